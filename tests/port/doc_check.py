#!/usr/bin/env python3
"""Fail on an undocumented public symbol in the public headers (issue 14 item 18).

    doc_check.py [HEADER...]     default: include/ipkit/*.h

Checked symbols: every function declared at file scope (prototypes and static
inline definitions) and every function-pointer member of a struct (the ops tables).

The rule, kept simple and strict:
  * a symbol is documented when a comment sits immediately above its declaration
    (no blank line, no preprocessor line in between), or
  * when it is one of a run of declarations with no blank line between them and the
    comment immediately above the run names it (the symbol's name appears in the
    comment as a word): a grouped comment must say explicitly what it covers;
  * a function returning int (an error code in ipkit's one convention) must also say
    what it returns: its comment mentions "return", an IPK_E code or "-E" (an errno).

A comment at the end of the declaration's line does not count. Also, every
repository file a header names (core/rss.c, examples/echo_workers.c, ...) must exist:
headers that cite files which were renamed away mislead the reader.

Prints one line per offending symbol (file:line: name: why) and exits 1 when there is
one; prints the count of checked symbols and exits 0 otherwise.
"""
import glob
import os
import re
import sys

FUNC_RE = re.compile(r"([A-Za-z_]\w*)\s*\($")
MEMBER_RE = re.compile(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(")
RETURNS_RE = re.compile(r"return|IPK_E[A-Z]|-E[A-Z]", re.I)
FILE_RE = re.compile(r"\b((?:core|io|runtime|examples|tests|bench|sim|include|docs|svc)"
                     r"/[\w./-]*\.(?:c|h|py|sh|md))\b")


COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def mark_comments(text):
    """Comments that start a line become one marker "@@C<i>@@" on their last line (after
    empty lines, so line numbers stay); comments after code on a line are removed."""
    comments = []

    def repl(m):
        before = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
        pad = "\n" * m.group(0).count("\n")
        if before.strip():
            return " " + pad
        comments.append(m.group(0))
        return pad + "@@C%d@@" % (len(comments) - 1)

    return COMMENT_RE.sub(repl, text), comments


def items_of(text):
    """The header as a list of items: ('blank',), ('pp',), ('other',),
    ('comment', text), ('decl', kind, name, line, head) with kind 'func' or
    'member'. Struct/enum bodies and inline function bodies are tracked by brace."""
    marked, comments = mark_comments(text)
    items = []
    stack = []  # 'struct' / 'enum' / 'body', one per open brace
    stmt, stmt_line = "", 0
    pp_cont = False
    cplusplus = False
    for n, line in enumerate(marked.split("\n"), 1):
        s = line.strip()
        if pp_cont:
            pp_cont = s.endswith("\\")
            continue
        if s == "#ifdef __cplusplus":
            cplusplus = True
        if cplusplus:  # the extern "C" guards: not a scope
            cplusplus = not s.startswith("#endif")
            items.append(("pp",))
            continue
        m = re.fullmatch(r"@@C(\d+)@@", s)
        if m and not stmt:
            items.append(("comment", comments[int(m.group(1))]))
            continue
        if not s:
            if not stmt:
                items.append(("blank",))
            continue
        if s.startswith("#") and not stmt:
            items.append(("pp",))
            pp_cont = s.endswith("\\")
            continue
        if not stmt:
            stmt_line = n
        stmt += " " + re.sub(r"@@C\d+@@", " ", s)
        while stmt.strip():
            if stack and stack[-1] == "body":  # skip an inline function's body
                k = 0
                for k, ch in enumerate(stmt):
                    if ch == "{":
                        stack.append("body")
                    elif ch == "}":
                        stack.pop()
                        if not stack or stack[-1] != "body":
                            break
                else:
                    stmt = ""
                    break
                stmt = stmt[k + 1 :]
                continue
            semi, brace, close = stmt.find(";"), stmt.find("{"), stmt.find("}")
            cands = [q for q in (semi, brace, close) if q >= 0]
            if not cands:
                break
            q = min(cands)
            head, rest = stmt[:q].strip(), stmt[q + 1 :]
            if q == brace:
                if "(" in head and "=" not in head and not stack:  # static inline definition
                    items.append(decl_item("func", head, stmt_line))
                    stack.append("body")
                else:
                    stack.append("enum" if "enum" in head.split() else "struct")
            elif q == close:
                if stack:
                    stack.pop()
            elif head:
                if not stack and "(" in head and not head.startswith("typedef"):
                    items.append(decl_item("func", head, stmt_line))
                elif stack and stack[-1] == "struct" and MEMBER_RE.search(head):
                    items.append(decl_item("member", head, stmt_line))
                else:
                    items.append(("other",))
            stmt = rest
            stmt_line = n
        if not stmt.strip():
            stmt = ""
    return items


def decl_item(kind, head, line):
    if kind == "member":
        name = MEMBER_RE.search(head).group(1)
    else:
        m = FUNC_RE.search(head[: head.index("(") + 1].replace(" (", "("))
        name = m.group(1) if m else "?"
    return ("decl", kind, name, line, head)


def check_files(path, text, root):
    bad = []
    for n, line in enumerate(text.split("\n"), 1):
        for f in FILE_RE.findall(line):
            if not os.path.exists(os.path.join(root, f)):
                bad.append("%s:%d: names %s, which does not exist" % (path, n, f))
    return bad


def check(path, root=None):
    text = open(path, encoding="utf-8").read()
    items = items_of(text)
    bad, checked = [], 0
    if root:
        bad += check_files(path, text, root)
    for i, it in enumerate(items):
        if it[0] != "decl":
            continue
        _, kind, name, line, head = it
        checked += 1
        j = i - 1
        while j >= 0 and items[j][0] == "decl":
            j -= 1
        doc = items[j][1] if j >= 0 and items[j][0] == "comment" else None
        if doc is None:
            bad.append("%s:%d: %s: no comment above it" % (path, line, name))
            continue
        if j != i - 1 and not re.search(r"\b%s\b" % re.escape(name), doc):
            bad.append("%s:%d: %s: the comment above its group does not name it" % (path, line, name))
            continue
        ret = head[: head.index(name)].replace("static", "").replace("inline", "").split()
        if kind == "func" and ret == ["int"] and not RETURNS_RE.search(doc):
            bad.append("%s:%d: %s: returns int but its comment says nothing of what" % (path, line, name))
    return bad, checked


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = argv[1:] or sorted(glob.glob(os.path.join(root, "include", "ipkit", "*.h")))
    if not paths:
        print("doc_check: no headers found")
        return 1
    bad, checked = [], 0
    for p in paths:
        b, c = check(p, root)
        bad += b
        checked += c
    for line in bad:
        print(line)
    if bad:
        print("doc_check: %d of %d public symbols undocumented" % (len(bad), checked))
        return 1
    if checked == 0:
        print("doc_check: no public symbol found (parser broken?)")
        return 1
    print("doc_check: %d public symbols documented" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
