# Shared by bench/http_bench.sh and bench/compare_backends.sh (sourced, not run).
# Expects ROOT, WORK, CHROMA_DIR, CHROMA_PORT, PREFIX; keeps started service pids in SERVICE_PIDS.

SERVICE_PIDS=()

bench_cleanup() {
  local pid
  for pid in "${SERVICE_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      wait "$pid" 2>/dev/null || true
    fi
  done
  "$ROOT/scripts/chroma.sh" stop "$CHROMA_DIR" || true
}

bench_build() {
  if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release --quiet --bin retrieval-service --example chroma_bench
  fi
}

# Fresh Chroma on CHROMA_PORT with the synthetic corpus under the collection prefix PREFIX.
# SKIP_LOAD=1 keeps the data directory of the previous run and its corpus (loading takes minutes).
start_chroma_with_corpus() {
  if [ "${SKIP_LOAD:-0}" = 1 ]; then
    CHROMA_KEEP_DATA=1 "$ROOT/scripts/chroma.sh" start "$CHROMA_DIR" "$CHROMA_PORT"
  else
    "$ROOT/scripts/chroma.sh" start "$CHROMA_DIR" "$CHROMA_PORT"
  fi
  CHROMA_PID=$(cat "$CHROMA_DIR/server.pid")
  if [ "${SKIP_LOAD:-0}" != 1 ]; then
    "$ROOT/target/release/examples/chroma_bench" --chroma "http://127.0.0.1:$CHROMA_PORT" --prefix "$PREFIX" \
      --load-only
  fi
}

# start_service <name> <port> [VAR=value ...]: starts the release service with the given
# environment, waits for /health 200 (at most 120 s) and sets SERVICE_PID and READY_SECONDS.
start_service() {
  local name=$1 port=$2
  shift 2
  local started ready
  started=$(date +%s.%N)
  env "$@" RUST_LOG="${RUST_LOG:-warn,retrieval_engine::index::chroma=info}" \
    "$ROOT/target/release/retrieval-service" serve --port "$port" >"$WORK/$name.log" 2>&1 &
  SERVICE_PID=$!
  SERVICE_PIDS+=("$SERVICE_PID")
  for _ in $(seq 1 1200); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; then
      ready=$(date +%s.%N)
      READY_SECONDS=$(echo "$ready - $started" | bc)
      return 0
    fi
    if ! kill -0 "$SERVICE_PID" 2>/dev/null; then
      echo "$name exited during start-up:" >&2
      tail -20 "$WORK/$name.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "$name not healthy after 120 s:" >&2
  tail -20 "$WORK/$name.log" >&2
  return 1
}

# The replica load latency the Chroma backend logs (info level), or "?" when not logged.
replica_load_ms() {
  sed 's/\x1b\[[0-9;]*m//g' "$WORK/$1.log" | grep 'chroma replica loaded' | head -1 | sed -n 's/.*latency_ms=\([0-9]*\).*/\1/p' | grep . || echo "?"
}
