"""Interop fixtures: Linux is the peer, ipkit runs on a backend in a private namespace.

Every test gets a fresh network namespace named ipk<4 hex><role> holding both ends of
its link, so nothing touches the host's interfaces or routes:

  tap / tun   a persistent TAP/TUN device: Linux owns the kernel side (10.N.0.1/24),
              ipkit attaches to the device file (10.N.0.2/24)
  afpacket    a veth pair: Linux on one end (address), ipkit on the other (no address)
  afxdp       the same veth pair, ipkit through AF_XDP (copy mode)

The `link` fixture yields a Link with helpers to run commands and ipkit programs in the
namespace. Processes started through it are ended by PID and the namespace deleted at
teardown, also when the test fails. Every wait is bounded.

Other engineers' tests can use `make_link(kind)` (fixture) for a link of one kind, and
`BUILD`/`prog()` to find the binaries (IPKIT_BUILD, default build/).
"""
import os
import secrets
import shutil
import sys
import subprocess
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("IPKIT_BUILD", os.path.join(ROOT, "build")))


def prog(name):
    """Path of a built example program (ipkit-httpd, ...)."""
    return os.path.join(BUILD, "examples", name)


def sh(*args, check=True, timeout=30, **kw):
    return subprocess.run(list(args), check=check, timeout=timeout,
                          capture_output=True, text=True, **kw)


