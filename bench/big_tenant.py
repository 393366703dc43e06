#!/usr/bin/env python3
"""How a single big tenant's costs grow: one synthetic tenant at several sizes (docs × 5 sections ×
5 chunks; 40,000 docs = 1.24M records), each served by the release binary in mock mode over a
snapshot file, reporting:

  - start-up: seconds from launch to the first search answered (from the JSON, or from the local
    copy a previous start left in <snapshot>.copy/: `start_from`), steady and peak RSS;
  - p50/p99 of one search at a time (`query_embedding` given, so the embedder is not measured);
  - searches/s at concurrency 16 (wrk);
  - recall@10: the hits of each search against those of the same search with exact scans only
    (RETR_APPROXIMATE_MIN_RECORDS=0), the same queries on a second start.

    python3 bench/big_tenant.py                    # 400, 4000 and 40000 docs
    python3 bench/big_tenant.py --docs 4000 --skip-exact
    python3 bench/big_tenant.py --docs 4000 --skip-exact --duration 0 --from-json --refresh

Data (written once, then reused) goes to .cache/big/ (bench/big_tenant_data.py). Needs wrk and
numpy (the generator; .cache/peer-venv has it). Env passes through RETR_* settings to try.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from hostile import free_port, rss_mb  # noqa: E402

WRK_SCRIPT = ROOT / "bench" / "search.lua"


def data_files(docs: int, tenants: int = 1) -> tuple[Path, Path]:
    name = f"docs-{docs}" if tenants == 1 else f"docs-{docs}-tenants-{tenants}"
    snapshot = ROOT / ".cache" / "big" / f"{name}.json"
    queries = snapshot.with_suffix(".queries.jsonl")
    if not snapshot.exists():
        python = ROOT / ".cache" / "peer-venv" / "bin" / "python"
        subprocess.run([str(python if python.exists() else sys.executable), str(ROOT / "bench" / "big_tenant_data.py"),
                        "--docs", str(docs), "--tenants", str(tenants), "--out", str(snapshot)], check=True)
    return snapshot, queries


def bodies(queries: Path, count: int) -> list[str]:
    out = []
    with queries.open(encoding="utf-8") as handle:
        for line in handle:
            query = json.loads(line)
            out.append(json.dumps({"query": query["query"], "tenant_id": query["tenant_id"], "max_results": 10,
                                   "query_embedding": query["embedding"]}, ensure_ascii=False))
            if len(out) == count:
                break
    return out


def hit_id(hit: dict) -> str:
    """A hit's own id: its chunk's, else its section's, else its page's."""
    return hit.get("chunk_id") or hit.get("section_id") or hit["doc_id"]


def search(port: int, body: str, key=hit_id) -> tuple[float, list[str]]:
    """One search: its latency in ms and `key` of each of its hits, in order."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    connection.request("POST", "/internal/retrieval/search", body=body.encode(),
                       headers={"content-type": "application/json"})
    response = connection.getresponse()
    payload = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    connection.close()
    if response.status != 200:
        raise SystemExit(f"search answered {response.status}: {payload[:300]!r}")
    hits = json.loads(payload)["hits"]
    return elapsed, [key(hit) for hit in hits]


class Service:
    """The release binary (or `BENCH_BINARY`, to compare two builds) serving `snapshot`; start-up
    timed to the first answered search, RSS sampled every 20 ms from launch."""

    def __init__(self, snapshot: Path, first_body: str, extra_env: dict[str, str]):
        self.port = free_port()
        env = {k: v for k, v in os.environ.items()}
        env.update({"RETR_MOCK_MODE": "true", "RETR_INDEX_PATH": str(snapshot),
                    "RUST_LOG": "warn,retrieval_engine::index::file_index=info"})
        env.update(extra_env)
        self.log = tempfile.TemporaryFile()
        started = time.perf_counter()
        binary = os.environ.get("BENCH_BINARY") or str(ROOT / "target" / "release" / "retrieval-service")
        self.process = subprocess.Popen([binary, "serve", "--port", str(self.port)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=self.log)
        self.peak = 0.0
        self.sampling = True
        sampler = threading.Thread(target=self._sample, daemon=True)
        sampler.start()
        while True:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise SystemExit(f"the service exited: {self.log.read()[-2000:]!r}")
            try:
                search(self.port, first_body)
                break
            except (OSError, http.client.HTTPException, SystemExit):
                time.sleep(0.05)
        self.startup_seconds = time.perf_counter() - started

    def started_from(self) -> str:
        """What the load read, from the service's log line: the local copy or the JSON."""
        self.log.seek(0)
        text = self.log.read().decode("utf-8", "replace")
        return "local copy" if re.search(r'from_copy"?[=:] ?true', text) else "json"

    def loads(self) -> int:
        """How many times the service has loaded the snapshot (its start-up, then each refresh)."""
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace").count("index snapshot loaded")

    def _sample(self) -> None:
        while self.sampling and self.process.poll() is None:
            try:
                self.peak = max(self.peak, rss_mb(self.process.pid))
            except OSError:
                return
            time.sleep(0.02)

    def rss(self) -> float:
        return rss_mb(self.process.pid)

    def stop(self) -> None:
        self.sampling = False
        self.process.terminate()
        self.process.wait(timeout=30)


def timed_searches(port: int, requests: list[str], warmup: float, key=hit_id) -> tuple[list[float], list[list[str]]]:
    """Searches the first 50 `requests` over and over for `warmup` seconds (and any background
    index build), then each request once, one at a time: their latencies in ms and `key` of
    their hits."""
    deadline = time.perf_counter() + warmup
    while time.perf_counter() < deadline:
        for body in requests[:50]:
            search(port, body, key=key)
    latencies, found = [], []
    for body in requests:
        elapsed, ids = search(port, body, key=key)
        latencies.append(elapsed)
        found.append(ids)
    return latencies, found


def wrk(port: int, bodies_file: Path, concurrency: int, duration: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t", "2", "-c", str(concurrency), "-d", f"{duration}s", "--latency", "-s",
                          str(WRK_SCRIPT), f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True,
                         env={**os.environ, "BENCH_BODIES_FILE": str(bodies_file)})
    line = next(line for line in out.stdout.splitlines() if line.startswith("BENCH "))
    result = {key: float(value) for key, value in re.findall(r"(\w+)=([\d.]+)", line)}
    result["errors"] = sum(result[key] for key in ("non2xx", "connect", "read", "write", "timeout"))
    return result


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered))) - 1))]


