"""Transfers between Linux and ipkit through ipk-relay, the seeded user-space impairment
relay (tests/relay/ipk-relay.c): loss, reordering, duplication and a mix of them, both
directions, SHA-256 verified end to end. Topology and the choice of backend: relay_topo.py.
Linux sends with relay_topo.LINUX_SENDER, its congestion control pinned to CUBIC (not the
host's default BBR) and read back from the socket.

Each test also checks that the impairment really happened (relay counters within a
binomial band that excludes zero) and that TCP had to work for it (retransmissions,
out-of-order or duplicate segments on the side that should see them). A relay test
checks that the same seed drops, duplicates and holds back the same frames of the same
input, and a different seed does not.
"""
import json
import math
import os
import re
import time

import pytest

from conftest import prog
from relay_topo import LINUX_SENDER, RELAY, RelayTopo, linux_sender_cc
from test_linux_peer import nc_digests, sha256_file

MiB = 1 << 20


@pytest.fixture
def topo():
    if os.geteuid() != 0:
        pytest.skip("relay tests need root (network namespaces)")
    if not os.path.exists(RELAY) or not os.path.exists(prog("ipkit-nc")):
        pytest.skip("ipk-relay or ipkit-nc not built")
    t = RelayTopo()
    yield t
    t.close()


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    """Random files for the Linux -> ipkit direction, by size in MiB."""
    d = tmp_path_factory.mktemp("ipk_relay_payload")
    files = {}
    for mib in (8, 16):
        files[mib] = d / ("%dM" % mib)
        files[mib].write_bytes(os.urandom(mib * MiB))
    return files


def in_band(count, n, p, sds=5.0):
    """count is a plausible Binomial(n, p) draw: within `sds` standard deviations of n*p,
    and above zero, so a relay that does nothing cannot pass."""
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    return count > 0 and mean - sds * sd - 1 <= count <= mean + sds * sd + 1


def check_relay(c):
    """The relay's bookkeeping adds up and it saw only wire-like frames."""
    for d in ("a2b", "b2a"):
        k = lambda name: c["%s.%s" % (d, name)]
        assert k("seen") + k("dup") == (k("sent") + k("drop") + k("bdrop") + k("qdrop") +
                                        k("big") + k("txerr") + k("left")), c
        assert k("big") == 0 and k("partial") == 0 and k("txerr") == 0, c


def tcp_stats(stderr):
    m = re.search(r"^tcp_stats (.*)$", stderr.decode(errors="replace"), re.M)
    assert m, stderr.decode(errors="replace")[-500:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}


def linux_retrans(t):
    """Tcp RetransSegs of Linux's namespace (fresh per test, so it starts at 0)."""
    rows = [ln.split() for ln in t.ns(t.ns_l, "cat", "/proc/net/snmp").stdout.decode()
            .splitlines() if ln.startswith("Tcp:")]
    return int(rows[1][rows[0].index("RetransSegs")])


def wait_reachable(t, tries=20):
    """Linux pings ipkit through the relay (bounded; a lossy relay may eat a few)."""
    for _ in range(tries):
        if t.ns(t.ns_l, "ping", "-c", "1", "-W", "1", t.ipk_ip, check=False,
                timeout=5).returncode == 0:
            return
    raise AssertionError("ipkit at %s never answered ping through the relay" % t.ipk_ip)


def to_linux(t, size, tmp_path):
    """ipkit-nc sends `size` bytes to a socat listener in L; returns ipkit's tcp_stats."""
    out = tmp_path / "recv.bin"
    p = t.start(t.ns_l, "socat", "-u", "TCP-LISTEN:5001,reuseaddr", "OPEN:%s,creat,trunc" % out)
    for _ in range(100):
        if ":5001 " in t.ns(t.ns_l, "ss", "-ltn").stdout.decode():
            break
        t.ns(t.ns_l, "sleep", "0.05")
    r = t.ns(t.ns_i, prog("ipkit-nc"), *t.ipk_args(), "--send-size", str(size), "--sha256",
             "--stats", "--no-output", t.linux_ip, "5001", check=False, timeout=90)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-800:]
    p.wait(timeout=30)
    sent, sent_sha, _, _ = nc_digests(r.stderr)
    assert sent == size and out.stat().st_size == size
    assert sha256_file(out) == sent_sha
    return tcp_stats(r.stderr)


