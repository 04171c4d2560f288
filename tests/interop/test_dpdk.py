"""ipkit on DPDK ports (io/dpdk), no hugepages, vdevs only.

  net_tap         ipkit in a namespace; Linux pings it, curls ipkit-httpd, and moves
                  32 MiB each way with ipkit-nc (TSO and checksum offloads on)
  net_memif       two ipkit processes (ipkit-echo server, ipkit-nc client): 256 MiB
                  each way, SHA-256 verified
  net_vhost /     two ipkit processes over vhost-user (a unix socket, no /dev/vhost-net):
  net_virtio_user ipkit-echo on net_vhost, ipkit-nc on net_virtio_user, 256 MiB each
                  way, SHA-256 verified, offload lines of both checked
  net_af_xdp      ipkit on one end of a veth (kernel AF_XDP, copy mode), Linux on the
                  other: ping, curl of ipkit-httpd, 32 MiB each way
  net_af_packet   ipkit on one end of a veth, Linux on the other: ping, 32 MiB each way
  steering        ipkit-echo --workers 2 on net_tap (software steering; no vdev here
                  applies Toeplitz RSS across queues): 240 connections by hash, active
                  opens from both workers
  probe           the offload line ipkit prints for each vdev agrees with what
                  dpdk-testpmd reports for the same PMD

Every DPDK process gets EAL args "--no-huge -m 256 --no-pci --file-prefix=ipkD<hex>..."
before "--" (the bench-iip convention); namespaces are ipkD<hex>n, devices ipkD<hex>*,
sockets in a pytest temp dir. Processes are ended by PID, namespaces and EAL runtime
dirs removed at teardown, also on failure. Every wait is bounded.
"""
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import time

import pytest

from conftest import backend_built, prog, sh, stop_procs

pytestmark = pytest.mark.skipif(not backend_built("dpdk"),
                                reason="DPDK backend not built (no libdpdk found by pkg-config)")

FEATURES = {  # ipkit's name -> (testpmd's name, rx or tx)
    "rx-ip4-csum": ("IPV4_CKSUM", "rx"), "rx-tcp-csum": ("TCP_CKSUM", "rx"),
    "rx-udp-csum": ("UDP_CKSUM", "rx"), "lro": ("TCP_LRO", "rx"),
    "tx-ip4-csum": ("IPV4_CKSUM", "tx"), "tx-tcp-csum": ("TCP_CKSUM", "tx"),
    "tx-udp-csum": ("UDP_CKSUM", "tx"), "tso": ("TCP_TSO", "tx"),
    "multi-seg": ("MULTI_SEGS", "tx"),
}


def lcores():
    """Lcore 0 on every CPU we may use: EAL does not pin us to one busy core."""
    return "--lcores=0@(%s)" % ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def nc_digests(err):
    err = err.decode(errors="replace") if isinstance(err, bytes) else err
    s = re.search(r"^sent (\d+) sha256 (\w+)$", err, re.M)
    g = re.search(r"^received (\d+) sha256 (\w+)$", err, re.M)
    assert s and g, err[-800:]
    return int(s.group(1)), s.group(2), int(g.group(1)), g.group(2)


def offload_line(text):
    text = text.decode(errors="replace") if isinstance(text, bytes) else text
    m = re.search(r"^dpdk:\S+ \(port \d+, (\S+)\): offloads(.*?);", text, re.M)
    assert m, "no offload line in: %r" % text[-800:]
    return m.group(1), dict(kv.split("=") for kv in m.group(2).split())


