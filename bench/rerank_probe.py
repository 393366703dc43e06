#!/usr/bin/env python3
"""Does a learned re-ranking of the first 20 hits hold across sites? An offline probe over what
the service already says about each hit (`explain: true`, `include_steps: true`).

For each site it asks every labelled question of its files over HTTP (router `heuristic`, 20
hits), turns each hit into 15 features that mean the same on any site (final score and its gap
to the first, cosine and lexical scores and ranks, the page's rank in the doc step, the share of
the question's words in the title and headings, router agreement, the boost factor, page
evidence, the section's place in its page), and reports page MRR@10:

  - of the service's own order (the baseline);
  - of a pairwise logistic model (relevant page vs the others of the same question) trained on
    one site and scored on the other, and trained on four folds of all questions and scored on
    the fifth;
  - of the service's score plus one feature × a weight, for each feature and weight, printed
    only when it raises both sites.

    python3 bench/rerank_probe.py --site adguard http://127.0.0.1:18091 adguard A.jsonl,B.jsonl \\
        --site veil http://127.0.0.1:18092 veil C.jsonl

Each site is a running service over that site's snapshot (see docs/quality.md). Needs numpy.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import random
import re
import urllib.request

import numpy as np

FEATURES = ["score", "gap to first", "log place", "cosine", "cosine gap", "log cosine rank", "lexical / best",
            "log lexical rank", "page evidence", "log doc-step rank", "title overlap", "heading overlap",
            "router agrees", "boost factor", "log section place"]


def ask(url: str, tenant: str, query: str) -> dict:
    body = json.dumps({"query": query, "tenant_id": tenant, "max_results": 20, "explain": True,
                       "include_steps": True, "router_mode": "heuristic"}).encode()
    request = urllib.request.Request(url + "/internal/retrieval/search", body, {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def words(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-zа-яё0-9]+", text.lower()) if len(w) >= 3}


def features(question: dict, answer: dict):
    hits = answer["hits"][:20]
    if not hits:
        return None
    asked = words(question["query"])
    doc_rank = {d["metadata"]["source"]: i for i, d in enumerate(answer["steps"]["docs"])}
    first = hits[0]["score"]
    best_cosine = max(h["explain"]["dense_score"] or 0 for h in hits)
    best_lexical = max(h["explain"]["lexical_score"] or 0 for h in hits) or 1
    primary = answer["routing"].get("primary_theme")
    rows, labels = [], []
    for place, hit in enumerate(hits):
        e, m = hit["explain"], hit["metadata"]
        cosine, lexical = e["dense_score"], e["lexical_score"]
        rows.append([
            hit["score"], hit["score"] - first, math.log(place + 1),
            cosine or 0, (cosine or best_cosine - 0.1) - best_cosine, math.log(e["dense_rank"] or 101),
            (lexical or 0) / best_lexical, math.log(e["lexical_rank"] or 101),
            e["page_evidence"] or 0, math.log(doc_rank.get(m["source"], 30) + 1),
            len(asked & words(hit["title"] or "")) / max(1, len(asked)),
            len(asked & words(" ".join(m.get("heading_path") or []))) / max(1, len(asked)),
            1.0 if primary and m.get("theme_label") == primary else 0.0,
            hit["score"] / (e["fused_normalized"] or 1), math.log(1 + (m.get("page") or 0)),
        ])
        labels.append(1 if m["source"] in question["relevant"] else 0)
    return np.array(rows), np.array(labels)


def mrr(items, weights) -> float:
    total = 0.0
    for item in items:
        if item is None:
            continue
        rows, labels = item
        order = np.argsort(-(rows @ weights), kind="stable")
        total += next((1 / (k + 1) for k, i in enumerate(order[:10]) if labels[i]), 0.0)
    return total / len(items)


def fit(items, iterations: int = 300) -> np.ndarray:
    pairs, targets = [], []
    for item in items:
        if item is None:
            continue
        rows, labels = item
        for p in np.where(labels == 1)[0]:
            for n in np.where(labels == 0)[0][:10]:
                pairs += [rows[p] - rows[n], rows[n] - rows[p]]
                targets += [1, 0]
    x, y = np.array(pairs), np.array(targets)
    scale = x.std(0) + 1e-6
    x = x / scale
    w = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-x @ w))
        w -= 2.0 * (x.T @ (p - y) + w) / len(y)
    return w / scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", nargs=4, action="append", metavar=("NAME", "URL", "TENANT", "QUESTIONS"),
                        required=True, help="a site: its name, service URL, tenant and question files (comma-separated)")
    args = parser.parse_args()
    sites: dict[str, list] = {}
    for name, url, tenant, files in args.site:
        questions = [json.loads(line) for path in files.split(",") for line in open(path, encoding="utf-8")]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda q: ask(url, tenant, q["query"]), questions))
        sites[name] = [features(q, a) for q, a in zip(questions, answers)]
    baseline = np.zeros(len(FEATURES))
    baseline[0] = 1.0
    for name, items in sites.items():
        print(f"{name}: {len(items)} questions, the service's order MRR@10 {mrr(items, baseline):.4f}")
    names = list(sites)
    for train in names:
        for test in names:
            if train != test:
                print(f"model trained on {train}, scored on {test}: {mrr(sites[test], fit(sites[train])):.4f}")
    everything = [(name, item) for name in names for item in sites[name]]
    random.Random(1).shuffle(everything)
    folds = {name: 0.0 for name in names}
    for fold in range(5):
        held = [pair for i, pair in enumerate(everything) if i % 5 == fold]
        weights = fit([item for i, (_, item) in enumerate(everything) if i % 5 != fold])
        for name in names:
            part = [item for site, item in held if site == name]
            folds[name] += mrr(part, weights) * len(part)
    print("5 folds over all questions: " + ", ".join(f"{n} {folds[n] / len(sites[n]):.4f}" for n in names))
    base = {name: mrr(items, baseline) for name, items in sites.items()}
    for j, feature in enumerate(FEATURES[1:], start=1):
        for weight in (-0.5, -0.2, -0.1, -0.05, 0.05, 0.1, 0.2, 0.5, 1.0):
            w = baseline.copy()
            w[j] = weight
            scores = {name: mrr(items, w) for name, items in sites.items()}
            if all(scores[n] > base[n] + 0.001 for n in names):
                print(f"score + {weight} × {feature}: " + ", ".join(f"{n} {scores[n]:.4f}" for n in names))


if __name__ == "__main__":
    main()
