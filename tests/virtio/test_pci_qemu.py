"""ipkit's virtio-net PCI driver in a QEMU guest (issue 21), Linux as the peer.

One guest boots (TCG) with two virtio-net-pci devices, each backed by a TAP device in
a namespace this module creates (pci<pid>): a legacy one (0x1af4:0x1000,
disable-modern=on) at 0000:00:04.0 and a modern one (0x1af4:0x1041,
disable-legacy=on) at 0000:00:05.0. Linux's virtio_net holds both at boot: the first
test checks that ipkit refuses them (-EBUSY), then the guest unbinds them itself. For
each device and three offload settings (all on, all off, mrg=0 alone), ipkit in the
guest answers the namespace's ping and curl and moves 64 MiB each way with SHA-256
checked on both ends; the TAP's frame counters show which offloads were in effect.

Skips with the reason when not root or when QEMU or the guest kernel cannot be had.
"""
import hashlib
import os
import re
import secrets
import subprocess
import time

import pytest

import qemu_guest as qg

SIZE64 = 64 << 20
NS = "pci%d" % os.getpid()
NICS = [
    {"mode": "legacy", "tap": "pcil%d" % os.getpid(), "slot": 4, "mac": "52:54:00:21:00:04",
     "addr": "0000:00:04.0", "net": "10.121.4"},
    {"mode": "modern", "tap": "pcim%d" % os.getpid(), "slot": 5, "mac": "52:54:00:21:00:05",
     "addr": "0000:00:05.0", "net": "10.121.5"},
]
# The driver's offload switches (io/virtio/README.md): all on, all off, and TSO out
# without mergeable buffers (so no GUEST_TSO: coalesced frames cannot come in, and a
# legacy device uses the 10-byte header).
OFFLOADS = {"on": "", "off": ",csum=0,tso=0,mrg=0", "nomrg": ",mrg=0"}
# Whether (ipkit sends super-frames, ipkit receives coalesced frames) per setting.
GSO_EXPECT = {"on": (True, True), "off": (False, False), "nomrg": (True, False)}


def host(*args, timeout=60, check=True):
    return subprocess.run(["ip", "netns", "exec", NS] + list(args), check=check,
                          timeout=timeout, capture_output=True)


def _cleanup_ns():
    subprocess.run(["ip", "netns", "del", NS], check=False, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def guest():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespace, TAP devices)")
    if not qg.QEMU:
        pytest.skip("qemu-system-x86_64 not installed (Debian: qemu-system-x86)")
    subprocess.run(["ip", "netns", "add", NS], check=True, timeout=30)
    g = None
    try:
        host("ip", "link", "set", "lo", "up")
        for n in NICS:
            host("ip", "tuntap", "add", "dev", n["tap"], "mode", "tap", "vnet_hdr")
            host("ip", "addr", "add", n["net"] + ".1/24", "dev", n["tap"])
            host("ip", "link", "set", n["tap"], "up")
        g = qg.Guest(NS, NICS)
        try:
            g.start()
        except qg.Unavailable as e:
            pytest.skip("QEMU guest unavailable: %s" % e)
        yield g
    finally:
        if g is not None:
            g.stop()
        _cleanup_ns()


def hugepages(guest):
    out = guest.check("grep HugePages_Total /proc/meminfo")
    return int(out.split()[1])


def ipk(n, off):
    return "--io virtio:pci=%s%s --ip %s.2/24" % (n["addr"], OFFLOADS[off], n["net"])


def tap_pkts(n):
    """(rx, tx) packet counters of the TAP's kernel side: rx counts the frames the
    guest sent, tx those Linux sent it; a TSO/GSO super-frame counts once."""
    base = "/sys/class/net/%s/statistics/" % n["tap"]
    r = host("cat", base + "rx_packets", base + "tx_packets").stdout.split()
    return int(r[0]), int(r[1])


# 64 MiB in MSS-sized frames (1448 bytes of payload each) is 46,345 frames; with
# TSO/GSO on, ipkit hands 64,000-byte super-frames to the device and QEMU hands
# coalesced ones to the guest: far fewer (counters, not timing).
FRAMES_MSS = SIZE64 // 1448
FRAMES_GSO_MAX = FRAMES_MSS // 3


def _digests(text):
    sent = re.search(r"sent (\d+) sha256 ([0-9a-f]{64})", text)
    got = re.search(r"received (\d+) sha256 ([0-9a-f]{64})", text)
    return ((int(sent.group(1)), sent.group(2)) if sent else None,
            (int(got.group(1)), got.group(2)) if got else None)


def bound(guest, n):
    return guest.run("test -e /sys/bus/pci/devices/%s/driver" % n["addr"])[0] == 0


def set_bound(guest, n, on):
    """Bind or unbind Linux's virtio-pci driver, inside the guest (never on the host)."""
    if bound(guest, n) == on:
        return
    if on:
        guest.check("echo %s > /sys/bus/pci/drivers/virtio-pci/bind" % n["addr"])
    else:
        guest.check("echo %s > /sys/bus/pci/devices/%s/driver/unbind" % (n["addr"], n["addr"]))
    assert bound(guest, n) == on