class Dpdk:
    """A namespace plus helpers to run DPDK processes in it and clean up after them."""

    def __init__(self, tmp_path):
        self.tag = "ipkD" + secrets.token_hex(2)
        self.ns = self.tag + "n"
        self.dir = tmp_path
        self.procs, self.prefixes = [], []
        self.net = 100 + secrets.randbelow(150)
        sh("ip", "netns", "add", self.ns)
        self.ns_run("ip", "link", "set", "lo", "up")

    def ns_run(self, *args, check=True, timeout=60, input=None):
        return subprocess.run(["ip", "netns", "exec", self.ns] + list(args), check=check,
                              timeout=timeout, capture_output=True, input=input)

    def eal(self, vdev):
        prefix = "%s%02d" % (self.tag, len(self.prefixes))
        self.prefixes.append(prefix)
        return ["--no-huge", "-m", "256", "--no-pci", "--no-telemetry", lcores(),
                "--file-prefix=" + prefix, "--vdev=" + vdev, "--"]

    def start(self, args, ns=True):
        cmd = (["ip", "netns", "exec", self.ns] if ns else []) + list(args)
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def wait_line(self, p, text, wait=20.0):
        """Read p's stderr (bounded) until text shows up; returns what was read."""
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
        raise AssertionError("no %r: rc=%s stderr=%r" % (text, p.poll(), buf[-800:]))

    def wait_dev(self, dev, wait=15.0, gone=False):
        """Until dev exists (or, with gone=True, no longer exists)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            there = self.ns_run("ip", "link", "show", dev, check=False).returncode == 0
            if there != gone:
                return
            time.sleep(0.05)
        raise AssertionError("device %s never %s" % (dev, "went" if gone else "appeared"))

    def close(self):
        stop_procs(self.procs)
        sh("ip", "netns", "del", self.ns, check=False)
        for prefix in self.prefixes:
            shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)


@pytest.fixture
def dpdk(tmp_path):
    d = Dpdk(tmp_path)
    yield d
    d.close()


def tap_link(d, prog_name, *app_args):
    """ipkit on net_tap in d's namespace; Linux owns the kernel side of the TAP."""
    dev = d.tag + "t"
    linux_ip, ipk_ip = "10.%d.0.1" % d.net, "10.%d.0.2" % d.net
    p = d.start([prog(prog_name)] + d.eal("net_tap0,iface=" + dev) +
                ["--io", "dpdk:net_tap0", "--ip", ipk_ip + "/24"] + list(app_args))
    d.wait_dev(dev)
    d.ns_run("ip", "addr", "add", linux_ip + "/24", "dev", dev)
    d.ns_run("ip", "link", "set", dev, "up")
    return p, linux_ip, ipk_ip


def ping_ok(d, ip, count=3, wait=10.0):
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        r = d.ns_run("ping", "-c", str(count), "-i", "0.2", "-W", "1", ip, check=False)
        if r.returncode == 0:
            return r
    raise AssertionError("no ping answer from %s" % ip)


def test_dpdk_tap_answers_ping_and_curl(dpdk):
    p, _, ipk_ip = tap_link(dpdk, "ipkit-httpd")
    err = dpdk.wait_line(p, "serving on")
    drv, feats = offload_line(err)
    assert drv == "net_tap"
    # net_tap offers checksums, TSO and multi-seg: all on, LRO not offered
    for f in ("rx-ip4-csum", "rx-tcp-csum", "tx-tcp-csum", "tso", "multi-seg"):
        assert feats[f] == "on", feats
    r = ping_ok(dpdk, ipk_ip)
    assert b" 0% packet loss" in r.stdout
    one = dpdk.ns_run("curl", "-sS", "--max-time", "10", "http://%s/" % ipk_ip).stdout
    assert one.startswith(b"ipkit says hello"), one[:200]
    urls = ["http://%s/" % ipk_ip] * 20  # one keep-alive connection, 20 requests
    r = dpdk.ns_run("curl", "-sS", "--max-time", "10", *urls)
    assert r.returncode == 0, r.stderr
    assert r.stdout == one * 20


def _socat_listen(d, port, out):
    p = d.start(["socat", "-u", "TCP-LISTEN:%d,reuseaddr" % port, "OPEN:%s,creat,trunc" % out])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (":%d " % port) in d.ns_run("ss", "-ltn").stdout.decode():
            return p
        time.sleep(0.05)
    raise AssertionError("socat never listened on %d" % port)


def _ipkit_to_linux(d, spec_extra, eal_vdev, dev_setup, size, linux_ip, ipk_ip):
    """ipkit-nc sends `size` bytes to a Linux socat; both digests must agree."""
    out = d.dir / "to_linux.bin"
    lst = _socat_listen(d, 5001, out)
    nc = d.start([prog("ipkit-nc")] + d.eal(eal_vdev) +
                 ["--io", "dpdk:0",
                  "--ip", ipk_ip + "/24", "--send-size", str(size), "--sha256", "--no-output",
                  linux_ip, "5001"])
    dev_setup()
    _, err = nc.communicate(timeout=90)
    assert nc.returncode == 0, err.decode(errors="replace")[-800:]
    lst.wait(timeout=30)
    sent, sent_sha, _, _ = nc_digests(err)
    assert sent == size and out.stat().st_size == size
    assert sha256_file(out) == sent_sha
    return err


