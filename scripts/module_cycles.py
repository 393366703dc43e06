#!/usr/bin/env python3
"""Finds import circles between the source files of each crate (the engine, the service).

A file depends on another when it names an item of it: `use crate::a::b::Item`, `super::Item`,
or such a path inline (a `pub use` re-export is not a use). A name re-exported by a parent module (`pub(crate) use child::Item`) is
followed to the file that defines it, so a child that imports its parent's re-export of a
sibling's item depends on that sibling, not on the parent. `#[cfg(test)]` modules are left out.
Prints each circle (a strongly connected set of files) and exits 1 if there is one; with
`--folders`, also the circles between the top-level modules (a folder and its file together).
`--known FILE` (repeatable) reports a circle through FILE without failing: a known one, still to
be undone.

    python3 scripts/module_cycles.py [--folders] [--known FILE]
"""

import os
import re
import sys

CRATES = {"engine": "crates/engine/src", "service": "src"}
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# `#[cfg(test)]` (other attributes may follow) before `mod name`.
TEST_MODULE = r"#\[cfg\(test\)\](?:\s*#\[[^\]]*\])*\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)"


def strip_comments_and_tests(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for match in re.finditer(TEST_MODULE + r"\s*\{", text):
        if match.start() < i:
            continue
        out.append(text[i:match.start()])
        depth, j = 1, match.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def module_files(root):
    """Module path (tuple) -> file, for every file of the crate under `root`."""
    modules = {}
    for directory, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(directory, name)
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            if parts[-1] == "mod" or parts == ["lib"]:
                parts = parts[:-1]
            if parts == ["main"]:
                continue
            modules[tuple(parts)] = path
    return modules


def use_paths(tree, prefix=""):
    """Expands one use tree (`a::{b, c::{d, e as f}}`) into its paths."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [prefix + re.split(r"\s+as\s+", tree)[0].strip()] if tree else []
    head, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for k, char in enumerate(body):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    return [path for part in parts for path in use_paths(part, prefix + head)]


def paths_in(text, children=()):
    """(path, re-exported) of every `use`, every inline `crate::`/`super::`/`self::` path, and every
    inline path through one of `children` (the file's own submodules, named bare)."""
    found = []
    for match in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
        for path in use_paths(match.group(2)):
            found.append((re.sub(r"\s+", "", path), bool(match.group(1))))
    text = re.sub(r"\buse\s+[^;]+;", "", text)
    for match in re.finditer(rf"(?<![\w:])(?:crate|super|self)(?:::{IDENT})+", text):
        found.append((match.group(0), False))
    for child in children:
        for match in re.finditer(rf"(?<![\w:]){child}(?:::{IDENT})+", text):
            found.append(("self::" + match.group(0), False))
    return found


def resolve(module, path, modules, aliases=None):
    """The module a path starts in and the names after it; `aliases` maps (module, name) to the
    module a `pub use` re-exports under that name."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    elif parts[0] in ("super", "self"):
        base = module
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                base = base[:-1]
            parts = parts[1:]
        rest = parts
    else:
        return None
    current = base
    while rest:
        if current + (rest[0],) in modules:
            current, rest = current + (rest[0],), rest[1:]
        elif aliases and (current, rest[0]) in aliases:
            current, rest = aliases[(current, rest[0])], rest[1:]
        else:
            break
    return current, rest


def analyse(root):
    modules = module_files(root)
    raw = {module: re.sub(r"//[^\n]*", "", open(path, encoding="utf-8").read()) for module, path in modules.items()}
    # Files that are test modules (`#[cfg(test)] mod tests;`) and their children are left out.
    tests = {module + (name,) for module, text in raw.items() for name in re.findall(TEST_MODULE + r"\s*;", text)}
    modules = {m: path for m, path in modules.items() if not any(m[: len(t)] == t for t in tests)}
    texts = {module: strip_comments_and_tests(raw[module]) for module in modules}
    # Re-exports: module -> name -> (module, rest) it stands for; a re-exported module is an alias.
    reexports = {module: {} for module in modules}
    aliases = {}
    for module, text in texts.items():
        for path, public in paths_in(text):
            if not public:
                continue
            first = path.split("::")[0]
            if first not in ("crate", "super", "self"):
                if module + (first,) not in modules:
                    continue
                path = "self::" + path
            target = resolve(module, path, modules)
            if target and target[1]:
                reexports[module][target[1][-1]] = target
            elif target:
                aliases[(module, path.split("::")[-1])] = target[0]

    def final(target, seen=0):
        current, rest = target
        if rest and rest[0] in reexports.get(current, {}) and seen < 10:
            via = reexports[current][rest[0]]
            return final((via[0], via[1] + rest[1:]), seen + 1)
        return current

    edges = {module: set() for module in modules}
    for module, text in texts.items():
        children = [m[-1] for m in modules if len(m) == len(module) + 1 and m[: len(module)] == module]
        for path, public in paths_in(text, children):
            if public:
                continue  # a re-export declares, it does not use
            first = path.split("::")[0]
            if first not in ("crate", "super", "self"):
                if module + (first,) in modules:
                    path = "self::" + path
                else:
                    continue
            target = resolve(module, path, modules, aliases)
            if target is None:
                continue
            to = final(target)
            # A parent naming its own child through `mod`/re-exports is declaration, not use.
            if to != module and to != ():
                edges[module].add(to)
    return modules, edges


def strongly_connected(edges):
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                result.append(component)

    for node in list(edges):
        if node not in index:
            visit(node)
    return result


def main():
    folders = "--folders" in sys.argv
    known = {sys.argv[i + 1] for i, arg in enumerate(sys.argv[:-1]) if arg == "--known"}
    failed = False
    for crate, root in CRATES.items():
        modules, edges = analyse(root)
        name = lambda module: os.path.relpath(modules[module], root)
        for component in strongly_connected(edges):
            members = set(component)
            is_known = any(os.path.join(root, name(m)) in known for m in component)
            failed = failed or not is_known
            print(f"{crate}: {'known ' if is_known else ''}circle: " + ", ".join(sorted(name(m) for m in component)))
            for module in sorted(component):
                for to in sorted(edges[module] & members):
                    print(f"  {name(module)} -> {name(to)}")
        if folders:
            top = {}
            for module, targets in edges.items():
                if not module:
                    continue
                top.setdefault(module[0], set()).update(t[0] for t in targets if t and t[0] != module[0])
            known_tops = {os.path.relpath(path, root).split(os.sep)[0] for path in known if path.startswith(root + "/")}
            for component in strongly_connected(top):
                is_known = bool(known_tops & set(component))
                failed = failed or not is_known
                label = "known circle" if is_known else "circle"
                print(f"{crate}: {label} between top-level modules: " + ", ".join(sorted(component)))
                for module in sorted(component):
                    for to in sorted(top[module] & set(component)):
                        print(f"  {module} -> {to}")
    if not failed:
        print("no import circle" + (" but the known ones" if known else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
