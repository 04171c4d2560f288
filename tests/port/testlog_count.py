#!/usr/bin/env python3
"""Count test programs in a meson testlog.json: prints "<passed> <failed>".

Each line of the log is one JSON object per test run. OK and EXPECTEDFAIL pass;
SKIP is neither; everything else (FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, ...) fails.
A missing or unreadable log counts as one failure, so a broken run cannot look green.
"""
import json
import sys

PASS = {"OK", "EXPECTEDFAIL"}
SKIP = {"SKIP"}


def main(path):
    passed = failed = 0
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                result = json.loads(line).get("result", "ERROR")
                if result in PASS:
                    passed += 1
                elif result not in SKIP:
                    failed += 1
    except (OSError, ValueError) as e:
        print(f"testlog_count: {path}: {e}", file=sys.stderr)
        failed += 1
    print(passed, failed)


if __name__ == "__main__":
    main(sys.argv[1])
