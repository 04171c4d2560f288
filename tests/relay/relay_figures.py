#!/usr/bin/env python3
"""Transfer time and goodput through ipk-relay for each case of
tests/interop/test_impair_relay.py, both directions, with the relay's and TCP's counters.
A measurement run, not a test (nothing here is timed against a bound).

    sudo IPKIT_BUILD=build python3 tests/relay/relay_figures.py [--repeat N] [--cases a,b]
        [--dirs to_linux,from_linux]

--cases and --dirs pick rows (default: every case of CASES, both directions).
IPKIT_RELAY_PREFIX sets the namespace prefix (relay_topo.py).

Prints a markdown table: the median of N runs (default 3) per row; the counters are
those of the median run. "data" is the direction carrying the file, "acks" the other.
Seconds are the wall time of the whole transfer, connection set-up included.
"""
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))

import test_impair_relay as T  # noqa: E402  (after the path is set)
from relay_topo import RelayTopo  # noqa: E402


def one_run(case, direction, tmp):
    opts, mib, _ = T.CASES[case]
    size = mib * T.MiB
    path = Path(tmp) / ("%dM" % mib)
    if direction == "from_linux" and not path.exists():
        path.write_bytes(os.urandom(size))
    t = RelayTopo()
    try:
        t.start_relay(*opts, seed=4242)
        t0 = time.monotonic()
        if direction == "to_linux":
            st = T.to_linux(t, size, Path(tmp))
        else:
            st = T.from_linux(t, path)
        took = time.monotonic() - t0
        retrans = T.linux_retrans(t)
        c = t.stop_relay()
    finally:
        t.close()
    return took, size, st, retrans, c


def row(case, direction, runs):
    runs.sort(key=lambda r: r[0])
    took, size, st, retrans, c = runs[len(runs) // 2]
    data, acks = ("b2a", "a2b") if direction == "to_linux" else ("a2b", "b2a")
    k = lambda d, n: c["%s.%s" % (d, n)]
    return ("| %s | %s | %d | %.2f | %.0f | %d/%d/%d/%d/%d | %d/%d/%d/%d | %d/%d/%d | %d | %d/%d/%d/%d |" % (
        case, direction, size >> 20, took, size * 8 / took / 1e6,
        k(data, "seen"), k(data, "drop") + k(data, "bdrop"), k(data, "reord"), k(data, "dup"),
        k(data, "qdrop"), k(acks, "seen"), k(acks, "drop") + k(acks, "bdrop"),
        k(acks, "reord"), k(acks, "dup"), st["retransmits"], st["ooo_segs"], st["dup_segs"],
        retrans, st["rto_episodes"], st["tlp_probes"], st["dsack_rx"], st["spurious_rtx"]))


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    repeat = int(arg("--repeat", "3"))
    cases = arg("--cases", ",".join(T.CASES)).split(",")
    dirs = arg("--dirs", "to_linux,from_linux").split(",")
    print("| case | direction | MiB | s (median of %d) | Mbit/s | data seen/lost/reord/dup/qdrop"
          " | acks seen/lost/reord/dup | ipkit rtx/ooo/dup segs | Linux RetransSegs"
          " | ipkit rto_ep/tlp/dsack_rx/spurious |" % repeat)
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="ipk-relay-fig-") as tmp:
        for case in cases:
            for direction in dirs:
                runs = [one_run(case, direction, tmp) for _ in range(repeat)]
                print(row(case, direction, runs), flush=True)


if __name__ == "__main__":
    main()
