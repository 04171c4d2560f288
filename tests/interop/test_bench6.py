"""ipkit-bench over IPv6 (issue 19) against its Linux twin: functional runs, never
speed thresholds. Over TAP (a private namespace, test_bench's BenchNet with IPv6 on
Linux's end) every pairing of ipkit-bench and ipkit-bench-linux, TCP ping-pong with
depth, TCP burst and UDP, each run finishing with 0 errors, > 0 requests and (ping-
pong) every echoed byte checked by the client; a corrupting server must make an
IPv6 client exit 1. Over AF_XDP on a veth between two namespaces (the host keeps
its own IPv6 on the device) the same pairings for TCP and UDP ping-pong.

Names start with ipkB6 / ipkX6; namespaces and processes are removed at teardown,
also on failure.
"""
import os
import re
import secrets
import subprocess
import time

import pytest

from conftest import BUILD, backend_built, sh
from test_bench import BENCH, TWIN, BenchNet, built


class Bench6Net(BenchNet):
    """BenchNet plus IPv6: Linux fdXX::1/64 (no DAD wait), ipkit fdXX::2/64."""

    def __init__(self, prefix="ipkB6"):
        super().__init__(prefix)
        pfx = "fd%02x:%x:%x:6" % (secrets.randbelow(256), secrets.randbelow(65536),
                                  secrets.randbelow(65536))
        self.linux6, self.ipk6 = pfx + "::1", pfx + "::2"
        try:
            self.x("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=0" % self.dev)
            self.x("ip", "-6", "addr", "add", self.linux6 + "/64", "dev", self.dev, "nodad")
        except Exception:
            self.close()
            raise

    def ib6(self, *args):
        """ipkit-bench with --ip6 (beside its IPv4 --ip: a dual-stack node)."""
        return self.ipk("--ip6", self.ipk6 + "/64", *args)


@pytest.fixture
def net6():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not built() or not backend_built("tap"):
        pytest.skip("ipkit-bench or the tap backend not built in %s" % BUILD)
    n = Bench6Net()
    yield n
    n.close()



def assert_clean(rc, s, out):
    assert rc == 0, out
    assert s["errors"] == 0 and s["mismatches"] == 0, out
    assert s["requests"] > 0, out


PAIRS6 = {
    "ipkit-client-twin-server": (lambda n, *a: [TWIN, "-6", "--ip", n.linux6] + list(a),
                                 lambda n, *a: n.ib6("-s", n.linux6, *a)),
    "twin-client-ipkit-server": (lambda n, *a: n.ib6("-6", *a),
                                 lambda n, *a: [TWIN, "-s", n.ipk6] + list(a)),
}
WORKLOADS6 = {
    "tcp-pingpong": (["-p", "10000"], ["-p", "10000", "-c", "4", "-d", "2", "-l", "100"]),
    "tcp-burst": (["-p", "10000", "-g", "2"], ["-p", "10000", "-c", "2", "-g", "2", "-l", "1400"]),
    "udp": (["-p", "10001", "-n", "17"], ["-p", "10001", "-n", "17", "-c", "2", "-d", "2",
                                          "-l", "1452"]),
}


@pytest.mark.parametrize("pair", sorted(PAIRS6))
@pytest.mark.parametrize("work", sorted(WORKLOADS6))
def test_bench6_tap_pairing_clean(net6, pair, work):
    """Each pairing over IPv6 on TAP: requests done, no error, bytes checked."""
    srv, cli = PAIRS6[pair]
    sargs, cargs = WORKLOADS6[work]
    net6.server(srv(net6, *sargs))
    rc, s, out = net6.client(cli(net6, *cargs))
    assert_clean(rc, s, out)


@pytest.mark.parametrize("proto", ["6", "17"])
def test_bench6_corrupted_echo_fails_ipkit_client(net6, proto):
    """The ipkit client checks the echoed bytes over IPv6: a flipped byte is counted."""
    port = "10000" if proto == "6" else "10001"
    net6.server([TWIN, "-6", "--ip", net6.linux6, "-p", port, "-n", proto, "--corrupt-echo"])
    rc, s, out = net6.client(net6.ib6("-s", net6.linux6, "-p", port, "-n", proto, "-l", "64"))
    assert rc == 1 and s["mismatches"] > 0, out


def test_bench6_ipkit_server_echo_checked_by_twin(net6):
    """A corrupting ipkit server over IPv6 makes the twin client exit 1: the echo
    really travels through ipkit's IPv6 path (not a loopback short cut)."""
    net6.server(net6.ib6("-6", "-p", "10000", "--corrupt-echo"))
    rc, s, out = net6.client([TWIN, "-s", net6.ipk6, "-p", "10000", "-l", "64"])
    assert rc == 1 and s["mismatches"] > 0, out


