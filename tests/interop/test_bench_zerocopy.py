"""ipkit-bench --zerocopy (the TCP client queues slices of one pool buffer with
ipk_tcp_send instead of copying with ipk_tcp_write) over a TAP link with offloads on,
so the slices leave as TSO chains written with writev. The Linux twin is the server:
in ping-pong it echoes and the ipkit client checks every byte and each request's
number, so a wrong slice, a wrong phase of the pattern or a lost numbered byte is a
mismatch (exit 1). Functional runs only, no speed thresholds.

Namespace and device names start with ipkV; removed at teardown, also on failure.
"""
import os

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


# (id, client args): requests larger than a TSO frame and than the pool's large buffer
# (slices restart at the pattern's phase), shorter than the numbered bytes, and a
# literal -m payload laid out whole.
PINGPONG = [
    ("64k-depth4", ["-l", "65536", "-d", "4"]),
    ("200000-depth2", ["-l", "200000", "-d", "2"]),
    ("5-bytes-depth8", ["-l", "5", "-d", "8"]),
    ("literal", ["-m", "zero-copy " * 300, "-d", "3"]),
]


@pytest.mark.parametrize("args", [a for _, a in PINGPONG], ids=[i for i, _ in PINGPONG])
def test_zerocopy_pingpong_echo_checked(znet, args):
    rc, s, out = run_pair(znet, [], ["-g", "1"] + args)
    assert_clean(rc, s, out)


def test_zerocopy_corrupted_echo_is_caught(znet):
    rc, s, out = run_pair(znet, ["--corrupt-echo"], ["-g", "1", "-l", "65536", "-d", "4"])
    assert rc == 1, out
    assert s["mismatches"] > 0, out


def test_zerocopy_burst_completes(znet):
    rc, s, out = run_pair(znet, ["-g", "2"], ["-g", "2", "-l", "65536"])
    assert_clean(rc, s, out)
    assert s["tx_gbps"] > 0, out
