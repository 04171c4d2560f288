#!/usr/bin/env python3
"""Keep README.md honest.

    readme_sync.py README.md EXAMPLE.c [EXAMPLE.c ...]

1. Every C block README.md quotes under "Embedding the core" appears in one of the
   example files, line for line and in order (ignoring lines that are only
   "/* ... */" elisions). Prints the first line that drifted.
2. Every file the README points to exists: relative Markdown link targets, and
   repository paths written in backticks (`examples/tcp_embed.c`).
3. A link whose text is a path names the file it links to (the text said one date
   of a bench report while the link went to another).
Exits non-zero on the first kind of problem found, after printing every instance.
"""
import os
import re
import sys

TOP_DIRS = ("core", "io", "runtime", "examples", "tests", "bench", "sim", "include",
            "docs", "svc", "compat", "ns3")
PATH_RE = re.compile(r"^(?:%s)/[\w./-]*[\w-]$" % "|".join(TOP_DIRS))


def check_quotes(text, examples):
    section = text.split("## Embedding the core", 1)[-1].split("\n## ", 1)[0]
    srcs = {e: [l.rstrip() for l in open(e, encoding="utf-8")] for e in examples}
    blocks = re.findall(r"```c\n(.*?)```", section, re.S)
    if not blocks:
        print("no C blocks under 'Embedding the core'")
        return 1
    for block in blocks:
        lines = [l.rstrip() for l in block.splitlines()]
        lines = [l for l in lines if l.strip() and not l.lstrip().startswith(("/* ...", "* ", "*/"))]
        if not any(in_order(lines, src) for src in srcs.values()):
            for e, src in srcs.items():
                bad = first_missing(lines, src)
                print("README line not in %s (or out of order): %s" % (e, bad.strip()))
            return 1
    return 0


def in_order(lines, src):
    return first_missing(lines, src) is None


def first_missing(lines, src):
    pos = 0
    for line in lines:
        try:
            pos = src.index(line, pos) + 1
        except ValueError:
            return line
    return None


def check_paths(text, root):
    bad = 0
    for label, target in re.findall(r"\[([^\]]*)\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not os.path.exists(os.path.join(root, path)):
            print("README links %s, which does not exist" % target)
            bad = 1
        if PATH_RE.match(label) and label != path:
            print("README link text %s points to %s" % (label, path))
            bad = 1
    for tok in re.findall(r"`([^`\s]+)`", text):
        tok = tok.rstrip(".,:")
        if PATH_RE.match(tok) and "<" not in tok and "*" not in tok:
            if not os.path.exists(os.path.join(root, tok)):
                print("README names %s, which does not exist" % tok)
                bad = 1
    return bad


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    readme, examples = argv[1], argv[2:]
    text = open(readme, encoding="utf-8").read()
    root = os.path.dirname(os.path.abspath(readme))
    rc = check_quotes(text, examples)
    rc |= check_paths(text, root)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