def _linux_to_ipkit(d, eal_vdev, dev_setup, size, ipk_ip):
    """Linux socat sends `size` bytes to ipkit-nc -l; the digests must agree."""
    data = d.dir / "from_linux.bin"
    with open(data, "wb") as f:
        f.write(os.urandom(size))
    nc = d.start([prog("ipkit-nc")] + d.eal(eal_vdev) +
                 ["--io", "dpdk:0",
                  "--ip", ipk_ip + "/24", "-l", "5002", "--sha256", "--no-output"])
    dev_setup()
    ping_ok(d, ipk_ip, count=1)
    r = d.ns_run("socat", "-u", "FILE:%s" % data,
                 "TCP:%s:5002,retry=50,interval=0.1" % ipk_ip, check=False, timeout=90)
    assert r.returncode == 0, r.stderr
    _, err = nc.communicate(timeout=60)
    assert nc.returncode == 0, err.decode(errors="replace")[-800:]
    _, _, got, got_sha = nc_digests(err)
    assert got == size and got_sha == sha256_file(data)


def test_dpdk_tap_transfer_32M_each_way_sha256(dpdk):
    dev = dpdk.tag + "t"
    linux_ip, ipk_ip = "10.%d.0.1" % dpdk.net, "10.%d.0.2" % dpdk.net

    def setup():
        dpdk.wait_dev(dev)
        dpdk.ns_run("ip", "addr", "replace", linux_ip + "/24", "dev", dev)
        dpdk.ns_run("ip", "link", "set", dev, "up")

    vdev = "net_tap0,iface=" + dev
    err = _ipkit_to_linux(dpdk, "", vdev, setup, 32 << 20, linux_ip, ipk_ip)
    assert offload_line(err)[1]["tso"] == "on"
    _linux_to_ipkit(dpdk, vdev, setup, 32 << 20, ipk_ip)


def memif_pair_transfer(d, mib, on_serving=None, timeout=150):
    """ipkit-echo on a net_memif server port, ipkit-nc on the client port sending `mib`
    MiB and checking the echo's SHA-256; on_serving(d) runs once the server is up."""
    sock = str(d.dir / "memif.sock")
    echo = d.start([prog("ipkit-echo")] + d.eal("net_memif0,role=server,socket=" + sock) +
                   ["--io", "dpdk:net_memif0", "--ip", "10.9.0.1/24"], ns=False)
    d.wait_line(echo, "serving on")
    if on_serving:
        on_serving(d)
    nc = d.start([prog("ipkit-nc")] + d.eal("net_memif0,role=client,socket=" + sock) +
                 ["--io", "dpdk:net_memif0", "--ip", "10.9.0.2/24", "--send-size", "%dM" % mib,
                  "--no-output", "--sha256", "10.9.0.1", "7"], ns=False)
    _, err = nc.communicate(timeout=timeout)
    assert nc.returncode == 0, err.decode(errors="replace")[-800:]
    sent, sent_sha, got, got_sha = nc_digests(err)
    assert sent == mib << 20 and (sent, sent_sha) == (got, got_sha)


def test_dpdk_memif_pair_256M_each_way_sha256(dpdk):
    memif_pair_transfer(dpdk, 256)


def test_dpdk_vhost_virtio_user_pair_256M_each_way_sha256(dpdk):
    """vhost-user between two ipkit processes, offloads on (the default). Fails without
    (a) taking RX_L4_CKSUM_NONE as good (virtio_user leaves the TCP checksum partial and
    says so in the virtio header; net_vhost reports NONE), (b) leaving the pool out of
    rte_extmem_register on both ends, (c) copying on virtio_user's transmit (vhost sees
    only EAL memory, shared by fd: a memfd under --no-huge)."""
    sock = str(dpdk.dir / "vhost.sock")
    echo = dpdk.start([prog("ipkit-echo")] +
                      dpdk.eal("net_vhost0,iface=%s,queues=1" % sock) +
                      ["--io", "dpdk:net_vhost0", "--ip", "10.9.0.1/24"], ns=False)
    err_echo = dpdk.wait_line(echo, "serving on")
    nc = dpdk.start([prog("ipkit-nc")] +
                    dpdk.eal("net_virtio_user0,path=%s,queues=1" % sock) +
                    ["--io", "dpdk:net_virtio_user0", "--ip", "10.9.0.2/24", "--send-size",
                     "256M", "--no-output", "--sha256", "10.9.0.1", "7"], ns=False)
    _, err = nc.communicate(timeout=150)
    assert nc.returncode == 0, err.decode(errors="replace")[-800:]
    sent, sent_sha, got, got_sha = nc_digests(err)
    assert sent == 256 << 20 and (sent, sent_sha) == (got, got_sha)
    # both PMDs offer L4 checksums both ways and multi-segment tx, neither TSO nor the
    # IPv4 header checksum (22.11 without the host TSO features negotiated)
    for text, drv in ((err_echo, "net_vhost"), (err, "net_virtio_user")):
        got_drv, feats = offload_line(text)
        assert got_drv == drv
        for f in ("rx-tcp-csum", "rx-udp-csum", "tx-tcp-csum", "tx-udp-csum", "multi-seg"):
            assert feats[f] == "on", (drv, feats)
        assert feats["tso"] == "n/a" and feats["tx-ip4-csum"] == "n/a", (drv, feats)
    assert re.search(rb"net_virtio_user.*tx=copy$", err, re.M), err[-800:]
    assert re.search(rb"net_vhost.*tx=zero-copy$", err_echo, re.M), err_echo[-800:]


