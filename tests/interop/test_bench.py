"""ipkit-bench and its Linux twin ipkit-bench-linux, functional runs (never speed
thresholds): every pairing over a TAP link in a private namespace, the twin against
itself on the namespace's loopback, TCP ping-pong with depth, burst and UDP. Each run
must finish with 0 errors and > 0 requests; a server that corrupts its echoes
(--corrupt-echo, test only) must make the client exit 1; bad options exit 2.

Namespace and device names start with ipkB; the namespace and every process are
removed at teardown, also on failure.
"""
import json
import os
import secrets
import subprocess
import time

import pytest

from conftest import BUILD, Link, backend_built, sh

BENCH = os.path.join(BUILD, "bench", "ipkit-bench")
TWIN = os.path.join(BUILD, "bench", "ipkit-bench-linux")
RUN_S = "1"  # seconds per client run


def built():
    return os.path.exists(BENCH) and os.path.exists(TWIN)


class BenchNet(Link):
    """A namespace with loopback and a TAP device: Linux 10.N.0.1, ipkit 10.N.0.2.

    Shares Link's teardown (processes ended by PID, namespace deleted)."""

    def __init__(self, prefix="ipkB"):
        self.ns = prefix + secrets.token_hex(3) + "n"
        self.dev = self.ns[:-1] + "t"
        net = 100 + secrets.randbelow(150)
        self.linux_ip, self.ipk_ip = "10.%d.0.1" % net, "10.%d.0.2" % net
        self.procs = []
        sh("ip", "netns", "add", self.ns)
        try:
            for cmd in (["ip", "link", "set", "lo", "up"],
                        ["ip", "tuntap", "add", "dev", self.dev, "mode", "tap", "vnet_hdr"],
                        ["ip", "addr", "add", self.linux_ip + "/24", "dev", self.dev],
                        ["ip", "link", "set", self.dev, "up"]):
                self.x(*cmd)
        except Exception:
            self.close()
            raise

    def x(self, *args, timeout=30):
        return sh("ip", "netns", "exec", self.ns, *args, timeout=timeout)

    def ipk(self, *args):
        return [BENCH, "--io", "tap:" + self.dev, "--ip", self.ipk_ip + "/24"] + list(args)

    def server(self, argv):
        """Start a server, wait (bounded) for its ready line."""
        p = subprocess.Popen(["ip", "netns", "exec", self.ns] + argv, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        os.set_blocking(p.stderr.fileno(), False)
        buf, deadline = b"", time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            buf += p.stderr.read() or b""
            if b"serving on" in buf:
                return p
            time.sleep(0.02)
        raise AssertionError("server did not start: %r" % buf)

    def client(self, argv):
        """Run a client with --json; returns (exit status, summary dict, output)."""
        r = subprocess.run(["ip", "netns", "exec", self.ns] + argv + ["--json", "-t", RUN_S],
                           capture_output=True, text=True, timeout=30)
        lines = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
        summary = [d for d in lines if d["type"] == "summary"]
        assert summary, "no summary: rc=%d out=%r err=%r" % (r.returncode, r.stdout, r.stderr)
        return r.returncode, summary[-1], r.stdout + r.stderr


@pytest.fixture
def net():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not built() or not backend_built("tap"):
        pytest.skip("ipkit-bench or the tap backend not built in %s" % BUILD)
    n = BenchNet()
    yield n
    n.close()


def assert_clean(rc, s, out):
    assert rc == 0, out
    assert s["errors"] == 0, out
    assert s["requests"] > 0, out


# (name, server argv builder, client argv builder); servers listen on 10000 (TCP) and
# 10001 (UDP), and every client runs TCP ping-pong with depth, burst and UDP.
def twin_server(n, *a):
    return [TWIN, "--ip", n.linux_ip] + list(a)


def twin_client(n, ip, *a):
    return [TWIN, "-s", ip] + list(a)


def ipk_server(n, *a):
    return n.ipk(*a)


def ipk_client(n, ip, *a):
    return n.ipk("-s", ip, *a)


PAIRS = {
    "twin-twin-loopback": (lambda n, *a: [TWIN, "--ip", "127.0.0.1"] + list(a),
                           lambda n, *a: twin_client(n, "127.0.0.1", *a)),
    "twin-client-ipkit-server": (ipk_server, lambda n, *a: twin_client(n, n.ipk_ip, *a)),
    "ipkit-client-twin-server": (twin_server, lambda n, *a: ipk_client(n, n.linux_ip, *a)),
}
WORKLOADS = {
    "tcp-pingpong": (["-p", "10000"], ["-p", "10000", "-c", "4", "-d", "2", "-l", "100"]),
    "tcp-burst": (["-p", "10000", "-g", "2"], ["-p", "10000", "-c", "2", "-g", "2", "-l", "1400"]),
    "udp": (["-p", "10001", "-n", "17"], ["-p", "10001", "-n", "17", "-c", "2", "-d", "2",
                                          "-l", "200"]),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_bench_pairing_all_workloads_clean(net, pair):
    srv, cli = PAIRS[pair]
    for wl in ("tcp-pingpong", "tcp-burst", "udp"):
        sargs, cargs = WORKLOADS[wl]
        p = net.server(srv(net, *sargs))
        rc, s, out = net.client(cli(net, *cargs))
        assert_clean(rc, s, "%s %s: %s" % (pair, wl, out))
        if wl != "tcp-burst":
            assert "lat_us" in s and s["lat_us"]["p50"] > 0, out
        p.terminate()
        p.wait(timeout=5)


@pytest.mark.parametrize("server_kind", ["ipkit", "twin"])
@pytest.mark.parametrize("proto", ["6", "17"])
def test_bench_corrupted_echo_fails_client(net, server_kind, proto):
    port = "10000" if proto == "6" else "10001"
    if server_kind == "ipkit":
        net.server(ipk_server(net, "-p", port, "-n", proto, "--corrupt-echo"))
        argv = twin_client(net, net.ipk_ip, "-p", port, "-n", proto, "-l", "64")
    else:
        net.server(twin_server(net, "-p", port, "-n", proto, "--corrupt-echo"))
        argv = ipk_client(net, net.linux_ip, "-p", port, "-n", proto, "-l", "64")
    rc, s, out = net.client(argv)
    assert rc == 1, out
    assert s["mismatches"] > 0, out


def test_bench_no_server_counts_errors(net):
    # nothing listens on the Linux side: every connect is refused
    rc, s, out = net.client(ipk_client(net, net.linux_ip, "-p", "10009", "-c", "2"))
    assert rc == 1 and s["connect_fails"] == 2, out
    rc, s, out = net.client(twin_client(net, net.ipk_ip, "-p", "10009", "-c", "2"))
    assert rc == 1 and s["connect_fails"] == 2, out  # no ipkit node: SYNs unanswered


@pytest.mark.parametrize("prog", [BENCH, TWIN])
@pytest.mark.parametrize("args", [["-c", "0"], ["-g", "3"], ["-n", "5"], ["--bogus"],
                                  ["-n", "17", "-l", "9000"], ["-s"]])
def test_bench_bad_options_exit_2(prog, args):
    if not built():
        pytest.skip("ipkit-bench not built in %s" % BUILD)
    base = ["--io", "tap:none", "--ip", "10.9.9.9/24"] if prog == BENCH else []
    r = subprocess.run([prog] + base + args, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    assert "see --help" in r.stderr
    h = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=10)
    assert h.returncode == 0 and "-d N" in h.stdout and "--json" in h.stdout


def test_bench_twin_threads_loopback(net):
    net.server([TWIN, "--ip", "127.0.0.1", "-p", "10000", "-T", "2"])
    rc, s, out = net.client(twin_client(net, "127.0.0.1", "-p", "10000", "-T", "2", "-c", "4",
                                        "-d", "2", "-l", "32"))
    assert_clean(rc, s, out)
    assert s["threads"] == 2, out


def workers_built():
    """Whether this ipkit-bench has the multi-core runtime (-T > 1)."""
    r = subprocess.run([BENCH, "--io", "tap:none", "--ip", "10.9.9.9/24", "-T", "2", "-n", "17"],
                       capture_output=True, text=True, timeout=10)
    return "not available yet" not in r.stderr


def test_bench_ipkit_threads_refused_or_checked():
    # without the multi-core runtime -T > 1 is refused with the reason; with it, the
    # combinations it cannot run (UDP, -r) are refused instead
    if not built():
        pytest.skip("ipkit-bench not built in %s" % BUILD)
    r = subprocess.run([BENCH, "--io", "tap:none", "--ip", "10.9.9.9/24", "-T", "2", "-n", "17"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    assert "not available yet" in r.stderr or "UDP" in r.stderr, r.stderr


@pytest.mark.parametrize("model", ["unified", "merge", "split"])
def test_bench_ipkit_workers_models(net, model):
    if not workers_built():
        pytest.skip("ipkit-bench built without the multi-core runtime")
    p = net.server(net.ipk("-p", "10000", "-T", "2", "--model", model))
    rc, s, out = net.client(twin_client(net, net.ipk_ip, "-p", "10000", "-c", "8", "-d", "2",
                                        "-l", "64"))
    assert_clean(rc, s, out)
    p.terminate()
    p.wait(timeout=5)
    net.server(twin_server(net, "-p", "10001"))
    rc, s, out = net.client(ipk_client(net, net.linux_ip, "-p", "10001", "-T", "2", "--model",
                                       model, "-c", "4", "-l", "100"))
    assert_clean(rc, s, out)
    assert s["threads"] == 2, out


def test_bench_stats_line_counts_the_run(net):
    """--stats: one line on stderr whose request count is the summary's and whose loop
    counters are consistent (frames per non-empty poll >= 1, at least one poll per
    request batch); over TAP no XSK line (its fd refuses XDP_STATISTICS)."""
    p = net.server(twin_server(net, "-p", "10000"))
    rc, s, out = net.client(ipk_client(net, net.linux_ip, "-p", "10000", "-c", "4",
                                       "--stats"))
    assert_clean(rc, s, out)
    lines = [ln for ln in out.splitlines() if ln.startswith("ipkit-bench: stats: requests")]
    assert len(lines) == 1, out
    f = lines[0].split()[2:]
    st = dict(zip(f[0::2], f[1::2]))
    assert int(st["requests"]) == s["requests"], out
    assert float(st["rx/poll"]) >= 1.0 and float(st["tx/push"]) >= 1.0, out
    assert 0 < float(st["polls/req"]) and float(st["empty/req"]) <= float(st["polls/req"]), out
    assert int(st["retransmits"]) == 0 and int(st["rx_drops"]) == 0, out
    assert "stats: xsk" not in out, out
    p.terminate()
    p.wait(timeout=5)