@pytest.mark.parametrize("args,msg", [
    (["--io", "tap:x", "--ip", "10.0.0.2/24", "-6", "-p", "1"], "--ip6"),
    (["--io", "tap:x", "--ip", "10.0.0.2/24", "--ip6", "fd00::2/64", "-s", "10.0.0.1"], "cannot go with"),
    (["--io", "tap:x", "--ip", "10.0.0.2/24", "--ip6", "fd00::2/129"], "--ip6"),
    (["--io", "tap:x", "--ip", "10.0.0.2/24", "--ip6", "fd00::2/64", "-s", "fd00::1", "-n", "17", "-l", "1453"],
     "1452"),
])
def test_bench6_bad_ipv6_options_exit_2(args, msg):
    if not os.path.exists(BENCH):
        pytest.skip("ipkit-bench not built")
    r = subprocess.run([BENCH] + args, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and msg in r.stderr, r.stderr


# ------------------------------------------------------------------ AF_XDP / veth

class XdpNet:
    """Two namespaces joined by a veth: ipkit on AF_XDP at the host end (whose kernel
    keeps fe80::3 and its own global address), the twin in the peer namespace."""

    def __init__(self):
        tag = secrets.token_hex(3)
        self.h, self.p = "ipkX6%sh" % tag, "ipkX6%sp" % tag
        self.hdev, self.pdev = "ipkX6%sa" % tag, "ipkX6%sb" % tag
        pfx = "fd%02x:%x:%x:7" % (secrets.randbelow(256), secrets.randbelow(65536),
                                  secrets.randbelow(65536))
        self.host6, self.ipk6, self.peer6 = pfx + "::3", pfx + "::2", pfx + "::1"
        self.procs = []
        sh("ip", "netns", "add", self.h)
        try:
            sh("ip", "netns", "add", self.p)
            sh("ip", "link", "add", self.pdev, "netns", self.p, "type", "veth", "peer", "name",
               self.hdev, "netns", self.h)
            self.run(self.h, "ip", "link", "set", self.hdev, "addrgenmode", "none")
            for ns, dev in ((self.h, self.hdev), (self.p, self.pdev)):
                self.run(ns, "sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=0" % dev)
                self.run(ns, "ip", "link", "set", "lo", "up")
                self.run(ns, "ip", "link", "set", dev, "up")
            # plain frames from the peer: XDP sees partial checksums and GSO frames
            # as they are (test_ipv6_io's peer_setup does the same)
            subprocess.run(["ip", "netns", "exec", self.p, "ethtool", "-K", self.pdev, "tx",
                            "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"],
                           capture_output=True, timeout=30)
            self.run(self.h, "ip", "-6", "addr", "add", "fe80::3/64", "dev", self.hdev, "nodad")
            self.run(self.h, "ip", "-6", "addr", "add", self.host6 + "/64", "dev", self.hdev,
                     "nodad")
            self.run(self.p, "ip", "-6", "addr", "add", self.peer6 + "/64", "dev", self.pdev,
                     "nodad")
        except Exception:
            self.close()
            raise

    def run(self, ns, *args, timeout=30):
        return sh("ip", "netns", "exec", ns, *args, timeout=timeout)

    def ipk(self, *args):
        return [BENCH, "--io", "afxdp:%s,mode=skb" % self.hdev, "--ip", "10.77.0.2/24",
                "--ip6", self.ipk6 + "/64"] + list(args)

    def server(self, ns, argv):
        return BenchNet.server(self._in(ns), argv)

    def client(self, ns, argv):
        return BenchNet.client(self._in(ns), argv)

    def _in(self, ns):
        """A BenchNet-shaped view running in namespace ns and recording our procs."""
        view = object.__new__(BenchNet)
        view.ns, view.procs = ns, self.procs
        return view

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        for ns in (self.h, self.p):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


@pytest.fixture
def xnet():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not built() or not backend_built("afxdp"):
        pytest.skip("ipkit-bench or the afxdp backend not built")
    n = XdpNet()
    yield n
    n.close()


@pytest.mark.parametrize("proto", ["6", "17"])
def test_bench6_afxdp_ipkit_client_twin_server(xnet, proto):
    port = "10000" if proto == "6" else "10001"
    xnet.server(xnet.p, [TWIN, "-6", "--ip", xnet.peer6, "-p", port, "-n", proto])
    rc, s, out = xnet.client(xnet.h, xnet.ipk("-s", xnet.peer6, "-p", port, "-n", proto,
                                              "-c", "2", "-d", "2", "-l", "200"))
    assert_clean(rc, s, out)


@pytest.mark.parametrize("proto", ["6", "17"])
def test_bench6_afxdp_twin_client_ipkit_server_host_ipv6_kept(xnet, proto):
    port = "10000" if proto == "6" else "10001"
    xnet.server(xnet.h, xnet.ipk("-6", "-p", port, "-n", proto))
    rc, s, out = xnet.client(xnet.p, [TWIN, "-s", xnet.ipk6, "-p", port, "-n", proto,
                                      "-c", "2", "-d", "2", "-l", "200"])
    assert_clean(rc, s, out)
    # the XDP program passed the host's own IPv6 to the kernel throughout
    r = subprocess.run(["ip", "netns", "exec", xnet.p, "ping", "-6", "-c", "1", "-W", "2",
                        xnet.host6], capture_output=True, timeout=20)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ ipkit-echo --workers --ip6

def echo_workers_server(n, model):
    """ipkit-echo --workers 2 with --ip6 on the TAP link; waits (bounded) until its
    IPv6 address answers (DAD passed on the workers)."""
    p = subprocess.Popen(["ip", "netns", "exec", n.ns, os.path.join(BUILD, "examples", "ipkit-echo"),
                          "--io", "tap:" + n.dev, "--ip", n.ipk_ip + "/24", "--ip6",
                          n.ipk6 + "/64", "--workers", "2", "--model", model],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    n.procs.append(p)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and p.poll() is None:
        r = subprocess.run(["ip", "netns", "exec", n.ns, "ping", "-6", "-c", "1", "-W", "1",
                            n.ipk6], capture_output=True, timeout=10)
        if r.returncode == 0:
            return p
        time.sleep(0.1)
    raise AssertionError("ipkit-echo --workers --ip6 never answered: rc=%s" % p.poll())


def stop_and_report(p):
    """SIGTERM the echo server (bounded), return its per-worker udp_echoed counts."""
    p.terminate()
    _, err = p.communicate(timeout=15)
    err = err.decode()
    counts = [int(m) for m in re.findall(r"udp_echoed (\d+)", err)]
    return counts, err


@pytest.mark.parametrize("model", ["unified", "merge"])
def test_echo_workers_udp6_echo_checked_on_every_worker(net6, model):
    """UDP over IPv6 through the workers' application interface (udp6 and
    ipk_app_udp_send_addr): the twin's 16 flows (16 source ports, spread over both
    workers by the RSS hash) get every byte back; each worker echoed some."""
    if not os.path.exists(os.path.join(BUILD, "examples", "ipkit-echo")):
        pytest.skip("examples not built")
    p = echo_workers_server(net6, model)
    rc, s, out = net6.client([TWIN, "-s", net6.ipk6, "-p", "7", "-n", "17", "-c", "16",
                              "-l", "300"])
    counts, err = stop_and_report(p)
    assert_clean(rc, s, out + err)
    assert len(counts) == 2 and all(c > 0 for c in counts), err


@pytest.mark.parametrize("model", ["unified", "merge"])
def test_echo_workers_tcp6_echo_checked_on_every_worker(net6, model):
    """TCP over IPv6 through the workers' application interface with Linux as the
    peer (issue 19; the tuple accepted6 hands over is checked by
    tests/runtime/test_workers_tcp6.c): the twin's 16 connections over IPv6 (spread
    over both workers by the tuple hash) get every byte back, and each worker
    accepted some."""
    if not os.path.exists(os.path.join(BUILD, "examples", "ipkit-echo")):
        pytest.skip("examples not built")
    p = echo_workers_server(net6, model)
    rc, s, out = net6.client([TWIN, "-s", net6.ipk6, "-p", "7", "-c", "16", "-l", "300"])
    p.terminate()
    _, err = p.communicate(timeout=15)
    err = err.decode()
    accepted = [int(m) for m in re.findall(r"worker \d+: .*?accepted (\d+)", err)]
    assert_clean(rc, s, out + err)
    assert len(accepted) == 2 and all(a > 0 for a in accepted), err


@pytest.mark.parametrize("model", ["unified", "merge"])
def test_bench6_workers_server_twin_client_clean(net6, model):
    """ipkit-bench -6 -T 2 (the workers runtime) serves TCP ping-pong over IPv6 to the
    Linux twin's 8 connections: every echo checked, no error, a clean exit."""
    p = net6.server(net6.ib6("-6", "-p", "10000", "-T", "2", "--model", model))
    deadline = time.monotonic() + 15  # its workers' address passes DAD (~1 s)
    while time.monotonic() < deadline:
        r = subprocess.run(["ip", "netns", "exec", net6.ns, "ping", "-6", "-c", "1", "-W", "1",
                            net6.ipk6], capture_output=True, timeout=10)
        if r.returncode == 0:
            break
        time.sleep(0.1)
    rc, s, out = net6.client([TWIN, "-s", net6.ipk6, "-p", "10000", "-c", "8", "-l", "100"])
    assert_clean(rc, s, out)
    p.terminate()
    _, err = p.communicate(timeout=15)
    err = err.decode(errors="replace")
    assert p.returncode == 0, err[-800:]


@pytest.mark.parametrize("model", ["unified", "merge", "split"])
def test_bench6_workers_client_twin_server_clean(net6, model):
    """ipkit-bench -T 2 as a CLIENT over IPv6 (the workers runtime) against the Linux
    twin: the workers' opens are made at start, before the --ip6 address has passed
    DAD; the runtime holds them until it has (runtime.h ipk_app_connect_addr), so
    all 8 connections open (connect_fails 0) and every echo is checked."""
    net6.server([TWIN, "-6", "--ip", net6.linux6, "-p", "10000"])
    rc, s, out = net6.client(net6.ib6("-s", net6.linux6, "-p", "10000", "-T", "2", "--model",
                                      model, "-c", "8", "-d", "2", "-l", "100"))
    assert_clean(rc, s, out)
    assert s["connect_fails"] == 0, out


def test_bench6_workers_client_corrupted_echo_fails(net6):
    """The workers' IPv6 client checks the echoed bytes: a corrupting Linux server
    makes it exit 1 (the data really went over the held-then-opened connections)."""
    net6.server([TWIN, "-6", "--ip", net6.linux6, "-p", "10000", "--corrupt-echo"])
    rc, s, out = net6.client(net6.ib6("-s", net6.linux6, "-p", "10000", "-T", "2", "--model",
                                      "merge", "-c", "4", "-l", "64"))
    assert rc == 1 and s["mismatches"] > 0, out


# ------------------------------------------------ ipkit-echo --workers --connect [IPv6]

ECHO6_SERVER = r"""
import socket, sys, threading
srv = socket.socket(socket.AF_INET6); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("%s", 7007)); srv.listen(512)
print("listening", flush=True)
def serve(c):
    with c:
        while True:
            d = c.recv(65536)
            if not d:
                return
            c.sendall(d)
while True:
    c, a = srv.accept()
    print("peer", a[0], flush=True)  # one thread prints: lines never interleave
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


@pytest.mark.parametrize("model", ["unified", "merge", "split"])
def test_echo_workers_connect_ipv6_to_linux(net6, model):
    """ipkit-echo --workers 2 --connect [ADDR]:PORT: both workers open 20 connections
    each over IPv6 to a Linux echo server (opened at start, held by the runtime until
    the --ip6 address passed DAD), send a message, check the echo byte for byte; every
    one must succeed, and Linux saw them all from ipkit's IPv6 address."""
    echo = os.path.join(BUILD, "examples", "ipkit-echo")
    if not os.path.exists(echo):
        pytest.skip("examples not built")
    srv = subprocess.Popen(["ip", "netns", "exec", net6.ns, "/usr/bin/python3", "-c",
                            ECHO6_SERVER % net6.linux6], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    net6.procs.append(srv)
    assert srv.stdout.readline().strip() == b"listening"
    p = subprocess.Popen(["ip", "netns", "exec", net6.ns, echo, "--io", "tap:" + net6.dev,
                          "--ip", net6.ipk_ip + "/24", "--ip6", net6.ipk6 + "/64",
                          "--workers", "2", "--model", model, "--port", "0",
                          "--connect", "[%s]:7007" % net6.linux6, "--conns", "20",
                          "--msg-size", "500", "--timeout", "30"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    net6.procs.append(p)
    _, err = p.communicate(timeout=60)
    err = err.decode(errors="replace")
    assert p.returncode == 0, err
    assert "active opens ok 40 of 40" in err, err
    srv.terminate()
    out, _ = srv.communicate(timeout=15)
    peers = re.findall(r"peer (\S+)", out.decode())
    assert len(peers) == 40 and set(peers) == {net6.ipk6}, out


@pytest.mark.parametrize("args,msg", [
    (["--connect", "[fd00::1]:7"], "needs --ip6"),          # IPv6 server, no --ip6
    (["--ip6", "fd00::2/64", "--connect", "[fd00::1]7"], ""),  # no colon after ]
    (["--ip6", "fd00::2/64", "--connect", "[::]:7"], ""),      # the unspecified address
    (["--ip6", "fd00::2/64", "--connect", "[fd00::1]:0"], ""),  # port 0
])
def test_echo_workers_connect_ipv6_bad_usage_exit_2(args, msg):
    echo = os.path.join(BUILD, "examples", "ipkit-echo")
    if not os.path.exists(echo):
        pytest.skip("examples not built")
    r = subprocess.run([echo, "--io", "tap:x", "--ip", "10.0.0.2/24", "--workers", "2"] + args,
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
