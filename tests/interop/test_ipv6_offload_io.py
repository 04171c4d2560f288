"""TCP over IPv6 with each backend's offloads on, beyond TAP (test_ipv6_offload.py):
AF_PACKET (vnet header: checksum offload and TSO6, Linux's GSO frames taken whole),
AF_XDP (csum=1: the backend finishes the TCP checksum the core leaves, as it copies)
and DPDK on net_tap (RTE_MBUF_F_TX_IPV6 | TCP_CKSUM). Each moves 64 MiB each way on
one connection (ipkit-nc as the client of a socat TCP6-LISTEN that sends its own file
while it stores ipkit's), SHA-256 end to end, and checks the offloads were on
(ipkit-nc -v prints the IPv6 offload bits the core was given). Linux's end checks
every checksum in software (peer_setup turns its offloads off, except on AF_PACKET,
where Linux's own TSO frames are the point), so a wrong sum stalls the transfer.
On AF_PACKET, tcpdump on Linux's end must also see ipkit's IPv6 TSO frames.

Namespaces are ipk<hex>*, removed at teardown (also on failure); processes are ended
by PID; every wait is bounded.
"""
import hashlib
import os
import re
import secrets
import threading
import time

import pytest

from conftest import backend_built, prog
from conftest import stop_procs
from test_ipv6_io import Veth, Xdp, lcores, net, udp_echo_ok  # noqa: F401 (net: fixture)

SIZE = 64 << 20


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


def _offloads6(err):
    m = re.search(r"offloads6 (.*)$", err, re.M)
    assert m, "no offloads6 line: " + err[-800:]
    return dict(kv.split("=") for kv in m.group(1).split())


