"""TCP through ipk-relay in all four pairings (issue 16): ipkit -> Linux, Linux -> ipkit,
ipkit -> ipkit and Linux -> Linux, the sender on side B and the receiver on side A of
relay_topo.py, so the data of every pairing crosses the relay the same way and, with the
relay's keyed mode (--key segment, its default), the same segments meet the same fates
for a seed. Counter-based, never timed.

Must pass now:
  test_pairing_sha256_through_impairment   every pairing x every impairment of
      relay_topo.IMPAIRMENTS: SHA-256 equal end to end, the impairment happened on the data
      direction (relay counters) and the stacks had to work for it (the sender
      retransmitted, the receiver saw out-of-order or duplicate segments).
  test_relay_keyed_same_segment_same_fate  two runs with one seed drop, duplicate and
      hold back the same segments by identity; a third with another seed differs.
  test_relay_keyed_bursts_hit_same_new_data  bursts lose the same new data in two runs.
  test_relay_pcap_has_every_frame          the relay's --pcap trace reads in tshark and
      holds every frame it received.
  test_relay_figures_quick                 tests/relay/relay_figures.py --quick runs and
      prints a row per pairing (the extra linux_bbr-linux too) and case.
  test_linux_sender_runs_pinned_cc         a Linux sender's socket runs the congestion
      control asked for (CUBIC by default, BBR when asked), read back from the socket.
  test_ipkit_sender_runs_paired_cc         an ipkit sender runs the Linux sender's
      counterpart (cubic <-> cubic, reno <-> newreno), read back from its connection.

A Linux sender runs CUBIC (relay_topo.default_linux_cc(); $IPKIT_LINUX_CC overrides it),
not the host's default (BBR here, which every new namespace inherits); transfer() reads
the algorithm back from the sender's socket and asserts it. ipkit runs the same algorithm
(relay_topo.CC_PAIRS: cubic <-> cubic, reno <-> newreno; ipkit-nc --cc), read back and
asserted the same way. Before this, ipkit-nc ran the core's default, NewReno, so the
counts below up to 902af25 are ipkit NewReno against Linux CUBIC.

Issue 16's targets for ipkit's sender, against Linux pinned to CUBIC and ipkit on CUBIC
(no retries), all three in the default run. (a) was opt-in from 403de95 to the
three-segment probe (h/tlp16c): it failed 1 run in 24 on h/tlp16 and once in a
fresh-clone CI run on 36bc958 (229 retransmissions for 228 drops, 3 TLPs, one RTO): a new-data probe whose one ACK is
lost leaves the RTO to repair the tail, as Linux's one probe does (Linux -> Linux had
1/1/3 TcpTimeouts per 64 MiB on the same path). Before f611bf8 the probe resent the
last segment (16/16, 10/10 and 6/6 runs), at the price of 116-136 spurious
retransmissions per 64 MiB at 5% loss:
  (a) 1% loss, 32 MiB ipkit -> Linux: zero RTO episodes (seed 4242). 17/20 on aa050e1 and
      7/10 on 902af25 with ipkit on NewReno (each failure one episode: a flight's one ACK
      and the probe's ACK lost, docs/loss-rto-traces.md); with ipkit CUBIC 10/10 on
      a993bfb and 6/6 on 1318ed0 (3-11 TLPs). Linux CUBIC -> Linux on the same path had
      23 TcpTimeouts in 14 runs (lossy3b's measurement, docs/loss-rto-traces.md).
      On main 1f24d9d 128/140 (h/tlp16c, docs/loss-rto-traces.md): 10 of the 12
      failures are one event the keyed relay repeats whenever a flight ends at the
      same byte (its one ACK lost, then the new-data probe's one ACK lost: RFC 8985
      §7.3 allows one probe, then the RTO), 2 a 300 ms pause of the path at load 8.
      Seeds 4243-4246: 32/32. This test itself: 27/30 at load 9-11, each failure 229
      retransmissions for 228 drops, one RTO. Linux CUBIC -> Linux, seed 4242: 7/30
      runs without a timeout (45 in all, each a flight whose one ACK was lost, with no
      probe). With the probe three new segments (the third's delayed ACK a second
      chance when the probe's first ACK is lost): 80/80 in runs of the transfer, then
      this test 30/30 in a row at load 10-12 (pytest -k zero_rto, 30 times), so it
      runs by default again. Not proof against every draw: when Linux takes the
      three in one batch it ACKs them once, and that ACK lost still means the RTO
      (2 of 32 runs at seeds 4243-4246, none at this seed in 140).
  (b) 5% reordering: ipkit's D-SACKed spurious retransmissions <= Linux's, same seed and
      path (Linux -> Linux, the same receiver) in the same test: 0/5 on aa050e1 (ipkit
      355-535, Linux 19-30), 10/10 on 902af25 (ipkit 7-24, Linux 12-36), with ipkit CUBIC
      10/10 on a993bfb (ipkit 4-17, Linux 13-49, closest 10 <= 13) and 6/6 on 1318ed0
      (ipkit 4-23, Linux 14-61, closest 23 <= 31), then 4/4 on the Eifel undo's merge
      (ipkit 3-24, Linux 15-58, once 15 <= 15). At 32 MiB one run in five failed (ipkit
      37 against Linux 28): ipkit's count has a tail, so (b) stays opt-in for now.
      h/tlp16 (new-data probes) ran it 10/10 at 32 MiB (ipkit 3-44, Linux 37-141), but
      on a loaded machine (load 7-9), where Linux's counts were 2-5x its quiet ones;
      quiet, at 64 MiB, main had ipkit 37/33/18 against Linux 20/22/21 (seeds
      4242-4244), and the probe change does not touch this case (0-1 TLPs per run).
      On ffbd5c5 (sender goodput fixed, quiet machine): 64 MiB ipkit 27/12/15 against
      Linux 49/67/40, and 9 runs 4-23 against 21-72; single 16 MiB pairs 13/15 (ipkit
      3-26, Linux 8-59: Linux's count alone spans 7x between runs of one seed). So (b)
      compares totals over REORDER_PAIRS pairs of 16 MiB runs and runs by default.
  (c) 5% loss, 32 MiB: ipkit's RTO episodes <= Linux's TcpTimeouts (its namespace) + 1.
      20/20 on aa050e1 (ipkit 6-13, Linux 17-37; 19/20 at 16 MiB), 10/10 on 902af25
      (ipkit 6-16, Linux 18-38); with ipkit CUBIC 10/10 on a993bfb (ipkit 7-14, Linux
      19-35) and 6/6 on 1318ed0 (ipkit 7-13, Linux 20-44).
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, prog
from relay_topo import (CC_PAIRS, EXTRA_PAIRINGS, IMPAIRMENTS, PAIRINGS, RELAY,
                        default_linux_cc, pairing_topo, read_log, sender_row, transfer)
from test_impair_relay import MiB, check_relay, in_band

SEED = 4242


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Where Linux senders' random files are made (once per size)."""
    return tmp_path_factory.mktemp("ipk_lossy_relay")


