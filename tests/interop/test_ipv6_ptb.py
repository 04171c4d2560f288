"""A Packet Too Big lowering the MSS of a live TCP connection with Linux (issue 19,
RFC 8201, RFC 5927 §4.1).

ipkit-nc (TAP, offloads off so every frame is one segment) sends 16 MiB over IPv6
to a socat TCP6-LISTEN. Mid-transfer the test's peer (ptb6_peer.py, scapy) answers
one of ipkit's 1500-byte datagrams with a Packet Too Big (MTU 1280) from a router
address, quoting that datagram. ipkit must send nothing above 1280 bytes after it
(but what was already on its way), and the transfer must complete with the SHA-256
of what Linux received equal to what ipkit sent.

Linux's ACKs to ipkit are held back by an htb class at 300 kbit/s (a short queue):
ipkit believes a PTB only for a sequence number still in flight (RFC 5927), and on
TAP Linux acknowledges a segment the instant it arrives, before the PTB quoting it
could be read. ICMPv6 takes the fast class, so the PTB overtakes the ACKs."""
import json
import os
import time

import pytest

from conftest import available_kinds, prog
from test_ipv6 import V6, _nc_digests, _sha256_file

pytestmark = pytest.mark.skipif("tap" not in available_kinds(), reason="tap backend not built")

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ptb6_peer.py")
SIZE = 16 << 20


@pytest.fixture
def v6p(make_link):
    return V6(make_link("tap", offload=False))


def _slow_acks(ln):
    """Linux's TCP over IPv6 leaving the TAP device: 300 kbit/s, 40-packet queue;
    everything else (ND, ICMPv6) unhindered."""
    dev = ln.linux_dev
    ln.run("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
    ln.run("tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
           "rate", "1gbit")
    ln.run("tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb",
           "rate", "300kbit", "ceil", "300kbit")
    ln.run("tc", "qdisc", "add", "dev", dev, "parent", "1:20", "pfifo", "limit", "40")
    ln.run("tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ipv6", "u32",
           "match", "ip6", "protocol", "6", "0xff", "flowid", "1:20")


def test_ptb_lowers_mss_of_live_connection_with_linux(v6p, tmp_path):
    v6 = v6p
    out = tmp_path / "recv.bin"
    router6 = v6.pfx + "::fe"
    p = v6.ln.start("socat", "-u", "TCP6-LISTEN:5001,reuseaddr,ipv6only=1",
                    "OPEN:%s,creat,trunc" % out)
    for _ in range(100):
        if ":5001 " in v6.ln.run("ss", "-6ltn").stdout.decode():
            break
        time.sleep(0.05)
    _slow_acks(v6.ln)
    peer = v6.ln.start("/usr/bin/python3", PEER, v6.ln.linux_dev, v6.ipk6, router6, "90")
    assert peer.stdout.readline().strip() == b"ready"
    r = v6.ln.run(prog("ipkit-nc"), *v6.ln.ipk_args(), "--ip6", v6.ipk6 + "/64",
                  "--send-size", str(SIZE), "--sha256", "--no-output", "--timeout", "30",
                  v6.linux6, "5001", check=False, timeout=150)
    assert r.returncode == 0, r.stderr.decode()[-800:]
    p.wait(timeout=30)
    pout, perr = peer.communicate(timeout=100)
    st = json.loads(pout.decode().strip().splitlines()[-1])
    print(st)
    sent, sent_sha, _, _ = _nc_digests(r.stderr)
    assert sent == SIZE and out.stat().st_size == SIZE
    assert _sha256_file(out) == sent_sha
    # the connection was live and sending 1500-byte datagrams when the PTB came
    assert st["big_before"] >= 100, st
    assert 1 <= st["ptb"] <= 20, st
    # afterwards: no datagram above 1280 once a PTB was believed, and the rest of
    # the transfer went in smaller segments
    assert st["big_late"] == 0, st
    assert st["small_after"] >= 1000, st
