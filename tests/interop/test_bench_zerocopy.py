"""ipkit-bench --zerocopy (the TCP client queues slices of one pool buffer with
ipk_tcp_send instead of copying with ipk_tcp_write) over a TAP link with offloads on,
so the slices leave as TSO chains written with writev. The Linux twin is the server:
in ping-pong it echoes and the ipkit client checks every byte and each request's
number, so a wrong slice, a wrong phase of the pattern or a lost numbered byte is a
mismatch (exit 1). Functional runs only, no speed thresholds.

Namespace and device names start with ipkV; removed at teardown, also on failure.
"""
import os
import subprocess

import pytest

from conftest import backend_built
from test_bench import TWIN, BenchNet, assert_clean, built


@pytest.fixture
def znet():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not built() or not backend_built("tap"):
        pytest.skip("ipkit-bench or the tap backend not built")
    n = BenchNet(prefix="ipkV")
    yield n
    n.close()


def run_pair(n, server_args, client_args):
    n.server([TWIN, "--ip", n.linux_ip, "-p", "10000"] + server_args)
    return n.client(n.ipk("-s", n.linux_ip, "-p", "10000", "--zerocopy") + client_args)


# (id, client args): requests larger than a TSO frame (a slice of the layout that
# restarts at the pattern's phase, cut by the core into frames), larger than a chain
# (64 KiB), shorter than the numbered bytes, and literal -m payloads laid out whole
# (one longer than a 2 KiB node-pool buffer: the layout has a 128 KiB pool of its own).
PINGPONG = [
    ("64k-depth4", ["-l", "65536", "-d", "4"]),
    ("200000-depth2", ["-l", "200000", "-d", "2"]),
    ("5-bytes-depth8", ["-l", "5", "-d", "8"]),
    ("literal", ["-m", "zero-copy " * 150, "-d", "3"]),
    ("literal-5000", ["-m", "zero-copy " * 500, "-d", "2"]),
]


@pytest.mark.parametrize("args", [a for _, a in PINGPONG], ids=[i for i, _ in PINGPONG])
def test_zerocopy_pingpong_echo_checked(znet, args):
    rc, s, out = run_pair(znet, [], ["-g", "1"] + args)
    assert_clean(rc, s, out)


def test_zerocopy_literal_longer_than_a_buffer_refused(znet):
    """A -m payload is laid out whole in the layout's one buffer (128 KiB less the
    headroom): longer ones exit 3 (set-up). 131000 bytes is still one argument
    (Linux takes up to 128 KiB per argument)."""
    r = subprocess.run(["ip", "netns", "exec", znet.ns] +
                       znet.ipk("-s", znet.linux_ip, "--zerocopy", "-m", "x" * 131000, "-t", "1"),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and "does not fit one pool buffer" in r.stderr, r.stderr


def test_zerocopy_corrupted_echo_is_caught(znet):
    rc, s, out = run_pair(znet, ["--corrupt-echo"], ["-g", "1", "-l", "65536", "-d", "4"])
    assert rc == 1, out
    assert s["mismatches"] > 0, out


def test_zerocopy_burst_completes(znet):
    rc, s, out = run_pair(znet, ["-g", "2"], ["-g", "2", "-l", "65536"])
    assert_clean(rc, s, out)
    assert s["tx_gbps"] > 0, out


class BridgedTaps(BenchNet):
    """Two TAP devices (offloads on) on a bridge in one namespace, an ipkit-bench at
    each, as bench/io_pairs.sh's tap rows: the server at 10.N.0.1 on tap 1, the client
    at 10.N.0.2 on tap 2. Teardown as BenchNet's (processes by PID, the namespace)."""

    def __init__(self):
        super().__init__(prefix="ipkV")
        br, t2 = self.ns[:-1] + "b", self.ns[:-1] + "u"
        try:
            self.x("ip", "addr", "flush", "dev", self.dev)
            self.x("ip", "link", "add", br, "type", "bridge", "stp_state", "0",
                   "forward_delay", "0")
            self.x("ip", "tuntap", "add", "dev", t2, "mode", "tap", "vnet_hdr")
            for d in (self.dev, t2):
                self.x("ip", "link", "set", d, "master", br)
                self.x("ip", "link", "set", d, "up")
            self.x("ip", "link", "set", br, "up")
        except Exception:
            self.close()
            raise
        self.dev2 = t2

    def ipk_at(self, dev, ip, *args):
        return [os.path.join(os.path.dirname(TWIN), "ipkit-bench"), "--io", "tap:" + dev,
                "--ip", ip + "/24"] + list(args)


@pytest.fixture
def bridged():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not built() or not backend_built("tap"):
        pytest.skip("ipkit-bench or the tap backend not built")
    n = BridgedTaps()
    yield n
    n.close()


def test_zerocopy_burst_big_buffer_no_pool_exhaustion(bridged):
    """Regression: the layout once lived in a buffer of the pool's large companion,
    whose 128 descriptors (one per slice and per transmit clone) ran dry with an
    8 MiB send buffer: failed allocations and a transfer stalled on retransmission
    timeouts. The sender warns when it ran short of packets; it must not."""
    n, buf = bridged, ["--tcp-buf", "8388480"]
    n.server(n.ipk_at(n.dev, "10.77.0.1", "-p", "10000", "-g", "2", *buf))
    rc, s, out = n.client(n.ipk_at(n.dev2, "10.77.0.2", "-s", "10.77.0.1", "-p", "10000",
                                   "-g", "2", "-l", "65536", "--zerocopy", *buf))
    assert_clean(rc, s, out)
    assert "pool short" not in out, out
