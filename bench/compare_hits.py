#!/usr/bin/env python3
"""Sends the same deterministic /search requests to two services and checks that they return the
same hits: same HTTP status, same hit ids in the same order, scores and relevances within 1e-4.

usage: compare_hits.py <base-url-a> <base-url-b> [--requests 100] [--tenants 10] [--dimension 384]
Exit status 1 on any difference (each one is printed)."""

import argparse
import json
import math
import random
import sys
import urllib.error
import urllib.request

WORDS = ["фрагмент", "раздела", "документа", "раздел", "документ", "теме"]
PRODUCTS = ["chatcenter", "sdk", "api"]
TOLERANCE = 1e-4


def requests(count, tenants, dimension):
    rng = random.Random(11)
    for n in range(count):
        body = {
            "query": f"{rng.choice(WORDS)} {rng.randrange(5)} {rng.choice(WORDS)} {rng.randrange(2000)}",
            "tenant_id": f"tenant{n % tenants}",
            "max_results": rng.choice([1, 5, 10, 20]),
        }
        # Every 10th request leaves the embedding to the service's own (pseudo) embedder.
        if n % 10 != 9:
            vector = [rng.uniform(-1, 1) for _ in range(dimension)]
            norm = math.sqrt(sum(v * v for v in vector))
            body["query_embedding"] = [v / norm for v in vector]
        if n % 4 == 1:
            body["filters"] = {"product": rng.choice(PRODUCTS)}
        if n % 5 == 2:
            body["filters"] = {**body.get("filters", {}), "tags": [f"tag{rng.randrange(7)}"]}
        yield body


def post(base, body):
    request = urllib.request.Request(
        base + "/internal/retrieval/search",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def differences(a, b):
    status_a, json_a = a
    status_b, json_b = b
    if status_a != status_b:
        return [f"status {status_a} vs {status_b}: {json_a} / {json_b}"]
    if status_a != 200:
        return [] if json_a.get("error", {}).get("code") == json_b.get("error", {}).get("code") else [
            f"error {json_a} vs {json_b}"]
    hits_a, hits_b = json_a["hits"], json_b["hits"]
    ids_a, ids_b = [h["id"] for h in hits_a], [h["id"] for h in hits_b]
    if ids_a != ids_b:
        return [f"hit ids differ:\n  a {ids_a}\n  b {ids_b}"]
    found = []
    for hit_a, hit_b in zip(hits_a, hits_b):
        for field in ("score", "relevance"):
            if abs(hit_a[field] - hit_b[field]) > TOLERANCE:
                found.append(f"{hit_a['id']} {field} {hit_a[field]} vs {hit_b[field]}")
    if json_a["hits_level"] != json_b["hits_level"]:
        found.append(f"hits_level {json_a['hits_level']} vs {json_b['hits_level']}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--dimension", type=int, default=384)
    args = parser.parse_args()
    same = hits = max_delta = 0
    failed = 0
    for n, body in enumerate(requests(args.requests, args.tenants, args.dimension)):
        a, b = post(args.a, body), post(args.b, body)
        found = differences(a, b)
        if found:
            failed += 1
            print(f"request {n} ({body['tenant_id']}, {body['query']!r}):", *found, sep="\n  ")
            continue
        if a[0] == 200:
            hits += len(a[1]["hits"])
            for hit_a, hit_b in zip(a[1]["hits"], b[1]["hits"]):
                max_delta = max(max_delta, abs(hit_a["score"] - hit_b["score"]))
        same += 1
        if a[0] != 200 or not a[1]["hits"]:
            print(f"request {n}: status {a[0]}, no hits on either side (still counted as equal)")
    print(f"identical on {same}/{args.requests} requests ({hits} hits compared, max score delta {max_delta:.2e})")
    if hits == 0:
        print("no hit was compared: the services did not serve the corpus", file=sys.stderr)
        sys.exit(1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
