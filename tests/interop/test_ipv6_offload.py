"""TCP over IPv6 with the TAP backend's offloads on (issue 19): 64 MiB each way
between ipkit-nc and socat with SHA-256 end to end, while tcpdump on the TAP device
shows the offloads at work: ipkit's IPv6 TSO super-frames (vnet header GSO_TCPV6,
IPK_CAP_TSO6) leaving, and Linux's TCPv6 GSO frames (TUN_F_TSO6) arriving, which
the core takes whole (IPK_CAP_LRO). On a core without IPv6 offloads neither kind
of frame exists and the test fails."""
import time

import pytest

from conftest import available_kinds, prog
from test_ipv6 import V6, nc6_64M_each_way

pytestmark = pytest.mark.skipif("tap" not in available_kinds(), reason="tap backend not built")


@pytest.fixture
def v6o(make_link):
    return V6(make_link("tap"))


def _big_frames(v6, pcap):
    """(from ipkit, from Linux): IPv6 TCP frames above 2000 bytes in the capture."""
    r = v6.ln.run("tcpdump", "-r", str(pcap), "-nn", "ip6", check=False, timeout=30)
    mine = theirs = 0
    for line in r.stdout.decode().splitlines():
        if " > " not in line:
            continue
        src = line.split(" IP6 ", 1)[-1].split(" > ", 1)[0]
        if src.startswith(v6.ipk6 + "."):
            mine += 1
        elif src.startswith(v6.linux6 + "."):
            theirs += 1
    return mine, theirs


def test_nc6_64M_each_way_offloads_sha256(v6o, tmp_path):
    v6 = v6o
    pcap = tmp_path / "big.pcap"
    dump = v6.ln.start("tcpdump", "-i", v6.ln.linux_dev, "-nn", "-s", "128", "-c", "100000",
                       "-U", "-w", str(pcap), "ip6 and tcp and greater 2000")
    time.sleep(0.5)
    nc6_64M_each_way(v6, tmp_path)
    time.sleep(0.5)
    dump.terminate()
    dump.wait(timeout=10)
    mine, theirs = _big_frames(v6, pcap)
    assert mine > 0, "no IPv6 TSO frame from ipkit"
    assert theirs > 0, "no IPv6 GSO frame from Linux taken by ipkit"