def measure(docs: int, args: argparse.Namespace) -> dict:
    snapshot, queries = data_files(docs, args.tenants)
    requests = bodies(queries, args.queries)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        handle.write("\n".join(requests) + "\n")
        bodies_file = Path(handle.name)
    row: dict = {"docs": docs, "tenants": args.tenants, "records": docs * 31, "snapshot_gb": round(snapshot.stat().st_size / 1e9, 2)}
    service = Service(snapshot, requests[0], {"RETR_INDEX_LOCAL_COPY": "false"} if args.from_json else {})
    row["start_from"] = service.started_from()
    try:
        row["startup_s"] = round(service.startup_seconds, 1)
        latencies, hits = timed_searches(service.port, requests, args.warmup)
        row["p50_ms"] = round(percentile(latencies, 50), 2)
        row["p99_ms"] = round(percentile(latencies, 99), 2)
        row["steady_rss_mb"] = round(service.rss())
        row["peak_rss_mb"] = round(service.peak)
        if args.duration:
            result = wrk(service.port, bodies_file, 16, args.duration)
            row["c16_rps"] = round(result["rps"])
            row["c16_p99_ms"] = result["p99_ms"]
            row["c16_errors"] = int(result["errors"])
        if args.refresh:
            # The file changes (its modification time): the service reads it again beside the
            # replica that keeps serving, then swaps. Peak RSS from the change to the swap.
            steady = service.rss()
            service.peak = steady
            loads = service.loads()
            started = time.perf_counter()
            os.utime(snapshot)
            while service.loads() == loads and time.perf_counter() - started < 900:
                time.sleep(0.1)
            row["refresh_s"] = round(time.perf_counter() - started, 1)
            row["refresh_peak_rss_mb"] = round(service.peak)
            row["refresh_peak_over_steady"] = round(service.peak / steady, 2)
            # Then one page really changes (a letter of its first record's text, edited in place):
            # the tenant is rebuilt, not shared.
            steady = service.rss()
            service.peak = steady
            loads = service.loads()
            started = time.perf_counter()
            edit_one_letter(snapshot)
            while service.loads() == loads and time.perf_counter() - started < 900:
                time.sleep(0.1)
            row["edit_refresh_s"] = round(time.perf_counter() - started, 1)
            row["edit_refresh_peak_rss_mb"] = round(service.peak)
            row["edit_refresh_peak_over_steady"] = round(service.peak / steady, 2)
    finally:
        service.stop()
    if not args.skip_exact:
        exact = Service(snapshot, requests[0], {"RETR_APPROXIMATE_MIN_RECORDS": "0"})
        try:
            found = total = 0
            for body, approximate in zip(requests, hits):
                _, ids = search(exact.port, body)
                found += len(set(ids[:10]) & set(approximate[:10]))
                total += len(ids[:10])
            row["recall_at_10"] = round(found / max(total, 1), 4)
        finally:
            exact.stop()
    bodies_file.unlink()
    return row


def edit_one_letter(snapshot: Path) -> None:
    """Changes one ASCII letter of the first record's text in place (same length, still JSON)."""
    with open(snapshot, "r+b") as file:
        head = file.read(1 << 20)
        at = re.search(rb'"text":\s*"', head).end()
        while not (97 <= head[at] <= 122):
            at += 1
        file.seek(at)
        file.write(bytes([97 + (head[at] - 97 + 1) % 26]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", default="400,4000,40000", help="tenant sizes in docs, comma-separated")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--tenants", type=int, default=1,
                        help="spread the docs over this many tenants (a refresh then rebuilds only the edited one)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of searches before timing")
    parser.add_argument("--duration", type=int, default=15, help="seconds of wrk at concurrency 16 (0: skip)")
    parser.add_argument("--skip-exact", action="store_true", help="no recall run")
    parser.add_argument("--from-json", action="store_true",
                        help="start from the JSON, not the local copy (RETR_INDEX_LOCAL_COPY=false)")
    parser.add_argument("--refresh", action="store_true",
                        help="then touch the snapshot and time the refresh and its peak RSS (the local copy is "
                             "written again after it); then edit one letter of a page and time that refresh too")
    args = parser.parse_args()
    for docs in (int(value) for value in args.docs.split(",")):
        print(json.dumps(measure(docs, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
