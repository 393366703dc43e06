#!/usr/bin/env bash
# Feedback under load: does a flood of POST /internal/retrieval/feedback slow searches, and is
# every acknowledged record on disk? Starts the release service (mock mode, demo corpus, a fresh
# RETR_FEEDBACK_DIR), measures search latency at concurrency 1 alone, then again while wrk posts
# feedback as fast as it can (FEEDBACK_CONNECTIONS connections) for DURATION seconds, then counts
# the records on disk against the posts answered 200 (the log's size bound is lifted to 4 GiB, so
# that no record is dropped by it; BOUND_BYTES sets another, whose rewrites are then measured too).
#
#   bench/feedback_load.sh              needs: apt-get install -y wrk; a release build
#   DURATION=30 FEEDBACK_CONNECTIONS=64 bench/feedback_load.sh
#   BIN=path/to/retrieval-service bench/feedback_load.sh     (that binary; no build)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-30}"
FEEDBACK_CONNECTIONS="${FEEDBACK_CONNECTIONS:-64}"
PORT="${PORT:-18190}"
command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }
BIN="${BIN:-}"
if [[ -z "$BIN" ]]; then
    cargo build --release --quiet
    BIN=target/release/retrieval-service
fi
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
RUST_LOG=warn RETR_REQUEST_LOG_LEVEL=off RETR_FEEDBACK_DIR="$work/feedback" \
  RETR_FEEDBACK_MAX_BYTES="${BOUND_BYTES:-4294967296}" \
  "$BIN" serve --port "$PORT" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
# Demo questions, pseudo-embedded in process.
python3 - "$work/bodies.jsonl" <<'PY'
import json, sys
queries = ["как сбросить пароль оператора", "как подключить Android SDK через gradle", "обязательные теги",
           "webhook о новом сообщении", "быстрые ответы оператора", "как настроить push-уведомления"]
with open(sys.argv[1], "w") as out:
    for query in queries:
        out.write(json.dumps({"query": query, "tenant_id": "demo", "max_results": 10}, ensure_ascii=False) + "\n")
PY
url="http://127.0.0.1:$PORT"
echo "searches alone (c1, ${DURATION}s):"
BENCH_BODIES_FILE="$work/bodies.jsonl" wrk -t1 -c1 -d"${DURATION}s" -s bench/search.lua "$url" | grep BENCH
echo "searches (c1) while feedback is posted (c${FEEDBACK_CONNECTIONS}, ${DURATION}s):"
wrk -t2 -c"$FEEDBACK_CONNECTIONS" -d"${DURATION}s" -s bench/feedback.lua "$url" >"$work/feedback.out" &
posting=$!
BENCH_BODIES_FILE="$work/bodies.jsonl" wrk -t1 -c1 -d"${DURATION}s" -s bench/search.lua "$url" | grep BENCH
wait "$posting"
echo "feedback posts:"
grep BENCH "$work/feedback.out"
posted=$(sed -n 's/.*requests=\([0-9]*\).*non2xx=\([0-9]*\).*/\1 \2/p' "$work/feedback.out")
read -r requests failed <<<"$posted"
stored=$(wc -l <"$work/feedback/t-demo/feedback.jsonl")
echo "acknowledged (200) at most $((requests - failed)); records on disk $stored"
