#!/usr/bin/env python3
"""The Dify metadata-condition probe: what 64 `not in` conditions of 1,000 values each cost on a
big tenant, alone and four at a time, and whether /health and an ordinary search stay fast while
they run (issue: "Nothing lost, nothing stalled").

    python3 bench/condition_bomb.py [--binary target/release/retrieval-service] [--records 36000]

Writes a synthetic snapshot (one tenant: docs, 3 sections per doc, 8 chunks per doc, random unit
vectors of dimension 384) to a temporary directory, serves it in mock mode and prints, for the
plain query and for the condition bomb: status, median and max wall time; then /health and a plain
search timed while four bombs run at once. Standard library only.
"""
import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile import free_port, start_service  # noqa: E402


def snapshot(path, records, dimension=384, seed=7):
    rnd = random.Random(seed)
    docs = max(1, records // 12)  # 1 doc + 3 sections + 8 chunks = 12 records per page

    def vector():
        v = [rnd.gauss(0.0, 1.0) for _ in range(dimension)]
        norm = sum(x * x for x in v) ** 0.5
        return [round(x / norm, 6) for x in v]

    def record(rid, doc, section=None, chunk=None, text=""):
        return {
            "id": rid, "tenant_id": "big", "doc_id": doc, "section_id": section, "chunk_id": chunk,
            "title": f"Страница {doc}", "summary": "", "url": f"/{doc}", "source": doc,
            "product": f"product-{hash(doc) % 7}", "version": "", "tags": [], "domain": "docs",
            "section": f"area-{hash(doc) % 5}", "platform": "", "role": "", "page_type": "howto",
            "heading": "", "heading_path": [], "page": 0, "chunk_index": 0, "content_length": len(text),
            "indexed_at": "2026-11-27T00:00:00Z", "text": text, "embedding": vector(),
        }

    out = {"format_version": 1, "indexed_at": "2026-11-27T00:00:00Z", "embedding_model": "pseudo",
           "dimension": dimension, "docs": [], "sections": [], "chunks": []}
    for d in range(docs):
        doc = f"page-{d:06d}.md"
        out["docs"].append(record(doc, doc, text=f"Страница {d} о настройке фильтра номер {d}"))
        for s in range(3):
            sid = f"{doc}#s{s}"
            out["sections"].append(record(sid, doc, sid, text=f"Раздел {s} страницы {d}: настройка фильтра"))
        for c in range(8):
            sid = f"{doc}#s{c % 3}"
            cid = f"{sid}-c{c}"
            out["chunks"].append(record(cid, doc, sid, cid, text=f"Абзац {c} страницы {d}: как настроить фильтр"))
    with open(path, "w") as f:
        json.dump(out, f)
    return docs * 12


def post(port, path, body, timeout=60):
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, body=body, headers={"content-type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status, (time.perf_counter() - start) * 1000
    except (OSError, http.client.HTTPException):
        return None, (time.perf_counter() - start) * 1000
    finally:
        connection.close()


def health(port):
    start = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/health")
        connection.getresponse().read()
        return (time.perf_counter() - start) * 1000
    except (OSError, http.client.HTTPException):
        return None


def summary(name, results):
    times = [t for _, t in results]
    statuses = sorted({s for s, _ in results}, key=str)
    print(f"{name}: status {statuses}, median {statistics.median(times):.1f} ms, max {max(times):.1f} ms "
          f"over {len(results)}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/retrieval-service")
    parser.add_argument("--records", type=int, default=36000)
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    path = os.path.join(work, "big.json")
    count = snapshot(path, args.records)
    port = free_port()
    service = None
    try:
        service = start_service(args.binary, port, subprocess.DEVNULL,
                                {"RETR_INDEX_PATH": path, "RUST_LOG": "warn"}, wait_seconds=60)
        print(f"tenant 'big': {count} records", flush=True)
        dify = "/internal/retrieval/dify/retrieval"
        plain = json.dumps({"knowledge_id": "big", "query": "как настроить фильтр",
                            "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}})
        names = ["product", "section", "page_type", "domain", "source", "url", "title", "platform"]
        conditions = [{"name": names[i % len(names)], "comparison_operator": "not in",
                       "value": [f"value-{i}-{j}" for j in range(1000)]} for i in range(64)]
        bomb = json.dumps({"knowledge_id": "big", "query": "как настроить фильтр",
                           "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
                           "metadata_condition": {"logical_operator": "and", "conditions": conditions}})
        summary("plain Dify query", [post(port, dify, plain) for _ in range(10)])
        summary(f"64 'not in' x 1,000 values ({len(bomb) / 1e6:.2f} MB)", [post(port, dify, bomb) for _ in range(5)])

        stop = threading.Event()
        bomb_results = []

        def bomber():
            while not stop.is_set():
                bomb_results.append(post(port, dify, bomb))

        threads = [threading.Thread(target=bomber, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        health_times, searches = [], []
        until = time.time() + 10
        while time.time() < until:
            value = health(port)
            health_times.append(value if value is not None else 30000.0)
            searches.append(post(port, dify, plain))
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        print(f"while 4 bombs run: /health median {statistics.median(health_times):.1f} ms, "
              f"max {max(health_times):.1f} ms over {len(health_times)}", flush=True)
        summary("  plain Dify query meanwhile", searches)
        summary("  the bombs", bomb_results)
    finally:
        if service is not None:
            service.kill()
            service.wait()
        os.remove(path)
        os.rmdir(work)


if __name__ == "__main__":
    main()
