#!/usr/bin/env bash
# The playground page in a real browser: starts the given binary in mock mode (bundled demo corpus)
# on a free port, opens /internal/retrieval/ui in headless Chromium (installed with apt when
# missing) with a question in the URL, so the page loads the tenants, runs the search and renders
# it; then checks the rendered DOM: hits, an explain chart with bars, the three cascade columns,
# the routing panel, no error message. A second page load asks for an unknown
# tenant and checks that the page says so instead of showing another tenant's results. A screenshot is kept in the
# artifact directory (not in the repo).
#
#   scripts/browser_test.sh <binary> [artifact_dir]
set -euo pipefail

binary="${1:?usage: scripts/browser_test.sh <binary> [artifact_dir]}"
artifacts="${2:-.cache/browser}"
mkdir -p "$artifacts"
log() { echo "browser_test.sh: $*" >&2; }

browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
    log "installing chromium (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
    browser="$(command -v chromium)"
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
url="http://127.0.0.1:$port"
service_log="$artifacts/service.log"
env -i PATH="$PATH" HOME="${HOME:-/tmp}" RETR_MOCK_MODE=true RETR_VECTOR_BACKEND=memory RETR_LOG_FORMAT=text \
    RUST_LOG=warn RETR_HOST=127.0.0.1 "$binary" serve --port "$port" >"$service_log" 2>&1 &
service_pid=$!
profile="$(mktemp -d)"
cleanup() {
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
    rm -rf "$profile"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
    curl -fsS "$url/health" >/dev/null 2>&1 && break
    if ! kill -0 "$service_pid" 2>/dev/null; then
        log "the service exited at start-up:"
        cat "$service_log" >&2
        exit 1
    fi
    sleep 0.2
done

# Headless Chromium; the virtual time budget lets the page's fetches finish before the DOM is read.
run_browser() {
    timeout 60 "$browser" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$profile" --hide-scrollbars --virtual-time-budget=15000 "$@" 2>>"$artifacts/browser.log"
}
query="$(python3 -c 'import urllib.parse; print(urllib.parse.quote("как настроить обязательные теги"))')"
page="$url/internal/retrieval/ui?tenant=demo&q=$query&max_results=5"

run_browser --dump-dom "$page" >"$artifacts/search.html"
run_browser --window-size=1366,1600 --screenshot="$artifacts/playground.png" "$page" >/dev/null
python3 - "$artifacts/search.html" <<'PY'
import sys
from html.parser import HTMLParser

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.by_testid, self.stack, self.text = {}, [], {}
    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        testid = attrs.get("data-testid")
        if testid:
            self.by_testid.setdefault(testid, []).append(attrs)
        self.stack.append(testid)
    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()
    def handle_data(self, data):
        for testid in self.stack:
            if testid:
                self.text[testid] = self.text.get(testid, "") + data

page = Page()
page.feed(open(sys.argv[1], encoding="utf-8").read())
count = lambda testid: len(page.by_testid.get(testid, []))
problems = []
if not 1 <= count("hit") <= 5:
    problems.append(f"expected 1-5 hits (max_results=5), found {count('hit')}")
if count("explain-chart") != count("hit"):
    problems.append(f"{count('explain-chart')} explain charts for {count('hit')} hits")
if count("bar") < 4 * count("hit"):
    problems.append(f"only {count('bar')} bars")
for column in ("cascade-docs", "cascade-sections", "cascade-chunks"):
    if page.text.get(column, "").strip() in ("", "—"):
        problems.append(f"{column} is empty")
if "heuristic" not in page.text.get("routing", ""):
    problems.append("the routing panel does not show the router mode")
if "теги" not in page.text.get("hits", "").lower():
    problems.append("no hit mentions теги: Cyrillic text not rendered?")
error = page.by_testid.get("error", [{}])[0]
if "hidden" not in error:
    problems.append(f"an error is shown: {page.text.get('error', '').strip()}")
if problems:
    sys.exit("browser_test.sh: " + "; ".join(problems))
print(f"browser_test.sh: {count('hit')} hits, {count('bar')} explain bars, cascade and routing rendered", file=sys.stderr)
PY

# An unknown tenant in the link: the page must say why there are no results, not stay blank.
run_browser --dump-dom "$url/internal/retrieval/ui?tenant=no-such-tenant&q=$query" >"$artifacts/error.html"
python3 - "$artifacts/error.html" <<'PY'
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
match = re.search(r'<div id="error"[^>]*>(.*?)</div>', html, re.S)
if not match or "hidden" in match.group(0).split(">")[0] or "tenant" not in match.group(1):
    sys.exit(f"browser_test.sh: the error message for an unknown tenant is not shown: {match and match.group(0)}")
print("browser_test.sh: an unknown tenant is reported as a message", file=sys.stderr)
PY
log "ok; screenshot at $artifacts/playground.png"
