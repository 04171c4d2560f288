"""UDP datagrams above the MTU, both ways, with Linux as the peer: ipkit-echo (one
context, no workers) on a TAP device in a private namespace; Linux's socat sends
4,000- and 8,000-byte datagrams (IPv4 fragments, 1500-byte MTU), ipkit reassembles
them and echoes each back as fragments it cuts itself (RFC 791 §3.2); Linux
reassembles the echo and the test compares it byte for byte and by SHA-256.

Namespaces and devices are named ipkF<hex>...; removed at teardown, also on failure.
"""
import hashlib
import os
import re

import pytest

from conftest import prog, stop_procs
from test_workers import TapNs, socat_udp


@pytest.fixture
def fragns():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not os.path.exists(prog("ipkit-echo")):
        pytest.skip("examples not built")
    t = TapNs(prefix="ipkF")
    yield t
    t.close()


def test_udp_echo_of_fragmented_datagrams_to_linux(fragns):
    p = fragns.echo("-v", ready="serving on")
    sizes = [4000, 8000, 4000, 8000]
    for i, size in enumerate(sizes):
        msg = os.urandom(size)
        got = socat_udp(fragns, 43000 + i, msg)
        assert len(got) == size and hashlib.sha256(got).digest() == \
            hashlib.sha256(msg).digest(), (i, len(got), size)
    stop_procs([p])
    err = p.early + p.stderr.read()
    # ipkit-echo -v's exit report: the echoes went out as fragments (3 for 4,000
    # bytes, 6 for 8,000 at 1480 bytes each), nothing refused or dropped for size
    m = re.search(rb"tx (\d+) frames", err)
    assert m and int(m.group(1)) >= 2 * (3 + 6), err
    assert b"drop no_pkt" not in err and b"frag_" not in err, err
