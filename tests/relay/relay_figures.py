#!/usr/bin/env python3
"""Goodput and loss-recovery counters through ipk-relay for the four pairings
ipkit -> Linux, Linux -> ipkit, ipkit -> ipkit and Linux -> Linux (issue 16). A
measurement run, not a test: nothing here is compared with a bound.

    sudo IPKIT_BUILD=build /usr/bin/python3 tests/relay/relay_figures.py [--quick]
        [--pairings P,..] [--cases C,..] [--mib N] [--seeds S,..] [--repeat N]
        [--key segment|index] [--cc cubic|reno] [--trace DIR [--pcap]]
        [--io-opts OPTS] [--nc-args ARGS] [--out docs/tcp-figures.md]

Pairings: the four of relay_topo.PAIRINGS, both stacks running one algorithm: --cc
NAME (default $IPKIT_LINUX_CC, else cubic; --linux-cc is the same option) pins a Linux
sender per socket (TCP_CONGESTION) to NAME and gives ipkit-nc its counterpart
(relay_topo.CC_PAIRS: cubic <-> cubic, reno <-> newreno), each read back from the
connection and checked; and the extra linux_bbr-linux: Linux -> Linux with the sender
pinned to BBR, this host's default, which every Linux-sender figure before the pin
measured.

Profiles: the default (full) is every pairing (the extra one too) and case (clean, then relay_topo.IMPAIRMENTS:
loss1, loss5, burst, reorder5, dup1), 64 MiB, seeds 4242,4243,4244, once each; --quick (what
make test runs, through test_lossy_relay.py) is every pairing and case, 4 MiB, seed 4242. The other options override the profile's choice.

Each run: fresh namespaces (relay_topo.RelayTopo), the relay with the case's options
and the seed (--key segment by default: the same segments meet the same fates in every
pairing that cuts the stream the same way), the sender on side B sends to the receiver
on side A, SHA-256 checked end to end. Goodput is over the relay's span_us of the data
direction (first to last TCP frame), so program start-up does not count. --trace DIR
keeps each run's relay --log there (one line per frame: identity and fate); with --pcap
also the relay's --pcap of the run (every frame as it arrived, headers only; ~8 MB per
64 MiB run).

Prints a markdown table, a row per case and pairing: the median goodput over the runs
(size over the relay's span_us of the data direction) and its ratio to Linux -> Linux in
the same case, then per run (seeds in order, "/"-separated): data frames the relay
dropped, and the sender's retransmissions, RTO episodes (Linux: TCPTimeouts, every
timeout), tail loss probes (Linux: TCPLossProbes) and D-SACKed spurious retransmissions
(Linux: TCPDSACKRecvSegs). Exit status 1 when a transfer failed (its row says FAIL).

--out FILE writes the table, with the command, commit, kernel and date, as the section
of FILE that starts at the line "<!-- relay-figures -->" (replacing it, or appended);
make tcp-figures keeps that section when it rewrites docs/tcp-figures.md.

--io-opts OPTS (appended to every ipkit end's afpacket spec, e.g. rx=v3,tov=1) and
--nc-args ARGS (added to every ipkit-nc, e.g. "--sndbuf 2M") try a setting on all ipkit
ends at once (relay_topo's $IPKIT_RELAY_IO_OPTS / $IPKIT_RELAY_NC_ARGS); the command
line in the --out section records them.
"""
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))

from relay_topo import (CC_PAIRS, EXTRA_PAIRINGS, IMPAIRMENTS, PAIRINGS,  # noqa: E402
                        default_linux_cc, pairing_kinds, pairing_topo, sender_row,
                        transfer)

