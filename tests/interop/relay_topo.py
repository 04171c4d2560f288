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

RelayTopo(a=..., b=...) puts either stack on either side ("linux" or "ipkit"; the
default is Linux on A, ipkit on B as above): an ipkit side runs on AF_PACKET with the
side's address, a Linux side has the address on its veth. transfer() moves a file from
B to A (data b2a, so every pairing's data meets the same keyed fates for a seed) and
returns both ends' counters; PAIRINGS names the four sender -> receiver pairings.

A Linux sender's congestion control is pinned per socket (TCP_CONGESTION, which root may
set to any available algorithm): CUBIC by default, like ipkit's, because this host's
default is BBR and a new namespace inherits it, so an unpinned Linux sender compared
BBR against ipkit's CUBIC. $IPKIT_LINUX_CC overrides the default; the extra pairing
linux_bbr-linux (EXTRA_PAIRINGS) keeps BBR's figure visible. The sender reads the
algorithm back from its connected socket and transfer() asserts it is the one asked for.
The host's sysctls are never changed.

ipkit runs the same algorithm as the pinned Linux sender (CC_PAIRS: cubic <-> cubic,
reno <-> newreno), given to ipkit-nc with --cc on both ipkit ends; ipkit-nc reads it
back from its connection ("cc ESTABLISHED END" with --stats) and transfer() asserts it
too. Before that ipkit-nc ran the core's default, NewReno, against Linux's CUBIC.

Two knobs for measurements (issue 16; empty by default, so no test changes what it
measures): $IPKIT_RELAY_IO_OPTS is appended to every ipkit end's afpacket spec (e.g.
"rx=v3,tov=1"), $IPKIT_RELAY_NC_ARGS (shell words) to every ipkit-nc's arguments (e.g.
"--sndbuf 2M"); relay_figures.py sets them with --io-opts and --nc-args.
"""
import hashlib
import os
import re
import secrets
import shlex
import signal
import subprocess
import time

from conftest import BUILD, prog, sh

RELAY = os.path.join(BUILD, "tests", "relay", "ipk-relay")


def parse_counts(line):
    """{'a2b.seen': N, ...} from an `ipk-relay final ...` line."""
    return {k: int(v) for k, v in re.findall(r"(\w+\.\w+)=(\d+)", line)}


def default_linux_cc():
    """A Linux sender's congestion control: $IPKIT_LINUX_CC, else cubic."""
    return os.environ.get("IPKIT_LINUX_CC") or "cubic"


# Linux's name -> ipkit-nc --cc's for the same algorithm: what ipkit runs in a RelayTopo
# whose Linux sender runs the first (RFC 9438 CUBIC; RFC 5681/6582 Reno with NewReno's
# recovery, which Linux's "reno" implements alongside SACK).
CC_PAIRS = {"cubic": "cubic", "reno": "newreno"}


def ipkit_cc_for(linux_cc):
    """ipkit's counterpart of a Linux algorithm; AssertionError when it has none."""
    assert linux_cc in CC_PAIRS, ("ipkit has no counterpart of Linux %r (%s)" %
                                  (linux_cc, ", ".join(CC_PAIRS)))
    return CC_PAIRS[linux_cc]


