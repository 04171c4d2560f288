"""IPv6 through the backends (issue 19): ping -6 both ways and UDP echo over AF_XDP,
AF_PACKET, memlink and DPDK (net_af_packet, --no-huge). TAP is covered by
test_ipv6.py.

AF_XDP runs on a veth between two namespaces this test creates: the peer (Linux,
fdXX::1) and the host side, where ipkit answers for fdXX::2 and its link-local address
through the XDP program while the host's kernel keeps its own IPv6 (fdXX::3 and
fe80::3) on the same device. The kernel's link-local is set by hand (addrgenmode
none): ipkit's is fe80:: + the EUI-64 of the device's MAC, the address the kernel
would otherwise take itself, and the program gives that address to ipkit.

Namespaces are ipk<hex>*, removed at teardown (also on failure); processes are ended by
PID; every wait is bounded.
"""
import json
import os
import re
import secrets
import shutil
import subprocess
import time

import pytest

from conftest import backend_built, prog, sh, stop_procs

UDP_CLIENT = r"""
import socket, sys, os
dst, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.settimeout(1.0)
ok = 0
for i in range(n):
    data = os.urandom(1 + (i * 97) % 1200)
    for attempt in range(3):
        s.sendto(data, (dst, 7))
        try:
            got, peer = s.recvfrom(4096)
        except socket.timeout:
            continue
        if got == data:
            ok += 1
            break
        sys.exit("data differs at %d" % i)
print("ok %d" % ok)
"""


def eui64_ll(mac):
    """fe80:: + the modified EUI-64 of mac (RFC 4291 App. A)."""
    b = [int(x, 16) for x in mac.split(":")]
    b[0] ^= 2
    return "fe80::%x:%x:%x:%x" % (b[0] << 8 | b[1], b[2] << 8 | 0xff, 0xfe00 | b[3],
                                  b[4] << 8 | b[5])


def eui64_addr(prefix, mac):
    return prefix + eui64_ll(mac)[len("fe80:"):]