@pytest.fixture
def topos():
    """Factory: topos(pairing) -> RelayTopo, every one closed at teardown."""
    if os.geteuid() != 0:
        pytest.skip("relay tests need root (network namespaces)")
    if not os.path.exists(RELAY) or not os.path.exists(prog("ipkit-nc")):
        pytest.skip("ipk-relay or ipkit-nc not built")
    made = []

    def make(pairing):
        t = pairing_topo(pairing)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def run(topos, files, pairing, opts, mib, seed=SEED, log=None):
    """One transfer of `mib` MiB through the relay; (transfer result, relay counters)."""
    t = topos(pairing)
    try:
        t.start_relay(*opts, seed=seed, log=log)
        res = transfer(t, mib * MiB, files)
        c = t.stop_relay()
    finally:
        t.close()
    check_relay(c)
    return res, c


# ------------------------------------------------------------- must pass now

def receiver_saw(kind, st, what):
    """Out-of-order ("ooo") or duplicate ("dup") segments at the receiver."""
    if kind == "ipkit":
        return st["ooo_segs" if what == "ooo" else "dup_segs"]
    return st["TCPOFOQueue" if what == "ooo" else "TCPDSACKOldSent"]


@pytest.mark.parametrize("case", list(IMPAIRMENTS))
@pytest.mark.parametrize("pairing", list(PAIRINGS))
def test_pairing_sha256_through_impairment(topos, files, pairing, case):
    opts, counter, p = IMPAIRMENTS[case]
    sender, receiver = PAIRINGS[pairing]
    res, c = run(topos, files, pairing, opts, 4)
    n = c["b2a.seen"]
    assert n >= 4 * MiB // 1500, c
    hit = c["b2a." + counter]
    assert in_band(hit, n, p) if p else hit > 0, (counter, p, c)
    snd = sender_row(sender, res["sender"])
    if counter in ("drop", "bdrop"):
        assert snd["retrans"] > 0, (snd, res)
    if counter == "reord":
        assert receiver_saw(receiver, res["receiver"], "ooo") > 0, res
    if counter == "dup":
        assert receiver_saw(receiver, res["receiver"], "dup") > 0, res