class RelayTopo:
    def __init__(self, a="linux", b="ipkit", linux_cc=None):
        assert a in ("linux", "ipkit") and b in ("linux", "ipkit"), (a, b)
        self.kind = {"a": a, "b": b}
        # a Linux sender's TCP_CONGESTION (see the module's docstring)
        self.linux_cc = linux_cc or default_linux_cc()
        assert re.fullmatch(r"[a-z0-9_]{1,15}", self.linux_cc), self.linux_cc
        prefix = os.environ.get("IPKIT_RELAY_PREFIX", "ipkR")
        assert len(prefix) == 4 and prefix.isalnum(), "IPKIT_RELAY_PREFIX: 4 letters or digits"
        self.tag = prefix + secrets.token_hex(2)
        self.ns_l, self.ns_r, self.ns_i = self.tag + "L", self.tag + "R", self.tag + "I"
        net = 100 + secrets.randbelow(150)
        self.linux_ip = "10.%d.0.1" % net
        self.ipk_ip = "10.%d.0.2" % net
        self.dev_l, self.dev_a = self.tag + "l", self.tag + "a"
        self.dev_b, self.dev_k = self.tag + "b", self.tag + "k"
        # measurement knobs (module docstring): afpacket options, ipkit-nc arguments
        self.io_opts = os.environ.get("IPKIT_RELAY_IO_OPTS", "")
        assert re.fullmatch(r"[a-z0-9_=,]*", self.io_opts), self.io_opts
        self.nc_extra = shlex.split(os.environ.get("IPKIT_RELAY_NC_ARGS", ""))
        self.procs = []
        self.relay = None
        self.helper_ip = None
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
        if self.kind["a"] == "linux":
            self.ns(self.ns_l, "ip", "addr", "add", self.linux_ip + "/24", "dev", self.dev_l)
        if self.kind["b"] == "linux":
            self.ns(self.ns_i, "ip", "addr", "add", self.ipk_ip + "/24", "dev", self.dev_k)

    # -- sides -----------------------------------------------------------------
    def side(self, s):
        """(namespace, device, address) of side "a" or "b"."""
        return ((self.ns_l, self.dev_l, self.linux_ip) if s == "a" else
                (self.ns_i, self.dev_k, self.ipk_ip))

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

    def start_relay(self, *impair, seed=1, log=None, pcap=None):
        """ipk-relay between the two veths in namespace R, with these options (keyed
        by segment identity unless they say --key index); log, pcap: its --log and
        --pcap files."""
        assert self.relay is None
        extra = (["--log", str(log)] if log else []) + (["--pcap", str(pcap)] if pcap else [])
        self.relay = self.start(self.ns_r, RELAY, "--a", self.dev_a, "--b", self.dev_b,
                                "--seed", str(seed), *extra, *impair)
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

    def ipk_args(self, s="b"):
        """--io and --ip for an ipkit program on side s (default B, ipkit's usual side)."""
        _, dev, ip = self.side(s)
        spec = "afpacket:%s,vnet=0" % dev + ("," + self.io_opts if self.io_opts else "")
        return ["--io", spec, "--ip", ip + "/24"]

    @property
    def ipkit_cc(self):
        """ipkit's algorithm, the Linux sender's counterpart; None when it has none
        (BBR), which only nc_args, an ipkit-nc end of this topology, refuses."""
        return CC_PAIRS.get(self.linux_cc)

    def nc_args(self, s="b"):
        """ipk_args plus ipkit-nc's --cc: the topology's ipkit algorithm."""
        return self.ipk_args(s) + ["--cc", ipkit_cc_for(self.linux_cc)] + self.nc_extra

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


# ------------------------------------------------------------------ the four pairings

# name -> (sender, receiver); the sender sits on side B, the receiver on side A. A Linux
# sender runs the RelayTopo's linux_cc (CUBIC unless $IPKIT_LINUX_CC says otherwise).
PAIRINGS = {
    "ipkit-linux": ("ipkit", "linux"),
    "linux-ipkit": ("linux", "ipkit"),
    "ipkit-ipkit": ("ipkit", "ipkit"),
    "linux-linux": ("linux", "linux"),
}

# Extra pairings, for the figures only: Linux -> Linux with the sender pinned to BBR,
# this host's (and every namespace's) default, which all "Linux as sender" figures
# before CUBIC was pinned measured. name -> (sender, receiver, the sender's CC).
EXTRA_PAIRINGS = {
    "linux_bbr-linux": ("linux", "linux", "bbr"),
}

# Linux's TCP counters a sender reports (TcpExt in /proc/net/netstat, Tcp in snmp)
LINUX_KEYS = ("RetransSegs", "TCPTimeouts", "TCPLossProbes", "TCPDSACKRecv",
              "TCPDSACKRecvSegs", "TCPSpuriousRTOs", "TCPLossProbeRecovery", "TCPDSACKUndo",
              "TCPDSACKOldSent", "TCPOFOQueue")

