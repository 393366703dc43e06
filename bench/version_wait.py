#!/usr/bin/env python3
"""The `min_index_version` probe: searches that ask for an index version far ahead wait (at most
RETR_INDEX_VERSION_WAIT_SECONDS) for it; do they keep ordinary searches from being served?
(issue: "Nothing lost, nothing stalled": 128 such requests/s left 13 of 180 probe searches
succeeding at 2de1966.)

    python3 bench/version_wait.py [--binary target/release/retrieval-service] [--rate 128] [--seconds 15]

Serves a small snapshot file (the bench's synthetic one, as a replica that reloads from the file,
so waits really wait), sends --rate requests/s with a far-ahead `min_index_version` from a pool of
threads, and meanwhile one ordinary search every 0.1 s; prints how many ordinary searches
succeeded, their median and p99 time, and what the waiting requests got. Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import condition_bomb as probe  # noqa: E402  (health, post, snapshot)
from hostile import free_port, start_service  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/retrieval-service")
    parser.add_argument("--rate", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    path = os.path.join(work, "small.json")
    probe.snapshot(path, 1200)
    port = free_port()
    service = None
    try:
        service = start_service(args.binary, port, subprocess.DEVNULL,
                                {"RETR_INDEX_PATH": path, "RUST_LOG": "warn"}, wait_seconds=30)
        search = "/internal/retrieval/search"
        ahead = json.dumps({"query": "фильтр", "tenant_id": "big", "min_index_version": "18446744073709551615"})
        plain = json.dumps({"query": "как настроить фильтр", "tenant_id": "big"})
        stop = threading.Event()
        waited = []

        def flood():
            interval = 1.0 / args.rate
            next_at = time.time()
            threads = []
            while not stop.is_set():
                t = threading.Thread(target=lambda: waited.append(probe.post(port, search, ahead, timeout=30)),
                                     daemon=True)
                t.start()
                threads.append(t)
                next_at += interval
                time.sleep(max(0.0, next_at - time.time()))
            for t in threads:
                t.join()

        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        time.sleep(1.0)
        results = []
        until = time.time() + args.seconds
        while time.time() < until:
            results.append(probe.post(port, search, plain, timeout=10))
            time.sleep(0.1)
        stop.set()
        flooder.join()
        ok = [t for s, t in results if s == 200]
        times = sorted(t for _, t in results)
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(f"{args.rate} far-ahead requests/s: ordinary searches {len(ok)} of {len(results)} answered 200, "
              f"median {statistics.median(times):.1f} ms, p99 {p99:.1f} ms", flush=True)
        statuses = {}
        for status, _ in waited:
            statuses[status] = statuses.get(status, 0) + 1
        print(f"  the far-ahead requests got: {statuses}", flush=True)
    finally:
        if service is not None:
            service.kill()
            service.wait()
        os.remove(path)
        os.rmdir(work)


if __name__ == "__main__":
    main()
