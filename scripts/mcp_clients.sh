#!/usr/bin/env bash
# The MCP endpoint checked by the official clients, none of them ours: starts the given binary in
# mock mode (bundled demo corpus) with an API key for the demo tenant on a free port, then
#  1. the MCP Python SDK (PyPI `mcp`, scripts/mcp_client.py) connects over streamable HTTP, lists
#     the tools, calls each one, compares search_docs with POST /search for twelve demo questions,
#     and checks that another tenant and a wrong key are refused;
#  2. the MCP Inspector's command-line client (npm `@modelcontextprotocol/inspector-cli`, run with
#     npx) lists the tools and calls search_docs.
# Fails (non-zero) on any failure, and when python3, node or npx is missing.
#
#   scripts/mcp_clients.sh <binary> [cache_dir]
#
# cache_dir defaults to .cache/mcp-clients (the venv in venv/, the npm install in npm/).
# MCP_PYTHON_VERSION (default 2.3.0) and MCP_INSPECTOR_VERSION (default 1.0.3) pin the clients.
set -euo pipefail

binary="${1:?usage: scripts/mcp_clients.sh <binary> [cache_dir]}"
cache_dir="${2:-.cache/mcp-clients}"
python_version="${MCP_PYTHON_VERSION:-2.3.0}"
inspector_version="${MCP_INSPECTOR_VERSION:-1.0.3}"
scripts_dir="$(cd "$(dirname "$0")" && pwd)"

log() { echo "mcp_clients.sh: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

for tool in python3 node npm npx curl; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
[[ -x "$binary" ]] || die "no executable binary at $binary"
mkdir -p "$cache_dir"
cache_dir="$(cd "$cache_dir" && pwd)"
venv_dir="$cache_dir/venv"
npm_dir="$cache_dir/npm"

if [[ ! -x "$venv_dir/bin/python" ]] || ! "$venv_dir/bin/pip" show mcp 2>/dev/null | grep -x "Version: $python_version" >/dev/null; then
    log "installing mcp==$python_version into $venv_dir"
    python3 -m venv "$venv_dir"
    "$venv_dir/bin/pip" install --quiet --disable-pip-version-check "mcp==$python_version" >&2
fi
inspector_package="@modelcontextprotocol/inspector-cli"
if [[ "$(cd "$npm_dir" 2>/dev/null && node -p "require('$inspector_package/package.json').version" 2>/dev/null)" != "$inspector_version" ]]; then
    log "installing $inspector_package@$inspector_version into $npm_dir"
    mkdir -p "$npm_dir"
    [[ -f "$npm_dir/package.json" ]] || echo '{"private": true}' >"$npm_dir/package.json"
    npm install --prefix "$npm_dir" --no-audit --no-fund --silent "$inspector_package@$inspector_version" >&2
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
url="http://127.0.0.1:$port"
work="$(mktemp -d)"
key="mcp-clients-demo-0123456789"
echo "$key: demo" >"$work/keys.txt"
# Mock mode with the shipped configuration, whatever the caller's environment says.
env -i PATH="$PATH" HOME="${HOME:-/tmp}" RETR_MOCK_MODE=true RETR_VECTOR_BACKEND=memory RETR_LOG_FORMAT=text \
    RETR_API_KEYS="$work/keys.txt" RUST_LOG=warn RETR_HOST=127.0.0.1 "$binary" serve --port "$port" >"$work/service.log" 2>&1 &
service_pid=$!
cleanup() {
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
    curl -fsS "$url/health" >/dev/null 2>&1 && break
    if ! kill -0 "$service_pid" 2>/dev/null; then
        cat "$work/service.log" >&2
        die "the service exited at start-up"
    fi
    sleep 0.2
done
curl -fsS "$url/health" >/dev/null || die "the service did not answer /health within 20 s"

log "MCP Python SDK $python_version"
timeout 300 "$venv_dir/bin/python" "$scripts_dir/mcp_client.py" "$url" "$key" || die "the Python SDK check failed"

log "MCP Inspector CLI $inspector_version"
# npx finds the pinned install in $npm_dir from a directory below it (no download). The CLI reads
# its own package.json at "../package.json" if that path exists from the working directory, so it
# runs one level below a directory that has one.
mkdir -p "$npm_dir/run"
inspector() {
    (cd "$npm_dir/run" && timeout 120 npx -y "$inspector_package@$inspector_version" --cli "$url/internal/retrieval/mcp" \
        --transport http --header "Authorization: Bearer $key" "$@")
}
inspector --method tools/list >"$work/tools.json" || die "the Inspector could not list the tools"
python3 - "$work/tools.json" <<'EOF' || die "the Inspector's tool list is not the expected one"
import json, sys
names = {tool["name"] for tool in json.load(open(sys.argv[1]))["tools"]}
wanted = {"search_docs", "read_passage", "get_context", "list_topics", "outline"}
assert wanted <= names, f"missing {sorted(wanted - names)} in {sorted(names)}"
print(f"inspector tools/list: {sorted(names)}")
EOF
inspector --method tools/call --tool-name search_docs --tool-arg "query=как сбросить пароль" tenant=demo \
    >"$work/search.json" || die "the Inspector could not call search_docs"
python3 - "$work/search.json" <<'EOF' || die "the Inspector's search_docs answer is not a search result"
import json, sys
result = json.load(open(sys.argv[1]))
assert not result.get("isError"), result
hits = result["structuredContent"]["hits"]
assert hits and hits[0]["doc_id"] == "demo/docs/faq/login-problems.md", hits[:1]
print(f"inspector search_docs: {len(hits)} hits, first {hits[0]['id']}")
EOF
log "ok: both clients listed the tools and searched"