# The impairments the pairings are measured through, both directions (ACKs too):
# case -> (relay options, the relay counter that shows it on the data direction and the
# probability each data frame meets it; None: correlated, only "some" is checked).
# burst: Gilbert-Elliott, bad state entered with 0.003 per frame and left with 0.25,
# so about 1.2 % of frames are lost in runs of 4 on average.
IMPAIRMENTS = {
    "loss1": (["--loss", "0.01"], "drop", 0.01),
    "loss5": (["--loss", "0.05"], "drop", 0.05),
    "burst": (["--burst", "0.003,0.25"], "bdrop", None),
    "reorder5": (["--reorder", "0.05", "--reorder-gap", "3"], "reord", 0.05),
    "dup1": (["--dup", "0.01"], "dup", 0.01),
}


def pairing_kinds(name):
    """(sender, receiver) of a pairing of PAIRINGS or EXTRA_PAIRINGS."""
    return PAIRINGS[name] if name in PAIRINGS else EXTRA_PAIRINGS[name][:2]


def pairing_topo(name, linux_cc=None):
    """A RelayTopo for pairing `name` (sender on B, receiver on A); a Linux sender runs
    linux_cc (default: default_linux_cc()), an extra pairing's its own."""
    sender, receiver = pairing_kinds(name)
    if name in EXTRA_PAIRINGS:
        linux_cc = EXTRA_PAIRINGS[name][2]
    return RelayTopo(a=receiver, b=sender, linux_cc=linux_cc)


def linux_counters(t, ns):
    """Linux's TCP MIB counters in namespace ns (per namespace: a fresh one starts at 0)."""
    out = {}
    for f in ("/proc/net/snmp", "/proc/net/netstat"):
        rows = [ln.split() for ln in t.ns(ns, "cat", f).stdout.decode().splitlines()]
        for names, vals in zip(rows[0::2], rows[1::2]):
            if names[0] in ("Tcp:", "TcpExt:"):
                out.update({k: int(v) for k, v in zip(names[1:], vals[1:])})
    return {k: out.get(k, 0) for k in LINUX_KEYS}


def ipkit_stats(stderr):
    """ipkit-nc --stats's counters."""
    m = re.search(r"^tcp_stats (.*)$", stderr.decode(errors="replace"), re.M)
    assert m, stderr.decode(errors="replace")[-500:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}


def nc_digest(stderr, what):
    """(bytes, sha256) of ipkit-nc --sha256's `sent` or `received` line."""
    m = re.search(r"^%s (\d+) sha256 ([0-9a-f]{64})$" % what,
                  stderr.decode(errors="replace"), re.M)
    assert m, "no %s digest: %r" % (what, stderr.decode(errors="replace")[-500:])
    return int(m.group(1)), m.group(2)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def random_file(directory, size):
    """A random file of `size` bytes in directory, made once per size."""
    path = os.path.join(str(directory), "relay-%d.bin" % size)
    if not os.path.exists(path) or os.path.getsize(path) != size:
        with open(path + ".tmp", "wb") as f:
            left = size
            while left:
                n = min(left, 4 << 20)
                f.write(os.urandom(n))
                left -= n
        os.replace(path + ".tmp", path)
    return path