def test_dpdk_afpacket_veth_ping_and_32M_each_way(dpdk):
    ipk, linux_ip, ipk_ip = veth_pair(dpdk)
    vdev = "net_af_packet0,iface=" + ipk
    _ipkit_to_linux(dpdk, "", vdev, lambda: None, 32 << 20, linux_ip, ipk_ip)
    _linux_to_ipkit(dpdk, vdev, lambda: None, 32 << 20, ipk_ip)


def veth_pair(d):
    """A veth in d's namespace: Linux's end (with an address) and ipkit's end.
    A packet socket or an XDP program on a veth sees Linux's GSO super-frames and
    unfilled (partial) checksums as they are, so Linux sends plain frames."""
    lnx, ipk = d.tag + "l", d.tag + "k"
    linux_ip, ipk_ip = "10.%d.0.1" % d.net, "10.%d.0.2" % d.net
    d.ns_run("ip", "link", "add", lnx, "type", "veth", "peer", "name", ipk)
    d.ns_run("ip", "link", "set", ipk, "up")
    d.ns_run("ip", "link", "set", lnx, "up")
    d.ns_run("ip", "addr", "add", linux_ip + "/24", "dev", lnx)
    d.ns_run("ethtool", "-K", lnx, "tx", "off", "tso", "off", "gso", "off", check=False)
    return ipk, linux_ip, ipk_ip


def test_dpdk_afxdp_veth_ping_and_curl(dpdk):
    ipk, _, ipk_ip = veth_pair(dpdk)
    vdev = "net_af_xdp0,iface=" + ipk
    web = dpdk.start([prog("ipkit-httpd")] + dpdk.eal(vdev) +
                     ["--io", "dpdk:net_af_xdp0", "--ip", ipk_ip + "/24"])
    err = dpdk.wait_line(web, "serving on")
    drv, feats = offload_line(err)
    # AF_XDP hands over whole frames, nothing else: every offload n/a
    assert drv == "net_af_xdp" and set(feats.values()) == {"n/a"}, feats
    assert b" 0% packet loss" in ping_ok(dpdk, ipk_ip).stdout
    one = dpdk.ns_run("curl", "-sS", "--max-time", "10", "http://%s/" % ipk_ip).stdout
    assert one.startswith(b"ipkit says hello"), one[:200]
    r = dpdk.ns_run("curl", "-sS", "--max-time", "10", *(["http://%s/" % ipk_ip] * 10))
    assert r.returncode == 0 and r.stdout == one * 10, r.stderr


def test_dpdk_afxdp_veth_32M_each_way_sha256(dpdk):
    """Regression (issue 5): bulk over net_af_xdp stalled after 1-900 KB for good.
    22.11's PMD makes the rx mempool the umem and registers it as if the objects lay
    back to back; under --no-huge they did not, mbufs beyond the umem were rejected by
    the kernel and lost until the pool was empty (io/dpdk/README.md)."""
    ipk, linux_ip, ipk_ip = veth_pair(dpdk)
    vdev = "net_af_xdp0,iface=" + ipk
    _ipkit_to_linux(dpdk, "", vdev, lambda: None, 32 << 20, linux_ip, ipk_ip)
    _linux_to_ipkit(dpdk, vdev, lambda: None, 32 << 20, ipk_ip)


