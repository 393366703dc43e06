#!/usr/bin/env python3
"""How many records an exact top-k scan would still have to score exactly after a quantized pass.

An exact scan can read fewer bytes without changing a score: score every row from a quantized
copy (int8 or int16, one scale per row), bound each row's error, and compute the exact f32 cosine
only for the rows whose upper bound reaches the k-th best lower bound. The bound of a row is
|q|·|v − v'| + |q − q'|·|v'| (quantization, Cauchy–Schwarz) plus γ_n·|q|·|v| (the rounding of the
f32 sum the exact scan computes), so the rows left out are exactly those that cannot be in the
top k. This measures the size of that candidate set, which decides whether the idea pays:

- on the synthetic corpus of ../shared/peers/side_by_side.sh (its generator, its queries), per
  tenant: 200 pages and 1,000 sections;
- on the AdGuard index (multilingual-e5-small vectors, whose cosines crowd into a narrow band),
  against query vectors from the eval embedding cache.

Needs numpy (the peer's venv has it):
    .cache/peer-venv/bin/python bench/prefilter_bound.py
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

DIMENSION = 384
GAMMA = DIMENSION * 2.0**-24 / (1 - DIMENSION * 2.0**-24)


def quantize(matrix: np.ndarray, bits: int) -> np.ndarray:
    """Rows rounded to `bits`-bit integers with one scale per row, back in float."""
    top = (1 << (bits - 1)) - 1
    scale = np.abs(matrix).max(axis=1, keepdims=True) / top
    scale[scale == 0] = 1.0
    return np.round(matrix / scale) * scale


def candidates(rows: np.ndarray, query: np.ndarray, bits: int, k: int) -> int:
    """Rows whose cosine upper bound reaches the k-th best lower bound."""
    approx = quantize(rows, bits)
    query_approx = quantize(query[None, :], bits)[0]
    norms = np.linalg.norm(rows, axis=1)
    query_norm = np.linalg.norm(query)
    error = (
        query_norm * np.linalg.norm(rows - approx, axis=1)
        + np.linalg.norm(query - query_approx) * np.linalg.norm(approx, axis=1)
        + 1.01 * GAMMA * query_norm * norms
        + 1e-7
    )
    dots = approx @ query_approx
    lower = (dots - error) / (query_norm * norms)
    upper = (dots + error) / (query_norm * norms)
    threshold = np.sort(lower)[-k]
    return int((upper >= threshold - 1e-6).sum())


def report(label: str, sets: list[tuple[np.ndarray, np.ndarray]], k: int) -> None:
    for bits in (8, 16):
        counts = [candidates(rows, query, bits, k) for rows, query in sets]
        print(
            f"{label:<28} rows {len(sets[0][0]):>5}  int{bits:<2}  top {k}: "
            f"rescored mean {np.mean(counts):7.1f}  max {max(counts):>5}"
        )


def synthetic(peers: Path, queries_path: Path, count: int) -> None:
    sys.path.insert(0, str(peers))
    import load_synthetic  # noqa: E402  (the peer's generator: same corpus as side_by_side.sh)

    args = argparse.Namespace(
        docs=2000, sections_per_doc=5, chunks_per_section=4, tenants=10, dim=DIMENSION,
        latent_dim=32, topics=24, seed=20261122,
    )
    corpus = load_synthetic.Corpus(args)
    docs = np.arange(args.docs)
    sections = corpus.section_vectors.reshape(-1, DIMENSION).astype(np.float64)
    section_docs = np.repeat(docs, args.sections_per_doc)
    queries = [json.loads(line) for line in queries_path.open()][:count]
    page_sets, section_sets = [], []
    for query in queries:
        tenant = int(query["tenant_id"].split("-")[1])
        vector = np.array(query["embedding"], dtype=np.float64)
        page_sets.append((corpus.doc_vectors[docs % args.tenants == tenant].astype(np.float64), vector))
        section_sets.append((sections[section_docs % args.tenants == tenant], vector))
    report("synthetic pages", page_sets, 100)
    report("synthetic sections", section_sets, 100)


def adguard(index_path: Path, cache_path: Path, count: int) -> None:
    index = json.loads(index_path.read_text())
    vectors = []
    with cache_path.open() as handle:
        for line in handle:
            vectors.append(json.loads(line)["embedding"])
            if len(vectors) >= 4 * count:
                break
    pick = np.random.default_rng(1).choice(len(vectors), size=min(count, len(vectors)), replace=False)
    queries = np.array(vectors, dtype=np.float64)[pick]
    for level in ("docs", "sections"):
        rows = np.array([record["embedding"] for record in index[level]], dtype=np.float64)
        report(f"adguard {level}", [(rows, query) for query in queries], 100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peers", type=Path, default=Path("../shared/peers"))
    parser.add_argument("--queries", type=Path, default=Path(".cache/sbs/queries.jsonl"))
    parser.add_argument("--adguard-index", type=Path, default=Path(".cache/adguard.json"))
    parser.add_argument("--embedding-cache", type=Path, default=Path(".cache/eval-cache.jsonl"))
    parser.add_argument("--count", type=int, default=200, help="queries per corpus")
    args = parser.parse_args()
    synthetic(args.peers, args.queries, args.count)
    if args.adguard_index.exists() and args.embedding_cache.exists():
        adguard(args.adguard_index, args.embedding_cache, args.count)
    else:
        print(f"no {args.adguard_index} or {args.embedding_cache}: AdGuard part skipped")


if __name__ == "__main__":
    main()
