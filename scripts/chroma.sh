#!/usr/bin/env bash
# Local Chroma server for tests and benchmarks: a server-only venv and one process per data dir.
#   scripts/chroma.sh start <dir> [port]   install (once) into <dir>/venv, start on 127.0.0.1:<port>
#                                          with a fresh <dir>/data, wait for the heartbeat
#   scripts/chroma.sh stop <dir>           stop the server started from <dir>
#   scripts/chroma.sh install <dir>        only create the venv
# Env: CHROMA_VERSION (default 1.5.9), CHROMA_KEEP_DATA=1 keeps <dir>/data on start.
set -euo pipefail

CHROMA_VERSION=${CHROMA_VERSION:-1.5.9}

usage() {
  echo "usage: $0 start <dir> [port] | stop <dir> | install <dir>" >&2
  exit 2
}

install_venv() {
  local dir=$1
  if "$dir/venv/bin/python" -c 'import chromadb_rust_bindings' >/dev/null 2>&1; then
    return 0
  fi
  mkdir -p "$dir"
  python3 -m venv "$dir/venv"
  # The server is Rust code inside the wheel; it needs none of the Python dependencies.
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$dir/venv/bin/pip" install --quiet --no-deps "chromadb==$CHROMA_VERSION"
}

start_server() {
  local dir=$1 port=$2
  install_venv "$dir"
  if [ -f "$dir/server.pid" ] && kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
    echo "chroma already running from $dir (pid $(cat "$dir/server.pid"))" >&2
    exit 1
  fi
  if [ "${CHROMA_KEEP_DATA:-0}" != 1 ]; then
    rm -rf "$dir/data"
  fi
  mkdir -p "$dir/data"
  ANONYMIZED_TELEMETRY=False RUST_LOG=warn nohup "$dir/venv/bin/python" \
    -c 'import sys, chromadb_rust_bindings as b; b.cli(["chroma", "run", *sys.argv[1:]])' \
    --path "$dir/data" --host 127.0.0.1 --port "$port" >"$dir/server.log" 2>&1 &
  echo $! >"$dir/server.pid"
  for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$port/api/v2/heartbeat" >/dev/null; then
      echo "chroma $CHROMA_VERSION listening on http://127.0.0.1:$port (pid $(cat "$dir/server.pid"))"
      return 0
    fi
    if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
      echo "chroma exited during start-up; last log lines:" >&2
      tail -50 "$dir/server.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "chroma did not answer the heartbeat within 30 s; last log lines:" >&2
  tail -50 "$dir/server.log" >&2
  stop_server "$dir"
  exit 1
}

stop_server() {
  local dir=$1
  [ -f "$dir/server.pid" ] || return 0
  local pid
  pid=$(cat "$dir/server.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$dir/server.pid"
}

[ $# -ge 2 ] || usage
command=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
case "$command" in
  start) start_server "$dir" "${3:-18000}" ;;
  stop) stop_server "$dir" ;;
  install) install_venv "$dir" ;;
  *) usage ;;
esac
