#!/usr/bin/env python3
"""Writes synthetic pages as a JSONL file `ingest` reads: N pages of 5 Markdown sections each
(one doc, 5 sections and about 5 chunks per page: ~11 records), deterministic for its arguments.

    python3 bench/pages_jsonl.py --pages 2000 --seed 1 --out .cache/pages/t1.jsonl
    retrieval-service ingest .cache/pages/t1.jsonl --tenant t1 --backend postgres

Used for the Citus figures in docs/operations.md; needs only the standard library.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

WORDS = (
    "фильтр блокировка реклама трекер настройка правило домен сервер прокси сертификат браузер "
    "приложение подписка лицензия устройство сеть соединение шифрование запрос ответ журнал "
    "filter block rule domain server proxy certificate browser app license device network "
    "connection encryption request response log update install dns vpn tunnel cache profile"
).split()
TOPICS = ("dns", "vpn", "filters", "license", "install", "network", "privacy", "browser")


def page(rng: random.Random, number: int) -> dict:
    topic = TOPICS[number % len(TOPICS)]
    sections = []
    for index in range(5):
        heading = " ".join(rng.choice(WORDS) for _ in range(3))
        body = " ".join(rng.choice(WORDS) for _ in range(90))
        sections.append(f"## {heading} {index}\n\n{topic} {body}.")
    return {
        "id": f"page-{number:06d}",
        "title": f"{topic} {' '.join(rng.choice(WORDS) for _ in range(4))} {number}",
        "text": "\n\n".join(sections),
        "url": f"https://example.test/{topic}/{number}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for number in range(args.pages):
            out.write(json.dumps(page(rng, number), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
