#!/usr/bin/env python3
"""Figures for issue 18 (run as root by tests/preload/figures.sh): wrk against
Debian's nginx (1 and 2 worker processes) and redis-benchmark against Debian's
redis-server, (a) under libipkit-preload over ipkitd on a TAP device, (b) on Linux's
own sockets over a veth pair; the client (wrk, redis-benchmark) runs on Linux's
sockets in a namespace of its own in both cases. Same machine, same run, one after
the other. Prints a Markdown table: requests/s and p99 latency.

Load: wrk -t 2 -c 32 -d DUR (a 6-byte index.html, keep-alive); redis-benchmark
-c 32 -n N -t set, then -t get (--csv: p99). FIG_DUR (s, default 5) and FIG_N
(default 100000) change it. FIG_IO: ipkitd's backends to run the shim side on, a
comma list of tap and afxdp (default tap; afxdp: the daemon on a veth pair through
AF_XDP in copy mode, as tests/interop's links). While each load runs, `perf stat`
counts the system calls of the server's processes (every thread: the shim's pump
too) and of ipkitd; each is divided by the requests served (wrk's count, N), so
the table also says what a request costs in system calls on each side (no perf:
those columns say "-"). Every namespace and process is removed by PID/name at the
end, also on failure.
"""
import csv
import io
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
from conftest import BUILD, Link  # noqa: E402
from test_ipkitd import Svc  # noqa: E402

ROOT = os.path.join(HERE, "..", "..", "build-debroot")
NGINX = os.path.join(ROOT, "usr", "sbin", "nginx")
RLIB = os.path.join(ROOT, "usr", "lib", "x86_64-linux-gnu")
RSERVER = os.path.join(ROOT, "usr", "bin", "redis-server")
RBENCH = os.path.join(ROOT, "usr", "bin", "redis-benchmark")
SHIM = os.path.join(BUILD, "svc", "preload", "libipkit-preload.so")
DUR = os.environ.get("FIG_DUR", "5")
# FIG_CLOSE=1: wrk sends "Connection: close" (a connection per request: accept and
# close on the request path); FIG_ONLY=nginx or redis: that server alone
CLOSE = os.environ.get("FIG_CLOSE", "0") not in ("", "0")
ONLY = os.environ.get("FIG_ONLY", "")
# FIG_WORKERS: nginx's worker counts to run, default "1,2". With FIG_CLOSE the
# client keeps a TIME_WAIT for each connection it closed first, 60 s, in its
# namespace: a later row's connect()s search them (one row a run compares best)
WORKERS = [int(x) for x in os.environ.get("FIG_WORKERS", "1,2").split(",") if x.strip()]
N = os.environ.get("FIG_N", "100000")

CONF = """master_process on;
daemon off;
user root;
worker_processes %(w)d;
error_log %(d)s/error.log;
pid %(d)s/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path %(d)s/tmp; proxy_temp_path %(d)s/tmp; fastcgi_temp_path %(d)s/tmp;
  uwsgi_temp_path %(d)s/tmp; scgi_temp_path %(d)s/tmp;
  server { listen 8080; root %(d)s/www; }
}
"""


def sh(*a, check=True):
    return subprocess.run(list(a), check=check, capture_output=True, timeout=60)


class Veth:
    """Two namespaces joined by a veth pair: the server's and the client's."""

    def __init__(self):
        t = "ipk" + secrets.token_hex(2)
        self.s, self.c = t + "s", t + "c"
        net = 100 + secrets.randbelow(150)
        self.sip, self.cip = "10.%d.1.1" % net, "10.%d.1.2" % net
        sh("ip", "netns", "add", self.s)
        sh("ip", "netns", "add", self.c)
        sh("ip", "link", "add", t + "a", "netns", self.s, "type", "veth", "peer", "name",
           t + "b", "netns", self.c)
        for ns, dev, ip in ((self.s, t + "a", self.sip), (self.c, t + "b", self.cip)):
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", ip + "/24", "dev", dev)

    def close(self):
        sh("ip", "netns", "del", self.s, check=False)
        sh("ip", "netns", "del", self.c, check=False)


def start(procs, argv, env=None):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=dict(os.environ, **(env or {})))
    procs.append(p)
    return p


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    del procs[:]


def wait_port(client, ip, port, what):
    end = time.monotonic() + 30
    while time.monotonic() < end:
        r = subprocess.run(client + ["bash", "-c", "exec 3<>/dev/tcp/%s/%d" % (ip, port)],
                           capture_output=True, timeout=10)
        if r.returncode == 0:
            return
        time.sleep(0.2)
    raise SystemExit("%s not serving at %s:%d" % (what, ip, port))


