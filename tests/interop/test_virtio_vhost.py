"""ipkit's own virtio-net driver over vhost-user (io/virtio, issue 21).

  switch        DPDK testpmd, two net_vhost ports in io-forward mode, is the wire; an
                ipkit node on the driver at each port: ipkit-ping, then 256 MiB each
                way through ipkit-echo with SHA-256, offloads on (checked in the
                features testpmd's vhost library reports as negotiated) and off
  poll mode     the same with event=0 (no call eventfd), 32 MiB
  interop       ipkit on the driver against DPDK's own net_virtio_user (ipkit's dpdk
                backend) through the same switch, 256 MiB each way
  tso           the switch with tso=1 on its ports: HOST_TSO4 and GUEST_TSO4
                negotiated, 256 MiB each way in 64 KB super-frames
  hostile       tests/virtio/vu_bad_dev.py, a vhost-user device returning bad ids,
                lengths and indices: the driver drops and counts each, still moves
                the good frames, serves the device again once its used index is back
                in range, and exits cleanly; and a device that answers the feature
                request wrongly or never: the open fails with a message, no hang

No network namespace is needed: every link is a UNIX socket under the test's temp dir.
DPDK processes get --file-prefix=vhst<hex>NN, removed at teardown; processes are
ended by PID. Every wait is bounded.
"""
import os
import re
import secrets
import shutil
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT, backend_built, prog, stop_procs

pytestmark = [
    pytest.mark.skipif(not backend_built("virtio"), reason="virtio backend not built"),
    pytest.mark.skipif(shutil.which("dpdk-testpmd") is None,
                       reason="dpdk-testpmd missing (Debian: dpdk)"),
]

F_CSUM, F_GUEST_CSUM, F_GUEST_TSO4, F_HOST_TSO4, F_MRG, F_VERSION_1 = 0, 1, 7, 11, 15, 32


def lcores(n=1):
    """Lcores 0..n-1, each free to run on every CPU we may use (EAL does not pin us
    to one busy core); testpmd needs two: its main lcore and one forwarding."""
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    return "--lcores=" + ",".join("%d@(%s)" % (i, cpus) for i in range(n))


def nc_digests(err):
    err = err.decode(errors="replace")
    s = re.search(r"^sent (\d+) sha256 (\w+)$", err, re.M)
    g = re.search(r"^received (\d+) sha256 (\w+)$", err, re.M)
    assert s and g, err[-800:]
    return int(s.group(1)), s.group(2), int(g.group(1)), g.group(2)


