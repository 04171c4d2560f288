#!/usr/bin/env python3
"""Check that every C block README.md quotes under "Embedding the core" appears in
examples/minimal_embed.c, line for line (ignoring lines that are only "/* ... */"
elisions). Prints the first line that drifted; exits non-zero when one did."""
import re
import sys


def main(readme, example):
    text = open(readme, encoding="utf-8").read()
    section = text.split("## Embedding the core", 1)[-1].split("\n## ", 1)[0]
    src = [l.rstrip() for l in open(example, encoding="utf-8")]
    blocks = re.findall(r"```c\n(.*?)```", section, re.S)
    if not blocks:
        print("no C blocks under 'Embedding the core'")
        return 1
    for block in blocks:
        lines = [l.rstrip() for l in block.splitlines()]
        lines = [l for l in lines if l.strip() and not l.lstrip().startswith(("/* ...", "* ", "*/"))]
        pos = 0
        for line in lines:
            try:
                pos = src.index(line, pos) + 1
            except ValueError:
                print("README line not in %s (or out of order): %s" % (example, line.strip()))
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