def tree(pid):
    """pid and its children (nginx's master and workers)."""
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True)
    return [pid] + [int(x) for x in r.stdout.split()]


DETAIL = os.environ.get("FIG_DETAIL", "0") not in ("", "0")
# FIG_DETAIL=1: also, per thread, the scheduling counters and the wake-up calls
# (futex, write: eventfd levels and doorbells, read, epoll_wait), summed per
# group: the server's main threads (thread id = a process id), its other threads
# (the shim's pump; redis's idle bio threads), ipkitd
DEV = ["raw_syscalls:sys_enter", "context-switches", "cpu-migrations", "task-clock",
       "syscalls:sys_enter_futex", "syscalls:sys_enter_write", "syscalls:sys_enter_read",
       "syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait"]
DETAILS = []  # (benchmark, stack, group, {event: per request})


def perf_start(pids):
    if not pids or not shutil.which("perf"):
        return None
    ev = ["-e", ",".join(DEV), "--per-thread"] if DETAIL else ["-e", "raw_syscalls:sys_enter"]
    pp = subprocess.Popen(["perf", "stat", "-x", ","] + ev + ["-p",
                           ",".join(str(p) for p in pids)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pp.pids = set(pids)
    return pp


def perf_stop(p, reqs, label=None, group=None):
    """System calls per request of a perf_start, or None; with FIG_DETAIL the
    per-thread counters go to DETAILS under label, group (pump threads apart)."""
    if p is None:
        return None
    p.send_signal(2)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None
    total, det = None, {}
    for line in err.decode().splitlines():
        f = line.split(",")
        if DETAIL:
            if len(f) < 4 or not re.match(r"^[\d.]+$", f[1].strip()):
                continue
            g = group
            tid = f[0].rsplit("-", 1)[-1]
            if group == "server":
                g = "server main" if tid.isdigit() and int(tid) in p.pids else "server others"
            d = det.setdefault(g, {})
            d[f[3]] = d.get(f[3], 0.0) + float(f[1])
        elif len(f) > 2 and f[0].strip().isdigit() and "sys_enter" in f[2]:
            return int(f[0]) / max(reqs, 1)
    if DETAIL:
        for g, d in det.items():
            DETAILS.append(label + (g, {k: v / max(reqs, 1) for k, v in d.items()}))
        n = sum(d.get("raw_syscalls:sys_enter", 0) for d in det.values())
        total = n / max(reqs, 1) if det else None
    return total


def wrk(client, ip, pids, dpid, label=None):
    ps, pd = perf_start(pids), perf_start([dpid] if dpid else [])
    out = subprocess.run(client + ["wrk", "-t", "2", "-c", "32", "-d", DUR, "--latency",
                                   "--timeout", "10s"] +
                         (["-H", "Connection: close"] if CLOSE else []) +
                         ["http://%s:8080/" % ip],
                         capture_output=True, timeout=int(DUR) + 60).stdout.decode()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    p99 = float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    err = "Socket errors" in out
    return rps, p99, err, perf_stop(ps, reqs, label, "server"), perf_stop(pd, reqs, label,
                                                                          "ipkitd")


def rbench(client, ip, pids, dpid, name=None):
    res = {}
    for t in ("set", "get"):
        ps, pd = perf_start(pids), perf_start([dpid] if dpid else [])
        out = subprocess.run(client + ["env", "LD_LIBRARY_PATH=" + RLIB, RBENCH, "-h", ip, "-p",
                                       "6379", "-c", "32", "-n", N, "-t", t, "--csv"],
                             capture_output=True, timeout=600).stdout.decode()
        lab = ("redis " + t.upper(), name)
        sc, dc = perf_stop(ps, int(N), lab, "server"), perf_stop(pd, int(N), lab, "ipkitd")
        for row in csv.DictReader(io.StringIO(out)):
            res[row["test"]] = (float(row["rps"]), float(row["p99_latency_ms"]), sc, dc)
    return res


def nginx_dir():
    d = tempfile.mkdtemp(prefix="ipkfig")
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "www"))
    os.makedirs(os.path.join(d, "tmp"))
    with open(os.path.join(d, "www", "index.html"), "w") as f:
        f.write("ipkit\n")
    return d


def server_pid(p):
    """The server's own pid: `ip netns exec` execs it, `env` too."""
    return p.pid