def from_linux(t, path):
    """Linux in L sends the file to ipkit-nc -l (relay_topo.LINUX_SENDER: its congestion
    control pinned to t.linux_cc, CUBIC by default, and checked); returns ipkit's
    tcp_stats."""
    p = t.start(t.ns_i, prog("ipkit-nc"), *t.ipk_args(), "-l", "5002", "--sha256", "--stats",
                "--no-output")
    wait_reachable(t)
    r = t.ns(t.ns_l, "/usr/bin/python3", "-c", LINUX_SENDER, t.ipk_ip, "5002", str(path),
             t.linux_cc, check=False, timeout=90)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert linux_sender_cc(r.stderr) == (t.linux_cc, t.linux_cc), r.stderr
    _, err = p.communicate(timeout=90)
    assert p.returncode == 0, err.decode(errors="replace")[-800:]
    _, _, got, got_sha = nc_digests(err)
    assert got == path.stat().st_size and got_sha == sha256_file(path)
    return tcp_stats(err)


# (relay options, MiB, the impairment each data-carrying direction must show)
CASES = {
    "loss1": (["--loss", "0.01"], 16, {"drop": 0.01}),
    "loss5": (["--loss", "0.05"], 8, {"drop": 0.05}),
    "reorder5": (["--reorder", "0.05", "--reorder-gap", "3"], 16, {"reord": 0.05}),
    "dup1": (["--dup", "0.01"], 16, {"dup": 0.01}),
    "combined": (["--loss", "0.01", "--burst", "0.001,0.5", "--reorder", "0.02",
                  "--dup", "0.01"], 8, {"drop": 0.01, "reord": 0.02 * 0.99, "dup": 0.01}),
}


@pytest.mark.parametrize("direction", ["to_linux", "from_linux"])
@pytest.mark.parametrize("case", list(CASES))
def test_transfer_through_relay_sha256(topo, payload, tmp_path, case, direction):
    opts, mib, expect = CASES[case]
    topo.start_relay(*opts, seed=4242)
    if direction == "to_linux":
        st = to_linux(topo, mib * MiB, tmp_path)
        data_dir = "b2a"  # ipkit -> Linux
    else:
        st = from_linux(topo, payload[mib])
        data_dir = "a2b"  # Linux -> ipkit
    retrans = linux_retrans(topo)
    c = topo.stop_relay()
    check_relay(c)
    n = c[data_dir + ".seen"]
    assert n >= mib * MiB // 1500, c
    for what, p in expect.items():
        # frames that were lost were never offered to reordering or duplication
        assert in_band(c["%s.%s" % (data_dir, what)], n, p), (what, p, c)
    lossy = "drop" in expect
    if direction == "to_linux" and lossy:
        assert st["retransmits"] > 0, st
    if direction == "from_linux" and lossy:
        assert retrans > 0 and st["ooo_segs"] > 0, (retrans, st)
    if direction == "from_linux" and "reord" in expect:
        assert st["ooo_segs"] > 0, st
    if direction == "from_linux" and "dup" in expect:
        assert st["dup_segs"] > 0, st


def test_linux_resends_only_what_the_relay_dropped(topo, payload):
    """Loss on the data path only: a receiver that keeps what it is sent inside its window
    makes Linux resend about what was lost (a Linux receiver here: 106 for 106).
    Regression test for 0a9068b: with the out-of-order queue capped at 64 segments, below
    the ~181-segment receive window, ipkit dropped in-window out-of-order data after each
    loss (drop tcp_ooo_full) and Linux resent ~20x what the relay dropped."""
    topo.start_relay("--loss", "0.01", "--dir", "a2b", seed=4242)
    from_linux(topo, payload[16])
    retrans = linux_retrans(topo)
    c = topo.stop_relay()
    check_relay(c)
    assert c["a2b.drop"] > 0 and retrans <= 2 * c["a2b.drop"] + 20, (retrans, c)