def stop_procs(procs, grace=5):
    """End the processes a test started (by PID: terminate, then kill after `grace`
    seconds) and reap them. Safe on processes that already exited."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=grace)


def backend_built(kind):
    """Whether the io layer was built with this backend (compile flag in the build)."""
    flag = "IPK_IO_HAVE_" + kind.upper()
    try:
        with open(os.path.join(BUILD, "compile_commands.json")) as f:
            return flag in f.read()
    except OSError:
        return False


class Link:
    """One namespace with a Linux end and an ipkit end."""

    def __init__(self, kind, offload=True, mtu=1500, prefix="ipk"):
        self.kind = kind
        self.tag = prefix + secrets.token_hex(2)
        self.ns = self.tag + "n"
        net = 100 + secrets.randbelow(150)
        self.linux_ip = "10.%d.0.1" % net
        self.ipk_ip = "10.%d.0.2" % net
        self.linux_dev = self.tag + "l"
        self.ipk_dev = self.tag + "k"
        self.offload = offload
        self.mtu = mtu
        self.procs = []
        self.files = []
        sh("ip", "netns", "add", self.ns)
        try:
            self._setup()
        except Exception:
            self.close()
            raise

    # -- set-up -------------------------------------------------------------
    def _ns(self, *args, check=True, timeout=30):
        return sh("ip", "netns", "exec", self.ns, *args, check=check, timeout=timeout)

    def _setup(self):
        self._ns("ip", "link", "set", "lo", "up")
        self._ns("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        self._ns("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        if self.kind in ("tap", "tun"):
            # ipkit attaches to the device file; Linux owns the kernel side
            self.linux_dev = self.ipk_dev
            self._ns("ip", "tuntap", "add", "dev", self.ipk_dev, "mode", self.kind, "vnet_hdr")
        else:
            self._ns("ip", "link", "add", self.linux_dev, "type", "veth", "peer", "name",
                     self.ipk_dev)
            self._ns("ip", "link", "set", self.ipk_dev, "mtu", str(self.mtu), "up")
        self._ns("ip", "link", "set", self.linux_dev, "mtu", str(self.mtu), "up")
        self._ns("ip", "addr", "add", self.linux_ip + "/24", "dev", self.linux_dev)
        # AF_XDP gets raw frames: a veth peer with transmit checksum offload hands
        # over TCP segments whose checksum was never filled in (CHECKSUM_PARTIAL) and
        # GSO super-frames, which ipkit rightly drops. So the Linux side of an afxdp
        # link always sends complete frames (as on any NIC used with AF_XDP).
        if not self.offload or self.kind == "afxdp":
            self._ns("ethtool", "-K", self.linux_dev, "tx", "off", "rx", "off", "tso", "off",
                     "gso", "off", "gro", "off", check=False)

    @property
    def spec(self):
        """The --io spec for ipkit's end."""
        if self.kind == "tap":
            return "tap:%s,offload=%d" % (self.ipk_dev, 1 if self.offload else 0)
        if self.kind == "tun":
            return "tun:%s" % self.ipk_dev
        if self.kind == "afpacket":
            return "afpacket:%s,vnet=%d" % (self.ipk_dev, 1 if self.offload else 0)
        if self.kind == "afxdp":
            return "afxdp:%s,mode=skb" % self.ipk_dev
        raise ValueError(self.kind)

    # -- running things ------------------------------------------------------
    def run(self, *args, check=True, timeout=60, input=None):
        """Run a command in the namespace and wait (bounded)."""
        return subprocess.run(["ip", "netns", "exec", self.ns] + list(args), check=check,
                              timeout=timeout, capture_output=True, input=input)

    def start(self, *args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
              stderr=subprocess.PIPE):
        """Start a command in the namespace; ended by PID at teardown."""
        p = subprocess.Popen(["ip", "netns", "exec", self.ns] + list(args), stdin=stdin,
                             stdout=stdout, stderr=stderr)
        self.procs.append(p)
        return p

    def ipk_args(self, ip=None):
        return ["--io", self.spec, "--ip", (ip or self.ipk_ip) + "/24"]

    def start_ipk(self, name, *args, ready="serving on", wait=10.0):
        """Start an ipkit server and wait (bounded) for its ready line on stderr."""
        p = self.start(prog(name), *self.ipk_args(), *args)
        deadline = time.monotonic() + wait
        buf = b""
        os.set_blocking(p.stderr.fileno(), False)
        while time.monotonic() < deadline:
            chunk = p.stderr.read() or b""
            buf += chunk
            if ready.encode() in buf:
                return p
            if p.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("%s did not start: rc=%s stderr=%r" % (name, p.poll(), buf))

    def wait_reachable(self, timeout=5.0):
        """Ping ipkit from Linux until it answers (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.run("ping", "-c", "1", "-W", "1", self.ipk_ip, check=False, timeout=5)
            if r.returncode == 0:
                return
        raise AssertionError("ipkit at %s never answered ping" % self.ipk_ip)

    def close(self):
        stop_procs(self.procs, grace=3)
        self.procs = []
        del_netns(self.ns)


def del_netns(ns, tries=10):
    """Delete a namespace this test created; retried (bounded), because a process
    the kernel is still tearing down can hold it for a moment. Says so on stderr
    when the namespace outlives every try, instead of leaking it silently."""
    for _ in range(tries):
        sh("ip", "netns", "del", ns, check=False)
        if not os.path.exists("/run/netns/" + ns):
            return True
        time.sleep(0.2)
    sys.stderr.write("conftest: namespace %s could not be deleted\n" % ns)
    return False


def available_kinds():
    kinds = []
    for k, be in (("tap", "tap"), ("tun", "tap"), ("afpacket", "afpacket"),
                  ("afxdp", "afxdp")):
        if backend_built(be):
            kinds.append(k)
    return kinds


ETH_KINDS = [k for k in available_kinds() if k != "tun"]


@pytest.fixture
def make_link(request):
    """Factory: make_link(kind, offload=True) -> Link, removed at teardown."""
    links = []

    def make(kind, offload=True, mtu=1500):
        if os.geteuid() != 0:
            pytest.skip("interop tests need root (network namespaces)")
        if not os.path.exists(prog("ipkit-httpd")):
            pytest.skip("examples not built in %s" % BUILD)
        if kind not in available_kinds():
            pytest.skip("backend %s not built" % kind)
        ln = Link(kind, offload=offload, mtu=mtu)
        links.append(ln)
        return ln

    yield make
    for ln in links:
        ln.close()


@pytest.fixture(params=available_kinds() or ["none"])
def link(request, make_link):
    """A link for each backend built here (tap, tun, afpacket, afxdp)."""
    return make_link(request.param)


@pytest.fixture(params=[k for k in available_kinds() if k != "tun"] or ["none"])
def eth_link(request, make_link):
    """Ethernet links only (ARP)."""
    return make_link(request.param)


@pytest.fixture(scope="session")
def payload_dir(tmp_path_factory):
    """Random files for transfers: 32 MiB and 256 MiB."""
    d = tmp_path_factory.mktemp("ipk_payload")
    for name, size in (("32M", 32 << 20), ("256M", 256 << 20)):
        with open(d / name, "wb") as f:
            left = size
            while left:
                n = min(left, 4 << 20)
                f.write(os.urandom(n))
                left -= n
    yield d
    shutil.rmtree(d, ignore_errors=True)
