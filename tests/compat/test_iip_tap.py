"""Issue 20, item 3(b): programs written against iip's documented API (iip_tap_app.c,
built with the adapter) on a TAP device, Linux as the peer: ping, curl, socat and nc,
transfers checked by SHA-256, under NIC feature sets the feature callbacks declare.

Run as root: IPKIT_BUILD=build /usr/bin/python3 -m pytest -q tests/compat/test_iip_tap.py
Namespaces and the TAP come from tests/interop/conftest.py's Link (prefix "ipk" + random
hex), removed at teardown also on failure; every wait is bounded.
"""
import hashlib
import importlib.util
import os
import subprocess
import time

import pytest

_spec = importlib.util.spec_from_file_location(
    "ipk_interop_conftest",
    os.path.join(os.path.dirname(__file__), "..", "interop", "conftest.py"))
_ic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ic)
Link, stop_procs, BUILD = _ic.Link, _ic.stop_procs, _ic.BUILD

APP = os.path.join(BUILD, "tests", "compat", "iip_tap_app")

# F_* bits of tests/compat/iipt_mem.h
F_SG, F_IP4_RX, F_IP4_TX, F_TCP_RX, F_TCP_TX, F_TSO, F_UDP_RX, F_UDP_TX = (
    1, 2, 4, 8, 16, 32, 64, 128)
FEATURES = {
    "none": 0,
    "sg": F_SG,
    "tx_csum": F_IP4_TX | F_TCP_TX | F_UDP_TX,
    "rx_csum": F_IP4_RX | F_TCP_RX | F_UDP_RX,
    "tso_sg": F_TSO | F_SG | F_TCP_TX | F_IP4_TX,
    "all": 0x1ff,
}


def pattern(n):
    """The bytes iip_tap_app sends: pat(i) = i * 7 + i / 251 (mod 256)."""
    return bytes(((i * 7 + i // 251) & 0xff) for i in range(n))


@pytest.fixture
def tap():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not os.path.exists(APP):
        pytest.skip("iip_tap_app not built in %s" % BUILD)
    ln = Link("tap", offload=False)
    yield ln
    ln.close()


@pytest.fixture
def tun():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not os.path.exists(APP):
        pytest.skip("iip_tap_app not built in %s" % BUILD)
    ln = Link("tun", offload=False)
    yield ln
    ln.close()


def start_server(ln, features, dev=None):
    p = ln.start(APP, dev or ln.ipk_dev, ln.ipk_ip, str(features), "server")
    os.set_blocking(p.stderr.fileno(), False)
    deadline = time.monotonic() + 10
    buf = b""
    while time.monotonic() < deadline:
        buf += p.stderr.read() or b""
        if b"ready" in buf:
            return p
        if p.poll() is not None:
            break
        time.sleep(0.02)
    raise AssertionError("iip_tap_app did not start: %r" % buf)


def linux_peers(tap, tmp_path, fs):
    """ping, curl (1 MiB), socat and nc (2 MiB echoed) and a UDP echo against the
    iip-API server, every transfer checked by SHA-256."""
    r = tap.run("ping", "-c", "3", "-i", "0.2", "-W", "2", tap.ipk_ip, check=False, timeout=20)
    assert r.returncode == 0, r.stdout.decode()
    # curl: 1 MiB body from the iip API's HTTP responder
    size = 1 << 20
    r = tap.run("curl", "-s", "--max-time", "30", "-o", str(tmp_path / "body"),
                "http://%s/%d" % (tap.ipk_ip, size), check=False, timeout=40)
    assert r.returncode == 0, r.stderr.decode()
    assert hashlib.sha256((tmp_path / "body").read_bytes()).hexdigest() == \
        hashlib.sha256(pattern(size)).hexdigest()
    # socat and nc: 2 MiB through the TCP echo, both ways checked
    data = os.urandom(2 << 20)
    src = tmp_path / "src"
    src.write_bytes(data)
    for tool in ("socat", "nc"):
        out = tmp_path / ("echo_" + tool)
        if tool == "socat":
            cmd = "socat -t 20 - TCP:%s:7 < %s > %s" % (tap.ipk_ip, src, out)
        else:
            cmd = "nc -N -w 20 %s 7 < %s > %s" % (tap.ipk_ip, src, out)
        r = tap.run("sh", "-c", cmd, check=False, timeout=60)
        assert r.returncode == 0, (tool, r.stderr.decode())
        got = out.read_bytes()
        assert len(got) == len(data), (tool, len(got))
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest(), tool
    # UDP echo through socat
    r = tap.run("sh", "-c", "printf 'iip-udp-%s' | socat -t 3 - UDP:%s:7" % (fs, tap.ipk_ip),
                check=False, timeout=15)
    assert r.stdout.decode() == "iip-udp-%s" % fs, r.stderr.decode()


@pytest.mark.parametrize("fs", list(FEATURES), ids=list(FEATURES))
def test_iip_server_ping_curl_socat_nc_udp(tap, tmp_path, fs):
    start_server(tap, FEATURES[fs])
    linux_peers(tap, tmp_path, fs)


# iip_l2: the same program on a link that is not Ethernet: a TUN device whose frames
# carry TUN's 4-byte packet information (flags, EtherType) as their L2 header, which
# the program describes through iip's L2 callbacks; the adapter re-frames.
@pytest.mark.parametrize("fs", ["none", "all"])
def test_iip_l2_tun_server_ping_curl_socat_nc_udp(tun, tmp_path, fs):
    start_server(tun, FEATURES[fs], "tun:" + tun.ipk_dev)
    linux_peers(tun, tmp_path, fs)


def bulk_to_linux(tap, tmp_path, fs, dev):
    size = 8 << 20
    out = tmp_path / "recv.bin"
    lst = tap.start("socat", "-u", "TCP-LISTEN:5001,reuseaddr", "OPEN:%s,creat,trunc" % out)
    for _ in range(100):
        if ":5001 " in tap.run("ss", "-ltn").stdout.decode():
            break
        time.sleep(0.05)
    r = tap.run(APP, dev, tap.ipk_ip, str(FEATURES[fs]), "send", tap.linux_ip, "5001",
                str(size), check=False, timeout=90)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    lst.wait(timeout=30)
    assert out.stat().st_size == size
    assert hashlib.sha256(out.read_bytes()).hexdigest() == \
        hashlib.sha256(pattern(size)).hexdigest()
    if FEATURES[fs] & F_TSO:
        assert "tso frames 0," not in err, err


@pytest.mark.parametrize("fs", ["none", "tso_sg", "all"])
def test_iip_bulk_sender_to_linux(tap, tmp_path, fs):
    bulk_to_linux(tap, tmp_path, fs, tap.ipk_dev)


@pytest.mark.parametrize("fs", ["none", "tso_sg"])
def test_iip_l2_tun_bulk_sender_to_linux(tun, tmp_path, fs):
    bulk_to_linux(tun, tmp_path, fs, "tun:" + tun.ipk_dev)
