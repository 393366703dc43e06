#!/usr/bin/env python3
"""Pairs the pages of a built HTML site with the Markdown pages they were built from.

  html_sites/pages.py questions MD_SNAPSHOT HTML_SNAPSHOT QUESTIONS OUT   rewrites the questions' relevant
                                                                    Markdown paths to the HTML pages'
  html_sites/pages.py compare MD_SNAPSHOT HTML_SNAPSHOT                   titles, sections and chunks that
                                                                    differ, and chunks holding any
                                                                    of the --chrome labels

A built page is `a/b.html`, `a/b/index.html` or `a/index.html`; its Markdown source `a/b.md`,
`a/b/index.md`, `a/b/README.md` (or `.mdx`). Snapshots are the `ingest --out` files.
"""
import argparse, json, sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def candidates(html_source):
    stem = html_source
    for ext in (".html", ".htm"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
    out = []
    if stem == "index" or stem.endswith("/index"):
        folder = stem[: -len("index")].rstrip("/")
        for name in ("index", "README", "readme"):
            out.append(f"{folder}/{name}".lstrip("/"))
        if folder:
            out.append(folder)
            leaf = folder.rsplit("/", 1)[-1]
            out.append(f"{folder}/{leaf}")
    else:
        out.append(stem)
    return [c + ext for c in out for ext in (".md", ".mdx")]


def pairing(md, html):
    md_sources = {d["source"] for d in md["docs"]}
    pairs = {}
    for d in html["docs"]:
        if d["source"] in md_sources:  # a Markdown file the generator copied as it is
            pairs[d["source"]] = d["source"]
            continue
        for c in candidates(d["source"]):
            if c in md_sources:
                pairs[c] = d["source"]
                break
    return pairs


def by_source(snapshot, level):
    out = {}
    for r in snapshot[level]:
        out.setdefault(r["source"], []).append(r)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["questions", "compare"])
    parser.add_argument("md")
    parser.add_argument("html")
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--chrome", default="", help="comma-separated menu/footer labels no chunk may hold")
    args = parser.parse_args()
    md, html = load(args.md), load(args.html)
    pairs = pairing(md, html)
    if args.command == "questions":
        questions, out = args.rest
        missing = dropped = 0
        # OUT: every question, on the built pages; OUT.built-*.jsonl: only the questions whose
        # relevant pages were all built, as Markdown and as HTML questions (a generator may drop a
        # page, e.g. MkDocs when `a.md` and `a/index.md` both build to `a/index.html`).
        with open(questions, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as w, \
                open(out + ".built-markdown.jsonl", "w", encoding="utf-8") as built_md, \
                open(out + ".built-html.jsonl", "w", encoding="utf-8") as built_html:
            for line in f:
                if not line.strip():
                    continue
                q = json.loads(line)
                mapped = [pairs[r] for r in q["relevant"] if r in pairs]
                missing += len(q["relevant"]) - len(mapped)
                all_built = len(mapped) == len(q["relevant"])
                if all_built:
                    built_md.write(json.dumps(q, ensure_ascii=False) + "\n")
                else:
                    dropped += 1
                q["relevant"] = mapped or ["(not built)"]
                w.write(json.dumps(q, ensure_ascii=False) + "\n")
                if all_built:
                    built_html.write(json.dumps(q, ensure_ascii=False) + "\n")
        print(f"{len(pairs)} pages paired; {missing} relevant pages with no built page "
              f"({dropped} questions)", file=sys.stderr)
        return
    unpaired_md = sorted({d["source"] for d in md["docs"]} - set(pairs))
    paired_html = set(pairs.values())
    unpaired_html = sorted(d["source"] for d in html["docs"] if d["source"] not in paired_html)
    md_docs = {d["source"]: d for d in md["docs"]}
    html_docs = {d["source"]: d for d in html["docs"]}
    md_sections, html_sections = by_source(md, "sections"), by_source(html, "sections")
    md_chunks, html_chunks = by_source(md, "chunks"), by_source(html, "chunks")
    titles = sections = chunks = same_chunks = 0
    examples = []
    for m, h in sorted(pairs.items()):
        if md_docs[m]["title"] != html_docs[h]["title"]:
            titles += 1
            examples.append(("title", m, md_docs[m]["title"], html_docs[h]["title"]))
        ms = [s["text"] for s in md_sections.get(m, [])]
        hs = [s["text"] for s in html_sections.get(h, [])]
        if ms != hs:
            sections += 1
        mc = [c["text"] for c in md_chunks.get(m, [])]
        hc = [c["text"] for c in html_chunks.get(h, [])]
        chunks += len(mc)
        same_chunks += sum(1 for c in hc if c in set(mc))
        if ms != hs and len(examples) < 40:
            for a, b in zip(ms + [""] * len(hs), hs + [""] * len(ms)):
                if a != b:
                    examples.append(("section", m, a[:300], b[:300]))
                    break
    print(f"pages: markdown {len(md['docs'])}, html {len(html['docs'])}, paired {len(pairs)}")
    print(f"unpaired markdown: {unpaired_md[:10]}")
    print(f"unpaired html: {unpaired_html[:10]}")
    print(f"paired pages with another title: {titles}; with other section texts: {sections}")
    print(f"chunks: markdown {chunks}, html chunks identical to a markdown chunk of the page: {same_chunks}")
    labels = [l.strip() for l in args.chrome.split(",") if l.strip()]
    if labels:
        # A label counts where the built page's records hold it and its Markdown page's do not.
        back = {h: m for m, h in pairs.items()}
        md_text = {m: "\n".join(r["text"] for r in md_sections.get(m, []) + md_chunks.get(m, [])) for m in pairs}
        found = [
            (r["source"], l)
            for r in html["chunks"] + html["sections"]
            for l in labels
            if l in r["text"] and l not in md_text.get(back.get(r["source"], ""), "")
        ]
        print(f"chunks or sections holding a navigation/footer label missing from the Markdown page: {len(found)} {found[:5]}")
    for kind, m, a, b in examples[:12]:
        print(f"--- {kind} {m}\n  md:   {a!r}\n  html: {b!r}")


if __name__ == "__main__":
    main()
