"""afxdp with 4 KiB UMEM frames (frame=4096) at MTU 3822, Linux as the peer.

A 2 KiB frame carries at most MTU 1774 (XDP keeps 256 bytes of headroom in every
frame); frame=4096 makes the runtime's pool buffers 4 KiB and carries MTU 3822, which
is what the bulk figure runs at. Both XDP modes: generic (skb) and native (drv; veth
accepts a native program at this MTU only because ipk_xdp_prog is frags-aware).
Namespaces and devices are named ipkQ<4 hex>... and removed at teardown.
"""
import os
import subprocess

import pytest

from conftest import BUILD, Link, available_kinds, prog, sh
from test_linux_peer import transfer_from_linux, transfer_to_linux

MTU = 3822  # 4096 - 256 (XDP_PACKET_HEADROOM) - 18 (Ethernet + one VLAN tag)

pytestmark = pytest.mark.skipif("afxdp" not in available_kinds(),
                                reason="afxdp backend not built")


class XdpLink(Link):
    """Link's veth pair at a given MTU, ipkit's end on afxdp with 4 KiB frames (and
    any further spec options, e.g. ",sg=1")."""

    def __init__(self, mode, mtu, opts="", prefix="ipkQ"):
        self.mode = mode  # read by the spec during Link's set-up
        self.opts = opts
        super().__init__("afxdp", offload=False, mtu=mtu, prefix=prefix)

    @property
    def spec(self):
        return "afxdp:%s,mode=%s,frame=4096%s" % (self.ipk_dev, self.mode, self.opts)


@pytest.fixture
def xdp_link():
    links = []

    def make(mode, mtu=MTU, opts="", prefix="ipkQ"):
        if os.geteuid() != 0:
            pytest.skip("interop tests need root (network namespaces)")
        if not os.path.exists(prog("ipkit-nc")):
            pytest.skip("examples not built in %s" % BUILD)
        ln = XdpLink(mode, mtu, opts=opts, prefix=prefix)
        links.append(ln)
        return ln

    yield make
    for ln in links:
        ln.close()


@pytest.fixture(scope="module")
def payload_64M(tmp_path_factory):
    path = tmp_path_factory.mktemp("ipkQ_payload") / "64M"
    with open(path, "wb") as f:
        for _ in range(16):
            f.write(os.urandom(4 << 20))
    yield path
    path.unlink()


@pytest.mark.parametrize("mode", ["skb", "drv"])
def test_afxdp_frame4096_mtu3822_64M_each_way_sha256(xdp_link, payload_64M, tmp_path, mode):
    ln = xdp_link(mode)
    transfer_to_linux(ln, 64 << 20, tmp_path)
    transfer_from_linux(ln, payload_64M)


def open_error(ln, spec):
    """ipkit-nc's one-line error and exit status for a spec that must not open."""
    r = subprocess.run(["ip", "netns", "exec", ln.ns, prog("ipkit-nc"), "--io", spec,
                        "--ip", ln.ipk_ip + "/24", "-l", "5009"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0, r.stdout + r.stderr
    return r.stderr.strip()


def test_afxdp_mtu_larger_than_frame_names_both_numbers(xdp_link):
    ln = xdp_link("skb")
    dev = ln.ipk_dev
    assert open_error(ln, "afxdp:%s,mode=skb" % dev) == (
        "afxdp:%s: MTU 3822 is larger than 2048-byte UMEM frames carry (MTU at most 1774); "
        "use frame=4096" % dev)
    assert open_error(ln, "afxdp:%s,mode=skb,frame=1000" % dev) == (
        "afxdp:%s: frame=1000 is not a UMEM frame size (use 2048 or 4096)" % dev)
    ln.run("ip", "link", "set", dev, "mtu", "9000")
    assert open_error(ln, "afxdp:%s,mode=skb,frame=4096" % dev) == (
        "afxdp:%s: MTU 9000 is larger than 4096-byte UMEM frames carry (MTU at most 3822); "
        "use sg=1 (multi-buffer) or lower the MTU" % dev)