def run_side(name, server, client, ip, env, rows, dpid=None):
    procs = []
    d = nginx_dir()
    try:
        for w in (WORKERS if ONLY != "redis" else ()):
            conf = os.path.join(d, "nginx%d.conf" % w)
            with open(conf, "w") as f:
                f.write(CONF % {"d": d, "w": w})
            m = start(procs, server + [NGINX, "-p", d, "-c", conf], env)
            wait_port(client, ip, 8080, "nginx")
            time.sleep(0.5)  # the workers are up (perf counts the processes there now)
            rps, p99, err, sc, dc = wrk(client, ip, tree(server_pid(m)), dpid,
                                        ("nginx, %d worker%s" % (w, "s" if w > 1 else ""), name))
            rows.append(("nginx, %d worker%s" % (w, "s" if w > 1 else ""), name, rps, p99,
                         err, sc, dc))
            stop(procs)
            time.sleep(0.5)
        if ONLY == "nginx":
            return
        m = start(procs, server + ["env", "LD_LIBRARY_PATH=" + RLIB, RSERVER, "--port", "6379",
                                   "--save", "", "--appendonly", "no", "--protected-mode", "no"],
                  env)
        wait_port(client, ip, 6379, "redis")
        for t, (rps, p99, sc, dc) in rbench(client, ip, [server_pid(m)], dpid, name).items():
            rows.append(("redis " + t, name, rps, p99, False, sc, dc))
        stop(procs)
    finally:
        stop(procs)
        shutil.rmtree(d, ignore_errors=True)


def main():
    for f in (NGINX, RSERVER, RBENCH, SHIM):
        if not os.path.exists(f):
            raise SystemExit("missing %s (bash tests/preload/debroot.sh; ninja -C build)" % f)
    rows = []
    import pathlib
    for kind in [k.strip() for k in os.environ.get("FIG_IO", "tap").split(",") if k.strip()]:
        if kind not in ("tap", "afxdp"):
            raise SystemExit("FIG_IO: tap or afxdp, not %r" % kind)
        tmp = tempfile.mkdtemp(prefix="ipkfig")
        link = Link(kind)
        try:
            svc = Svc(link, pathlib.Path(tmp))
            env = {"LD_PRELOAD": SHIM, "IPKITD_SOCKET": svc.sock}
            client = ["ip", "netns", "exec", link.ns]
            run_side("ipkit (shim, ipkitd, %s)" % {"tap": "TAP", "afxdp": "AF_XDP"}[kind], [],
                     client, link.ipk_ip, env, rows, svc.daemon.pid)
        finally:
            link.close()
            shutil.rmtree(tmp, ignore_errors=True)
    v = Veth()
    try:
        run_side("Linux (veth)", ["ip", "netns", "exec", v.s], ["ip", "netns", "exec", v.c],
                 v.sip, None, rows)
    finally:
        v.close()
    print("load: wrk -t 2 -c 32 -d %s (%s, 6-byte file); redis-benchmark -c 32 "
          "-n %s -t set / -t get; %d CPUs; load average %.1f at the end; ipkitd %s"
          % (DUR, "Connection: close" if CLOSE else "keep-alive", N, os.cpu_count(),
             os.getloadavg()[0],
             os.environ.get("IPKITD_TEST_ARGS", "(defaults)")))
    print()
    print("| benchmark | stack | requests/s | p99 (ms) | server syscalls/request "
          "| ipkitd syscalls/request |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")

    def f(x):
        return "-" if x is None else "%.2f" % x
    for what, name, rps, p99, err, sc, dc in rows:
        print("| %s | %s | %.0f | %.2f%s | %s | %s |" % (
            what, name, rps, p99, " (socket errors)" if err else "", f(sc), f(dc)))
    if DETAILS:
        print()
        print("per request (perf stat --per-thread): context switches, CPU migrations, "
              "task-clock (us), system calls, futex, write, read, epoll_wait + epoll_pwait")
        print()
        print("| benchmark | stack | threads | cs | migr | cpu us | syscalls | futex | write "
              "| read | epoll_wait |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for what, name, g, d in DETAILS:
            print("| %s | %s | %s | %.2f | %.3f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
                what, name, g, d.get("context-switches", 0), d.get("cpu-migrations", 0),
                d.get("task-clock", 0) * 1000, d.get("raw_syscalls:sys_enter", 0),
                d.get("syscalls:sys_enter_futex", 0), d.get("syscalls:sys_enter_write", 0),
                d.get("syscalls:sys_enter_read", 0),
                d.get("syscalls:sys_enter_epoll_wait", 0) + d.get("syscalls:sys_enter_epoll_pwait", 0)))


if __name__ == "__main__":
    main()