def test_transfer_through_relay_delay_and_rate(topo, tmp_path):
    """--delay-us and --rate-mbit: ping's RTT carries both one-way delays and the
    transfer cannot beat the rate (lower bounds only: a slow machine still passes)."""
    delay_us, mbit, size = 10000, 100, 4 * MiB
    topo.start_relay("--delay-us", str(delay_us), "--rate-mbit", str(mbit), "--queue", "512")
    t0 = time.monotonic()
    to_linux(topo, size, tmp_path)
    took = time.monotonic() - t0
    assert took >= size * 8 / (mbit * 1e6), took
    echo = topo.start(topo.ns_i, prog("ipkit-echo"), *topo.ipk_args())
    topo.wait_line(echo, "serving on")
    wait_reachable(topo)
    r = topo.ns(topo.ns_l, "ping", "-c", "3", "-i", "0.2", "-W", "2", topo.ipk_ip,
                check=False, timeout=15)
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", r.stdout.decode())]
    assert rtts and min(rtts) >= 2 * delay_us / 1000, r.stdout.decode()
    check_relay(topo.stop_relay())


# --------------------------------------------------------------------- the relay itself

N_FRAMES = 20000
ETHERTYPE = 0x88B5  # IEEE local experimental: nothing else on the link uses it

SENDER = r"""
import socket, struct, sys, time
dev, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
hdr = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + struct.pack("!H", 0x88B5)
for i in range(n):
    s.send(hdr + struct.pack("!I", i) + bytes(200))
    if i % 200 == 199:
        time.sleep(0.002)  # stay well inside the relay's and receiver's buffers
"""

RECEIVER = r"""
import json, select, socket, struct, sys, time
dev = sys.argv[1]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88B5))
s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
s.bind((dev, 0))
print("ready", file=sys.stderr, flush=True)
seqs, end = [], time.monotonic() + 30
while time.monotonic() < end:
    if not select.select([s], [], [], 1.5 if seqs else 10)[0]:
        break
    f = s.recv(2048)
    seqs.append(struct.unpack("!I", f[14:18])[0])
print(json.dumps(seqs))
"""

RELAY_MIX = ["--loss", "0.05", "--burst", "0.01,0.3", "--reorder", "0.05", "--dup", "0.02",
             "--dir", "a2b"]


def relay_run(t, seed):
    """N_FRAMES numbered frames L -> I through the relay; (counters, received seqs)."""
    t.start_relay(*RELAY_MIX, seed=seed)
    rx = t.start(t.ns_i, "python3", "-c", RECEIVER, t.dev_k)
    t.wait_line(rx, "ready")
    t.ns(t.ns_l, "python3", "-c", SENDER, t.dev_l, str(N_FRAMES), timeout=60)
    out, _ = rx.communicate(timeout=60)
    c = t.stop_relay()
    return c, json.loads(out)


def test_relay_same_seed_same_frames(topo):
    c1, got1 = relay_run(topo, 11)
    c2, got2 = relay_run(topo, 11)
    c3, got3 = relay_run(topo, 12)
    for c, got in ((c1, got1), (c2, got2), (c3, got3)):
        check_relay(c)
        assert c["a2b.kdrop"] == 0 and c["a2b.seen"] == N_FRAMES, c
        assert c["a2b.sent"] == len(got) and c["a2b.left"] == 0, (c, len(got))
        assert in_band(c["a2b.drop"], N_FRAMES, 0.05), c
        assert c["a2b.bdrop"] > 0 and c["a2b.reord"] > 0 and c["a2b.dup"] > 0, c
        # reordering happened on the wire: some frame arrives after a later one
        assert any(b < a for a, b in zip(got, got[1:])), "no frame arrived late"
    keys = ("drop", "bdrop", "reord", "dup", "sent")
    assert [c1["a2b." + k] for k in keys] == [c2["a2b." + k] for k in keys]
    assert sorted(got1) == sorted(got2), "same seed, same input, different frames through"
    assert sorted(got1) != sorted(got3), "a different seed changed nothing"