def test_pci_refuses_device_held_by_kernel(guest):
    """While Linux's virtio-pci driver holds a device, ipkit's driver refuses it with
    EBUSY and one line naming the driver, and leaves it bound; unbinding is the
    administrator's job (done here by the guest's shell)."""
    for n in NICS:
        set_bound(guest, n, True)
        rc, out = guest.run("ipkit-nc %s -l 1 2>&1" % ipk(n, "on"), timeout=60)
        assert rc != 0, out
        assert "bound to kernel driver virtio-pci (EBUSY)" in out, out
        assert bound(guest, n)
        set_bound(guest, n, False)
    # none reserved: the driver reserves the hugepages it needs and gives them back
    assert hugepages(guest) == 0


@pytest.mark.parametrize("off", ["on", "off", "nomrg"])
@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_pci_ping_curl_64M_each_way(guest, mode, off, tmp_path):
    n = [x for x in NICS if x["mode"] == mode][0]
    set_bound(guest, n, False)
    gip = n["net"] + ".2"
    # ping and curl against ipkit-httpd
    guest.check("ipkit-httpd %s --port 80 > /tmp/httpd.log 2>&1 & echo $! > /tmp/httpd.pid" % ipk(n, off))
    try:
        r = host("ping", "-c", "3", "-i", "0.5", "-W", "10", "-w", "60", gip, timeout=90, check=False)
        assert r.returncode == 0, r.stdout.decode() + guest.run("cat /tmp/httpd.log")[1]
        # ipkit took its MAC from the device's configuration space (§5.1.4)
        neigh = host("ip", "neigh", "show", gip).stdout.decode()
        assert n["mac"] in neigh, neigh
        r = host("curl", "-sS", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code}",
                 "http://%s/" % gip, timeout=90, check=False)
        assert r.stdout.decode() == "200", r.stderr.decode() + guest.run("cat /tmp/httpd.log")[1]
        # while it runs, the driver holds hugepages it reserved itself
        assert hugepages(guest) > 0
    finally:
        guest.run("kill $(cat /tmp/httpd.pid); for i in $(seq 100); do"
                  " kill -0 $(cat /tmp/httpd.pid) 2>/dev/null || break; sleep 0.1; done")
    assert hugepages(guest) == 0, guest.run("cat /tmp/httpd.log")[1]
    # Linux -> ipkit: 64 MiB of random bytes
    src = tmp_path / "send.bin"
    with open(src, "wb") as f:
        for _ in range(16):
            f.write(secrets.token_bytes(4 << 20))
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    guest.check("ipkit-nc %s -l 5002 --sha256 --no-output --timeout 60 > /tmp/nc.log 2>&1 &"
                " echo $! > /tmp/nc.pid" % ipk(n, off))
    t0 = time.monotonic()
    rx0, tx0 = tap_pkts(n)
    r = host("socat", "-u", "FILE:%s" % src, "TCP:%s:5002,retry=100,interval=0.2" % gip,
             timeout=900, check=False)
    rx_s = time.monotonic() - t0
    out = guest.check("for i in $(seq 600); do kill -0 $(cat /tmp/nc.pid) 2>/dev/null || break;"
                      " sleep 0.2; done; cat /tmp/nc.log", timeout=200)
    assert r.returncode == 0, r.stderr.decode() + out
    _, got = _digests(out)
    assert got == (SIZE64, want), out
    to_guest = tap_pkts(n)[1] - tx0
    # ipkit -> Linux: 64 MiB of ipkit-nc's pattern
    dst = tmp_path / "recv.bin"
    p = subprocess.Popen(["ip", "netns", "exec", NS, "socat", "-u",
                          "TCP-LISTEN:5001,reuseaddr", "OPEN:%s,creat,trunc" % dst])
    try:
        for _ in range(100):
            if ":5001 " in host("ss", "-ltn").stdout.decode():
                break
            time.sleep(0.05)
        t0 = time.monotonic()
        rx0, tx0 = tap_pkts(n)
        out = guest.check("ipkit-nc %s --send-size %d --sha256 --no-output --timeout 60 %s.1 5001 2>&1"
                          % (ipk(n, off), SIZE64, n["net"]), timeout=900)
        tx_s = time.monotonic() - t0
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
    sent, _ = _digests(out)
    assert sent is not None and sent[0] == SIZE64, out
    assert dst.stat().st_size == SIZE64
    assert hashlib.sha256(dst.read_bytes()).hexdigest() == sent[1]
    assert hugepages(guest) == 0  # given back by both ipkit-nc runs
    from_guest = tap_pkts(n)[0] - rx0
    # TSO out of ipkit / coalesced frames into it: far fewer frames than MSS-sized
    # ones; without: every frame at most one MSS
    gso_out, gso_in = GSO_EXPECT[off]
    assert (from_guest < FRAMES_GSO_MAX) if gso_out else (from_guest >= FRAMES_MSS), from_guest
    assert (to_guest < FRAMES_GSO_MAX) if gso_in else (to_guest >= FRAMES_MSS), to_guest
    print("%s offload=%s: frames guest->host %d, host->guest %d" % (mode, off, from_guest, to_guest))
    print("%s offload=%s: 64 MiB in %.1f s (Linux->ipkit), %.1f s (ipkit->Linux)"
          % (mode, off, rx_s, tx_s))


def test_qemu_harness_skips_when_qemu_cannot_start(guest, monkeypatch):
    """The harness turns a QEMU that exits at once into Unavailable (the module's
    tests then skip with its message) instead of waiting out the boot budget."""
    monkeypatch.setattr(qg, "QEMU", "/bin/false")
    g = qg.Guest(NS, NICS[:1])
    try:
        with pytest.raises(qg.Unavailable, match="QEMU could not start"):
            g.start()
    finally:
        g.stop()
