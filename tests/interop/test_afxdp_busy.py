"""afxdp busy_poll=1: preferred busy polling on the AF_XDP socket.

With busy_poll=1 the backend sets SO_PREFER_BUSY_POLL, SO_BUSY_POLL and
SO_BUSY_POLL_BUDGET on its socket and starts every receive burst with a non-blocking
recvfrom; the veths get napi_defer_hard_irqs and gro_flush_timeout as
Documentation/networking/napi.rst asks. On veth (copy mode) the kernel gives the
socket no NAPI id since Linux 6.13 (only zero-copy sockets get one, at bind), so the
polling itself does nothing there; what these tests prove is that the option opens,
moves data unchanged both ways (multi-buffer at MTU 9000, Linux and a second ipkit
as peers, SHA-256 verified) and that a bad value is refused by name. Namespaces and
devices are named ixq<4 hex>... and removed at teardown, also on failure.
"""
import pytest

from conftest import available_kinds
from test_afxdp_mtu import open_error, payload_64M, xdp_link  # noqa: F401 (fixtures)
from test_afxdp_sg import nc_pair_transfer
from test_linux_peer import transfer_from_linux, transfer_to_linux

pytestmark = pytest.mark.skipif("afxdp" not in available_kinds(),
                                reason="afxdp backend not built")

OPTS = ",sg=1,busy_poll=1"


def busy_link(xdp_link, mode):
    """A veth pair at MTU 9000, ipkit's end busy polling, both ends with the NAPI
    deferral that preferred busy polling relies on (napi.rst: 2 deferrals, 200 us)."""
    ln = xdp_link(mode, 9000, opts=OPTS, prefix="ixq")
    for dev in (ln.ipk_dev, ln.linux_dev):
        ln.run("sh", "-c", "echo 2 > /sys/class/net/%s/napi_defer_hard_irqs && "
               "echo 200000 > /sys/class/net/%s/gro_flush_timeout" % (dev, dev))
    return ln


@pytest.mark.parametrize("mode", ["skb", "drv"])
def test_afxdp_busy_poll_linux_64M_each_way_sha256(xdp_link, payload_64M, tmp_path, mode):
    ln = busy_link(xdp_link, mode)
    transfer_to_linux(ln, 64 << 20, tmp_path)
    transfer_from_linux(ln, payload_64M)


def test_afxdp_busy_poll_ipkit_pair_64M_each_way_sha256(xdp_link):
    """Both ends ipkit, both busy polling (native XDP)."""
    ln = busy_link(xdp_link, "drv")
    ln.run("ip", "addr", "flush", "dev", ln.linux_dev)  # that end is ipkit's now
    peer = ["--io", "afxdp:%s,mode=drv,frame=4096%s" % (ln.linux_dev, OPTS),
            "--ip", ln.linux_ip + "/24"]
    nc_pair_transfer(ln, ln.ipk_args(), peer, ln.ipk_ip, 64 << 20)
    nc_pair_transfer(ln, peer, ln.ipk_args(), ln.linux_ip, 64 << 20)


def test_afxdp_busy_poll_bad_value_named(xdp_link):
    ln = xdp_link("skb", 1500, prefix="ixq")
    assert open_error(ln, "afxdp:%s,mode=skb,busy_poll=yes" % ln.ipk_dev) == (
        "afxdp: option busy_poll=yes must be 0 or 1")
