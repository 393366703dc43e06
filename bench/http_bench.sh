#!/usr/bin/env bash
# HTTP benchmark of POST /internal/retrieval/search on the Chroma backend (the bar it checks:
# ≥ 300 req/s and p99 ≤ 50 ms at concurrency 16). Starts a fresh Chroma, loads the synthetic
# corpus (2,000 docs / 10,000 sections / 40,000 chunks, 384-d, 10 tenants) with
# examples/chroma_bench.rs, starts the release service on it, runs wrk at concurrency 1 and 16
# with precomputed query embeddings (bench/search.lua), prints req/s, p50, p99, the service's
# RSS and replica load time, and the CPU used by Chroma and by the service during the c16 run.
# Fails when any response is not 2xx or a socket error occurs. Stops every server it started.
#
#   bench/http_bench.sh            needs: apt-get install -y wrk; python3 (for the Chroma venv)
# Env: CHROMA_PORT (18500), PORT (18091), DURATION (20s), PREFIX (bench), SKIP_BUILD=1,
#      SKIP_LOAD=1 (reuse the corpus loaded into .cache/chroma by an earlier run).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
CHROMA_PORT=${CHROMA_PORT:-18500}
PORT=${PORT:-18091}
DURATION=${DURATION:-20s}
PREFIX=${PREFIX:-bench}
CHROMA_DIR=$ROOT/.cache/chroma
WORK=$ROOT/.cache/http-bench
mkdir -p "$WORK"

command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
trap bench_cleanup EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

bench_build
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
start_chroma_with_corpus
start_service service "$PORT" RETR_MOCK_MODE=false RETR_VECTOR_BACKEND=chroma \
  RETR_CHROMA_HOST="http://127.0.0.1:$CHROMA_PORT" RETR_CHROMA_COLLECTION="$PREFIX" RETR_EMBEDDING_DIMENSION=384
echo "== service healthy ${READY_SECONDS} s after start; replica load $(replica_load_ms service) ms"

# One request by hand: it must answer 200 with hits, or the benchmark measures errors.
probe=$(BENCH_BODIES=1 wrk -t1 -c1 -d1s -s bench/search.lua "http://127.0.0.1:$PORT" | grep '^BENCH')
echo "$probe" | grep -q ' non2xx=0 ' || { echo "probe failed: $probe" >&2; exit 1; }

run() {
  local threads=$1 connections=$2 out=$WORK/wrk-c$2.txt
  local chroma_before service_before t0 t1 chroma_after service_after
  chroma_before=$(cpu_ticks "$CHROMA_PID"); service_before=$(cpu_ticks "$SERVICE_PID"); t0=$(date +%s.%N)
  wrk -t"$threads" -c"$connections" -d"$DURATION" --latency -s bench/search.lua "http://127.0.0.1:$PORT" >"$out"
  chroma_after=$(cpu_ticks "$CHROMA_PID"); service_after=$(cpu_ticks "$SERVICE_PID"); t1=$(date +%s.%N)
  local hz; hz=$(getconf CLK_TCK)
  echo "== wrk -t$threads -c$connections -d$DURATION --latency (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  grep -E 'Latency Distribution|^ +(50|75|90|99)%|Requests/sec|Non-2xx|Socket errors' "$out" || true
  grep '^BENCH' "$out"
  awk -v a="$service_before" -v b="$service_after" -v c="$chroma_before" -v d="$chroma_after" -v t0="$t0" -v t1="$t1" -v hz="$hz" \
    'BEGIN { printf "CPU cores used: service %.2f, chroma %.2f\n", (b - a) / hz / (t1 - t0), (d - c) / hz / (t1 - t0) }'
  if grep -q 'Non-2xx\|Socket errors' "$out" || ! grep -q ' non2xx=0 connect=0 read=0 write=0 timeout=0$' "$out"; then
    echo "FAIL: errors during the run (see $out)" >&2
    return 1
  fi
}

wrk -t1 -c4 -d3s -s bench/search.lua "http://127.0.0.1:$PORT" >/dev/null
status=0
run 1 1 || status=1
run 2 16 || status=1
echo "== service RSS after load: $(grep VmRSS "/proc/$SERVICE_PID/status" | awk '{print $2, $3}'); chroma RSS: $(grep VmRSS "/proc/$CHROMA_PID/status" | awk '{print $2, $3}')"
exit $status