MIX = ["--loss", "0.03", "--reorder", "0.03", "--dup", "0.01"]


def shared_first_transmissions(logs):
    """Each run's first transmissions of data (b2a) by identity, and the identities the
    first two runs both sent. How many they share depends on where the sender cut its
    segments, which timing can move (one short segment shifts the identities behind
    it): 2,546 of 2,898 in one CI run of ipkit-ipkit. That is the sender's doing, not
    the relay's; half is plenty for the fate comparisons the callers make."""
    first = [{k: v for k, v in lg.items() if k[0] == "b2a" and k[1] == "D" and k[4] == "0"}
             for lg in logs]
    common = first[0].keys() & first[1].keys()
    assert len(common) >= 0.5 * max(len(first[0]), len(first[1])) > 1250, (
        len(common), len(first[0]), len(first[1]))
    return first, common


@pytest.mark.parametrize("pairing", ["ipkit-linux", "ipkit-ipkit"])
def test_relay_keyed_same_segment_same_fate(topos, files, tmp_path, pairing):
    """The keyed relay decides by segment identity: over two runs with one seed every
    identity (data and pure ACKs, each occurrence) both runs saw met the same fate, and
    nearly all first transmissions are in both (so the same data frames were dropped);
    another seed gives other fates. Fails for a relay keyed by arrival order, or one whose
    identities carry the random ISNs or ports. ipkit sends: it cuts the stream into the
    same segments every run (a Linux sender does not always: see relay_topo._run_sender),
    with a Linux and an ipkit receiver (whose ACKs differ)."""
    logs = []
    for k, seed in enumerate((SEED, SEED, SEED + 1)):
        run(topos, files, pairing, MIX, 4, seed=seed, log=tmp_path / ("run%d.log" % k))
        logs.append(read_log(tmp_path / ("run%d.log" % k)))
    first, common = shared_first_transmissions(logs)
    dropped = [k for k in common if first[0][k] == "drop"]
    assert in_band(len(dropped), len(common), 0.03), (len(dropped), len(common))
    assert sorted(dropped) == sorted(k for k in common if first[1][k] == "drop")
    same = logs[0].keys() & logs[1].keys()
    differ = [k for k in same if logs[0][k] != logs[1][k]]
    assert not differ, differ[:10]
    assert len([k for k in same if k[1] == "A"]) > 100, "no pure ACKs in both runs"
    other = logs[0].keys() & logs[2].keys()
    # Each run impairs about 7% of the frames (MIX), so two seeds disagree on about 13%
    # of the identities both runs saw (409-446 of 3,235-3,533 here). A fraction, not a
    # count: how many identities the runs share depends on where the sender cut its
    # segments, which load moves (a CI run had 44 differing of an unknown share, and
    # an absolute bound of 50 failed it).
    moved = sum(logs[0][k] != logs[2][k] for k in other)
    assert len(other) >= 200, ("too few identities shared with the other seed's run",
                               len(other), len(logs[0]), len(logs[2]))
    assert moved >= 0.05 * len(other), ("another seed changed nothing", moved, len(other))


def test_relay_keyed_bursts_hit_same_new_data(topos, files, tmp_path):
    """Gilbert-Elliott bursts in keyed mode: only first sightings of data segments step
    the chain, so two runs with one seed lose the same new data in bursts even though
    retransmissions and other frames interleave differently. Fails when every frame
    steps the chain in arrival order."""
    logs = []
    for k in range(2):
        run(topos, files, "ipkit-linux", ["--burst", "0.003,0.25", "--dir", "b2a"], 4,
            log=tmp_path / ("run%d.log" % k))
        logs.append(read_log(tmp_path / ("run%d.log" % k)))
    first, common = shared_first_transmissions(logs)
    lost = [sorted(k for k in common if f[k] == "bdrop") for f in first]
    assert len(lost[0]) > 10, len(lost[0])
    assert lost[0] == lost[1], (len(lost[0]), len(lost[1]))


