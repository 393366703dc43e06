#!/usr/bin/env python3
"""End-to-end quality of a running retrieval service on the AdGuard dev questions.

Sends every question of dev_questions.jsonl ({"id","query","relevant","platform","ambiguous"}) to
POST /internal/retrieval/search (tenant adguard, max_results 10) once per router mode (switched with
POST /internal/retrieval/config) and prints one table row per mode:

  any@10        a relevant page (hit.metadata.source in relevant) among the hits
  first         a relevant page as the first hit
  plat_first    platform-specific questions (platform not null, not "general"): relevant page first
  plat_wrong1   platform-specific questions whose first hit is another product's page
  filt_wrong    hard filters (routing.hard_filter.platform) naming another platform than the label
  amb_disamb    ambiguous questions with routing.requires_disambiguation true
  amb_clarif    ambiguous questions with a clarification object
  clear_disamb  non-ambiguous questions wrongly flagged requires_disambiguation

  python3 bench/adguard_dev.py --url http://127.0.0.1:18090 --modes none,heuristic [--verbose]

Standard library only. Leaves the router mode as it found it.
"""

import argparse
import json
import sys
import urllib.request

DEFAULT_QUESTIONS = "/work/shared/corpora/adguard-kb-ru/dev_questions.jsonl"


def post(url, body, timeout=60.0):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def get(url, timeout=10.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


def load_questions(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def specific_platform(question):
    platform = question.get("platform")
    return platform if platform and platform != "general" else None


def run_mode(base, mode, questions, tenant, max_results, verbose):
    post(base + "/internal/retrieval/config", {"theme_router_mode": mode})
    counts = dict.fromkeys(
        ["any", "first", "plat_first", "plat_wrong1", "filt_wrong", "amb_disamb", "amb_clarif", "clear_disamb"], 0
    )
    took = []
    for question in questions:
        answer = post(
            base + "/internal/retrieval/search",
            {"query": question["query"], "tenant_id": tenant, "max_results": max_results},
        )
        took.append(answer.get("took_ms", 0.0))
        relevant = set(question["relevant"])
        sources = [hit["metadata"]["source"] for hit in answer["hits"]]
        routing = answer.get("routing") or {}
        hard_filter = routing.get("hard_filter") or {}
        disamb = bool(routing.get("requires_disambiguation"))
        any_hit = any(source in relevant for source in sources)
        first = bool(sources) and sources[0] in relevant
        counts["any"] += any_hit
        counts["first"] += first
        platform = specific_platform(question)
        first_platform = answer["hits"][0]["metadata"]["platform"] if answer["hits"] else ""
        if platform:
            counts["plat_first"] += first
            counts["plat_wrong1"] += bool(first_platform) and first_platform != platform
        if hard_filter.get("platform") and hard_filter["platform"] != platform:
            counts["filt_wrong"] += 1
        if question["ambiguous"]:
            counts["amb_disamb"] += disamb
            counts["amb_clarif"] += answer.get("clarification") is not None
        else:
            counts["clear_disamb"] += disamb
        if verbose:
            rank = next((i + 1 for i, source in enumerate(sources) if source in relevant), None)
            print(
                f"  [{mode}] {question['id']} plat={question.get('platform')} amb={question['ambiguous']} "
                f"rank={rank} first={sources[0] if sources else None} ({first_platform or '-'}) "
                f"primary={routing.get('primary_theme')} filter={hard_filter or None} disamb={disamb} "
                f"clarif={answer.get('clarification') is not None}",
                file=sys.stderr,
            )
    took.sort()
    counts["p50_ms"] = took[len(took) // 2] if took else 0.0
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:18090")
    parser.add_argument("--questions", default=DEFAULT_QUESTIONS)
    parser.add_argument("--modes", default="none,heuristic")
    parser.add_argument("--tenant", default="adguard")
    parser.add_argument("--max-results", type=int, default=10)
    parser.add_argument("--label", default="", help="row prefix, e.g. the embedder")
    parser.add_argument("--verbose", action="store_true", help="one line per question on stderr")
    args = parser.parse_args()
    base = args.url.rstrip("/")
    questions = load_questions(args.questions)
    n_plat = sum(1 for q in questions if specific_platform(q))
    n_amb = sum(1 for q in questions if q["ambiguous"])
    n_clear = len(questions) - n_amb
    original_mode = get(base + "/internal/retrieval/config")["theme_router_mode"]
    header = (
        f"{'run':<22} {'any@10':>7} {'first':>7} {'plat_first':>10} {'plat_wrong1':>11} {'filt_wrong':>10} "
        f"{'amb_disamb':>10} {'amb_clarif':>10} {'clear_disamb':>12} {'p50_ms':>7}"
    )
    rows = []
    try:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            c = run_mode(base, mode, questions, args.tenant, args.max_results, args.verbose)
            name = f"{args.label} {mode}".strip()
            total = len(questions)
            rows.append(
                f"{name:<22} {c['any']:>3}/{total:<3} {c['first']:>3}/{total:<3} {c['plat_first']:>6}/{n_plat:<3} "
                f"{c['plat_wrong1']:>7}/{n_plat:<3} {c['filt_wrong']:>10} {c['amb_disamb']:>6}/{n_amb:<3} "
                f"{c['amb_clarif']:>6}/{n_amb:<3} {c['clear_disamb']:>8}/{n_clear:<3} {c['p50_ms']:>7.1f}"
            )
    finally:
        post(base + "/internal/retrieval/config", {"theme_router_mode": original_mode})
    print(header)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
