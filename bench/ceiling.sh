#!/usr/bin/env bash
# How far can a search go? The service built with the ceiling probe (crates/engine/src/ceiling_probe.rs) is
# run three times on the side-by-side Chroma corpus and load of ../shared/peers/side_by_side.sh,
# then the Python peer in memory, all in one run:
#
#   full  the service as it is (the probe unset);
#   scan  HTTP, JSON in and out, and only the exact scans of a default search (the tenant's
#         pages and its sections, 100 best of each): the most a search that must compute these
#         scores can reach, with ranking, fusion, boosting and routing free;
#   http  HTTP and JSON in and out only (the first search's response answered again).
#
#   bench/ceiling.sh          from the project root; needs wrk and python3, like side_by_side.sh
#
# Env: PEERS (../shared/peers), VENV (.cache/peer-venv), WORK (.cache/sbs: Chroma data and
# queries, shared with side_by_side.sh), CONC (16), DURATION (15), CHROMA_PORT (18300),
# OURS_PORT (18301), PEER_PORT (18302), SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PEERS="$(cd "${PEERS:-$ROOT/../shared/peers}" && pwd)"
VENV="${VENV:-$ROOT/.cache/peer-venv}"
WORK="${WORK:-$ROOT/.cache/sbs}"
CONC="${CONC:-16}"
DURATION="${DURATION:-15}"
CHROMA_PORT="${CHROMA_PORT:-18300}"
OURS_PORT="${OURS_PORT:-18301}"
PEER_PORT="${PEER_PORT:-18302}"
TARGET="$ROOT/target/ceiling"
mkdir -p "$WORK"
command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }
if [ ! -x "$VENV/bin/uvicorn" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$PEERS/py_retrieval/requirements.txt"
fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  CARGO_TARGET_DIR="$TARGET" cargo build --release --quiet --features ceiling-probe --bin retrieval-service
fi
PY="$VENV/bin/python"
OUT="$WORK/ceiling.jsonl"
: > "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

if ! curl -fsS "http://127.0.0.1:$CHROMA_PORT/api/v2/heartbeat" >/dev/null 2>&1; then
  rm -rf "$WORK/chroma/data"
  "$PEERS/start_chroma.sh" "$WORK/chroma" "$CHROMA_PORT" >/dev/null
  PIDS+=("$(cat "$WORK/chroma/server.pid")")
  "$PY" "$PEERS/load_synthetic.py" --chroma-url "http://127.0.0.1:$CHROMA_PORT" --reset --queries 500 \
    --queries-out "$WORK/queries.jsonl" >/dev/null
fi

bench() { # label url pid
  "$PY" "$PEERS/bench_search.py" --url "$2" --queries "$WORK/queries.jsonl" --concurrency "$CONC" \
    --duration "$DURATION" --warmup 3 --label "$1" --watch "svc=$3" --json-out "$OUT"
}
wait_up() { # url pid: fails at once when the process has exited
  for _ in $(seq 1 600); do
    curl -fsS "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { echo "the service exited: see $WORK/ceiling-*.log" >&2; return 1; }
    sleep 0.2
  done
  return 1
}
# Indexes load in the background: wait until a search answers with hits (2.5 min at most).
wait_hits() { # url
  local body n
  body=$(head -1 "$WORK/queries.jsonl" | "$PY" -c 'import json,sys; q=json.loads(sys.stdin.read()); print(json.dumps({"query":q["query"],"tenant_id":q["tenant_id"],"query_embedding":q["embedding"]}))')
  for _ in $(seq 1 300); do
    n=$(curl -s -XPOST "$1/internal/retrieval/search" -H 'content-type: application/json' -d "$body" \
        | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin).get("hits",[])))' 2>/dev/null || echo 0)
    [ "$n" != "0" ] && return 0; sleep 0.5
  done
  echo "$1 answered no hits" >&2; return 1
}

for probe in full scan http; do
  probe_env=()
  [ "$probe" != full ] && probe_env=(CEILING_PROBE="$probe")
  env "${probe_env[@]}" RETR_MOCK_MODE=false RETR_VECTOR_BACKEND=chroma \
    RETR_CHROMA_HOST="http://127.0.0.1:$CHROMA_PORT" RETR_EMBEDDING_DIMENSION=384 RUST_LOG=warn \
    "$TARGET/release/retrieval-service" serve --port "$OURS_PORT" >"$WORK/ceiling-$probe.log" 2>&1 &
  OURS=$!; PIDS+=("$OURS")
  wait_up "http://127.0.0.1:$OURS_PORT" "$OURS"
  wait_hits "http://127.0.0.1:$OURS_PORT"
  bench "ours $probe" "http://127.0.0.1:$OURS_PORT" "$OURS"
  kill "$OURS"; wait "$OURS" 2>/dev/null || true
done

( cd "$PEERS/py_retrieval" && exec env RETR_MOCK_MODE=true RETR_CHROMA_HOST="http://127.0.0.1:$CHROMA_PORT" \
    "$VENV/bin/uvicorn" retrieval_service.app:create_app --factory --host 127.0.0.1 --port "$PEER_PORT" --workers 2 \
    --no-access-log --log-level warning ) >"$WORK/ceiling-peer.log" 2>&1 &
PEER=$!; PIDS+=("$PEER")
# Both workers load the corpus from Chroma, then say they are ready.
for _ in $(seq 1 600); do
  [ "$(grep -c 'retrieval service ready' "$WORK/ceiling-peer.log" || true)" -ge 2 ] && break; sleep 0.3
done
wait_hits "http://127.0.0.1:$PEER_PORT"
bench "peer memory w2" "http://127.0.0.1:$PEER_PORT" "$PEER"

"$PY" - "$OUT" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
peer = {r["concurrency"]: r["rps"] for r in rows if r["label"] == "peer memory w2"}
print(f"{'run':<16}{'conc':>5}{'req/s':>10}{'x peer':>8}{'p99 ms':>9}{'errors':>7}{'svc cores':>10}{'CPU us/req':>11}")
for r in rows:
    cores = r["cores"].get("svc", 0)
    ratio = r["rps"] / peer[r["concurrency"]] if peer.get(r["concurrency"]) else 0
    print(f"{r['label']:<16}{r['concurrency']:>5}{r['rps']:>10.1f}{ratio:>8.2f}{r['p99_ms']:>9.2f}{r['errors']:>7}"
          f"{cores:>10.2f}{cores / r['rps'] * 1e6 if r['rps'] else 0:>11.0f}")
EOF
