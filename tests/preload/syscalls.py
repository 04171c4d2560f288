#!/usr/bin/env python3
"""Where an nginx request's system calls go (issue 18's speed item; root).

nginx with one worker process, driven by wrk (-t 2 -c 32, keep-alive, the 6-byte
file of figures.py) from a namespace of its own, (a) under libipkit-preload over
ipkitd on TAP, (b) on Linux's sockets over veth. While wrk runs, `perf stat`
counts system calls (tracepoints raw_syscalls:sys_enter and syscalls:sys_enter_*)
in the nginx worker (every thread: the shim's pump too) and, for (a), in ipkitd;
each count is divided by the requests served in the window (the worker's openat
count: nginx opens the file once per request, open_file_cache being off). Printed per request, side by side, repeated SYSCALL_RUNS times
(default 3) so the spread shows. SYSCALL_DUR: seconds of wrk (default 4).
SYSCALL_WHAT=redis: redis-server under redis-benchmark instead (-c 32, SET and GET,
SYSCALL_REDIS_N each, default 50000; perf over the whole benchmark).
SYSCALL_BASE=DIR (another build, e.g. of main): its shim and ipkitd are measured
too, in the same runs, for a before/after side by side.

    sudo IPKIT_BUILD=build /usr/bin/python3 tests/preload/syscalls.py
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import figures as F  # noqa: E402

DUR = int(os.environ.get("SYSCALL_DUR", "4"))
RUNS = int(os.environ.get("SYSCALL_RUNS", "3"))
CALLS = ["read", "write", "readv", "writev", "recvfrom", "sendto", "sendfile64",
         "epoll_wait", "epoll_pwait", "poll", "ppoll", "futex", "accept4", "ioctl", "close",
         "openat", "newfstatat", "setsockopt", "eventfd2"]
EVENTS = ["raw_syscalls:sys_enter"] + ["syscalls:sys_enter_" + c for c in CALLS]


def perf_start(pids):
    return subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p",
                             ",".join(str(p) for p in pids), "--", "sleep", str(DUR - 1)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def perf_read(p):
    _, err = p.communicate(timeout=DUR + 30)
    out = {}
    for line in err.decode().splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit():
            ev = f[2].replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter",
                                                                   "all")
            out[ev] = int(f[0])
    return out


def worker_pid(master):
    end = time.monotonic() + 10
    while time.monotonic() < end:
        r = subprocess.run(["pgrep", "-P", str(master)], capture_output=True)
        pids = r.stdout.split()
        if pids:
            return int(pids[0])
        time.sleep(0.1)
    raise SystemExit("no nginx worker")


def measure(server, client, ip, env, daemon_pid):
    procs = []
    d = F.nginx_dir()
    try:
        conf = os.path.join(d, "nginx1.conf")
        with open(conf, "w") as f:
            f.write(F.CONF % {"d": d, "w": 1})
        m = F.start(procs, server + [F.NGINX, "-p", d, "-c", conf], env)
        F.wait_port(client, ip, 8080, "nginx")
        w = worker_pid(m.pid)
        time.sleep(0.3)
        pw = subprocess.Popen(client + ["wrk", "-t", "2", "-c", "32", "-d", str(DUR),
                                        "http://%s:8080/" % ip],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        p1 = perf_start([w])
        p2 = perf_start([daemon_pid]) if daemon_pid else None
        app = perf_read(p1)
        dmn = perf_read(p2) if p2 else {}
        out = pw.communicate(timeout=DUR + 60)[0].decode()
        rps = float(F.re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        # nginx opens the file once per request (no open_file_cache), on both
        # sides: its openat count is the requests served in the window exactly
        reqs = max(app.get("openat", 0), 1)
        return rps, {k: v / reqs for k, v in app.items()}, {k: v / reqs for k, v in dmn.items()}
    finally:
        F.stop(procs)
        shutil.rmtree(d, ignore_errors=True)


def redis_measure(server, client, ip, env, daemon_pid):
    """redis-server (its level-triggered epoll loop) under redis-benchmark -c 32 -n
    REDIS_N -t set,get: perf counts over the whole benchmark; per request = per
    SET or GET."""
    procs = []
    n = int(os.environ.get("SYSCALL_REDIS_N", "50000"))
    try:
        m = F.start(procs, server + ["env", "LD_LIBRARY_PATH=" + F.RLIB, F.RSERVER, "--port",
                                     "6379", "--save", "", "--appendonly", "no",
                                     "--protected-mode", "no"], env)
        F.wait_port(client, ip, 6379, "redis")
        perfs = [subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p",
                                   str(p)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for p in ([m.pid, daemon_pid] if daemon_pid else [m.pid])]
        time.sleep(0.3)
        t0 = time.monotonic()
        subprocess.run(client + ["env", "LD_LIBRARY_PATH=" + F.RLIB, F.RBENCH, "-h", ip, "-p",
                                 "6379", "-c", "32", "-n", str(n), "-t", "set,get", "-q"],
                       capture_output=True, timeout=600)
        rps = 2 * n / (time.monotonic() - t0)
        res = []
        for p in perfs:
            p.send_signal(2)
            res.append({k: v / (2.0 * n) for k, v in perf_read(p).items()})
        return rps, res[0], res[1] if daemon_pid else {}
    finally:
        F.stop(procs)


def fmt(c):
    keys = ["all"] + [k for k in CALLS if c.get(k, 0) >= 0.01]
    return ", ".join("%s %.2f" % (k, c.get(k, 0)) for k in keys)


def shim_side(build, what=None):
    """nginx (or `what`) under the shim of `build` over that build's ipkitd."""
    import test_ipkitd as T
    saved = T.DAEMON
    T.DAEMON = os.path.join(build, "svc", "ipkitd")
    tmp = tempfile.mkdtemp(prefix="ipkfig")
    link = F.Link("tap")
    try:
        svc = F.Svc(link, pathlib.Path(tmp))
        env = {"LD_PRELOAD": os.path.join(build, "svc", "preload", "libipkit-preload.so"),
               "IPKITD_SOCKET": svc.sock}
        return (what or measure)([], ["ip", "netns", "exec", link.ns], link.ipk_ip, env,
                                 svc.daemon.pid)
    finally:
        T.DAEMON = saved
        link.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main_redis(base):
    for run in range(RUNS):
        if base:
            brps, bapp, bd = shim_side(base, redis_measure)
        srps, sapp, sd = shim_side(F.BUILD, redis_measure)
        v = F.Veth()
        try:
            lrps, lapp, _ = redis_measure(["ip", "netns", "exec", v.s],
                                          ["ip", "netns", "exec", v.c], v.sip, None, None)
        finally:
            v.close()
        if base:
            print("run %d: base shim %.0f req/s (%.2fx Linux)" % (run + 1, brps, brps / lrps))
            print("  base redis-server, syscalls/request: " + fmt(bapp))
            print("  base ipkitd, syscalls/request:       " + fmt(bd))
        print("run %d: shim %.0f req/s, Linux %.0f req/s (%.2fx)" % (run + 1, srps, lrps,
                                                                    srps / lrps))
        print("  shim redis-server, syscalls/request: " + fmt(sapp))
        print("  ipkitd, syscalls/request:            " + fmt(sd))
        print("  Linux redis-server, syscalls/request: " + fmt(lapp))
        sys.stdout.flush()


def main():
    base = os.environ.get("SYSCALL_BASE")
    if os.environ.get("SYSCALL_WHAT") == "redis":
        return main_redis(base)
    for run in range(RUNS):
        if base:
            brps, bapp, bd = shim_side(base)
        srps, sapp, sd = shim_side(F.BUILD)
        v = F.Veth()
        try:
            lrps, lapp, _ = measure(["ip", "netns", "exec", v.s], ["ip", "netns", "exec", v.c],
                                    v.sip, None, None)
        finally:
            v.close()
        if base:
            print("run %d: base shim %.0f req/s (%.2fx Linux)" % (run + 1, brps, brps / lrps))
            print("  base nginx worker, syscalls/request: " + fmt(bapp))
            print("  base ipkitd, syscalls/request:       " + fmt(bd))
        print("run %d: shim %.0f req/s, Linux %.0f req/s (%.2fx)" % (run + 1, srps, lrps,
                                                                    srps / lrps))
        print("  shim nginx worker, syscalls/request: " + fmt(sapp))
        print("  ipkitd, syscalls/request:            " + fmt(sd))
        print("  Linux nginx worker, syscalls/request: " + fmt(lapp))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