class Vhost:
    def __init__(self, tmp_path):
        self.tag = "vhst" + secrets.token_hex(2)
        self.dir = tmp_path
        self.procs, self.prefixes = [], []

    def eal(self, *vdevs, nlcores=1):
        prefix = "%s%02d" % (self.tag, len(self.prefixes))
        self.prefixes.append(prefix)
        return (["--no-huge", "-m", "512", "--no-pci", "--no-telemetry", lcores(nlcores),
                 "--file-prefix=" + prefix] + ["--vdev=" + v for v in vdevs])

    def start(self, args, stdin=subprocess.DEVNULL):
        p = subprocess.Popen(list(args), stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def wait_text(self, p, text, wait=30.0, stream="stderr"):
        f = getattr(p, stream)
        deadline = time.monotonic() + wait
        buf = b""
        os.set_blocking(f.fileno(), False)
        while time.monotonic() < deadline:
            buf += f.read() or b""
            if text.encode() in buf:
                return buf
            if p.poll() is not None:
                break
            time.sleep(0.02)
        other = p.stdout if stream == "stderr" else p.stderr
        os.set_blocking(other.fileno(), False)
        raise AssertionError("no %r: rc=%s out=%r other=%r" % (text, p.poll(), buf[-1500:],
                                                               (other.read() or b"")[-1500:]))

    def switch(self, tso=0):
        """testpmd, io forwarding between two net_vhost ports; returns the sockets."""
        socks = [str(self.dir / ("v%d.sock" % i)) for i in range(2)]
        vdevs = ["net_vhost%d,iface=%s,queues=1,tso=%d" % (i, s, tso)
                 for i, s in enumerate(socks)]
        # stdin a pipe kept open: testpmd without -i runs until its stdin ends; its
        # output (the vhost library logs every message) goes to a file, never a pipe
        # nobody drains
        self.tp_path = self.dir / "testpmd.log"
        with open(self.tp_path, "wb") as log:
            self.testpmd = subprocess.Popen(
                ["dpdk-testpmd"] + self.eal(*vdevs, nlcores=2) +
                ["--", "--forward-mode=io", "--auto-start", "--nb-cores=1",
                 "--total-num-mbufs=16384"],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(self.testpmd)
        deadline = time.monotonic() + 30
        while "Checking link statuses" not in self.testpmd_log():
            assert self.testpmd.poll() is None and time.monotonic() < deadline, \
                self.testpmd_log()[-1500:]
            time.sleep(0.05)
        return socks

    def testpmd_log(self):
        """What testpmd printed so far (its vhost library logs each message)."""
        with open(self.tp_path, "rb") as f:
            return f.read().decode(errors="replace")

    def close(self):
        stop_procs(self.procs)
        for prefix in self.prefixes:
            shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)


@pytest.fixture
def vh(tmp_path):
    v = Vhost(tmp_path)
    yield v
    v.close()


def negotiated(v, sock, wait=10.0):
    """The virtio features testpmd's vhost library negotiated on sock's connection."""
    deadline = time.monotonic() + wait
    pat = re.compile(r"\(%s\) negotiated Virtio features: (0x[0-9a-f]+)" % re.escape(sock))
    while time.monotonic() < deadline:
        m = pat.findall(v.testpmd_log())
        if m:
            return int(m[-1], 16)
        time.sleep(0.1)
    raise AssertionError("no negotiated features for %s in %r" % (sock, v.testpmd_log()[-1500:]))


def echo_pair(v, spec_a, spec_b, mib, timeout=240, ping=True):
    echo = v.start([prog("ipkit-echo"), "-v", "--io", spec_a, "--ip", "10.9.0.1/24"])
    v.wait_text(echo, "serving on")
    if ping:
        r = subprocess.run([prog("ipkit-ping"), "--io", spec_b, "--ip", "10.9.0.2/24",
                            "-c", "3", "-i", "0.2", "-W", "5", "10.9.0.1"],
                           capture_output=True, timeout=60)
        out = (r.stdout + r.stderr).decode(errors="replace")
        assert r.returncode == 0 and "3 received" in out, out[-800:]
    nc = v.start([prog("ipkit-nc"), "--io", spec_b, "--ip", "10.9.0.2/24", "--send-size",
                  "%dM" % mib, "--no-output", "--sha256", "10.9.0.1", "7"])
    _, err = nc.communicate(timeout=timeout)
    assert nc.returncode == 0, err.decode(errors="replace")[-800:]
    sent, sent_sha, got, got_sha = nc_digests(err)
    assert sent == mib << 20 and (sent, sent_sha) == (got, got_sha)
    return echo


def bit(f, b):
    return bool(f >> b & 1)


def test_vhost_switch_ping_and_256M_each_way_offloads_on(vh):
    a, b = vh.switch()
    echo_pair(vh, "virtio:vhost-user=" + a, "virtio:vhost-user=" + b, 256)
    for s in (a, b):
        f = negotiated(vh, s)
        for want in (F_VERSION_1, F_MRG, F_CSUM, F_GUEST_CSUM):
            assert bit(f, want), (s, hex(f), want)
        assert not bit(f, F_HOST_TSO4)   # net_vhost's tso=0 does not offer it


def test_vhost_switch_ping_and_256M_each_way_offloads_off(vh):
    a, b = vh.switch()
    opts = ",csum=0,tso=0,mrg=0"
    echo_pair(vh, "virtio:vhost-user=" + a + opts, "virtio:vhost-user=" + b + opts, 256)
    for s in (a, b):
        f = negotiated(vh, s)
        assert bit(f, F_VERSION_1)
        for off in (F_MRG, F_CSUM, F_GUEST_CSUM, F_GUEST_TSO4, F_HOST_TSO4):
            assert not bit(f, off), (s, hex(f), off)


def test_vhost_switch_poll_mode_32M_each_way(vh):
    a, b = vh.switch()
    echo_pair(vh, "virtio:vhost-user=" + a + ",event=0", "virtio:vhost-user=" + b + ",event=0",
              32, ping=False)


def test_vhost_driver_vs_dpdk_virtio_user_256M_each_way(vh):
    """ipkit-echo on ipkit's driver, ipkit-nc on DPDK's net_virtio_user (ipkit's dpdk
    backend), testpmd between them."""
    a, b = vh.switch()
    echo = vh.start([prog("ipkit-echo"), "--io", "virtio:vhost-user=" + a,
                     "--ip", "10.9.0.1/24"])
    vh.wait_text(echo, "serving on")
    nc = vh.start([prog("ipkit-nc")] + vh.eal("net_virtio_user0,path=%s,queues=1" % b) +
                  ["--", "--io", "dpdk:net_virtio_user0", "--ip", "10.9.0.2/24",
                   "--send-size", "256M", "--no-output", "--sha256", "10.9.0.1", "7"])
    _, err = nc.communicate(timeout=240)
    assert nc.returncode == 0, err.decode(errors="replace")[-800:]
    sent, sent_sha, got, got_sha = nc_digests(err)
    assert sent == 256 << 20 and (sent, sent_sha) == (got, got_sha)


def test_vhost_switch_tso_256M_each_way(vh):
    """net_vhost with tso=1 offers HOST_TSO4 and GUEST_TSO4: the driver sends 64 KB
    super-frames (a descriptor chain each), testpmd forwards DPDK's LRO mbuf as it is,
    and the other driver takes it whole (IPK_CAP_LRO)."""
    a, b = vh.switch(tso=1)
    echo = echo_pair(vh, "virtio:vhost-user=" + a, "virtio:vhost-user=" + b, 256, ping=False)
    for s in (a, b):
        f = negotiated(vh, s)
        for want in (F_HOST_TSO4, F_GUEST_TSO4, F_MRG, F_CSUM):
            assert bit(f, want), (s, hex(f), want)
    # super-frames really went through: 256 MiB in 1448-byte segments would be
    # 185,000 frames into the echo; in 64 KB ones about 4,100 (a counter, not a time)
    echo.terminate()
    _, err = echo.communicate(timeout=30)
    m = re.search(rb"ipkit-echo: rx (\d+) frames", err)
    assert m and int(m.group(1)) < 100000, err[-800:]


def test_vhost_hostile_device_entries_dropped_and_counted(vh):
    sock = str(vh.dir / "bad.sock")
    dev = vh.start([sys.executable, os.path.join(ROOT, "tests", "virtio", "vu_bad_dev.py"),
                    sock, "60"])
    vh.wait_text(dev, "listening", stream="stdout")
    drv = vh.start([os.path.join(BUILD, "tests", "virtio", "vu_reflect"),
                    "virtio:vhost-user=" + sock, "90"])
    out = vh.wait_text(dev, "result done", wait=60, stream="stdout").decode()
    assert "good_back=20" in out and "after_back=5" in out, out
    drv.terminate()
    res, err = drv.communicate(timeout=30)
    assert drv.returncode == 0, err.decode(errors="replace")[-800:]
    c = dict(line.split("=") for line in res.decode().split())
    c = {k: int(x) for k, x in c.items()}
    assert c["rx_bad_id"] >= 2, c        # out of range, and a repeat
    assert c["rx_bad_len"] >= 1, c
    assert c["short_frame"] >= 1, c
    assert c["bad_mrg"] >= 1, c
    assert c["tx_bad_id"] >= 1, c
    assert c["rx_used_ahead"] >= 1, c
    assert c["reflected"] >= 25, c
    assert c["rx_drops"] >= 5, c


@pytest.mark.parametrize("mode", ["badreply", "silent"])
def test_vhost_hostile_device_protocol_open_fails_cleanly(vh, mode):
    """A device answering GET_FEATURES with the wrong reply, or not at all: the
    driver's open fails with a message naming the step (bounded by its 5 s reply
    limit; the test allows 60 s), no hang, no crash."""
    sock = str(vh.dir / "bad.sock")
    dev = vh.start([sys.executable, os.path.join(ROOT, "tests", "virtio", "vu_bad_dev.py"),
                    sock, "60", mode])
    vh.wait_text(dev, "listening", stream="stdout")
    drv = vh.start([os.path.join(BUILD, "tests", "virtio", "vu_reflect"),
                    "virtio:vhost-user=" + sock, "30"])
    _, err = drv.communicate(timeout=60)
    err = err.decode(errors="replace")
    assert drv.returncode == 1, err
    want = "Protocol error" if mode == "badreply" else "timed out"
    assert "GET_FEATURES" in err and want in err, err
