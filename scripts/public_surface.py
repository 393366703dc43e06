#!/usr/bin/env python3
"""Measures the engine's public surface and how much of it the other targets name.

The engine (crates/engine/src): its public modules (reachable from the crate root through
`pub mod`) and its public names (a `pub` item at the top of a public module, or a name a public
module re-exports with `pub use`), each counted once by its path. Items behind a feature count.

The other targets (the service's src/, tests/, benches/, examples/): every engine path they name,
in a `use` or inline (`retrieval_engine::a::b::Item`, and in src/ `crate::a::…` through a module
alias of src/lib.rs). A path names a module (the longest prefix that is an engine module, a
submodule when it is more than one level deep) and, after it, an item. Prints the counts; with
`--list`, the module paths named and the public names no other target names. With `--check`
(scripts/test.sh), fails when src/lib.rs aliases an engine module: the service names engine items
by the engine's crate.

    python3 scripts/public_surface.py [--list] [--check]
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from module_cycles import module_files, strip_comments_and_tests  # noqa: E402

ENGINE = "crates/engine/src"
OTHERS = ["src", "tests", "benches", "examples"]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A `pub` item at the top of a file (rustfmt puts those in column 0).
ITEM = re.compile(
    rf"^pub\s+(?:(?:async|unsafe|const|extern(?:\s+\"C\")?)\s+)*(fn|struct|enum|trait|const|static|type|union|mod)\s+({IDENT})",
    re.M,
)
PUB_USE = re.compile(r"^pub\s+use\s+([^;]+);", re.M)


def read(path):
    return strip_comments_and_tests(open(path, encoding="utf-8").read())


def tree_paths(tree, prefix=""):
    """Expands one use tree (`a::{b, c::{d, e as f}}`) into (path, the name it binds)."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        if not tree:
            return []
        path, _, rename = (part.strip() for part in re.sub(r"\s+", " ", tree).partition(" as "))
        path = re.sub(r"\s+", "", prefix + path)
        bound = rename or path.split("::")[-1]
        return [(path[: -len("::self")] if path.endswith("::self") else path, bound if bound != "self" else path.split("::")[-2])]
    head, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for k, char in enumerate(body):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    return [found for part in parts for found in tree_paths(part, prefix + head)]


def engine_surface():
    """(public modules, public names as (module, name), every module of the engine)."""
    modules = module_files(ENGINE)
    texts = {module: read(path) for module, path in modules.items()}
    public, pending = {()}, [()]
    while pending:
        module = pending.pop()
        for kind, name in ITEM.findall(texts.get(module, "")):
            child = module + (name,)
            if kind == "mod" and child in modules and child not in public:
                public.add(child)
                pending.append(child)
    names = set()
    for module in public:
        text = texts[module]
        names.update((module, name) for kind, name in ITEM.findall(text) if kind != "mod")
        for tree in PUB_USE.findall(text):
            for path, bound in tree_paths(tree):
                parts = path.split("::")
                if bound == "*":
                    target = resolve_relative(module, parts[:-1], modules)
                    if target is not None:
                        names.update((module, name) for kind, name in ITEM.findall(texts[target]) if kind != "mod")
                elif module + (bound,) not in public:
                    names.add((module, bound))
    return public, names, set(modules)


def resolve_relative(module, parts, modules):
    base = () if parts and parts[0] == "crate" else module
    for part in parts:
        if part == "crate":
            continue
        base = base[:-1] if part == "super" else base if part == "self" else base + (part,)
    return base if base in modules else None


def engine_aliases():
    """The engine modules src/lib.rs names under the service's own root (`crate::search`)."""
    aliases = set()
    for tree in re.findall(r"\buse\s+(retrieval_engine::[^;]+);", read("src/lib.rs")):
        for path, bound in tree_paths(tree):
            if len(path.split("::")) == 2 and re.fullmatch(r"[a-z_]+", bound):
                aliases.add(bound)
    return aliases


def named_paths(aliases, modules):
    """Every engine path (a tuple, after the crate name) the other targets name: in a `use`, inline
    from the crate's name (or a module alias), or inline through a module a `use` brought in."""
    found = set()
    for top in OTHERS:
        roots = {"retrieval_engine": ()}
        if top == "src":
            roots.update({"crate::" + alias: (alias,) for alias in aliases})
        for directory, _, files in os.walk(top):
            for file in files:
                if not file.endswith(".rs"):
                    continue
                text = re.sub(r"//[^\n]*", "", open(os.path.join(directory, file), encoding="utf-8").read())
                local = dict(roots)
                for tree in re.findall(r"\buse\s+([^;]+);", text):
                    for used, bound in tree_paths(tree):
                        path = engine_path(used, roots)
                        if path:
                            found.add(path)
                            if path in modules:
                                local[bound] = path
                inline = re.sub(r"\buse\s+[^;]+;", "", text)
                for match in re.finditer(rf"(?<![\w:])(?:crate::)?{IDENT}(?:::{IDENT})+", inline):
                    path = engine_path(match.group(0), local)
                    if path:
                        found.add(path)
    return found


def engine_path(path, roots):
    for root, base in roots.items():
        if path.startswith(root + "::"):
            parts = [part for part in path[len(root) + 2 :].split("::") if part not in ("self", "*")]
            return base + tuple(parts) if base or parts else None
    return None


def main():
    public, names, modules = engine_surface()
    aliases = engine_aliases()
    # A path names a public module (another crate cannot name a private one).
    named = named_paths(aliases, public)
    module_paths, items = set(), set()
    for path in named:
        depth = 0
        while depth < len(path) and path[: depth + 1] in public:
            depth += 1
        if depth:
            module_paths.add(path[:depth])
        if depth < len(path):
            items.add((path[:depth], path[depth]))
    named_idents = {name for _, name in items}
    unnamed = sorted("::".join(module + (name,)) for module, name in names if name not in named_idents)
    alias_uses = 0
    for directory, _, files in os.walk("src"):
        for file in files:
            if file.endswith(".rs"):
                text = open(os.path.join(directory, file), encoding="utf-8").read()
                alias_uses += sum(len(re.findall(rf"\bcrate::{alias}\b", text)) for alias in aliases)
    print(f"engine public modules (the crate root not counted): {len(public) - 1}")
    print(f"engine public names: {len(names)}")
    print(f"engine public names no other target names: {len(unnamed)}")
    print(f"engine module paths the other targets name: {len(module_paths)}")
    print(f"  of them submodules (two levels or more): {sum(1 for path in module_paths if len(path) > 1)}")
    print(f"engine items the other targets name: {len(items)}")
    print(f"engine module aliases in src/lib.rs: {len(aliases)} (named {alias_uses} times in src/)")
    if "--list" in sys.argv[1:]:
        print("\nmodule paths named:")
        for path in sorted(module_paths):
            print("  " + "::".join(path))
        print("\npublic names no other target names:")
        for name in unnamed:
            print("  " + name)
    if "--check" in sys.argv[1:] and aliases:
        print(f"error: src/lib.rs aliases engine modules: {', '.join(sorted(aliases))}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    main()
