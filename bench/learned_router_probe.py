#!/usr/bin/env python3
"""Would routing over a tenant's whole vocabulary name the right area more often than the learned
themes' keyword lists? An offline probe over a snapshot and its labelled questions.

The service's learned themes (`router/learned.rs`) route by at most 40 distinctive words per area
(and their Cyrillic spellings). This probe instead scores each area by every word of its pages: a
naive Bayes model over page frequencies (per area, the share of its pages a stem is on, +0.5
smoothing; uniform prior over the areas), the areas being what the service learns them from (the
docs' `platform`, else their `section`; an area needs 3 pages). Nothing is fitted on questions.

For the questions that name an area (`platform` other than empty or `general`, the denominator of
`eval`'s `router_ok`), it prints the share whose most probable area is theirs; and, as a signal for
clarification, the AUC of the top area's probability between clear and ambiguous questions (how
often a clear question is more certain than an ambiguous one).

    python3 bench/learned_router_probe.py .cache/veil.json section ../shared/corpora/veil-vdi-ru/dev_questions.jsonl
    python3 bench/learned_router_probe.py .cache/adguard.json platform A.jsonl B.jsonl

Needs the `snowballstemmer` package (the same Snowball stemmers the service uses).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re

import snowballstemmer

RUSSIAN = snowballstemmer.stemmer("russian")
ENGLISH = snowballstemmer.stemmer("english")
MIN_AREA_PAGES = 3


def stems(text: str) -> list[str]:
    words = re.findall(r"\w+", text.lower().replace("ё", "е"))
    return [ENGLISH.stemWord(w) if re.fullmatch(r"[a-z0-9]+", w) else RUSSIAN.stemWord(w) for w in words if len(w) > 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot")
    parser.add_argument("field", choices=["platform", "section"], help="the metadata field the areas are")
    parser.add_argument("questions", nargs="+")
    args = parser.parse_args()

    with open(args.snapshot, encoding="utf-8") as file:
        snapshot = json.load(file)
    area_of = {doc["doc_id"]: (doc.get(args.field) or "").strip() for doc in snapshot["docs"]}
    page_words: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for section in snapshot["sections"]:
        area = area_of.get(section["doc_id"])
        if area:
            page_words[(section["doc_id"], area)].update(stems(section["text"]))
    pages = collections.Counter(area for (_, area) in page_words)
    areas = {area: n for area, n in pages.items() if n >= MIN_AREA_PAGES}
    frequency = {area: collections.Counter() for area in areas}
    for (_, area), words in page_words.items():
        if area in frequency:
            frequency[area].update(words)
    vocabulary = set().union(*(set(counts) for counts in frequency.values()))

    def posterior(question: str) -> dict[str, float]:
        log_p = {area: 0.0 for area in areas}
        for word in set(stems(question)) & vocabulary:
            for area in areas:
                log_p[area] += math.log((frequency[area][word] + 0.5) / (areas[area] + 1))
        top = max(log_p.values())
        total = sum(math.exp(v - top) for v in log_p.values())
        return {area: math.exp(v - top) / total for area, v in log_p.items()}

    questions = []
    for path in args.questions:
        with open(path, encoding="utf-8") as file:
            questions.extend(json.loads(line) for line in file if line.strip())
    named, right, clear, ambiguous = 0, 0, [], []
    for question in questions:
        p = posterior(question["query"])
        best = max(p, key=p.get)
        platform = question.get("platform") or ""
        if platform and platform != "general":
            named += 1
            right += best == platform
        (ambiguous if question.get("ambiguous") else clear).append(p[best])
    auc = sum((c > a) + 0.5 * (c == a) for c in clear for a in ambiguous) / max(1, len(clear) * len(ambiguous))
    print(f"areas (pages): {dict(sorted(areas.items()))}")
    print(f"questions naming an area: {named}; most probable area is theirs: {right / max(1, named):.3f}")
    print(f"clear {len(clear)} / ambiguous {len(ambiguous)}: AUC of the top area's probability {auc:.3f}")


if __name__ == "__main__":
    main()