def pmd_caps(d, vdev, ns=True):
    """rx and tx offload capability names dpdk-testpmd reports for the vdev."""
    prefix = "%s%02d" % (d.tag, len(d.prefixes))
    d.prefixes.append(prefix)
    cmd = ["dpdk-testpmd", "--lcores=(0,1)@(%s)" % ",".join(
        str(c) for c in sorted(os.sched_getaffinity(0))), "--no-huge", "-m", "256", "--no-pci",
        "--no-telemetry", "--file-prefix=" + prefix, "--vdev=" + vdev, "--", "-i",
        "--total-num-mbufs=2048"]
    if ns:
        cmd = ["ip", "netns", "exec", d.ns] + cmd
    r = subprocess.run(cmd, input=b"show port 0 rx_offload capabilities\n"
                       b"show port 0 tx_offload capabilities\nquit\n",
                       capture_output=True, timeout=60)
    out = r.stdout.decode(errors="replace")
    caps = {}
    for side in ("Rx", "Tx"):
        m = re.search(side + r" Offloading Capabilities of port 0 :\s*\n\s*Per Queue :(.*)\n"
                      r"\s*Per Port  :(.*)\n", out)
        assert m, out[-1500:]
        caps[side.lower()] = set((m.group(1) + " " + m.group(2)).split())
    return caps


def ipkit_probe(d, vdev, ns=True):
    """Open the vdev with ipkit-ping (one echo to a never-answering address) and
    return the driver and the feature map of the offload line."""
    cmd = [prog("ipkit-ping")] + d.eal(vdev) + ["--io", "dpdk:0", "--ip", "10.9.9.2/24",
                                                "-c", "1", "-W", "1", "10.9.9.3"]
    if ns:
        cmd = ["ip", "netns", "exec", d.ns] + cmd
    r = subprocess.run(cmd, capture_output=True, timeout=60)
    return offload_line(r.stderr)


@pytest.mark.skipif(not shutil.which("dpdk-testpmd"), reason="dpdk-testpmd missing (dpdk-dev)")
def test_dpdk_offload_probe_matches_testpmd(dpdk):
    veth = dpdk.tag + "p"
    dpdk.ns_run("ip", "link", "add", veth, "type", "veth", "peer", "name", dpdk.tag + "q")
    dpdk.ns_run("ip", "link", "set", veth, "up")
    sock = str(dpdk.dir / "probe.sock")
    vdevs = {"net_tap": "net_tap0,iface=%sa" % dpdk.tag,
             "net_af_packet": "net_af_packet0,iface=" + veth,
             "net_af_xdp": "net_af_xdp0,iface=" + veth,
             "net_memif": "net_memif0,role=server,socket=" + sock}
    for drv, vdev in vdevs.items():
        caps = pmd_caps(dpdk, vdev)
        got_drv, feats = ipkit_probe(dpdk, vdev)
        assert got_drv == drv
        assert set(feats) == set(FEATURES), feats
        for name, (pmd_name, side) in FEATURES.items():
            offered = pmd_name in caps[side]
            assert (feats[name] != "n/a") == offered, (drv, name, feats[name], caps)
            if name == "lro" and offered:
                assert feats[name] == "off"  # only with lro=1 and big buffers
            elif name == "tso" and offered:
                needs = {"MULTI_SEGS", "TCP_CKSUM", "IPV4_CKSUM"}
                assert feats[name] == ("on" if needs <= caps["tx"] else "off"), (drv, feats)
            elif offered:
                assert feats[name] == "on", (drv, name, feats)


def test_dpdk_errors_are_one_line(dpdk):
    """No such port, too few queues, bad EAL arguments: one clear line, exit code 3/2."""
    def run(args):
        return subprocess.run(["ip", "netns", "exec", dpdk.ns, prog("ipkit-ping")] + args,
                              capture_output=True, timeout=60)

    base = ["--ip", "10.9.9.2/24", "-c", "1", "-W", "1", "10.9.9.3"]
    r = run(dpdk.eal("net_tap0,iface=%sb" % dpdk.tag) + ["--io", "dpdk:7"] + base)
    assert r.returncode == 3 and b"dpdk:7: no such port" in r.stderr, r.stderr[-400:]
    r = run(dpdk.eal("net_tap0,iface=%sc" % dpdk.tag) + ["--io", "dpdk:0,queues=9"] + base)
    assert r.returncode == 3 and b"too few queues" in r.stderr, r.stderr[-400:]
    veth = dpdk.tag + "e"
    dpdk.ns_run("ip", "link", "add", veth, "type", "veth", "peer", "name", dpdk.tag + "f")
    r = run(dpdk.eal("net_af_packet0,iface=" + veth) + ["--io", "dpdk:0,queues=2"] + base)
    assert r.returncode == 3 and b"too few queues: the port has 1 rx" in r.stderr, \
        r.stderr[-400:]
    r = run(["--no-such-eal-flag", "--"] + ["--io", "dpdk:0"] + base)
    assert r.returncode == 2 and b"dpdk: EAL init failed" in r.stderr, r.stderr[-400:]


