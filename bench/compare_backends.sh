#!/usr/bin/env bash
# Equality check (a Chroma-backed service must answer exactly as the in-memory one): loads the synthetic corpus
# into a fresh Chroma, writes the same deterministic corpus as an in-memory snapshot file, starts
# one service on each backend, sends both the same 100 /search requests (bench/compare_hits.py)
# and fails unless every answer has the same hit ids in the same order and scores within 1e-4.
#
#   bench/compare_backends.sh
# Env: CHROMA_PORT (18500), PORT (18091, the Chroma service; the in-memory one gets PORT+1),
#      PREFIX (bench), REQUESTS (100), SKIP_BUILD=1, SKIP_LOAD=1 (reuse the loaded corpus).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
CHROMA_PORT=${CHROMA_PORT:-18500}
PORT=${PORT:-18091}
PREFIX=${PREFIX:-bench}
CHROMA_DIR=$ROOT/.cache/chroma
WORK=$ROOT/.cache/compare-backends
mkdir -p "$WORK"
# shellcheck source=bench/lib.sh
. bench/lib.sh
trap bench_cleanup EXIT

bench_build
start_chroma_with_corpus
./target/release/examples/chroma_bench --snapshot-out "$WORK/snapshot.json"

start_service chroma "$PORT" RETR_MOCK_MODE=false RETR_VECTOR_BACKEND=chroma \
  RETR_CHROMA_HOST="http://127.0.0.1:$CHROMA_PORT" RETR_CHROMA_COLLECTION="$PREFIX" RETR_EMBEDDING_DIMENSION=384
echo "chroma service healthy after ${READY_SECONDS} s (replica load $(replica_load_ms chroma) ms)"
start_service memory "$((PORT + 1))" RETR_MOCK_MODE=true RETR_INDEX_PATH="$WORK/snapshot.json" \
  RETR_EMBEDDING_DIMENSION=384
echo "memory service healthy after ${READY_SECONDS} s"

python3 bench/compare_hits.py "http://127.0.0.1:$PORT" "http://127.0.0.1:$((PORT + 1))" --requests "${REQUESTS:-100}"
