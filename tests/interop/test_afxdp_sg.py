"""Multi-buffer AF_XDP (afxdp sg=1, XDP_USE_SG): jumbo frames over 4 KiB UMEM frames.

At MTU 9000 a frame spans three UMEM frames: the kernel hands ipkit its descriptors
chained with XDP_PKT_CONTD and ipkit receives them as one packet chain (the core takes
it whole, IPK_CAP_LRO's rule); ipkit sends each segment as a chain of descriptors, the
pieces read in place. Linux as the peer (skb and drv XDP; the TCP checksums finished
by the backend as it copies, csum=1, the default, or by the core, csum=0: Linux drops
a segment whose sum is wrong), then two ipkit processes on
one veth pair, 64 MiB each way SHA-256 verified; then the errors. Namespaces and
devices are named ixm<4 hex>... and removed at teardown, also on failure.
"""
import os
import time

import pytest

from conftest import available_kinds, prog
from test_afxdp_mtu import open_error, payload_64M, xdp_link  # noqa: F401 (fixtures)
from test_linux_peer import nc_digests, transfer_from_linux, transfer_to_linux

MTU = 9000

pytestmark = pytest.mark.skipif("afxdp" not in available_kinds(),
                                reason="afxdp backend not built")


@pytest.fixture
def sg_link(xdp_link):
    """xdp_link's links, multi-buffer at MTU 9000 by default, named ixm..."""
    def make(mode, mtu=MTU, opts=",sg=1"):
        return xdp_link(mode, mtu, opts=opts, prefix="ixm")
    return make


@pytest.mark.parametrize("csum", [1, 0])
@pytest.mark.parametrize("mode", ["skb", "drv"])
def test_afxdp_sg_mtu9000_linux_64M_each_way_sha256(sg_link, payload_64M, tmp_path, mode,
                                                    csum):
    ln = sg_link(mode, opts=",sg=1,csum=%d" % csum)
    transfer_to_linux(ln, 64 << 20, tmp_path)
    err = transfer_from_linux(ln, payload_64M)
    # jumbo frames really arrived: 64 MiB in MTU-9000 frames is ~7,600 of them (at
    # 3,822 it would be ~18,000)
    rx = int(err.split(" rx ")[1].split()[0])
    assert rx < (64 << 20) // 8000, err


def nc_pair_transfer(ln, srv, cli, dst, size):
    """ipkit-nc srv (listening) <- ipkit-nc cli (sending size bytes to dst): both
    digests equal and complete."""
    p = ln.start(prog("ipkit-nc"), *srv, "-l", "5003", "--sha256", "--no-output", "-v")
    time.sleep(0.5)  # a SYN before the listener is up is retransmitted anyway
    r = ln.run(prog("ipkit-nc"), *cli, "--send-size", str(size), "--sha256", "--no-output",
               dst, "5003", check=False, timeout=60)
    assert r.returncode == 0, r.stderr.decode()[-500:]
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode()[-500:]
    sent, sent_sha, _, _ = nc_digests(r.stderr)
    _, _, got, got_sha = nc_digests(err)
    assert sent == size and got == size
    assert got_sha == sent_sha


@pytest.mark.parametrize("mode", ["skb", "drv"])
def test_afxdp_sg_mtu9000_ipkit_pair_64M_each_way_sha256(sg_link, mode):
    """Two ipkit processes, one on each end of the veth pair, both multi-buffer."""
    ln = sg_link(mode)
    ln.run("ip", "addr", "flush", "dev", ln.linux_dev)  # that end is ipkit's now
    peer = ["--io", "afxdp:%s,mode=%s,frame=4096,sg=1" % (ln.linux_dev, mode),
            "--ip", ln.linux_ip + "/24"]
    nc_pair_transfer(ln, ln.ipk_args(), peer, ln.ipk_ip, 64 << 20)
    nc_pair_transfer(ln, peer, ln.ipk_args(), ln.linux_ip, 64 << 20)


def test_afxdp_sg_errors_name_the_numbers(sg_link):
    ln = sg_link("skb", mtu=1500)
    dev = ln.ipk_dev
    ln.run("ip", "link", "set", dev, "mtu", "65000")
    assert open_error(ln, "afxdp:%s,mode=skb,frame=4096,sg=1" % dev) == (
        "afxdp:%s: MTU 65000 is larger than 16 4096-byte UMEM frames carry with sg=1 "
        "(MTU at most 61422); lower the MTU" % dev)
    ln.run("ip", "link", "set", dev, "mtu", "30000")
    assert open_error(ln, "afxdp:%s,mode=skb,sg=1" % dev) == (
        "afxdp:%s: MTU 30000 is larger than 16 2048-byte UMEM frames carry with sg=1 "
        "(MTU at most 28654); lower the MTU" % dev)
    assert open_error(ln, "afxdp:%s,mode=skb,frame=4096,sg=2" % dev) == (
        "afxdp: option sg=2 must be 0 or 1")