MiB = 1 << 20
# the impairments, and a clean path first: the pairings' speed with nothing to repair,
# so a ratio below 1 can be told apart from the path's own limit (AF_PACKET, one core)
CASES = dict([("clean", ([], None, None))] + list(IMPAIRMENTS.items()))
ALL_PAIRINGS = list(PAIRINGS) + list(EXTRA_PAIRINGS)
PROFILES = {
    "full": {"pairings": ALL_PAIRINGS, "cases": list(CASES), "mib": 64,
             "seeds": [4242, 4243, 4244], "repeat": 1},
    "quick": {"pairings": ALL_PAIRINGS, "cases": list(IMPAIRMENTS), "mib": 4,
              "seeds": [4242], "repeat": 1},
}


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def options():
    prof = dict(PROFILES["quick" if "--quick" in sys.argv else "full"])
    prof["pairings"] = arg("--pairings", ",".join(prof["pairings"])).split(",")
    prof["cases"] = arg("--cases", ",".join(prof["cases"])).split(",")
    prof["mib"] = int(arg("--mib", prof["mib"]))
    prof["seeds"] = [int(s) for s in arg("--seeds", ",".join(map(str, prof["seeds"]))).split(",")]
    prof["repeat"] = int(arg("--repeat", prof["repeat"]))
    prof["key"] = arg("--key", "segment")
    prof["trace"] = arg("--trace", None)
    prof["out"] = arg("--out", None)
    prof["pcap"] = "--pcap" in sys.argv
    # measurement knobs for the ipkit ends, through relay_topo's environment variables
    if "--io-opts" in sys.argv:
        os.environ["IPKIT_RELAY_IO_OPTS"] = arg("--io-opts", "")
    if "--nc-args" in sys.argv:
        os.environ["IPKIT_RELAY_NC_ARGS"] = arg("--nc-args", "")
    cc = arg("--cc", arg("--linux-cc", default_linux_cc()))
    # either stack's name for the pair: newreno is ipkit's name for Linux's reno
    prof["linux_cc"] = {v: k for k, v in CC_PAIRS.items()}.get(cc, cc)
    assert prof["linux_cc"] in CC_PAIRS, "--cc %s (%s; ipkit has no counterpart of %r)" % (
        "|".join(CC_PAIRS), "newreno is reno", cc)
    prof["ipkit_cc"] = CC_PAIRS[prof["linux_cc"]]
    assert prof["trace"] or not prof["pcap"], "--pcap needs --trace DIR"
    for p in prof["pairings"]:
        assert p in ALL_PAIRINGS, "unknown pairing %r (%s)" % (p, ", ".join(ALL_PAIRINGS))
    for c in prof["cases"]:
        assert c in CASES, "unknown case %r (%s)" % (c, ", ".join(CASES))
    assert prof["key"] in ("segment", "index"), "--key segment|index"
    return prof


def one_run(o, case, pairing, seed, k, tmp):
    """One transfer; a dict of figures, or {"fail": reason}."""
    opts = CASES[case][0] + ["--key", o["key"]]
    log = pcap = None
    if o["trace"]:
        base = os.path.join(o["trace"], "%s-%s-%d-%d" % (case, pairing, seed, k))
        log = base + ".log"
        pcap = base + ".pcap" if o["pcap"] else None
    t = pairing_topo(pairing, o["linux_cc"])
    try:
        t.start_relay(*opts, seed=seed, log=log, pcap=pcap)
        res = transfer(t, o["mib"] * MiB, tmp, timeout=600)
        c = t.stop_relay()
    except (AssertionError, subprocess.SubprocessError) as e:
        return {"fail": str(e).splitlines()[0][:120] if str(e) else type(e).__name__}
    finally:
        t.close()
    row = sender_row(pairing_kinds(pairing)[0], res["sender"])
    # the transfer on the wire: first to last TCP frame of the data direction (SYN to
    # the last ACK of the close), so the programs' start-up (~0.1 s for ipkit-nc in a
    # namespace, ~0.05 s for the Python sender) is not counted; the wall time when the relay saw
    # fewer than two TCP frames
    span = c["b2a.span_us"] / 1e6
    row["mbit"] = o["mib"] * MiB * 8 / span / 1e6 if span > 0 else res["mbit"]
    row["lost"] = c["b2a.drop"] + c["b2a.bdrop"]
    return row


def fmt_row(case, pairing, o, runs, linux_mbit):
    fails = [r["fail"] for r in runs if "fail" in r]
    if fails:
        return "| %s | %s | %d | FAIL: %s | | | | | | |" % (case, pairing, o["mib"], fails[0])
    med = statistics.median(r["mbit"] for r in runs)
    ratio = "%.2f" % (med / linux_mbit) if linux_mbit else "-"
    per = lambda key: "/".join(str(r[key]) for r in runs)  # noqa: E731
    return "| %s | %s | %d | %.0f (%.0f-%.0f) | %s | %s | %s | %s | %s | %s |" % (
        case, pairing, o["mib"], med, min(r["mbit"] for r in runs),
        max(r["mbit"] for r in runs), ratio, per("lost"), per("retrans"), per("rto"),
        per("tlp"), per("spurious"))


MARK = "<!-- relay-figures -->"


def source_state():
    """(commit, uncommitted changes?) of the tree the tool runs from, at the start."""
    root = os.path.join(HERE, "..", "..")
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return commit, bool(dirty)


