"""ipkit-nc's core options (issue 16): --cc picks the connection's congestion control,
--sndbuf / --rcvbuf size its buffers, each bad value is one line and exit 2. Two
ipkit-nc processes over memlink (no kernel, no namespaces); with --stats each prints
"cc ESTABLISHED END", the algorithm read back from its connection (ipk_tcp_info)."""
import os
import re
import secrets
import subprocess

import pytest

from conftest import backend_built, prog


def nc_cc(stderr):
    m = re.search(r"^cc (\S+) (\S+)$", stderr, re.M)
    assert m, stderr[-500:]
    return m.group(1), m.group(2)


def pair(listen_opts, connect_opts, size="1M"):
    """ipkit-nc -l on memlink role a, ipkit-nc sending `size` from role b; both stderrs."""
    name = "ipk" + secrets.token_hex(2) + "c"
    srv = subprocess.Popen([prog("ipkit-nc"), "--io", "memlink:%s,role=a" % name,
                            "--ip", "10.9.1.1/24", "-l", "7000", "--no-output", "--stats",
                            "--timeout", "20"] + listen_opts,
                           stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        r = subprocess.run([prog("ipkit-nc"), "--io", "memlink:%s,role=b" % name,
                            "--ip", "10.9.1.2/24", "--send-size", size, "--no-output",
                            "--stats", "--timeout", "20"] + connect_opts +
                           ["10.9.1.1", "7000"], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
        _, serr = srv.communicate(timeout=30)
        cerr = r.stderr.decode(errors="replace")
        serr = serr.decode(errors="replace")
        assert r.returncode == 0 and srv.returncode == 0, (cerr[-500:], serr[-500:])
        return serr, cerr
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait(timeout=5)
        for suffix in ("", ".a.sock", ".b.sock"):
            try:
                os.unlink("/dev/shm/ipkit-ml-%s%s" % (name, suffix))
            except OSError:
                pass


@pytest.mark.skipif(not backend_built("memlink"), reason="memlink not built")
def test_nc_cc_option_takes():
    """Each end runs the algorithm it was given, from establishment to the end; without
    --cc the core's default (NewReno). Fails if --cc is parsed but not put into the
    core's configuration (both would read back newreno)."""
    serr, cerr = pair(["--cc", "newreno", "--rcvbuf", "512k"],
                      ["--cc", "cubic", "--sndbuf", "1M"])
    assert nc_cc(cerr) == ("cubic", "cubic"), cerr
    assert nc_cc(serr) == ("newreno", "newreno"), serr
    serr, cerr = pair(["--cc=cubic"], [])
    assert nc_cc(cerr) == ("newreno", "newreno"), cerr
    assert nc_cc(serr) == ("cubic", "cubic"), serr


def nc_digest(stderr, what):
    m = re.search(r"^%s (\d+) sha256 ([0-9a-f]{64})$" % what, stderr, re.M)
    assert m, stderr[-500:]
    return int(m.group(1)), m.group(2)


@pytest.mark.skipif(not backend_built("memlink"), reason="memlink not built")
def test_nc_send_size_digest_is_the_pattern():
    """With --send-size, ipkit-nc --sha256 hashes the pattern once the stream is over
    (off the transfer's path, issue 16), not inside the loop: its "sent" digest must
    still be the SHA-256 of exactly the pattern bytes 0..N-1 (x ^ x>>8 ^ x>>16 ^ 0x5a),
    and the receiver's digest of what arrived must equal it. N is no multiple of the
    64 KiB chunk nor of 256, so partial chunks and pattern runs are covered."""
    import hashlib
    size = (1 << 20) + 70001
    serr, cerr = pair(["--sha256"], ["--sha256"], size=str(size))
    pat = bytes((x ^ (x >> 8) ^ (x >> 16) ^ 0x5a) & 0xff for x in range(size))
    want = hashlib.sha256(pat).hexdigest()
    assert nc_digest(cerr, "sent") == (size, want), cerr[-300:]
    assert nc_digest(serr, "received") == (size, want), serr[-300:]


@pytest.mark.skipif(not backend_built("memlink"), reason="memlink not built")
def test_nc_stats_loop_line():
    """--stats also prints where the process's time went (issue 16): the node's polls,
    sleeps and frames and getrusage's CPU and context switches, one parseable line.
    The sender of 1 MiB sent at least 1 MiB / 1460 frames and slept at most once per
    poll."""
    _, cerr = pair([], [])
    m = re.search(r"^loop (.*)$", cerr, re.M)
    assert m, cerr[-500:]
    v = {k: int(x) for k, x in re.findall(r"(\w+)=(\d+)", m.group(1))}
    assert set(v) == {"polls", "sleeps", "rx_frames", "tx_frames", "user_us", "sys_us",
                      "vcsw", "ivcsw"}, v
    assert v["tx_frames"] >= (1 << 20) // 1460 and v["sleeps"] <= v["polls"], v


@pytest.mark.parametrize("args", [["--cc", "bbr"], ["--cc", "CUBIC"], ["--cc"],
                                  ["--sndbuf", "12"], ["--sndbuf", "2G"],
                                  ["--rcvbuf", "x"], ["--rcvbuf=0"]])
def test_nc_bad_core_option_exit_2(args):
    """A bad --cc / --sndbuf / --rcvbuf: exit 2 and one line naming the option."""
    r = subprocess.run([prog("ipkit-nc"), "--io", "memlink:none,role=a", "--ip",
                        "10.9.1.1/24"] + args + ["10.9.1.2", "7"], capture_output=True,
                       timeout=10)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and args[0].split("=")[0] in err, err


def test_nc_help_lists_core_options():
    r = subprocess.run([prog("ipkit-nc"), "--help"], capture_output=True, timeout=10)
    out = r.stdout.decode()
    assert r.returncode == 0
    for opt in ("--cc ALGO", "cubic", "newreno", "--sndbuf BYTES", "--rcvbuf BYTES"):
        assert opt in out, opt
