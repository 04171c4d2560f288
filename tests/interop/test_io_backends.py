"""Backend-level smoke tests: Linux pings an address answered by io_probe (ARP + ICMP
echo done on raw frames, no core) through each backend, so frames cross the backend in
both directions. Bad configurations check the exact one-line messages.

Everything runs inside a network namespace the test creates (prefix ipk + 4 random hex)
and deletes in a finalizer; every wait is bounded. Needs root; io_probe comes from the
meson build dir (IPKIT_BUILD, default build/, as in conftest.py).
"""
import os
import secrets
import shutil
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("IPKIT_BUILD", os.path.join(ROOT, "build")))
PROBE = os.path.join(BUILD, "tests", "io", "io_probe")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(not os.path.exists(PROBE), reason="io_probe not built: " + PROBE),
]


def sh(*args, check=True, timeout=10):
    return subprocess.run(list(args), check=check, timeout=timeout,
                          capture_output=True, text=True)


@pytest.fixture
def ns(request):
    name = "ipk" + secrets.token_hex(2) + "io"
    sh("ip", "netns", "add", name)
    request.addfinalizer(lambda: sh("ip", "netns", "del", name, check=False))
    sh("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
    return name


def nsx(ns, *args, **kw):
    return sh("ip", "netns", "exec", ns, *args, **kw)


def start_probe(request, ns, spec, ip, seconds=10, count=3):
    p = subprocess.Popen(["ip", "netns", "exec", ns, PROBE, spec, ip, str(seconds), str(count)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop():
        if p.poll() is None:
            p.kill()
        p.wait(timeout=5)
    request.addfinalizer(stop)
    return p


def wait_link(ns, dev, limit=5.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if nsx(ns, "ip", "link", "show", dev, check=False).returncode == 0:
            return True
        time.sleep(0.05)
    return False


def ping_through(request, ns, spec, dev_wait, peer_ip):
    p = start_probe(request, ns, spec, peer_ip)
    if dev_wait:
        assert wait_link(ns, dev_wait), "probe did not create " + dev_wait
    return p


def finish(p):
    out, err = p.communicate(timeout=15)
    assert p.returncode == 0, out + err
    assert "replied 3" in out
    assert "leak" not in out
    return out


@pytest.mark.parametrize("opts", ["", ",vnet=0", ",offload=0"])
def test_tap_ping_both_directions(request, ns, opts):
    dev = "ipkt0"
    p = ping_through(request, ns, "tap:" + dev + ",up=1" + opts, dev, "10.77.0.2")
    nsx(ns, "ip", "addr", "add", "10.77.0.1/24", "dev", dev)
    r = nsx(ns, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.77.0.2", check=False, timeout=15)
    assert r.returncode == 0, r.stdout
    out = finish(p)
    assert "link=0" in out


def test_tun_ping_both_directions(request, ns):
    dev = "ipku0"
    p = ping_through(request, ns, "tun:" + dev + ",up=1", dev, "10.79.0.2")
    nsx(ns, "ip", "addr", "add", "10.79.0.1/24", "dev", dev)
    r = nsx(ns, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.79.0.2", check=False, timeout=15)
    assert r.returncode == 0, r.stdout
    assert "link=1" in finish(p)


@pytest.fixture
def veth(ns):
    nsx(ns, "ip", "link", "add", "ipka0", "type", "veth", "peer", "name", "ipka1")
    nsx(ns, "ip", "link", "set", "ipka0", "up")
    nsx(ns, "ip", "link", "set", "ipka1", "up")
    nsx(ns, "ip", "addr", "add", "10.78.0.1/24", "dev", "ipka0")
    return ns


@pytest.mark.parametrize("opts", ["", ",vnet=0", ",fanout=7,qdisc_bypass=1,promisc=1", ",rx=v3",
                                  ",rx=v3,vnet=0"])
def test_afpacket_ping_both_directions(request, veth, opts):
    p = ping_through(request, veth, "afpacket:ipka1" + opts, None, "10.78.0.2")
    time.sleep(0.3)  # the sockets bind before Linux sends its first ARP request
    r = nsx(veth, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.78.0.2", check=False, timeout=15)
    assert r.returncode == 0, r.stdout
    finish(p)


def test_afpacket_pcap_records_exchange(request, veth, tmp_path):
    pcap = str(tmp_path / "afp.pcap")
    p = ping_through(request, veth, "afpacket:ipka1,pcap=" + pcap, None, "10.78.0.2")
    time.sleep(0.3)
    r = nsx(veth, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.78.0.2", check=False, timeout=15)
    assert r.returncode == 0
    finish(p)
    if not shutil.which("tshark"):
        pytest.skip("tshark missing: pcap written but not read back")
    out = sh("tshark", "-r", pcap, "-Y", "icmp", "-T", "fields", "-e", "icmp.type").stdout.split()
    assert out.count("8") == 3 and out.count("0") == 3


def probe_error(ns, spec, user=None):
    cmd = ["ip", "netns", "exec", ns]
    if user:
        cmd += ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    r = subprocess.run(cmd + [PROBE, spec, "10.78.0.2", "1", "1"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2, r.stdout + r.stderr
    return r.stderr.strip()


def test_afpacket_missing_interface_named(ns):
    assert probe_error(ns, "afpacket:veth9") == "afpacket: no interface veth9"


@pytest.mark.skipif(not shutil.which("setpriv"), reason="setpriv missing")
def test_afpacket_without_cap_net_raw(veth):
    assert probe_error(veth, "afpacket:ipka1", user=True) == "afpacket: ipka1: needs CAP_NET_RAW"


@pytest.mark.skipif(not shutil.which("setpriv"), reason="setpriv missing")
def test_tap_without_privilege(ns):
    msg = probe_error(ns, "tap:ipkx0", user=True)
    # /dev/net/tun is 0666 on some systems: then TUNSETIFF is what refuses.
    assert msg in ("tap: cannot open /dev/net/tun: Permission denied (needs CAP_NET_ADMIN)",
                   "tap: ipkx0: needs CAP_NET_ADMIN")


def test_afpacket_unsupported_option_and_mtu(veth):
    assert probe_error(veth, "afpacket:ipka1,mode=zc") == "afpacket: unknown option 'mode'"
    assert probe_error(veth, "afpacket:ipka1,rx=v4") == "afpacket: option rx=v4 must be v2 or v3"
    nsx(veth, "ip", "link", "set", "ipka1", "mtu", "9000")
    assert probe_error(veth, "afpacket:ipka1") == (
        "afpacket: ipka1: mtu 9000 does not fit a pool buffer (1920 bytes after headroom)")


def test_unknown_kind_and_bad_spec(ns):
    assert probe_error(ns, "nosuch:x").startswith("io: unknown backend kind 'nosuch' (available: tap tun afpacket")
    assert probe_error(ns, "tap:x,vnet=2") == "tap: option vnet=2 must be 0 or 1"
    assert probe_error(ns, "tap:x,vnet") == "io: option 'vnet' is not key=value"


NC = os.path.join(BUILD, "examples", "ipkit-nc")


@pytest.mark.skipif(not os.path.exists(NC) or not shutil.which("socat"),
                    reason="ipkit-nc or socat missing")
def test_afpacket_linux_tso_superframes_received(request, veth, tmp_path):
    """A veth peer hands AF_PACKET whole 64 KiB TSO frames, larger than a ring slot;
    the backend must deliver them (before the first fix nothing arrived and the
    transfer stalled)."""
    data = tmp_path / "in.bin"
    data.write_bytes(os.urandom(4 << 20))
    import hashlib
    want = hashlib.sha256(data.read_bytes()).hexdigest()
    p = subprocess.Popen(["ip", "netns", "exec", veth, "timeout", "30", NC, "--io",
                          "afpacket:ipka1", "--ip", "10.78.0.2/24", "--no-output", "--sha256",
                          "-l", "5001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    request.addfinalizer(lambda: (p.poll() is None and p.kill(), p.wait(timeout=5)))
    time.sleep(0.5)
    nsx(veth, "socat", "-u", "FILE:" + str(data), "TCP:10.78.0.2:5001", timeout=25)
    out, err = p.communicate(timeout=30)
    assert ("received %d sha256 %s" % (4 << 20, want)) in out + err