def test_relay_pcap_has_every_frame(topos, files, tmp_path):
    """--pcap: tshark reads the trace, it holds every frame the relay received (both
    directions, dropped ones too) and the transfer's TCP segments, headers only."""
    tshark = shutil.which("tshark")
    if not tshark:
        pytest.skip("no tshark")
    pcap = tmp_path / "relay.pcap"
    t = topos("ipkit-linux")
    t.start_relay("--loss", "0.01", seed=SEED, pcap=pcap)
    transfer(t, 2 * MiB, files)
    c = t.stop_relay()
    r = subprocess.run([tshark, "-r", str(pcap), "-T", "fields", "-e", "frame.len",
                        "-e", "frame.cap_len", "-e", "tcp.len"], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-500:]
    rows = [ln.split("\t") for ln in r.stdout.decode().splitlines()]
    assert len(rows) == c["a2b.seen"] + c["b2a.seen"], (len(rows), c)
    data = [w for w in rows if len(w) > 2 and w[2] and int(w[2]) > 0]
    assert sum(int(w[2]) for w in data) >= 2 * MiB, len(data)
    assert all(int(w[1]) <= 128 and int(w[1]) <= int(w[0]) for w in rows)


def test_relay_figures_quick():
    """The figures tool's --quick profile (every pairing and case, 4 MiB) runs and prints
    a row for each; its transfers are SHA-256 checked by transfer()."""
    if os.geteuid() != 0:
        pytest.skip("relay tests need root (network namespaces)")
    if not os.path.exists(RELAY) or not os.path.exists(prog("ipkit-nc")):
        pytest.skip("ipk-relay or ipkit-nc not built")
    tool = os.path.join(ROOT, "tests", "relay", "relay_figures.py")
    r = subprocess.run([sys.executable, tool, "--quick"], capture_output=True, timeout=240,
                       env=dict(os.environ, IPKIT_RELAY_PREFIX="ipkQ"))
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-1500:]
    rows = [ln for ln in r.stdout.decode().splitlines() if ln.startswith("| ") and
            not ln.startswith("| case") and not ln.startswith("| ---")]
    names = list(PAIRINGS) + list(EXTRA_PAIRINGS)
    assert len(rows) == len(IMPAIRMENTS) * len(names), r.stdout.decode()
    for name in names:
        assert sum((" %s " % name) in ln for ln in rows) == len(IMPAIRMENTS), (name, rows)
    assert not any("FAIL" in ln for ln in rows), rows


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_linux_sender_runs_pinned_cc(topos, files, cc):
    """A Linux sender's socket runs the congestion control it was given, whatever the
    namespace's default (BBR on this host): transfer() reads TCP_CONGESTION back after
    connect and after the last write and asserts it; checked here once more. Fails if the
    sender stops setting TCP_CONGESTION (a "cubic" run would read back the default)."""
    t = topos("linux-linux")
    t.linux_cc = cc
    t.start_relay("--loss", "0.01", seed=SEED)
    res = transfer(t, 2 * MiB, files)
    t.stop_relay()
    assert res["linux_cc"] == cc, res


@pytest.mark.parametrize("cc", list(CC_PAIRS))
def test_ipkit_sender_runs_paired_cc(topos, files, cc):
    """With the Linux algorithm `cc` an ipkit sender (and its ipkit receiver) runs the
    counterpart, read back from the connection once established and at the end
    (ipkit-nc --stats's cc line; transfer() asserts it too). Fails if the topology stops
    passing --cc (ipkit-nc would run the core's default, NewReno, in the cubic case) or
    ipkit-nc stops applying it."""
    t = topos("ipkit-ipkit")
    t.linux_cc = cc
    t.start_relay("--loss", "0.01", seed=SEED)
    res = transfer(t, 2 * MiB, files)
    t.stop_relay()
    assert res["sender_cc"] == CC_PAIRS[cc] and res["linux_cc"] is None, res


# ------------------------------------------------------------ issue 16's targets

def sender_figures(res, pairing):
    return sender_row(PAIRINGS[pairing][0], res["sender"])


