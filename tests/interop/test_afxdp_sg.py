"""Multi-buffer AF_XDP (afxdp sg=1, XDP_USE_SG): jumbo frames over 4 KiB UMEM frames.

At MTU 9000 a frame spans three UMEM frames: the kernel hands ipkit its descriptors
chained with XDP_PKT_CONTD and ipkit receives them as one packet chain (the core takes
it whole, IPK_CAP_LRO's rule); ipkit sends each segment as a chain of descriptors, the
pieces read in place. Linux as the peer (skb and drv XDP), then two ipkit processes on
one veth pair, 64 MiB each way SHA-256 verified; then the errors. Namespaces and
devices are named ixm<4 hex>... and removed at teardown, also on failure.
"""
import os
import secrets
import subprocess

import pytest

from conftest import BUILD, available_kinds, prog, sh
from test_afxdp_mtu import XdpLink, open_error
from test_linux_peer import transfer_from_linux, transfer_to_linux

MTU = 9000

pytestmark = pytest.mark.skipif("afxdp" not in available_kinds(),
                                reason="afxdp backend not built")


@pytest.fixture
def sg_link():
    links = []

    def make(mode, mtu=MTU, opts=",sg=1"):
        if os.geteuid() != 0:
            pytest.skip("interop tests need root (network namespaces)")
        if not os.path.exists(prog("ipkit-nc")):
            pytest.skip("examples not built in %s" % BUILD)
        ln = XdpLink(mode, mtu, opts=opts, prefix="ixm")
        links.append(ln)
        return ln

    yield make
    for ln in links:
        ln.close()


@pytest.fixture(scope="module")
def payload_64M(tmp_path_factory):
    path = tmp_path_factory.mktemp("ixm_payload") / "64M"
    with open(path, "wb") as f:
        for _ in range(16):
            f.write(os.urandom(4 << 20))
    yield path
    path.unlink()


@pytest.mark.parametrize("mode", ["skb", "drv"])
def test_afxdp_sg_mtu9000_linux_64M_each_way_sha256(sg_link, payload_64M, tmp_path, mode):
    ln = sg_link(mode)
    transfer_to_linux(ln, 64 << 20, tmp_path)
    err = transfer_from_linux(ln, payload_64M)
    # jumbo frames really arrived: 64 MiB in MTU-9000 frames is ~7,600 of them (at
    # 3,822 it would be ~18,000)
    rx = int(err.split(" rx ")[1].split()[0])
    assert rx < (64 << 20) // 8000, err