class Net:
    """Namespaces and processes of one test, cleaned up at teardown."""

    def __init__(self):
        self.tag = "ipk" + secrets.token_hex(2)
        self.nss, self.procs, self.prefixes = [], [], []
        n = secrets.randbelow(256)
        self.pfx = "fd%02x:%x:%x:6" % (n, secrets.randbelow(65536), secrets.randbelow(65536))
        self.net = 100 + secrets.randbelow(150)

    def add_ns(self, role):
        ns = self.tag + role
        sh("ip", "netns", "add", ns)
        self.nss.append(ns)
        self.run(ns, "ip", "link", "set", "lo", "up")
        return ns

    def run(self, ns, *args, check=True, timeout=60):
        return subprocess.run(["ip", "netns", "exec", ns] + list(args), check=check,
                              timeout=timeout, capture_output=True)

    def start(self, ns, *args):
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(args),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def start_ready(self, ns, *args, ready="serving on", wait=20.0):
        p = self.start(ns, *args)
        deadline = time.monotonic() + wait
        buf = b""
        os.set_blocking(p.stderr.fileno(), False)
        while time.monotonic() < deadline:
            buf += p.stderr.read() or b""
            if ready.encode() in buf:
                return p
            if p.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("%s did not start: rc=%s stderr=%r" % (args[0], p.poll(), buf))

    def ping6(self, ns, dst, count=1, timeout=20):
        return self.run(ns, "ping", "-6", "-c", str(count), "-i", "0.05", "-W", "1", dst,
                        check=False, timeout=timeout)

    def wait6(self, ns, dst, limit=10.0):
        """Ping until dst answers (ipkit runs DAD first, ~1 s); bounded."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.ping6(ns, dst, timeout=5).returncode == 0:
                return True
            time.sleep(0.1)
        return False

    def mac(self, ns, dev):
        out = self.run(ns, "ip", "-o", "link", "show", dev).stdout.decode()
        m = re.search(r"link/ether ((?:[0-9a-f]{2}:){5}[0-9a-f]{2})", out)
        assert m, out
        return m.group(1)

    def close(self):
        stop_procs(self.procs, grace=3)
        for ns in self.nss:
            sh("ip", "netns", "del", ns, check=False)
        for prefix in self.prefixes:
            shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)


@pytest.fixture
def net():
    if os.geteuid() != 0:
        pytest.skip("interop tests need root (network namespaces)")
    if not os.path.exists(prog("ipkit-echo")):
        pytest.skip("examples not built")
    n = Net()
    yield n
    n.close()


def peer_setup(n, ns, dev, v4, v6):
    """Linux's end: IPv6 on, the address without DAD, plain frames (no offloads: a
    packet socket or XDP sees partial checksums and GSO frames as they are)."""
    n.run(ns, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=0" % dev)
    n.run(ns, "ip", "addr", "add", v4 + "/24", "dev", dev)
    n.run(ns, "ip", "-6", "addr", "add", v6 + "/64", "dev", dev, "nodad")
    n.run(ns, "ip", "link", "set", dev, "up")
    n.run(ns, "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off",
          "gro", "off", check=False)


def udp_echo_ok(n, ns, dst, count=20):
    r = n.run(ns, "/usr/bin/python3", "-c", UDP_CLIENT, dst, str(count), check=False,
              timeout=60)
    out = r.stdout.decode()
    assert r.returncode == 0 and "ok %d" % count in out, out + r.stderr.decode()


def ipkit_ping_ok(n, ns, args, dst):
    r = n.run(ns, prog("ipkit-ping"), *args, "-c", "3", "-i", "0.05", "-W", "2", dst,
              check=False, timeout=30)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m and int(m.group(1)) == 3 and int(m.group(2)) >= 2, out


# ------------------------------------------------------------------- AF_XDP

class Xdp:
    """Peer namespace P (dev tag+'p') and host namespace H (dev tag+'h', ipkit's
    AF_XDP device, where the kernel keeps fdXX::3, fe80::3 and 10.N.0.3)."""

    def __init__(self, n):
        self.n = n
        self.p, self.h = n.add_ns("p"), n.add_ns("h")
        self.pdev, self.hdev = n.tag + "p", n.tag + "h"
        self.peer4, self.ipk4, self.host4 = ("10.%d.0.%d" % (n.net, i) for i in (1, 2, 3))
        self.peer6, self.ipk6, self.host6 = (n.pfx + "::%d" % i for i in (1, 2, 3))
        sh("ip", "link", "add", self.pdev, "netns", self.p, "type", "veth", "peer", "name",
           self.hdev, "netns", self.h)
        # the host kernel: its own addresses, its own link-local (not the EUI-64 one)
        n.run(self.h, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=0" % self.hdev)
        n.run(self.h, "ip", "link", "set", self.hdev, "addrgenmode", "none")
        n.run(self.h, "ip", "addr", "add", self.host4 + "/24", "dev", self.hdev)
        n.run(self.h, "ip", "-6", "addr", "add", "fe80::3/64", "dev", self.hdev, "nodad")
        n.run(self.h, "ip", "-6", "addr", "add", self.host6 + "/64", "dev", self.hdev, "nodad")
        n.run(self.h, "ip", "link", "set", self.hdev, "up")
        peer_setup(n, self.p, self.pdev, self.peer4, self.peer6)
        self.mac = n.mac(self.h, self.hdev)

    def args(self, mode="skb", ip6=None):
        return ["--io", "afxdp:%s,mode=%s" % (self.hdev, mode), "--ip", self.ipk4 + "/24",
                "--ip6", ip6 or (self.ipk6 + "/64")]

    def host_still_works(self):
        n = self.n
        r = n.ping6(self.p, self.host6, count=3)
        assert r.returncode == 0, "the host's own IPv6 broke: " + r.stdout.decode()
        r = n.ping6(self.p, "fe80::3%" + self.pdev, count=2)
        assert r.returncode == 0, "the host's link-local broke: " + r.stdout.decode()
        r = n.run(self.p, "ping", "-c", "2", "-W", "1", self.host4, check=False)
        assert r.returncode == 0, "the host's IPv4 broke: " + r.stdout.decode()


needs_afxdp = pytest.mark.skipif(not backend_built("afxdp"), reason="afxdp backend not built")


@needs_afxdp
@pytest.mark.parametrize("mode", ["skb", "drv"])
def test_afxdp_ping6_udp_echo_and_host_ipv6_kept(net, mode):
    x = Xdp(net)
    net.start_ready(x.h, prog("ipkit-echo"), *x.args(mode))
    assert net.wait6(x.p, x.ipk6), "ipkit never answered ping -6 over AF_XDP"
    r = net.ping6(x.p, x.ipk6, count=5)
    assert r.returncode == 0 and b" 0% packet loss" in r.stdout, r.stdout.decode()
    # the link-local (EUI-64 of the device MAC) is ipkit's: ND for it reached ipkit
    r = net.ping6(x.p, eui64_ll(x.mac) + "%" + x.pdev, count=3)
    assert r.returncode == 0, r.stdout.decode()
    udp_echo_ok(net, x.p, x.ipk6)
    # while ipkit runs, the kernel's own IPv6 and IPv4 on the same device still work
    x.host_still_works()


@needs_afxdp
def test_afxdp_nc6_client_of_linux_server_64M_each_way(net, tmp_path):
    """TCP over IPv6 through AF_XDP (skb mode): ipkit-nc as the client of a Linux
    server (socat TCP6-LISTEN running `cat`s) that sends its own 64 MiB while it
    stores ipkit's, both at once on one connection, SHA-256 of each end to end;
    the host's own IPv6 still works afterwards."""
    import hashlib
    size = 64 << 20
    x = Xdp(net)
    src, out = tmp_path / "server.bin", tmp_path / "recv.bin"
    with open(src, "wb") as f:
        for _ in range(16):
            f.write(secrets.token_bytes(4 << 20))
    p = net.start(x.p, "socat", "-t", "60", "TCP6-LISTEN:5003,reuseaddr,ipv6only=1",
                  "SYSTEM:cat %s & cat > %s; wait" % (src, out))
    for _ in range(100):
        if ":5003 " in net.run(x.p, "ss", "-6ltn").stdout.decode():
            break
        time.sleep(0.05)
    r = net.run(x.h, prog("ipkit-nc"), *x.args(), "--send-size", str(size), "--sha256",
                "--no-output", "--timeout", "20", x.peer6, "5003", check=False, timeout=240)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err[-800:]
    p.wait(timeout=60)
    s = re.search(r"^sent (\d+) sha256 ([0-9a-f]{64})$", err, re.M)
    g = re.search(r"^received (\d+) sha256 ([0-9a-f]{64})$", err, re.M)
    assert s and g, err[-500:]

    def sha(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for blk in iter(lambda: f.read(1 << 20), b""):
                h.update(blk)
        return h.hexdigest()

    assert int(s.group(1)) == size and out.stat().st_size == size
    assert s.group(2) == sha(out)
    assert int(g.group(1)) == size and g.group(2) == sha(src)
    x.host_still_works()


@needs_afxdp
def test_afxdp_ipkit_ping6_to_linux(net):
    x = Xdp(net)
    ipkit_ping_ok(net, x.h, x.args(), x.peer6)
    x.host_still_works()


@needs_afxdp
def test_afxdp_slaac_from_ra_through_xdp(net):
    """--ip6 auto: the program hands Router Advertisements to ipkit, which forms
    prefix + EUI-64 (an address the program steers by its identifier)."""
    x = Xdp(net)
    net.start_ready(x.h, prog("ipkit-echo"), *x.args(ip6="auto"))
    assert net.wait6(x.p, eui64_ll(x.mac) + "%" + x.pdev)
    script = (
        "from scapy.all import *\n"
        "import sys\n"
        "p = (Ether(dst='33:33:00:00:00:01', src='02:aa:bb:cc:dd:01') /"
        " IPv6(src='fe80::aa:1', dst='ff02::1', hlim=255) /"
        " ICMPv6ND_RA(routerlifetime=0) /"
        " ICMPv6NDOptSrcLLAddr(lladdr='02:aa:bb:cc:dd:01') /"
        " ICMPv6NDOptPrefixInfo(prefix=sys.argv[2], prefixlen=64, L=1, A=1,"
        " validlifetime=3600, preferredlifetime=1800))\n"
        "sendp(p, iface=sys.argv[1], verbose=False)\n")
    net.run(x.p, "/usr/bin/python3", "-c", script, x.pdev, net.pfx + "::", timeout=60)
    addr = eui64_addr(net.pfx, x.mac)
    assert net.wait6(x.p, addr), "ipkit's SLAAC address %s never answered" % addr
    x.host_still_works()


# ---------------------------------------------------------------- AF_PACKET

class Veth:
    """One namespace: Linux on dev tag+'l' (fdXX::1), ipkit's end tag+'k' with IPv6
    off in the kernel (ipkit alone answers on it)."""

    def __init__(self, n):
        self.n = n
        self.ns = n.add_ns("n")
        self.ldev, self.kdev = n.tag + "l", n.tag + "k"
        self.linux4, self.ipk4 = "10.%d.0.1" % n.net, "10.%d.0.2" % n.net
        self.linux6, self.ipk6 = n.pfx + "::1", n.pfx + "::2"
        n.run(self.ns, "ip", "link", "add", self.ldev, "type", "veth", "peer", "name",
              self.kdev)
        n.run(self.ns, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % self.kdev)
        n.run(self.ns, "ip", "link", "set", self.kdev, "up")
        peer_setup(n, self.ns, self.ldev, self.linux4, self.linux6)
        self.mac = n.mac(self.ns, self.kdev)


@pytest.mark.skipif(not backend_built("afpacket"), reason="afpacket backend not built")
def test_afpacket_ping6_both_ways_and_udp_echo(net):
    v = Veth(net)
    args = ["--io", "afpacket:%s,vnet=0" % v.kdev, "--ip", v.ipk4 + "/24", "--ip6",
            v.ipk6 + "/64"]
    ipkit_ping_ok(net, v.ns, args, v.linux6)
    net.start_ready(v.ns, prog("ipkit-echo"), *args)
    assert net.wait6(v.ns, v.ipk6), "ipkit never answered ping -6 over AF_PACKET"
    r = net.ping6(v.ns, eui64_ll(v.mac) + "%" + v.ldev, count=3)
    assert r.returncode == 0, r.stdout.decode()
    udp_echo_ok(net, v.ns, v.ipk6)


# ------------------------------------------------------------------ memlink

@pytest.mark.skipif(not backend_built("memlink"), reason="memlink backend not built")
def test_memlink_ping6_both_ways(net):
    """Two ipkit processes, no kernel on the path: ipkit-ping over IPv6 to an
    ipkit-echo, then the roles swapped (ND both ways each time)."""
    name = net.tag + "m"
    a6, b6 = net.pfx + "::a", net.pfx + "::b"
    try:
        for srv, cli, dst in (("a", "b", a6), ("b", "a", b6)):
            me = {"a": a6, "b": b6}
            echo = subprocess.Popen([prog("ipkit-echo"), "--io",
                                     "memlink:%s,role=%s" % (name, srv), "--ip",
                                     "10.9.0.%d/24" % (1 if srv == "a" else 2), "--ip6",
                                     me[srv] + "/64"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            net.procs.append(echo)
            time.sleep(1.5)  # its DAD (one NS, RetransTimer 1 s)
            r = subprocess.run([prog("ipkit-ping"), "--io", "memlink:%s,role=%s" % (name, cli),
                                "--ip", "10.9.0.%d/24" % (1 if cli == "a" else 2), "--ip6",
                                me[cli] + "/64", "-c", "3", "-i", "0.05", "-W", "3", dst],
                               capture_output=True, timeout=30)
            out = r.stdout.decode()
            assert r.returncode == 0, out + r.stderr.decode()
            m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
            assert m and int(m.group(2)) >= 2, out
            stop_procs([echo], grace=3)
    finally:
        for suffix in ("", ".a.sock", ".b.sock"):
            try:
                os.unlink("/dev/shm/ipkit-ml-%s%s" % (name, suffix))
            except OSError:
                pass


# --------------------------------------------------------------------- DPDK

def lcores():
    return "--lcores=0@(%s)" % ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))


@pytest.mark.skipif(not backend_built("dpdk"), reason="DPDK backend not built")
def test_dpdk_afpacket_ping6_both_ways_and_udp_echo(net):
    v = Veth(net)

    def eal():
        prefix = "%sD%02d" % (net.tag, len(net.prefixes))
        net.prefixes.append(prefix)
        return ["--no-huge", "-m", "256", "--no-pci", "--no-telemetry", lcores(),
                "--file-prefix=" + prefix, "--vdev=net_af_packet0,iface=" + v.kdev, "--"]

    args = ["--io", "dpdk:net_af_packet0", "--ip", v.ipk4 + "/24", "--ip6", v.ipk6 + "/64"]
    r = net.run(v.ns, prog("ipkit-ping"), *eal(), *args, "-c", "3", "-i", "0.05", "-W", "2",
                v.linux6, check=False, timeout=60)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()[-1500:]
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m and int(m.group(2)) >= 2, out
    net.start_ready(v.ns, prog("ipkit-echo"), *eal(), *args, wait=30.0)
    assert net.wait6(v.ns, v.ipk6, limit=20.0), "ipkit never answered ping -6 over DPDK"
    udp_echo_ok(net, v.ns, v.ipk6)


# -------------------------------------------------- the Linux twin over IPv6

TWIN = os.path.join(os.path.dirname(prog("x")), "..", "bench", "ipkit-bench-linux")


def twin_run(n, ns, args):
    """A twin client for 1 s with --json: its summary line (asserted clean)."""
    r = n.run(ns, TWIN, *args, "--json", "-t", "1", check=False, timeout=30)
    out = r.stdout.decode()
    lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    s = [d for d in lines if d["type"] == "summary"]
    assert r.returncode == 0 and s, out + r.stderr.decode()
    assert s[-1]["errors"] == 0 and s[-1]["requests"] > 0, out
    return s[-1]


@pytest.mark.skipif(not os.path.exists(TWIN), reason="ipkit-bench-linux not built")
def test_bench_twin_over_ipv6_loopback_and_link_local(net):
    """-6 server on ::, clients to ::1 (TCP with depth, UDP), and across a veth to the
    server's link-local address with %IFNAME (the scope)."""
    v = Veth(net)
    net.run(v.ns, "sysctl", "-qw", "net.ipv6.conf.lo.disable_ipv6=0")
    net.run(v.ns, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=0" % v.kdev)
    net.start_ready(v.ns, TWIN, "-6", "-p", "10000")
    net.start_ready(v.ns, TWIN, "-6", "-p", "10001", "-n", "17")
    twin_run(net, v.ns, ["-s", "::1", "-p", "10000", "-c", "4", "-d", "2", "-l", "100"])
    twin_run(net, v.ns, ["-s", "::1", "--ip", "::1", "-p", "10001", "-n", "17", "-c", "2",
                         "-l", "1452"])
    # the link-local address of the veth's other end, reached through the scope
    deadline = time.monotonic() + 10
    ll = None
    while time.monotonic() < deadline and not ll:
        out = net.run(v.ns, "ip", "-6", "addr", "show", "dev", v.kdev, "scope", "link").stdout
        m = re.search(rb"inet6 (fe80::[0-9a-f:]+)/64 scope link\s*$", out, re.M)
        ll = m.group(1).decode() if m and b"tentative" not in out else None
        time.sleep(0.1)
    assert ll, "no link-local address on %s" % v.kdev
    twin_run(net, v.ns, ["-s", ll + "%" + v.ldev, "-p", "10000", "-c", "2", "-l", "64"])

