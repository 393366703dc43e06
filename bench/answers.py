#!/usr/bin/env python3
"""Writes a running service's whole answer to every question of a question file, once per router
mode, with `include_steps` and `explain`: one JSON line per (question, mode), keys sorted, `took_ms`
left out, so two runs (before and after a change) compare with `cmp`. The query embeddings come
from the `eval` embedding cache (`.cache/eval-embeddings.jsonl`, keyed as `ingest::cache::cache_key`
keys them), so no embedding server is needed and both runs search with the same vectors.

usage: answers.py --url http://127.0.0.1:18090 --questions dev_questions.jsonl --tenant adguard \
           --out before.jsonl [--modes none,heuristic] [--embeddings .cache/eval-embeddings.jsonl] \
           [--model multilingual-e5-small]
Exit status 1 when a question has no cached embedding (run `eval --questions` over it once first)."""

import argparse
import hashlib
import json
import sys
import urllib.error
import urllib.request


def cache_key(model, text):
    digest = hashlib.sha256()
    digest.update(model.encode() + b"\0query\0" + text.encode())
    return digest.hexdigest()


def post(url, body):
    request = urllib.request.Request(
        url + "/internal/retrieval/search",
        data=json.dumps(body).encode("utf-8"),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--questions", required=True)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--modes", default="none,heuristic")
    parser.add_argument("--embeddings", default=".cache/eval-embeddings.jsonl")
    parser.add_argument("--model", default="multilingual-e5-small")
    args = parser.parse_args()
    vectors = {}
    with open(args.embeddings, encoding="utf-8") as handle:
        for line in handle:
            entry = json.loads(line)
            vectors[entry["key"]] = entry["embedding"]
    with open(args.questions, encoding="utf-8") as handle:
        questions = [json.loads(line) for line in handle if line.strip()]
    missing = [q["id"] for q in questions if cache_key(args.model, q["query"]) not in vectors]
    if missing:
        print(f"no cached embedding for {len(missing)} questions: {missing[:5]}", file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="utf-8") as out:
        for question in questions:
            for mode in args.modes.split(","):
                body = {
                    "tenant_id": args.tenant,
                    "query": question["query"],
                    "max_results": 10,
                    "include_steps": True,
                    "explain": True,
                    "router_mode": mode,
                    "query_embedding": vectors[cache_key(args.model, question["query"])],
                }
                status, answer = post(args.url, body)
                if isinstance(answer, dict):
                    answer.pop("took_ms", None)
                line = {"id": question.get("id"), "mode": mode, "status": status, "answer": answer}
                out.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{len(questions)} questions × {len(args.modes.split(','))} modes → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