def load(avg):
    return "/".join("%.1f" % x for x in avg)


def section(o, lines):
    """The --out section: how the table was made, what it shows, the table."""
    commit, dirty = o["source"]
    cmd = "sudo IPKIT_BUILD=build /usr/bin/python3 " + " ".join(
        ["tests/relay/relay_figures.py"] + sys.argv[1:])
    return "\n".join([
        MARK,
        "## 4. Real stacks through ipk-relay: the four pairings and Linux BBR (issue 16)",
        "",
        "Run %s UTC on %s%s, Linux %s, with `%s`. Not the simulator: ipkit (AF_PACKET, "
        "`ipkit-nc --cc %s`, read back from the connection and checked) and Linux "
        "(Python sockets sending and receiving; the sender's congestion control pinned "
        "per socket with TCP_CONGESTION to **%s**, read back from the socket and "
        "checked, except the extra pairing "
        "linux_bbr-linux, pinned to BBR, this host's default, which every Linux-sender "
        "figure before the pin measured) in network namespaces on veths, "
        "[ipk-relay](../tests/relay/ipk-relay.c) between them impairing both directions "
        "(ACKs too), keyed by segment identity (`--key %s`): for a seed the same segments "
        "meet the same fates in every run and pairing that cuts the stream the same way "
        "(ipkit always does; Linux does until its first short segment). No delay or rate "
        "limit: a sub-millisecond RTT. %d MiB per run, seeds %s; every transfer SHA-256 "
        "checked end to end. Sender on one side, receiver on the other, the data the same "
        "way through the relay for every pairing. Load average (1, 5, 15 min) at the "
        "start %s, at the end %s: other work shared the machine's %d CPUs." % (
            o["started"], commit,
            " (with uncommitted changes)" if dirty else "", platform.release(), cmd,
            o["ipkit_cc"], o["linux_cc"], o["key"], o["mib"], ",".join(map(str, o["seeds"])),
            load(o["load_start"]), load(os.getloadavg()), os.cpu_count() or 1),
        "",
        "Mbit/s: the transfer's time on the wire (the relay's span from the first to the "
        "last TCP frame of the data direction: SYN to the close, not the programs' "
        "start-up); x Linux->"
        "Linux: the median's ratio to Linux -> Linux (the " + o["linux_cc"] + " sender) in the "
        "same case. Then per seed "
        "(in order, /-separated): data frames the relay dropped, and the sender's "
        "retransmissions, RTO episodes (Linux: TCPTimeouts, every timeout), tail loss "
        "probes (Linux: TCPLossProbes) and D-SACKed spurious retransmissions (Linux: "
        "TCPDSACKRecvSegs). Cases: clean no impairment; loss1/loss5 random loss 1%/5%; burst Gilbert-Elliott "
        "(enter 0.003, leave 0.25: ~1.2% in runs of ~4); reorder5 5% held back 3 frames; "
        "dup1 1% duplicated.",
        "",
    ] + lines) + "\n"


def write_out(path, text):
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    head = old.split(MARK)[0].rstrip("\n")
    with open(path, "w") as f:
        f.write((head + "\n\n" if head else "") + text)


def main():
    o = options()
    o["source"] = source_state()
    o["started"] = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    o["load_start"] = os.getloadavg()
    if o["trace"]:
        os.makedirs(o["trace"], exist_ok=True)
    lines = ["| case | sender -> receiver | MiB | Mbit/s median (min-max) | x Linux->Linux"
             " | data frames dropped | retransmissions | RTO episodes | TLPs"
             " | D-SACKed spurious |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    print("\n".join(lines), flush=True)
    failed = False
    order = sorted(o["pairings"], key=lambda p: p != "linux-linux")  # the reference first
    with tempfile.TemporaryDirectory(prefix="ipk-relay-fig-") as tmp:
        for case in o["cases"]:
            rows, linux_mbit = {}, None
            for pairing in order:
                runs = [one_run(o, case, pairing, s, k, tmp)
                        for s in o["seeds"] for k in range(o["repeat"])]
                failed |= any("fail" in r for r in runs)
                if pairing == "linux-linux" and not any("fail" in r for r in runs):
                    linux_mbit = statistics.median(r["mbit"] for r in runs)
                rows[pairing] = runs
            for pairing in o["pairings"]:
                lines.append(fmt_row(case, pairing, o, rows[pairing], linux_mbit))
                print(lines[-1], flush=True)
    if o["out"]:
        write_out(o["out"], section(o, lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
