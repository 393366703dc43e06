#!/usr/bin/env python3
"""Fails when a source file of either crate holds more than 800 lines of code: lines that are not
blank and not only a comment, outside its `#[cfg(test)]` modules (a test module in a file of its
own, `tests.rs`, is not counted). Prints the largest files either way.

    python3 scripts/file_sizes.py [--limit 800] [--top 5]
"""

import os
import re
import sys

ROOTS = ["src", "crates/engine/src"]
TEST_MODULE = re.compile(r"#\[cfg\(test\)\](?:\s*#\[[^\]]*\])*\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def code_lines(text):
    kept, at = [], 0
    for match in TEST_MODULE.finditer(text):
        if match.start() < at:
            continue
        kept.append(text[at : match.start()])
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        at = end
    kept.append(text[at:])
    return sum(1 for line in "".join(kept).split("\n") if line.strip() and not line.strip().startswith("//"))


def main():
    args = sys.argv[1:]
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else 800
    top = int(args[args.index("--top") + 1]) if "--top" in args else 5
    sizes = []
    for root in ROOTS:
        for directory, _, files in os.walk(root):
            for name in files:
                if name.endswith(".rs") and name != "tests.rs" and not name.endswith("_tests.rs"):
                    path = os.path.join(directory, name)
                    sizes.append((code_lines(open(path, encoding="utf-8").read()), path))
    sizes.sort(reverse=True)
    for lines, path in sizes[:top]:
        print(f"{lines:5} lines of code  {path}")
    over = [(lines, path) for lines, path in sizes if lines > limit]
    for lines, path in over:
        print(f"error: {path} has {lines} lines of code (over {limit}, tests not counted): split it", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
