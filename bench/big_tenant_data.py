#!/usr/bin/env python3
"""Writes one synthetic tenant as an in-memory snapshot file, plus its benchmark queries.

The corpus is the side-by-side one (../shared/peers/load_synthetic.py: docs with topic
structure, sections and chunks near their doc, words drawn per topic) with a single tenant,
written straight to this service's snapshot format (no Chroma). The same arguments always give
the same file.

    python3 bench/big_tenant_data.py --docs 40000 --out .cache/big/docs-40000.json

Writes OUT and OUT with `.queries.jsonl` for `.json` (one {"tenant_id", "query", "embedding",
"target_doc_id", ...} per line, as load_synthetic.py writes them). Needs numpy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("PEERS", ROOT.parent / "shared" / "peers"))
sys.path.insert(0, str(PEERS))

import numpy as np  # noqa: E402
import load_synthetic  # noqa: E402

INDEXED_AT = "2026-11-27T00:00:00Z"
META_KEYS = ("tenant_id", "doc_id", "section_id", "chunk_id", "title", "summary", "url", "product", "version",
             "domain", "section", "platform", "role", "page_type", "page", "chunk_index")


def record(rid: str, vector: np.ndarray, metadata: dict, text: str) -> str:
    meta = {key: metadata[key] for key in META_KEYS if key in metadata}
    meta["source"] = f"{metadata['doc_id']}.md"
    meta["indexed_at"] = INDEXED_AT
    meta["content_length"] = len(text)
    body = {"id": rid, **meta, "text": text}
    head = json.dumps(body, ensure_ascii=False)[:-1]
    embedding = ",".join(f"{value:.7g}" for value in vector.tolist())
    return f'{head},"embedding":[{embedding}]}}'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, required=True)
    parser.add_argument("--sections-per-doc", type=int, default=5)
    parser.add_argument("--chunks-per-section", type=int, default=5)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--tenants", type=int, default=1, help="docs spread over this many tenants")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    corpus_args = argparse.Namespace(
        docs=args.docs, sections_per_doc=args.sections_per_doc, chunks_per_section=args.chunks_per_section,
        tenants=args.tenants, dim=384, latent_dim=32, topics=24, seed=20261122, with_tags=False)
    corpus = load_synthetic.Corpus(corpus_args)
    out = Path(args.out)
    partial = out.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as handle:
        handle.write(f'{{"format_version":1,"indexed_at":"{INDEXED_AT}","embedding_model":"synthetic",'
                     f'"dimension":384')
        for level, key in (("doc", "docs"), ("section", "sections"), ("chunk", "chunks")):
            handle.write(f',"{key}":[')
            for number, (rid, vector, metadata, text) in enumerate(corpus.records(level)):
                if number:
                    handle.write(",")
                handle.write(record(rid, vector, metadata, text))
            handle.write("]")
        handle.write("}\n")
    partial.rename(out)
    with out.with_suffix(".queries.jsonl").open("w", encoding="utf-8") as handle:
        for query in corpus.queries(args.queries):
            handle.write(json.dumps(query, ensure_ascii=False) + "\n")
    print(f"wrote {out} ({out.stat().st_size / 1e9:.2f} GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