def test_loss1_32mib_ipkit_to_linux_zero_rto_episodes(topos, files):
    """(a) 1% random loss each way (ACKs too), 32 MiB ipkit -> Linux, seed 4242: SACK
    recovery, RACK and the tail loss probe repair every loss without an RTO."""
    res, c = run(topos, files, "ipkit-linux", IMPAIRMENTS["loss1"][0], 32)
    assert in_band(c["b2a.drop"], c["b2a.seen"], 0.01), c
    st = res["sender"]
    print("target-a ipkit", res["sender_cc"], sender_row("ipkit", st), "dropped",
          c["b2a.drop"])
    assert st["retransmits"] >= c["b2a.drop"] // 2, (st, c)
    assert st["rto_episodes"] == 0, (st, c)


# Pairs of runs (b) compares: one pair's counts are too noisy to order two stacks
# whose means differ ~2x. 15 single pairs at 16 MiB on main ffbd5c5 (quiet machine, 02:06 UTC):
# ipkit 3-26 (mean 11), Linux 8-59 (mean 25), and 2 of the 15 had ipkit above Linux
# (11 > 8, 26 > 22): Linux's count alone spans 8 to 59 between runs of one seed.
REORDER_PAIRS = 3


def test_reorder5_ipkit_spurious_at_most_linux(topos, files):
    """(b) 5% reordering, seed 4242: ipkit's D-SACKed spurious retransmissions are at
    most Linux's (TCPDSACKRecvSegs) on the same seed and path, both sending to a Linux
    receiver in this test. REORDER_PAIRS transfers of 16 MiB by each, alternating, and
    their totals compared: each pair alone is one draw of which late segments a RACK
    timer beats (Linux's own count varies 8-59 between runs of one seed), the total
    over the same path and seed is the stacks' behaviour."""
    opts = IMPAIRMENTS["reorder5"][0]
    tot_i = tot_l = 0
    for k in range(REORDER_PAIRS):
        ipk, ci = run(topos, files, "ipkit-linux", opts, 16)
        lin, cl = run(topos, files, "linux-linux", opts, 16)
        fi, fl = sender_figures(ipk, "ipkit-linux"), sender_figures(lin, "linux-linux")
        print("target-b pair", k, "ipkit", ipk["sender_cc"], fi, "linux", lin["linux_cc"], fl)
        assert lin["linux_cc"] == default_linux_cc(), lin
        assert ipk["sender_cc"] == CC_PAIRS[lin["linux_cc"]], ipk
        assert ci["b2a.reord"] > 0 and cl["b2a.reord"] > 0, (ci, cl)
        tot_i += fi["spurious"]
        tot_l += fl["spurious"]
    print("target-b totals ipkit", tot_i, "linux", tot_l)
    assert tot_i <= tot_l, ("ipkit", tot_i, "linux", tot_l)


def test_loss5_ipkit_rto_episodes_at_most_linux_plus_one(topos, files):
    """(c) 5% random loss each way, 32 MiB, seed 4242: ipkit's RTO episodes are at most
    Linux's TcpTimeouts (read in the Linux sender's namespace) plus one, same seed and
    path, both sending to a Linux receiver in this test, Linux's sender pinned to CUBIC
    (asserted). One run of each, no retry. 32 MiB, not 16: both counts vary from run to
    run (the relay keys data fates, but which ACKs exist and are lost differs), and over
    20 runs at 16 MiB ipkit had 2-6 episodes and Linux CUBIC 4-20, so one run in 20 met
    a low Linux draw (6 > 4 + 1); the counts grow with the size and their spread only
    with its square root. Against a BBR sender (0 timeouts here) it would not pass."""
    opts = IMPAIRMENTS["loss5"][0]
    ipk, ci = run(topos, files, "ipkit-linux", opts, 32)
    lin, cl = run(topos, files, "linux-linux", opts, 32)
    fi, fl = sender_figures(ipk, "ipkit-linux"), sender_figures(lin, "linux-linux")
    print("target-c ipkit", ipk["sender_cc"], fi, "linux", lin["linux_cc"], fl)
    assert lin["linux_cc"] == default_linux_cc(), lin
    assert ipk["sender_cc"] == CC_PAIRS[lin["linux_cc"]], ipk
    assert in_band(ci["b2a.drop"], ci["b2a.seen"], 0.05), ci
    assert fi["rto"] <= fl["rto"] + 1, ("ipkit", fi, "linux", lin["linux_cc"], fl)