def nc6_each_way(n, ns, args, peer6, tmp_path, size=SIZE, eal=(), peer_ns=None):
    """ipkit-nc (args, in ns) as the client of socat on [peer6]:5003 in peer_ns
    (default ns): size bytes each way at once, both SHA-256 checked; returns
    ipkit-nc's stderr."""
    peer_ns = peer_ns or ns
    src, out = tmp_path / "server.bin", tmp_path / "recv.bin"
    with open(src, "wb") as f:
        for _ in range(size // (4 << 20)):
            f.write(secrets.token_bytes(4 << 20))
    p = n.start(peer_ns, "socat", "-t", "60", "TCP6-LISTEN:5003,reuseaddr,ipv6only=1",
                "SYSTEM:cat %s & cat > %s; wait" % (src, out))
    for _ in range(100):
        if ":5003 " in n.run(peer_ns, "ss", "-6ltn").stdout.decode():
            break
        time.sleep(0.05)
    r = n.run(ns, prog("ipkit-nc"), *eal, *args, "-v", "--send-size", str(size), "--sha256",
              "--no-output", "--timeout", "30", peer6, "5003", check=False, timeout=300)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err[-800:]
    p.wait(timeout=60)
    s = re.search(r"^sent (\d+) sha256 ([0-9a-f]{64})$", err, re.M)
    g = re.search(r"^received (\d+) sha256 ([0-9a-f]{64})$", err, re.M)
    assert s and g, err[-500:]
    assert int(s.group(1)) == size and out.stat().st_size == size
    assert s.group(2) == _sha(out), "ipkit -> Linux differs"
    assert int(g.group(1)) == size and g.group(2) == _sha(src), "Linux -> ipkit differs"
    return err


@pytest.mark.skipif(not backend_built("afpacket"), reason="afpacket backend not built")
def test_afpacket_nc6_64M_each_way_tso6_csum_sha256(net, tmp_path):
    v = Veth(net)
    # Linux's end with its offloads back on: its TSO frames cross the veth whole
    net.run(v.ns, "ethtool", "-K", v.ldev, "tx", "on", "rx", "on", "tso", "on", "gso", "on",
            check=False)
    pcap = tmp_path / "big.pcap"
    dump = net.start(v.ns, "tcpdump", "-i", v.ldev, "-nn", "-s", "128", "-c", "100000", "-U",
                     "-w", str(pcap), "ip6 and tcp and greater 2000")
    time.sleep(0.5)
    args = ["--io", "afpacket:%s,vnet=1" % v.kdev, "--ip", v.ipk4 + "/24", "--ip6",
            v.ipk6 + "/64"]
    err = nc6_each_way(net, v.ns, args, v.linux6, tmp_path)
    time.sleep(0.5)
    dump.terminate()
    dump.wait(timeout=10)
    off = _offloads6(err)
    assert off["tx_csum_tcp6"] == "1" and off["tso6"] == "1", off
    r = net.run(v.ns, "tcpdump", "-r", str(pcap), "-nn", "ip6", check=False, timeout=30)
    srcs = [ln.split(" IP6 ", 1)[-1].split(" > ", 1)[0]
            for ln in r.stdout.decode().splitlines() if " > " in ln]
    mine = sum(1 for a in srcs if a.startswith(v.ipk6 + "."))
    theirs = sum(1 for a in srcs if a.startswith(v.linux6 + "."))
    assert mine > 0, "no IPv6 TSO frame from ipkit over AF_PACKET"
    # Linux's GSO frames went to ipkit whole (before the backend took IPv6 super-frames
    # they were dropped and this direction stalled)
    assert theirs > 0, "Linux sent no IPv6 GSO frame: the receive side was not tested"


@pytest.mark.skipif(not backend_built("afxdp"), reason="afxdp backend not built")
def test_afxdp_nc6_64M_each_way_csum_offload_sha256(net, tmp_path):
    """csum=1 (the default): the core leaves the pseudo-header sum, the backend
    finishes it as it copies into the UMEM frame; Linux checks every sum."""
    x = Xdp(net)
    args = x.args()
    args[1] += ",csum=1"
    err = nc6_each_way(net, x.h, args, x.peer6, tmp_path, peer_ns=x.p)
    assert _offloads6(err)["tx_csum_tcp6"] == "1"
    x.host_still_works()


@pytest.mark.skipif(not backend_built("dpdk"), reason="DPDK backend not built")
def test_dpdk_tap_nc6_32M_each_way_csum_offload_sha256(net, tmp_path):
    """net_tap with TCP checksum offload: IPv6 segments leave with
    RTE_MBUF_F_TX_IPV6 | TCP_CKSUM and the pseudo-header sum (the PMD finishes it)."""
    ns = net.add_ns("d")
    dev = net.tag + "t"
    linux4, ipk4 = "10.%d.0.1" % net.net, "10.%d.0.2" % net.net
    linux6, ipk6 = net.pfx + "::1", net.pfx + "::2"
    prefix = "%sD%02d" % (net.tag, len(net.prefixes))
    net.prefixes.append(prefix)
    eal = ["--no-huge", "-m", "256", "--no-pci", "--no-telemetry", lcores(),
           "--file-prefix=" + prefix, "--vdev=net_tap0,iface=" + dev, "--"]
    args = ["--io", "dpdk:net_tap0", "--ip", ipk4 + "/24", "--ip6", ipk6 + "/64"]

    # the TAP exists only once ipkit-nc runs: a thread sets Linux's end up meanwhile

    def setup():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if net.run(ns, "ip", "link", "show", dev, check=False).returncode == 0:
                break
            time.sleep(0.05)
        net.run(ns, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=0" % dev, check=False)
        net.run(ns, "ip", "addr", "add", linux4 + "/24", "dev", dev, check=False)
        net.run(ns, "ip", "-6", "addr", "add", linux6 + "/64", "dev", dev, "nodad",
                check=False)
        net.run(ns, "ip", "link", "set", dev, "up", check=False)

    t = threading.Thread(target=setup)
    t.start()
    try:
        err = nc6_each_way(net, ns, args, linux6, tmp_path, size=32 << 20, eal=eal)
    finally:
        t.join(timeout=40)
    assert _offloads6(err)["tx_csum_tcp6"] == "1", err[-800:]


def _udp6_echo_offload(n, ns, peer_ns, args, ipk6):
    """ipkit-echo -v (args) in ns answers 20 UDP datagrams over IPv6 (1..1200 bytes,
    data checked) from Linux in peer_ns; returns its offloads6 bits."""
    p = n.start_ready(ns, prog("ipkit-echo"), "-v", *args)
    assert n.wait6(peer_ns, ipk6), "ipkit never answered ping -6"
    udp_echo_ok(n, peer_ns, ipk6)
    stop_procs([p], grace=5)
    err = p.stderr.read().decode(errors="replace")
    return _offloads6(err)


@pytest.mark.skipif(not backend_built("afpacket"), reason="afpacket backend not built")
def test_afpacket_udp6_echo_csum_offload(net):
    """UDP over IPv6 with IPK_CAP_TX_CSUM_UDP6: the vnet header asks the kernel to
    finish the sum (NEEDS_CSUM, offset 6)."""
    v = Veth(net)
    args = ["--io", "afpacket:%s,vnet=1" % v.kdev, "--ip", v.ipk4 + "/24", "--ip6",
            v.ipk6 + "/64"]
    assert _udp6_echo_offload(net, v.ns, v.ns, args, v.ipk6)["tx_csum_udp6"] == "1"


@pytest.mark.skipif(not backend_built("afxdp"), reason="afxdp backend not built")
def test_afxdp_udp6_echo_csum_offload(net):
    """csum=1: the backend finishes the UDP sum over IPv6 (0 sent as 0xffff); Linux's
    end (offloads off) checks every datagram's sum and drops a wrong one."""
    x = Xdp(net)
    args = x.args()
    args[1] += ",csum=1"
    assert _udp6_echo_offload(net, x.h, x.p, args, x.ipk6)["tx_csum_udp6"] == "1"
    x.host_still_works()


@pytest.mark.skipif(not backend_built("dpdk"), reason="DPDK backend not built")
def test_dpdk_vhost_virtio_user_pair_ipv6_64M_csum_offload(net, tmp_path):
    """Two ipkit processes over vhost-user (net_vhost <-> net_virtio_user, both with
    TCP checksum offload: the sum travels partial in the virtio header), TCP over
    IPv6: ipkit-nc sends 64 MiB to ipkit-echo and checks the echo's SHA-256; both
    ends had IPK_CAP_TX_CSUM_TCP6 (RTE_MBUF_F_TX_IPV6 on every segment)."""
    ns = net.add_ns("v")
    sock = str(tmp_path / "vhost.sock")

    def eal(vdev):
        prefix = "%sD%02d" % (net.tag, len(net.prefixes))
        net.prefixes.append(prefix)
        return ["--no-huge", "-m", "256", "--no-pci", "--no-telemetry", lcores(),
                "--file-prefix=" + prefix, "--vdev=" + vdev, "--"]

    a6, b6 = net.pfx + "::a", net.pfx + "::b"
    echo = net.start_ready(ns, prog("ipkit-echo"),
                           *eal("net_vhost0,iface=%s,queues=1" % sock), "-v",
                           "--io", "dpdk:net_vhost0", "--ip", "10.9.0.1/24", "--ip6", a6 + "/64",
                           wait=30.0)
    size = 64 << 20
    r = net.run(ns, prog("ipkit-nc"), *eal("net_virtio_user0,path=%s,queues=1" % sock), "-v",
                "--io", "dpdk:net_virtio_user0", "--ip", "10.9.0.2/24", "--ip6", b6 + "/64",
                "--send-size", str(size), "--no-output", "--sha256", "--timeout", "30", a6, "7",
                check=False, timeout=200)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err[-800:]
    s = re.search(r"^sent (\d+) sha256 ([0-9a-f]{64})$", err, re.M)
    g = re.search(r"^received (\d+) sha256 ([0-9a-f]{64})$", err, re.M)
    assert s and g and int(s.group(1)) == size and s.group(1, 2) == g.group(1, 2), err[-800:]
    assert _offloads6(err)["tx_csum_tcp6"] == "1"
    stop_procs([echo], grace=5)
    eerr = echo.stderr.read().decode(errors="replace")
    assert _offloads6(eerr)["tx_csum_tcp6"] == "1", eerr[-800:]
