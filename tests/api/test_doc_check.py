#!/usr/bin/env python3
"""doc_check.py must flag exactly the faults planted in doc_fixture.h (a checker that
cannot fail proves nothing), and pass the real headers."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, os.path.join(root, "tests", "port"))
import doc_check  # noqa: E402

EXPECT_BAD = {"fx_undocumented", "fx_group_missed", "fx_no_return_doc", "fx_trailing",
              "fx_inline_bad", "fx_m_bad", "runtime/no_such_file.h"}
EXPECT_OK = {"fx_documented", "fx_group_a", "fx_group_b", "fx_group_c", "fx_void",
             "fx_inline_ok", "fx_m_ok", "fx_cites"}


def main():
    bad, checked = doc_check.check(os.path.join(here, "doc_fixture.h"), root)
    text = "\n".join(bad)
    fails = 0
    for name in sorted(EXPECT_BAD):
        if name not in text:
            print("FAIL not flagged: %s" % name)
            fails += 1
    for name in sorted(EXPECT_OK):
        if (": %s:" % name) in text:
            print("FAIL flagged but documented: %s" % name)
            fails += 1
    want = len(EXPECT_BAD | EXPECT_OK) - 1  # the missing file is not a symbol
    if checked != want:
        print("FAIL checked %d symbols in the fixture, expected %d" % (checked, want))
        fails += 1
    if doc_check.main(["doc_check.py"]) != 0:
        print("FAIL the real headers do not pass")
        fails += 1
    print("%d passed, %d failed" % (0 if fails else 1, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