def _wait_ready(t, port, wait=15.0):
    """Until the receiver on A accepts: a Linux listener shows in ss; an ipkit one
    answers ping from B (bounded; the relay may eat a few pings)."""
    ns_a, _, ip_a = t.side("a")
    ns_b, dev_b, _ = t.side("b")
    deadline = time.monotonic() + wait
    if t.kind["a"] == "linux":
        while time.monotonic() < deadline:
            if (":%d " % port) in t.ns(ns_a, "ss", "-ltn").stdout.decode():
                return
            time.sleep(0.05)
        raise AssertionError("Linux listener on %d never came up" % port)
    if t.kind["b"] == "ipkit" and not t.helper_ip:
        # B's kernel has no address when ipkit owns B: lend it one to ping from
        t.helper_ip = ip_a.rsplit(".", 1)[0] + ".3"
        t.ns(ns_b, "ip", "addr", "add", t.helper_ip + "/24", "dev", dev_b)
    while time.monotonic() < deadline:
        if t.ns(ns_b, "ping", "-c", "1", "-W", "1", ip_a, check=False,
                timeout=5).returncode == 0:
            return
    raise AssertionError("ipkit at %s never answered ping through the relay" % ip_a)


# A Linux receiver: one process (ended by PID at teardown; a shell pipeline would leave
# its children behind), accepts one connection, hashes what arrives, prints
# "received BYTES sha256 HEX" like ipkit-nc. Bounded: 60 s without progress ends it.
LINUX_RECEIVER = r"""
import hashlib, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1)
s.settimeout(60)
c, _ = s.accept()
c.settimeout(60)
h, n, buf = hashlib.sha256(), 0, bytearray(1 << 20)
while True:
    k = c.recv_into(buf)
    if k == 0:
        break
    h.update(memoryview(buf)[:k])
    n += k
print("received %d sha256 %s" % (n, h.hexdigest()), file=sys.stderr, flush=True)
"""


# A Linux sender: pins its congestion control on the socket (TCP_CONGESTION, IPPROTO_TCP
# 13; root may choose any available algorithm, the host's sysctls stay as they are),
# connects, writes the file in 1 MiB writes and prints "cc CONNECTED LAST": the
# algorithm read back from the socket after connect and after the last write. Bounded:
# a refused connect (the listener not up yet) is retried 20 times 0.1 s apart, connect
# and every 1 MiB write time out after 60 s.
LINUX_SENDER = r"""
import socket, sys, time
ip, port, path, cc = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
for attempt in range(20):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.settimeout(60)
    try:
        s.connect((ip, port))
        break
    except ConnectionRefusedError:
        s.close()
        if attempt == 19:
            raise
        time.sleep(0.1)
used = lambda: s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0]
first = used()
buf = bytearray(1 << 20)
with open(path, "rb") as f:
    while True:
        k = f.readinto(buf)
        if not k:
            break
        s.sendall(memoryview(buf)[:k])
last = used()
s.close()
print("cc %s %s" % (first.decode(), last.decode()), file=sys.stderr, flush=True)
"""


def linux_sender_cc(stderr):
    """The congestion control LINUX_SENDER's socket ran (after connect, at the end), or
    ipkit-nc's connection with --stats (once established, at the end): same line."""
    m = re.search(r"^cc (\S+) (\S+)$", stderr.decode(errors="replace"), re.M)
    assert m, "sender printed no cc line: %r" % stderr.decode(errors="replace")[-500:]
    return m.group(1), m.group(2)


def _start_receiver(t, port):
    ns_a, _, _ = t.side("a")
    if t.kind["a"] == "linux":
        return t.start(ns_a, "/usr/bin/python3", "-c", LINUX_RECEIVER, str(port))
    return t.start(ns_a, prog("ipkit-nc"), *t.nc_args("a"), "-l", str(port), "--sha256",
                   "--stats", "--no-output", "--timeout", "60")