def connections_land_by_hash(dpdk, echo, dev, linux_ip, ipk_ip, n):
    """Give the tap `dev` Linux's address, open n echo connections from Linux to
    ipkit-echo --workers 2 and stop it: each worker accepted exactly the connections
    the Toeplitz hash (computed here) names, and saw no frame of the other's flows."""
    from test_workers import CLIENT, stop_and_stats, worker_of
    dpdk.wait_dev(dev)
    dpdk.ns_run("ip", "addr", "add", linux_ip + "/24", "dev", dev)
    dpdk.ns_run("ip", "link", "set", dev, "up")
    if not hasattr(echo, "early"):
        echo.early = dpdk.wait_line(echo, "workers (")
    os.set_blocking(echo.stderr.fileno(), True)
    r = dpdk.ns_run("/usr/bin/python3", "-c", CLIENT % (ipk_ip, n), timeout=120)
    ports = [int(x) for x in r.stdout.split()]
    assert len(ports) == n, r.stderr
    want = [0, 0]
    for sp in ports:
        want[worker_of(linux_ip, ipk_ip, sp, 7)] += 1
    stats, err = stop_and_stats(echo)
    assert [stats[0]["accepted"], stats[1]["accepted"]] == want, (want, err[-1500:])
    assert stats[0]["wrong"] == 0 and stats[1]["wrong"] == 0, err[-1500:]
    return want


def test_dpdk_tap_workers_software_steering(dpdk):
    """RSS steering shown on a DPDK port with the software path: no vdev here applies
    Toeplitz RSS over 2 queues (io/dpdk/README.md), so ipkit-echo --workers 2 reads
    net_tap's one queue and the reader hashes each frame to its worker. 240 connections
    from Linux land exactly where the hash (computed here, from the spec) says, no
    frame reaches a wrong worker, and active opens from both workers all complete."""
    from test_workers import SERVER, stop_and_stats
    dev = dpdk.tag + "w"
    linux_ip, ipk_ip = "10.%d.0.1" % dpdk.net, "10.%d.0.2" % dpdk.net
    echo = dpdk.start([prog("ipkit-echo")] + dpdk.eal("net_tap0,iface=" + dev) +
                      ["--io", "dpdk:net_tap0", "--ip", ipk_ip + "/24", "--workers", "2",
                       "--model", "merge"])
    want = connections_land_by_hash(dpdk, echo, dev, linux_ip, ipk_ip, 240)
    assert min(want) >= 60, want
    # active opens: each worker picks local ports whose hash lands on itself
    # (the first net_tap left with its process: a new one, Linux's address moves;
    # the old tap must be gone first: deleting it while the address is also on the new
    # one takes the address's local route with it). Linux listens on any address
    # before ipkit starts: a SYN that came first got a RST and failed the open.
    dpdk.wait_dev(dev, gone=True)
    srv = dpdk.start(["/usr/bin/python3", "-c", SERVER % ""])
    assert srv.stdout.readline().strip() == b"listening"
    cli = dpdk.start([prog("ipkit-echo")] + dpdk.eal("net_tap0,iface=" + dev + "x") +
                     ["--io", "dpdk:net_tap0", "--ip", ipk_ip + "/24", "--workers", "2",
                      "--model", "unified", "--port", "0", "--connect", linux_ip + ":7007",
                      "--conns", "30", "--timeout", "30"])
    dpdk.wait_dev(dev + "x")
    dpdk.ns_run("ip", "addr", "add", linux_ip + "/24", "dev", dev + "x")
    dpdk.ns_run("ip", "link", "set", dev + "x", "up")
    cli.wait(timeout=60)
    cli.early = b""
    stats, err = stop_and_stats(cli)
    assert b"active opens ok 60 of 60" in err, err[-1500:]
    assert all(stats[w]["connected"] == 30 and stats[w]["wrong"] == 0 for w in (0, 1)), err
