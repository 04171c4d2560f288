#!/usr/bin/env python3
"""Classify a sender's spurious retransmissions in one relay_figures.py --trace run
(issue 16). A measurement aid, not a test.

    /usr/bin/python3 tests/relay/spurious_classes.py RUN.pcap RUN.log [-v]

The relay's --pcap holds every frame as it reached the relay (before any fate) and
its --log the fate of each, in the same order per direction, so every data segment
and ACK is known with its time and whether it got through. A retransmission is
spurious when every byte of it had got through before (the receiver then D-SACKs
it). Each spurious one is classed by what made the sender send it, read off the
sender's input at that moment (the last ACK that got through before it):
  rto      no ACK got through for >= 150 ms (RTO floor 200 ms, both stacks)
  tlp      a timer, not an ACK (no ACK for >= 2 ms), and the tail (the highest
           segment sent): a tail loss probe
  timer    a timer, not the tail: RACK's reordering timer or a recovery probe
  ack      sent within 2 ms of an ACK: a loss mark (RACK or DupThresh) on an ACK
and by what the receiver had said about the segment before it was resent:
  acklost  an ACK covering it (cumulatively or by SACK) was sent, every one lost
  known    an ACK covering it had got through the relay 1 ms or more before
  crossing one had got through the relay less than 1 ms before: the resend was
           decided before it arrived, or just after (a path of ~0.1-1 ms)
  unacked  no ACK covering it yet (the original, or its ACK, still pending)
"""
import struct
import sys


def frames(path):
    with open(path, "rb") as f:
        hdr = f.read(24)
        magic = struct.unpack("<I", hdr[:4])[0]
        end = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
        nano = magic in (0xa1b23c4d, 0x4d3cb2a1)
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _ = struct.unpack(end + "IIII", h)
            yield sec + frac / (1e9 if nano else 1e6), f.read(incl)


def tcp(p):
    """(src ip, seq, ack, payload length, sack blocks, syn) or None."""
    if len(p) < 14 + 20 or p[12:14] != b"\x08\x00" or p[23] != 6:
        return None
    ihl = (p[14] & 15) * 4
    tot = struct.unpack(">H", p[16:18])[0]
    t = 14 + ihl
    if len(p) < t + 20:
        return None
    seq, ack = struct.unpack(">II", p[t + 4:t + 12])
    doff = (p[t + 12] >> 4) * 4
    flags = p[t + 13]
    sacks, o = [], t + 20
    while o < t + doff and o < len(p):
        k = p[o]
        if k == 0:
            break
        if k == 1:
            o += 1
            continue
        n = p[o + 1] if o + 1 < len(p) else 0
        if n < 2:
            break
        if k == 5:
            for b in range(o + 2, o + n, 8):
                sacks.append(struct.unpack(">II", p[b:b + 8]))
        o += n
    return p[26:30], seq, ack, tot - ihl - doff, sacks, flags & 2


def load(pcap, log):
    """Data segments (time, seq, len, got through) and ACKs (time, ack, sacks, got
    through) of the sender's connection. Frames pair with log lines in order per
    direction; the direction is the frame's source MAC."""
    fates = {}
    for line in open(log):
        w = line.split()
        fates.setdefault(w[0], []).append(("pass" in w[-1], w[1], w[3]))
    pk = list(frames(pcap))
    by = {}
    for _, p in pk:
        x = tcp(p)
        if x:
            by[p[6:12]] = by.get(p[6:12], 0) + x[3]
    snd = max(by, key=by.get)
    dname = max(fates, key=lambda k: sum(1 for f in fates[k] if f[1] == "D"))
    aname = [k for k in fates if k != dname][0]
    macs = {}
    for _, p in pk:
        macs.setdefault(p[6:12], 0)
        macs[p[6:12]] += 1
    pos = {dname: 0, aname: 0}
    data, acks, bad = [], [], 0
    for t, p in pk:
        name = dname if p[6:12] == snd else aname
        q = fates[name]
        i = pos[name]
        pos[name] = i + 1
        if i >= len(q):
            bad += 1
            continue
        x = tcp(p)
        if not x:
            continue
        if q[i][1] == "D" and int(q[i][2]) != x[3]:
            bad += 1
        if name == dname and x[3] > 0:
            data.append((t, x[1], x[3], q[i][0]))
        elif name == aname:
            acks.append((t, x[2], x[4], q[i][0]))
    if bad:
        print("warning: %d frames did not match the log" % bad)
    return data, acks


CROSS_S = 0.001


def rel(v, base):
    return (v - base) & 0xffffffff


def classify(data, acks, verbose=False):
    base = data[0][1]
    got = []          # intervals that got through (merged lazily)
    sent_hi = 0
    ai = 0
    last_ack_ok = None
    cover = []        # per ack: (t, cum, sacks, ok) relative
    racks = [(t, rel(a, base), [(rel(l, base), rel(r, base)) for l, r in s], ok)
             for t, a, s, ok in acks]
    counts = {}
    total_rtx = 0
    seen = {}

    def delivered(lo, hi):
        for l, r in got:
            if l <= lo and hi <= r:
                return True
        return False

    def add(lo, hi):
        got.append((lo, hi))
        if len(got) > 64:
            got.sort()
            m = [got[0]]
            for l, r in got[1:]:
                if l <= m[-1][1]:
                    m[-1] = (m[-1][0], max(m[-1][1], r))
                else:
                    m.append((l, r))
            got[:] = m

    for t, s, n, ok in data:
        lo = rel(s, base)
        hi = lo + n
        while ai < len(racks) and racks[ai][0] <= t:
            if racks[ai][3]:
                last_ack_ok = racks[ai][0]
            ai += 1
        again = lo < sent_hi
        if again:
            total_rtx += 1
        if again and delivered(lo, hi):
            gap = t - last_ack_ok if last_ack_ok is not None else 1e9
            if gap >= 0.150:
                trig = "rto"
            elif gap >= 0.002:
                trig = "tlp" if hi >= sent_hi else "timer"
            else:
                trig = "ack"
            said = "unacked"
            for at, cum, sk, aok in racks[:ai]:
                if cum >= hi or any(l <= lo and hi <= r for l, r in sk):
                    if aok:
                        said = "known" if at < t - CROSS_S else "crossing"
                        if said == "known":
                            break
                        continue
                    said = "acklost"
            k = trig + "/" + said
            counts[k] = counts.get(k, 0) + 1
            if verbose:
                print("%.6f %d+%d %s gap %.1f ms" % (t, lo, n, k, gap * 1e3))
        if ok:
            add(lo, hi)
        sent_hi = max(sent_hi, hi)
        seen[lo] = seen.get(lo, 0) + 1
    return total_rtx, counts


def main():
    data, acks = load(sys.argv[1], sys.argv[2])
    total, counts = classify(data, acks, "-v" in sys.argv)
    print("data frames %d, ACK frames %d, retransmissions %d, spurious %d" %
          (len(data), len(acks), total, sum(counts.values())))
    for k in sorted(counts, key=lambda k: -counts[k]):
        print("  %-16s %d" % (k, counts[k]))


if __name__ == "__main__":
    main()