def _run_sender(t, port, size, src, timeout):
    """Returns (completed process, sent bytes, sent sha256, wall seconds)."""
    ns_b, _, _ = t.side("b")
    _, _, ip_a = t.side("a")
    t0 = time.monotonic()
    if t.kind["b"] == "linux":
        # 1 MiB writes. Linux still sends a short segment now and then (a write that
        # waits for send buffer pushes its partial tail), after which its segments no
        # longer line up with another run's: the keyed relay's fates follow segments,
        # so a Linux sender meets the same fates only up to its first short segment.
        r = t.ns(ns_b, "/usr/bin/python3", "-c", LINUX_SENDER, ip_a, str(port), src,
                 t.linux_cc, check=False, timeout=timeout)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-800:]
        # the pin took: the socket ran the asked-for algorithm from connect to the end
        ran = linux_sender_cc(r.stderr)
        assert ran == (t.linux_cc, t.linux_cc), ("asked", t.linux_cc, "ran", ran)
        return r, size, sha256_of(src), took
    r = t.ns(ns_b, prog("ipkit-nc"), *t.nc_args("b"), "--send-size", str(size), "--sha256",
             "--stats", "--no-output", "--timeout", "60", ip_a, str(port), check=False,
             timeout=timeout)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-800:]
    ran = linux_sender_cc(r.stderr)
    assert ran == (t.ipkit_cc, t.ipkit_cc), ("ipkit asked", t.ipkit_cc, "ran", ran)
    sent, sha = nc_digest(r.stderr, "sent")
    return r, sent, sha, took


def transfer(t, size, tmpdir, port=5001, timeout=120):
    """Send `size` bytes from B to A through the relay, SHA-256 checked end to end.
    Returns {"seconds", "mbit", "sender": counters, "receiver": counters, "linux_cc",
    "sender_cc"}: an ipkit end's tcp_stats, a Linux end's MIB counters (deltas over the
    transfer); linux_cc is the congestion control a Linux sender's socket ran (read back
    from it and checked against t.linux_cc), None for an ipkit sender; sender_cc is the
    algorithm the sender ran, either stack (an ipkit sender's checked against
    t.ipkit_cc)."""
    ns_a, ns_b = t.side("a")[0], t.side("b")[0]
    src = random_file(tmpdir, size) if t.kind["b"] == "linux" else None
    before = {s: linux_counters(t, ns) for s, ns in (("a", ns_a), ("b", ns_b))
              if t.kind[s] == "linux"}
    rx = _start_receiver(t, port)
    _wait_ready(t, port)
    r, sent, sent_sha, took = _run_sender(t, port, size, src, timeout)
    _, err = rx.communicate(timeout=timeout)
    assert rx.returncode == 0, err.decode(errors="replace")[-800:]
    got, got_sha = nc_digest(err, "received")
    assert sent == size and got == size and got_sha == sent_sha, (sent, got, sent_sha, got_sha)
    res = {"seconds": took, "mbit": size * 8 / took / 1e6,
           "linux_cc": linux_sender_cc(r.stderr)[1] if t.kind["b"] == "linux" else None,
           "sender_cc": linux_sender_cc(r.stderr)[1]}
    for s, proc_err in (("b", r.stderr), ("a", err)):
        role = "sender" if s == "b" else "receiver"
        if t.kind[s] == "ipkit":
            res[role] = ipkit_stats(proc_err)
        else:
            after = linux_counters(t, t.side(s)[0])
            res[role] = {k: after[k] - before[s][k] for k in LINUX_KEYS}
    return res


def sender_row(kind, st):
    """The sender's figures in one vocabulary: retransmissions, RTO episodes (Linux:
    TCPTimeouts, every timeout), TLPs, D-SACKed spurious retransmissions (Linux:
    TCPDSACKRecvSegs)."""
    if kind == "ipkit":
        return {"retrans": st["retransmits"], "rto": st["rto_episodes"],
                "tlp": st["tlp_probes"], "spurious": st["spurious_rtx"]}
    return {"retrans": st["RetransSegs"], "rto": st["TCPTimeouts"],
            "tlp": st["TCPLossProbes"], "spurious": st["TCPDSACKRecvSegs"]}


def read_log(path):
    """An ipk-relay --log as {(dir, kind, rel, len|nsack, occurrence, id): fate} for the
    TCP frames (data "D" and pure ACKs "A")."""
    fates = {}
    with open(path) as f:
        for ln in f:
            w = ln.split()
            if len(w) == 7 and w[1] in ("D", "A"):
                fates[tuple(w[:6])] = w[6]
    return fates
