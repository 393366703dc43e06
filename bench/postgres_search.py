#!/usr/bin/env python3
"""A search in the database (`RETR_POSTGRES_SEARCH=database`) on one synthetic tenant, against the
in-memory engine on the same records. Reports, for the release binary serving the database:

  - p50/p99 of one search at a time (`query_embedding` given, so the embedder is not measured);
  - searches/s and p99 at concurrency 16 (wrk);
  - page-level recall@10: the pages of each search's hits against those of the in-memory engine
    with exact scans only (RETR_APPROXIMATE_MIN_RECORDS=0) on the same snapshot.

The database must hold the tenant first (bench/big_tenant_data.py writes the snapshot):

    python3 bench/big_tenant_data.py --docs 10000 --out .cache/big/docs-10000.json
    RETR_POSTGRES_URL=$URL RETR_POSTGRES_SEARCH=database \\
      cargo run --release --example postgres_load_snapshot -- .cache/big/docs-10000.json
    python3 bench/postgres_search.py --docs 10000 --url $URL

Needs wrk; env passes through RETR_* settings to try (RETR_POSTGRES_EF_SEARCH, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from big_tenant import Service, bodies, data_files, percentile, search, timed_searches, wrk  # noqa: E402


def doc_id(hit: dict) -> str:
    """A hit's page."""
    return hit["doc_id"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10000)
    parser.add_argument("--url", required=True, help="the database the tenant was loaded into")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--duration", type=int, default=20, help="seconds of wrk at c16 (0: none)")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--skip-exact", action="store_true")
    args = parser.parse_args()
    snapshot, queries = data_files(args.docs)
    requests = bodies(queries, args.queries)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        handle.write("\n".join(requests) + "\n")
        bodies_file = Path(handle.name)
    row: dict = {"docs": args.docs, "records": args.docs * 31}
    database = Service(snapshot, requests[0], {
        "RETR_MOCK_MODE": "false", "RETR_VECTOR_BACKEND": "postgres", "RETR_POSTGRES_SEARCH": "database",
        "RETR_POSTGRES_URL": args.url, "RETR_EMBEDDING_DIMENSION": "384",
        "RETR_POSTGRES_POOL_SIZE": "16"})
    try:
        row["startup_s"] = round(database.startup_seconds, 1)
        latencies, found = timed_searches(database.port, requests, args.warmup, key=doc_id)
        row["c1_p50_ms"] = round(percentile(latencies, 50), 2)
        row["c1_p99_ms"] = round(percentile(latencies, 99), 2)
        row["rss_mb"] = round(database.rss())
        if args.duration:
            result = wrk(database.port, bodies_file, 16, args.duration)
            row["c16_rps"] = round(result["rps"])
            row["c16_p99_ms"] = result["p99_ms"]
            row["c16_errors"] = int(result["errors"])
    finally:
        database.stop()
    if not args.skip_exact:
        exact = Service(snapshot, requests[0], {"RETR_APPROXIMATE_MIN_RECORDS": "0"})
        try:
            hit = total = 0
            for body, approximate in zip(requests, found):
                _, wanted = search(exact.port, body, key=doc_id)
                hit += len(set(wanted[:10]) & set(approximate[:10]))
                total += len(set(wanted[:10]))
            row["page_recall_at_10"] = round(hit / max(total, 1), 4)
        finally:
            exact.stop()
    bodies_file.unlink()
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
