#!/usr/bin/env bash
# Checks the service against its own OpenAPI document with Schemathesis (`--checks all`): starts the
# given binary in mock mode (bundled demo corpus) on a free port, runs a bounded, seeded (so
# repeatable) set of generated requests, and fails on any failure: an undocumented status, a 5xx,
# a response that breaks its schema, a schema-valid request rejected or an invalid one accepted.
#
#   scripts/schemathesis.sh <binary> [venv_dir]
#
# venv_dir defaults to .cache/schemathesis. SCHEMATHESIS_VERSION pins the package (default 4.32.5);
# SCHEMATHESIS_MAX_EXAMPLES (default 30) and SCHEMATHESIS_SEED (default 1) bound and fix the run.
set -euo pipefail

binary="${1:?usage: scripts/schemathesis.sh <binary> [venv_dir]}"
venv_dir="${2:-.cache/schemathesis}"
version="${SCHEMATHESIS_VERSION:-4.32.5}"
max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-30}"
seed="${SCHEMATHESIS_SEED:-1}"

log() { echo "schemathesis.sh: $*" >&2; }

if [[ ! -x "$venv_dir/bin/schemathesis" ]] || ! "$venv_dir/bin/pip" show schemathesis 2>/dev/null | grep -qx "Version: $version"; then
    log "installing schemathesis==$version into $venv_dir"
    python3 -m venv "$venv_dir"
    "$venv_dir/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version" >&2
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
url="http://127.0.0.1:$port"
service_log="$(mktemp)"
# Mock mode with the shipped configuration, whatever the caller's environment says (no RETR_*
# variable of the caller's, e.g. the test command's RETR_TEST_*, reaches the service).
env -i PATH="$PATH" HOME="${HOME:-/tmp}" RETR_MOCK_MODE=true RETR_VECTOR_BACKEND=memory RETR_LOG_FORMAT=text \
    RUST_LOG=warn RETR_HOST=127.0.0.1 "$binary" serve --port "$port" >"$service_log" 2>&1 &
service_pid=$!
cleanup() {
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
    rm -f "$service_log"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
    curl -fsS "$url/health" >/dev/null 2>&1 && break
    if ! kill -0 "$service_pid" 2>/dev/null; then
        log "the service exited at start-up:"
        cat "$service_log" >&2
        exit 1
    fi
    sleep 0.2
done

log "checking $url against its OpenAPI document (max $max_examples examples per operation, seed $seed)"
"$venv_dir/bin/schemathesis" run "$url/internal/retrieval/openapi.json" --url "$url" \
    --checks all --max-examples "$max_examples" --seed "$seed" --generation-database none \
    --request-timeout 10 --no-color
