"""Three namespaces with ipk-relay in the middle, for tests/interop/test_impair_relay.py.

  ns <tag>L  Linux peer           <tag>l  10.N.0.1/24
                                     |  veth
  ns <tag>R  ipk-relay --a <tag>a --b <tag>b  (no addresses)
                                     |  veth
  ns <tag>I  ipkit on afpacket:<tag>k         10.N.0.2/24

tag is $IPKIT_RELAY_PREFIX (default "ipkR", 4 characters, so that device names stay
within Linux's 15) + 4 hex digits; a session running the relay next to others sets its own. ipkit uses AF_PACKET on its veth end rather than the
default TAP backend: a TAP device's kernel side lives in the namespace of whoever opens
it, so with TAP ipkit would have to share namespace R with the relay, and the relay
would read ipkit's frames off the TAP's kernel side instead of a wire. With AF_PACKET
each party has a namespace and a plain Ethernet link of its own.

All four veth ends run with TSO/GSO/GRO and checksum offloads off, so what the relay
reads with AF_PACKET is what a wire would carry (complete frames, checksums filled in).
a2b in the relay's counters is Linux -> ipkit, b2a is ipkit -> Linux.
"""
import os
import re
import secrets
import signal
import subprocess
import time

from conftest import BUILD, sh

RELAY = os.path.join(BUILD, "tests", "relay", "ipk-relay")


def parse_counts(line):
    """{'a2b.seen': N, ...} from an `ipk-relay final ...` line."""
    return {k: int(v) for k, v in re.findall(r"(\w+\.\w+)=(\d+)", line)}


class RelayTopo:
    def __init__(self):
        prefix = os.environ.get("IPKIT_RELAY_PREFIX", "ipkR")
        assert len(prefix) == 4 and prefix.isalnum(), "IPKIT_RELAY_PREFIX: 4 letters or digits"
        self.tag = prefix + secrets.token_hex(2)
        self.ns_l, self.ns_r, self.ns_i = self.tag + "L", self.tag + "R", self.tag + "I"
        net = 100 + secrets.randbelow(150)
        self.linux_ip = "10.%d.0.1" % net
        self.ipk_ip = "10.%d.0.2" % net
        self.dev_l, self.dev_a = self.tag + "l", self.tag + "a"
        self.dev_b, self.dev_k = self.tag + "b", self.tag + "k"
        self.procs = []
        self.relay = None
        self.made = []
        try:
            self._setup()
        except Exception:
            self.close()
            raise

    def _setup(self):
        for ns in (self.ns_l, self.ns_r, self.ns_i):
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            self.ns(ns, "ip", "link", "set", "lo", "up")
            # no IPv6: no router solicitations or DAD through the relay
            self.ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            self.ns(ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        self.ns(self.ns_r, "ip", "link", "add", self.dev_a, "type", "veth", "peer", "name",
                self.dev_l, "netns", self.ns_l)
        self.ns(self.ns_r, "ip", "link", "add", self.dev_b, "type", "veth", "peer", "name",
                self.dev_k, "netns", self.ns_i)
        for ns, dev in ((self.ns_l, self.dev_l), (self.ns_r, self.dev_a),
                        (self.ns_r, self.dev_b), (self.ns_i, self.dev_k)):
            self.ns(ns, "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso",
                    "off", "gro", "off", check=False)
            self.ns(ns, "ip", "link", "set", dev, "up")
        self.ns(self.ns_l, "ip", "addr", "add", self.linux_ip + "/24", "dev", self.dev_l)

    # -- running things ------------------------------------------------------
    @staticmethod
    def ns(ns, *args, check=True, timeout=30, input=None):
        """Run a command in a namespace and wait (bounded)."""
        return subprocess.run(["ip", "netns", "exec", ns] + list(args), check=check,
                              timeout=timeout, capture_output=True, input=input)

    def start(self, ns, *args):
        """Start a command in a namespace; ended by PID at teardown."""
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(args),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    @staticmethod
    def wait_line(p, text, wait=10.0):
        """Wait (bounded) for `text` on p's stderr; returns what was read."""
        deadline = time.monotonic() + wait
        buf = b""
        os.set_blocking(p.stderr.fileno(), False)
        while time.monotonic() < deadline:
            buf += p.stderr.read() or b""
            if text.encode() in buf:
                return buf
            if p.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("no %r: rc=%s stderr=%r" % (text, p.poll(), buf[-500:]))

    def start_relay(self, *impair, seed=1):
        """ipk-relay between the two veths in namespace R, with these options."""
        assert self.relay is None
        self.relay = self.start(self.ns_r, RELAY, "--a", self.dev_a, "--b", self.dev_b,
                                "--seed", str(seed), *impair)
        self.wait_line(self.relay, "relaying")
        return self.relay

    def stop_relay(self):
        """SIGTERM the relay; returns its counters."""
        p, self.relay = self.relay, None
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=10)
        assert p.returncode == 0, err.decode(errors="replace")
        finals = [ln for ln in out.decode().splitlines() if ln.startswith("ipk-relay final")]
        assert finals, out
        return parse_counts(finals[-1])

    def ipk_args(self):
        return ["--io", "afpacket:%s,vnet=0" % self.dev_k, "--ip", self.ipk_ip + "/24"]

    def close(self):
        # SIGTERM everything we started, then one 3-second grace period for all of them
        deadline = time.monotonic() + 3
        live = [p for p in self.procs if p.poll() is None]
        for p in live:
            p.terminate()
        for p in live:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=3)
        self.procs = []
        for ns in self.made:
            sh("ip", "netns", "del", ns, check=False)
        self.made = []
