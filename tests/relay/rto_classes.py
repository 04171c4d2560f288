#!/usr/bin/env python3
"""Classify a sender's timer-driven sends (tail loss probes and RTOs) in relay traces
(issue 16). A measurement aid, not a test.

    /usr/bin/python3 tests/relay/rto_classes.py RUN [RUN ...] [-v]

RUN is a relay_figures.py --trace DIR --pcap run, DIR/CASE-PAIRING-SEED-K with or
without .log or .pcap (the relay's --log and --pcap of that run), e.g.
DIR/loss1-ipkit-linux-4242-*.log. The relay's pcap holds every
frame as it reached the relay, its log the fate of each (tests/relay/spurious_classes.py
pairs them). The relay sits between the two ends with no added delay, so a frame's
pcap time is within microseconds of its send time, and a gap in the sender's data
is a timer of the sender's: 8 to 150 ms a probe (TLP), 150 ms or more an RTO (both
stacks' RTO floor is 200 ms). For each such send, from the last ACK that got through
before it:
  flight   the ACKs the receiver sent after that one, before the timer send, and
           whether any got through (none did, or the timer would not have fired):
           "acklost" when it sent some (all lost), "noack" when it sent none (its ACK
           held, or the data lost)
and for an RTO, what came between the flight and the RTO:
  probe    a probe went out (new data or a retransmission) and every ACK it drew
           was lost ("probe-acklost"), or it drew none ("probe-noack": the probe
           itself lost, or its ACK held); "noprobe": the RTO was the only timer
           (Linux arms no probe in a recovery)
  pause    a gap of RTO_S or more after which new data goes, in answer to an ACK
           that came that late: a path or host pause (the relay or the receiver
           descheduled on a loaded machine), during which the RTO may have fired
Per run: the count of each class, and with -v one line per timer send.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spurious_classes import load  # noqa: E402

PROBE_S = 0.008
RTO_S = 0.150


def timer_sends(data, acks):
    """(time, gap, new data, flight ACKs, frame) for every data frame sent PROBE_S or
    more after the sender's previous one; flight ACKs: the times of the receiver's
    ACKs since the last one that got through."""
    out, ai, last_ok, since = [], 0, None, []
    prev_t, top = None, 0
    for t, seq, n, ok in data:
        while ai < len(acks) and acks[ai][0] <= t:
            if acks[ai][3]:
                last_ok, since = acks[ai][0], []
            else:
                since.append(acks[ai][0])
            ai += 1
        rel = (seq - data[0][1]) & 0xffffffff
        if prev_t is not None and t - prev_t >= PROBE_S and last_ok is not None:
            out.append((t, t - prev_t, rel >= top, list(since), (t, seq, n, ok)))
        prev_t = t
        top = max(top, rel + n)
    return out


def acks_between(acks, a, b):
    return [(t, ok) for t, _, _, ok in acks if a < t < b]


def classify(data, acks, verbose=False):
    counts = {}
    sends = timer_sends(data, acks)
    t0 = data[0][0]
    for i, (t, gap, new, since, frame) in enumerate(sends):
        kind = "rto" if gap >= RTO_S else "probe"
        cls = kind + "/" + ("acklost" if since else "noack")
        if kind == "rto" and new:
            cls = "pause"  # new data after the gap: an ACK came that late
        elif kind == "rto":
            prev = sends[i - 1] if i else None
            # a probe of this stall: the previous timer send, with no ACK through since
            if prev and prev[1] < RTO_S and not any(ok for _, ok in acks_between(acks, prev[0], t)):
                drew = acks_between(acks, prev[0], t)
                cls += "/probe-" + ("acklost" if drew else "noack") + ("-new" if prev[2] else "-rtx")
            else:
                cls += "/noprobe"
        counts[cls] = counts.get(cls, 0) + 1
        if verbose:
            print("  %.6f %-36s gap %6.1f ms %s seq %d flight ACKs lost %d" % (
                t - t0, cls, gap * 1e3, "new" if new else "rtx", frame[1], len(since)))
    return counts


def main():
    verbose = "-v" in sys.argv
    total = {}
    for run in [a for a in sys.argv[1:] if a != "-v"]:
        for ext in (".pcap", ".log"):
            if run.endswith(ext):
                run = run[:-len(ext)]
        data, acks = load(run + ".pcap", run + ".log")
        print(run)
        counts = classify(data, acks, verbose)
        for k in sorted(counts):
            print("  %-40s %d" % (k, counts[k]))
            total[k] = total.get(k, 0) + counts[k]
    print("total")
    for k in sorted(total):
        print("  %-40s %d" % (k, total[k]))


if __name__ == "__main__":
    main()
