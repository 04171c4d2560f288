"""Debian's own programs, unmodified, on ipkitd through libipkit-preload (issue 18).

ipkitd runs on a TAP device in the test's namespace (test_ipkitd.Svc); the programs
run with LD_PRELOAD=libipkit-preload.so, their peers are the same programs on
Linux's sockets in the namespace. Transfers are checked by SHA-256; the shim's
statistics line (IPKIT_PRELOAD_STATS=1, at exit) must show the traffic went
through ipkitd (no kernel AF_INET socket, ipkitd's own counters equal to the
shim's) — the same transfer on the kernel alone would fail those checks.
Everything is ended by PID at teardown (conftest's Link).
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD
from test_ipkitd import Svc

SHIM = os.path.join(BUILD, "svc", "preload", "libipkit-preload.so")
STATS = re.compile(r"ipkit-preload: pid \d+ ipkit_sockets (\d+) kernel_inet_sockets (\d+) "
                   r"other_sockets \d+ ipkit_tx (\d+) ipkit_rx (\d+) accepts (\d+) connects (\d+) "
                   r"ipkitd_tx (\d+) ipkitd_rx (\d+)")
SIZE = 32 << 20


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def stats(err):
    """The shim's counters as a dict; asserts the line is there."""
    keys = ("ipk", "kern", "tx", "rx", "accepts", "connects", "dtx", "drx")
    found = [dict(zip(keys, (int(x) for x in m.groups()))) for m in STATS.finditer(err)]
    assert found, "no statistics line from the shim: " + err[-2000:]
    # a shell in front prints its own (empty) line: the program's has the sockets
    return max(found, key=lambda d: d["ipk"])


def through_ipkitd(st, tx=0, rx=0, reset_at_end=False):
    """Every socket was ipkitd's, the bytes are there, ipkitd counted the same
    (reset_at_end: the peer resets the connection when it has had enough, as
    iperf3's server does, so what was queued behind that was never copied)."""
    assert st["ipk"] >= 1 and st["kern"] == 0, st
    assert st["tx"] >= tx and st["rx"] >= rx, st
    assert st["drx"] == st["rx"], st
    if reset_at_end:
        assert st["tx"] - (4 << 20) <= st["dtx"] <= st["tx"], st
    else:
        assert st["dtx"] == st["tx"], st


@pytest.fixture
def rig(make_link, tmp_path):
    if not os.path.exists(SHIM):
        pytest.skip("libipkit-preload not built in %s" % BUILD)
    svc = Svc(make_link("tap"), tmp_path)
    data = tmp_path / "www"
    data.mkdir()
    with open(data / "big", "wb") as f:
        f.write(os.urandom(SIZE))
    svc.data = data
    return svc


def shimmed(svc, *argv):
    """argv under the shim, in the namespace (the shim needs only ipkitd's socket)."""
    return svc.link.start("env", "LD_PRELOAD=" + SHIM, "IPKITD_SOCKET=" + svc.sock,
                          "IPKIT_PRELOAD_STATS=1", *argv)


def wait_http(link, url, timeout=15):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = link.run("curl", "-g", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "2", url,
                     check=False, timeout=10)
        if r.stdout.decode().strip() == "200":
            return
        time.sleep(0.2)
    raise AssertionError("no HTTP server at " + url)


def finish(p, timeout=120):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def test_preload_curl_get_32mib_from_linux_http_server(rig, tmp_path):
    """Debian's curl under the shim fetches 32 MiB from Linux's python3 -m http.server."""
    link = rig.link
    link.start("/usr/bin/python3", "-m", "http.server", "--bind", link.linux_ip, "8000",
               "--directory", str(rig.data))
    url = "http://%s:8000/big" % link.linux_ip
    wait_http(link, url)
    out = tmp_path / "got"
    rc, _, err = finish(shimmed(rig, "curl", "-sS", "-o", str(out), url))
    assert rc == 0, err
    assert sha(out) == sha(rig.data / "big")
    st = stats(err)
    through_ipkitd(st, rx=SIZE)
    assert st["connects"] == 1, st


def test_preload_python_http_server_fetched_by_linux_curl(rig, tmp_path):
    """python3 -m http.server (threads) under the shim; Linux's curl fetches 32 MiB
    three times in parallel; then SIGINT ends the server, which prints its stats."""
    link = rig.link
    srv = shimmed(rig, "/usr/bin/python3", "-m", "http.server", "--bind", "0.0.0.0", "8080",
                  "--directory", str(rig.data))
    url = "http://%s:8080/big" % link.ipk_ip
    wait_http(link, url)
    outs = [tmp_path / ("got%d" % i) for i in range(3)]
    curls = [link.start("curl", "-sS", "-o", str(o), url) for o in outs]
    for c in curls:
        rc, _, err = finish(c)
        assert rc == 0, err
    want = sha(rig.data / "big")
    assert all(sha(o) == want for o in outs)
    srv.send_signal(signal.SIGINT)
    rc, _, err = finish(srv, 30)
    st = stats(err)
    through_ipkitd(st, tx=3 * SIZE)
    assert st["accepts"] >= 4, st  # the readiness probe and the three transfers


def test_preload_socat_both_ways(rig, tmp_path):
    """socat under the shim sends 32 MiB to a Linux socat, then receives 32 MiB from one."""
    link = rig.link
    src = str(rig.data / "big")
    got1, got2 = tmp_path / "got1", tmp_path / "got2"
    sink = link.start("socat", "-u", "TCP-LISTEN:9000,reuseaddr", "CREATE:%s" % got1)
    time.sleep(0.3)
    rc, _, err = finish(shimmed(rig, "socat", "-u", "OPEN:%s" % src,
                                "TCP:%s:9000" % link.linux_ip))
    assert rc == 0, err
    through_ipkitd(stats(err), tx=SIZE)
    assert finish(sink)[0] == 0
    recv = shimmed(rig, "socat", "-u", "TCP-LISTEN:9001,reuseaddr", "CREATE:%s" % got2)
    time.sleep(0.5)
    r = link.run("socat", "-u", "OPEN:%s" % src, "TCP:%s:9001" % link.ipk_ip, timeout=120)
    assert r.returncode == 0
    rc, _, err = finish(recv)
    assert rc == 0, err
    through_ipkitd(stats(err), rx=SIZE)
    assert sha(got1) == sha(got2) == sha(src)


# A Linux client of the accept-then-fork server below: NCLI connections at once,
# each sends UP random bytes (its own), then reads the server's SHA-256 of what it
# got, a newline, and the DOWN-byte file, then the end of the stream; prints one
# line per connection: "ok" or what went wrong.
FORK_CLIENT = r"""
import hashlib, os, socket, sys, threading
ip, port, n, up, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
res = [None] * n
def one(i):
    try:
        data = os.urandom(up)
        s = socket.create_connection((ip, port), timeout=60)
        s.sendall(data)
        got = b""
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            got += b
        line, _, body = got.partition(b"\n")
        ok = line.split()[0].decode() == hashlib.sha256(data).hexdigest()
        ok2 = hashlib.sha256(body).hexdigest() == want
        res[i] = "ok" if ok and ok2 else "bad up %s down %s (%d bytes)" % (ok, ok2, len(body))
    except Exception as e:
        res[i] = "error %r" % e
t = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[x.start() for x in t]
[x.join(120) for x in t]
print("\n".join(str(r) for r in res))
"""


def test_preload_socat_fork_server_accept_then_fork(rig, tmp_path):
    """socat TCP-LISTEN:P,fork under the shim: the classic accept-then-fork server
    (socat's child owns the accepted connection, the parent closes its copy at
    once). Four Linux clients at once each upload 4 MiB and get back its SHA-256
    (sha256sum in the child's shell) and an 8 MiB file, verified; twice, so the
    parent keeps serving after its children are gone. Before: the child's socket
    answered EBADF (socat: "Bad file descriptor"), the clients got nothing."""
    link = rig.link
    down = tmp_path / "down"
    with open(down, "wb") as f:
        f.write(os.urandom(8 << 20))
    up = 4 << 20
    srv = shimmed(rig, "socat", "TCP-LISTEN:9003,fork,reuseaddr",
                  "SYSTEM:head -c %d | sha256sum; cat %s" % (up, down))
    time.sleep(0.5)
    for _ in range(2):
        r = link.run("/usr/bin/python3", "-c", FORK_CLIENT, link.ipk_ip, "9003", "4", str(up),
                     sha(down), timeout=150)
        lines = r.stdout.decode().split("\n")
        assert r.returncode == 0 and lines[:4] == ["ok"] * 4, r.stdout.decode() + r.stderr.decode()
    srv.send_signal(signal.SIGTERM)
    rc, _, err = finish(srv, 30)
    st = stats(err)
    assert st["ipk"] >= 1 and st["kern"] == 0 and st["accepts"] >= 8, st


# A Linux client of an echo server: NCLI connections at once, each sends UP random
# bytes (a thread), ends its half, reads the echo to the end; prints one line each:
# "ok" or what went wrong.
ECHO_CLIENT = r"""
import hashlib, os, socket, sys, threading
ip, port, n, up = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
res = [None] * n
def one(i):
    try:
        data = os.urandom(up)
        s = socket.create_connection((ip, port), timeout=60)
        def tx():
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        t = threading.Thread(target=tx)
        t.start()
        h, k = hashlib.sha256(), 0
        res[i] = 0
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            h.update(b)
            k += len(b)
            res[i] = k
        t.join()
        ok = h.hexdigest() == hashlib.sha256(data).hexdigest()
        res[i] = "ok" if ok else "bad echo: %d bytes of %d" % (k, up)
    except Exception as e:
        res[i] = "error %r after %s bytes" % (e, res[i])
th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[t.start() for t in th]
[t.join() for t in th]
print("\n".join(res))
"""


def test_preload_connection_kept_across_exec_socat_nofork(rig):
    """socat TCP-LISTEN:P EXEC:cat,nofork under the shim: socat accepts, puts the
    connected socket on cat's stdin and stdout and execs cat in its own place
    (execvp); cat, under the shim too, echoes 8 MiB to a Linux client, verified by
    SHA-256. Then inetd's pattern, one level deeper: with fork, socat's child
    execs a shell script with the connection, the shell forks and execs cat and
    leaves with _exit after it; four clients at once, twice. Before, the new
    image saw a bare eventfd (cat: "Bad file descriptor"), the clients a reset;
    and a process leaving with _exit reset its connections, where Linux ends them
    with a FIN. (cat closes stderr before the shim's statistics line: none here.)"""
    link = rig.link
    srv = shimmed(rig, "socat", "TCP-LISTEN:9012,reuseaddr", "EXEC:cat,nofork")
    time.sleep(0.5)
    r = link.run("/usr/bin/python3", "-c", ECHO_CLIENT, link.ipk_ip, "9012", "1", str(8 << 20),
                 timeout=150)
    assert r.stdout.decode().split("\n")[:1] == ["ok"], r.stdout.decode() + r.stderr.decode()
    rc, _, err = finish(srv, 30)
    assert rc == 0, err
    sc = rig.data / "echo.sh"
    sc.write_text("#!/bin/sh\ncat\n")
    sc.chmod(0o755)
    srv = shimmed(rig, "socat", "TCP-LISTEN:9013,fork,reuseaddr", "EXEC:%s,nofork" % sc)
    time.sleep(0.5)
    for _ in range(2):
        r = link.run("/usr/bin/python3", "-c", ECHO_CLIENT, link.ipk_ip, "9013", "4",
                     str(2 << 20), timeout=150)
        lines = r.stdout.decode().split("\n")
        assert r.returncode == 0 and lines[:4] == ["ok"] * 4, r.stdout.decode() + r.stderr.decode()
    srv.send_signal(signal.SIGTERM)
    finish(srv, 30)


def test_preload_exit_without_handlers_keeps_written_bytes(rig):
    """inetd's pattern with a shell's builtin: socat TCP-LISTEN,fork execs a
    script whose `printf` (dash's builtin) writes 1,000 lines and whose dash then
    leaves with _exit, no exit handlers, at once. On Linux the bytes are in the
    kernel when write returns and go out with the FIN; under the shim they were
    SENDs in the ring that ipkitd might not have taken before it saw the process
    go. 20 connections, each must get all 1,000 lines and the end of the stream."""
    link = rig.link
    sc = rig.data / "lines.sh"
    sc.write_text("#!/bin/sh\ni=0\nwhile [ $i -lt 1000 ]; do printf 'line %d\\n' $i; "
                  "i=$((i+1)); done\n")
    sc.chmod(0o755)
    srv = shimmed(rig, "socat", "TCP-LISTEN:9016,fork,reuseaddr", "EXEC:%s,nofork" % sc)
    time.sleep(0.5)
    want = "".join("line %d\n" % i for i in range(1000))
    try:
        for k in range(20):
            r = link.run("socat", "-u", "TCP:%s:9016" % link.ipk_ip, "-", timeout=30)
            assert r.returncode == 0 and r.stdout.decode() == want, \
                (k, len(r.stdout), r.stderr.decode())
    finally:
        srv.send_signal(signal.SIGTERM)
        finish(srv, 30)


# Node.js's http server (libuv's epoll loop): GET sends the file, POST answers
# the SHA-256 of the body; after N requests it exits (exit handlers run).
NODE_SERVER = r"""
const http = require('http'), fs = require('fs'), crypto = require('crypto');
const body = fs.readFileSync(process.argv[1]);
let left = parseInt(process.argv[2]);
const srv = http.createServer((req, res) => {
  const done = () => { if (--left === 0) srv.close(() => process.exit(0)); };
  res.on('finish', done);
  if (req.method === 'POST') {
    const h = crypto.createHash('sha256');
    req.on('data', d => h.update(d));
    req.on('end', () => res.end(h.digest('hex')));
    return;
  }
  res.writeHead(200, {'Content-Length': body.length});
  res.end(body);
});
srv.keepAliveTimeout = 100;
srv.listen(9017, '0.0.0.0', () => console.log('listening'));
"""


def test_preload_nodejs_http_server(rig, tmp_path):
    """Node.js's http server under the shim (libuv: epoll, accept4, writev, its
    own threads with small stacks): four Linux curls fetch 32 MiB at once, then
    one POSTs 32 MiB and gets its SHA-256 back. Every transfer verified; the
    shim's statistics show every socket on ipkitd. Before, the shim's 256 KiB of
    static TLS made node's small-stack threads fail (pthread_create: EINVAL)."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node not installed (apt-get install nodejs)")
    link = rig.link
    big = rig.data / "big"
    srv = shimmed(rig, node, "-e", NODE_SERVER, str(big), "5")
    line = srv.stdout.readline().decode()
    assert "listening" in line, line + srv.stderr.read().decode() if srv.poll() is not None else line
    outs = [tmp_path / ("got%d" % i) for i in range(4)]
    ps = [link.start("curl", "-s", "-o", str(o), "http://%s:9017/" % link.ipk_ip) for o in outs]
    for p in ps:
        assert finish(p, 120)[0] == 0
    for o in outs:
        assert sha(o) == sha(big)
    r = link.run("curl", "-s", "--data-binary", "@%s" % big, "http://%s:9017/" % link.ipk_ip,
                 timeout=120)
    assert r.stdout.decode().strip() == sha(big), r.stdout.decode()[:200]
    rc, _, err = finish(srv, 60)
    assert rc == 0, err[-2000:]
    assert "pthread_create" not in err, err[-2000:]
    through_ipkitd(stats(err), tx=4 * SIZE, rx=SIZE)


def test_preload_loopback_to_kernel_servers(rig, tmp_path):
    """A program under the shim reaches the kernel's own local servers: Linux's
    python3 http.server on 127.0.0.1 (no ipkit application listens there), curl
    under the shim fetches 32 MiB from it (SHA-256), asyncio under the shim too
    (a non-blocking connect); a port nobody listens on is refused as on Linux;
    a connected and an unconnected UDP socket under the shim get answers from a
    kernel UDP server on 127.0.0.1.
    ipkit applications still reach each other over loopback through ipkitd
    (preload_redis, pl_calls). Before, every loopback connect went to ipkitd and
    a kernel server was unreachable ("connection refused")."""
    link = rig.link
    big = rig.data / "big"
    link.start("/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1", "8001",
               "--directory", str(rig.data))
    url = "http://127.0.0.1:8001/big"
    wait_http(link, url)
    got = tmp_path / "got"
    rc, _, err = finish(shimmed(rig, "curl", "-s", "-o", str(got), url))
    assert rc == 0 and sha(got) == sha(big), err[-2000:]
    m = re.search(r"loopback_to_kernel (\d+)", err)
    assert m and int(m.group(1)) == 1, err[-2000:]
    rc, out, err = finish(shimmed(rig, "/usr/bin/python3", "-c", r"""
import asyncio, hashlib
async def main():
    r, w = await asyncio.open_connection("127.0.0.1", 8001)
    w.write(b"GET /big HTTP/1.0\r\n\r\n")
    await w.drain()
    d = await r.read()
    print(hashlib.sha256(d.split(b"\r\n\r\n", 1)[1]).hexdigest())
asyncio.run(main())
"""))
    assert rc == 0 and out.strip() == sha(big), out + err[-2000:]
    rc, out, err = finish(shimmed(rig, "curl", "-s", "-o", "/dev/null", "http://127.0.0.1:8009/"))
    assert rc == 7, (rc, err[-1000:])  # curl: couldn't connect, as on Linux
    # UDP: a kernel echo on 127.0.0.1 (a local resolver's place): a connected
    # socket and an unconnected one under the shim both get their answers
    link.start("/usr/bin/python3", "-c", r"""
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 8053))
while True:
    b, a = u.recvfrom(2048)
    u.sendto(b"re:" + b, a)
""")
    time.sleep(0.3)
    rc, out, err = finish(shimmed(rig, "/usr/bin/python3", "-c", r"""
import socket
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
a.settimeout(5)
a.connect(("127.0.0.1", 8053))
a.send(b"one")
print(a.recv(100).decode())
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b.settimeout(5)
b.sendto(b"two", ("127.0.0.1", 8053))
print(b.recvfrom(100)[0].decode())
"""))
    assert rc == 0 and out.split() == ["re:one", "re:two"], out + err[-2000:]
    m = re.search(r"loopback_to_kernel (\d+)", err)
    assert m and int(m.group(1)) == 2, err[-2000:]


def test_preload_kernel_loopback_reaches_shimmed_listener(rig, tmp_path):
    """The other way: Linux's curl (on the kernel's sockets) fetches 32 MiB over
    127.0.0.1 from python3 -m http.server under the shim, three at once, while
    a Linux curl over the link fetches it through ipkitd; and a socat under the
    shim with fork (a fork family) answers kernel clients over loopback from its
    children. On Linux a server on 0.0.0.0 answers on loopback too; before, a
    listener under the shim listened on ipkitd only and the kernel's loopback
    found nobody (connection refused)."""
    link = rig.link
    big = rig.data / "big"
    srv = shimmed(rig, "/usr/bin/python3", "-m", "http.server", "--bind", "0.0.0.0", "8002",
                  "--directory", str(rig.data))
    wait_http(link, "http://127.0.0.1:8002/big")
    outs = [tmp_path / ("lo%d" % i) for i in range(3)]
    ps = [link.start("curl", "-s", "-o", str(o), "http://127.0.0.1:8002/big") for o in outs]
    ps.append(link.start("curl", "-s", "-o", str(tmp_path / "wire"),
                         "http://%s:8002/big" % link.ipk_ip))
    for p in ps:
        assert finish(p, 120)[0] == 0
    for o in outs + [tmp_path / "wire"]:
        assert sha(o) == sha(big)
    srv.send_signal(signal.SIGINT)
    finish(srv, 30)
    srv = shimmed(rig, "socat", "TCP-LISTEN:8003,fork,reuseaddr", "SYSTEM:echo hello")
    time.sleep(0.5)
    for _ in range(3):
        r = link.run("socat", "-u", "TCP:127.0.0.1:8003", "-", timeout=30)
        assert r.returncode == 0 and r.stdout == b"hello\n", r.stderr.decode()
    srv.send_signal(signal.SIGTERM)
    finish(srv, 30)


# A server with a backlog of 1 that takes its time: listens, says so, sleeps
# 1.5 s, then accepts N connections one by one, answering each one's 4 bytes.
SLOW_ACCEPT = r"""
import socket, sys, time
n = int(sys.argv[1])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", 9014))
l.listen(1)
print("listening", flush=True)
time.sleep(1.5)
for _ in range(n):
    c, _ = l.accept()
    b = b""
    while len(b) < 4:
        k = c.recv(4 - len(b))
        if not k:
            break
        b += k
    c.sendall(b"ok" + b)
    c.close()
print("served", n, flush=True)
"""

# N Linux clients at once on PORT, each sends SEND (its number, 4 digits, when
# "num"; nothing when "-"), reads to the end of the stream and wants WANT and then
# what it sent; prints one line each: "ok" or what went wrong.
BURST_CLIENT = r"""
import socket, sys, threading
ip, port, n, send, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
    sys.argv[5].encode()
res = [None] * n
def one(i):
    try:
        s = socket.create_connection((ip, port), timeout=30)
        m = b"%04d" % i if send == "num" else b""
        s.sendall(m)
        got = b""
        while True:
            k = s.recv(64)
            if not k:
                break
            got += k
        res[i] = "ok" if got == want + m else "bad %r" % got
    except Exception as e:
        res[i] = "error %r" % e
th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[t.start() for t in th]
[t.join() for t in th]
print("\n".join(res))
"""


def test_preload_full_backlog_makes_clients_wait_not_fail(rig):
    """A python3 server under the shim listens with a backlog of 1 and accepts
    only after 1.5 s; 8 Linux clients connect at once. Linux drops a SYN while
    the accept queue is full and the client's retransmission gets in later, so
    every client is served. ipkitd answered such a SYN with a RST: clients failed
    (a reset, in 2 runs of 2 with that answer put back). The daemon's counters
    show the dropped SYNs."""
    link = rig.link
    srv = shimmed(rig, "/usr/bin/python3", "-c", SLOW_ACCEPT, "8")
    line = srv.stdout.readline().decode()
    assert "listening" in line, line
    r = link.run("/usr/bin/python3", "-c", BURST_CLIENT, link.ipk_ip, "9014", "8", "num", "ok",
                 timeout=120)
    lines = r.stdout.decode().split("\n")
    assert r.returncode == 0 and lines[:8] == ["ok"] * 8, r.stdout.decode() + r.stderr.decode()
    rc, out, err = finish(srv, 30)
    assert rc == 0 and "served 8" in out, out + err
    rig.daemon.send_signal(signal.SIGUSR1)
    rig.wait_log(r"worker 0 stack: ")
    m = re.search(r"worker 0 stack: .* drops:.* tcp_backlog (\d+)", rig.log())
    assert m and int(m.group(1)) >= 1, rig.log()


# nginx's shape: the parent listens and never accepts; two forked children start
# accepting after a second and serve until no connection came for 3 s.
FORK_LATE_ACCEPT = r"""
import os, socket, time
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", 9015))
l.listen(16)
kids = []
for k in range(2):
    pid = os.fork()
    if pid == 0:
        time.sleep(1.0)
        l.settimeout(3.0)
        n = 0
        try:
            while True:
                c, _ = l.accept()
                c.sendall(b"child")
                c.close()
                n += 1
        except socket.timeout:
            pass
        os._exit(0 if n else 1)
    kids.append(pid)
print("listening", flush=True)
bad = sum(1 for p in kids if os.waitpid(p, 0)[1] != 0)
print("done", bad, flush=True)
"""



def test_preload_fork_family_never_queues_on_a_parent_that_does_not_accept(rig):
    """A python3 server under the shim in nginx's shape: the parent listens, forks
    two children and never accepts; the children start accepting a second later.
    Six Linux clients connect at once, before any child waits. On Linux they wait
    in the shared queue and the children serve them all. ipkitd gave some of them
    to the parent's listener, where they waited forever (the clients timed out);
    now a fork family's connection goes only to a listener that waits, and until
    one does the port has no room (the SYN comes again)."""
    link = rig.link
    srv = shimmed(rig, "/usr/bin/python3", "-c", FORK_LATE_ACCEPT)
    line = srv.stdout.readline().decode()
    assert "listening" in line, line
    r = link.run("/usr/bin/python3", "-c", BURST_CLIENT, link.ipk_ip, "9015", "6", "-", "child",
                 timeout=120)
    lines = r.stdout.decode().split("\n")
    assert r.returncode == 0 and lines[:6] == ["ok"] * 6, r.stdout.decode() + r.stderr.decode()
    rc, out, err = finish(srv, 60)
    assert rc == 0 and "done 0" in out, out + err


# socat's LISTEN addresses tell the program they start the accepted socket's own
# address and its peer's (getsockname, getpeername), as the socat manual says.
NAMES = "SYSTEM:echo $SOCAT_SOCKADDR $SOCAT_SOCKPORT $SOCAT_PEERADDR"


def socat_names(link, target):
    """What a Linux socat connecting to target reads from the NAMES server."""
    r = link.run("socat", "-u", target, "-", timeout=30)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode().split()


def test_preload_socat_accepted_socket_name(rig):
    """An accepted socket's getsockname under the shim is the address and port the
    Linux client connected to, not its listener's 0.0.0.0 (what Linux answers;
    socat hands it to its child as SOCAT_SOCKADDR). Before, the shim answered
    0.0.0.0."""
    link = rig.link
    srv = shimmed(rig, "socat", "TCP-LISTEN:9004,reuseaddr,fork", NAMES)
    time.sleep(0.5)
    for _ in range(2):
        got = socat_names(link, "TCP:%s:9004" % link.ipk_ip)
        assert got == [link.ipk_ip, "9004", link.linux_ip], got
    srv.send_signal(signal.SIGTERM)
    rc, _, err = finish(srv, 30)
    st = stats(err)
    assert st["ipk"] >= 1 and st["kern"] == 0 and st["accepts"] >= 2, st


# A server that waits for its client's "go", sends 5 bytes and closes with SO_LINGER
# {1, 0} (an abortive close), and a client that reads until the stream ends and says
# how it ended. The "go": a reset that reaches the client before its connect()
# returned fails the connect (ECONNRESET), on Linux too.
LINGER_SERVER = r"""
import socket, struct, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(4)
print("ready", flush=True)
for _ in range(2):
    c, _ = s.accept()
    got = b""
    while len(got) < 2:
        b = c.recv(2 - len(got))
        if not b:
            break
        got += b
    c.sendall(b"hello")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
"""
LINGER_CLIENT = r"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
if len(sys.argv) > 3:  # "go", or bytes the server will not read
    c.sendall(sys.argv[3].encode())
got = b""
try:
    while True:
        b = c.recv(100)
        if not b:
            print("eof", got.decode(), flush=True)
            break
        got += b
except ConnectionResetError:
    print("reset", got.decode(), flush=True)
"""


def reset_twice(rig, server, port, send):
    """server (python3 under the shim) on port; a Linux LINGER_CLIENT sending
    `send` twice: each reads "hello", then the connection is reset; the server's
    two accepts went through ipkitd."""
    link = rig.link
    srv = shimmed(rig, "/usr/bin/python3", "-c", server, port)
    line = srv.stdout.readline().decode()
    assert "ready" in line, line + srv.stderr.read().decode()
    for _ in range(2):
        r = link.run("/usr/bin/python3", "-c", LINGER_CLIENT, link.ipk_ip, port, send,
                     timeout=30)
        assert r.stdout.decode().split() == ["reset", "hello"], r.stdout + r.stderr
    rc, _, err = finish(srv, 30)
    assert rc == 0, err
    st = stats(err)
    assert st["ipk"] >= 1 and st["kern"] == 0 and st["accepts"] == 2, st


def test_preload_linger0_close_resets_linux_peer(rig):
    """A python3 server under the shim sends 5 bytes and closes with SO_LINGER
    {1, 0}: the Linux client reads the 5 bytes, then the connection is reset (not
    an end of stream), as from a server on Linux's sockets. Before, the shim kept
    the option and closed with a FIN."""
    reset_twice(rig, LINGER_SERVER, "9006", "go")


# A server that sends 5 bytes, waits until its peer's bytes are in (the client
# sends them once its connect() returned: no reset can beat that), and closes
# without reading them.
UNREAD_SERVER = r"""
import select, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(4)
print("ready", flush=True)
for _ in range(2):
    c, _ = s.accept()
    c.sendall(b"hello")
    select.select([c], [], [], 20)
    c.close()
"""


def test_preload_close_with_unread_bytes_resets_linux_peer(rig):
    """A python3 server under the shim closes a connection whose peer's 3 bytes it
    never read: the Linux client reads the server's 5 bytes, then the connection
    is reset, as from a server on Linux's sockets (tcp_close's "unread data was
    tossed"). Before, the shim ended it with a FIN."""
    reset_twice(rig, UNREAD_SERVER, "9007", "xyz")


def test_preload_nc_both_ways(rig, tmp_path):
    """Debian's nc (OpenBSD) under the shim, both directions, 32 MiB each."""
    if subprocess.run(["sh", "-c", "command -v nc"], capture_output=True).returncode:
        pytest.skip("nc (netcat-openbsd) not installed")
    link = rig.link
    src = str(rig.data / "big")
    got1, got2 = tmp_path / "got1", tmp_path / "got2"
    sink = link.start("sh", "-c", "nc -l -p 9100 > %s" % got1)
    time.sleep(0.3)
    rc, _, err = finish(shimmed(rig, "sh", "-c", "nc -N %s 9100 < %s" % (link.linux_ip, src)))
    assert rc == 0, err
    through_ipkitd(stats(err), tx=SIZE)
    finish(sink)
    recv = shimmed(rig, "sh", "-c", "nc -l -p 9101 > %s" % got2)
    time.sleep(0.5)
    r = link.run("sh", "-c", "nc -N %s 9101 < %s" % (link.ipk_ip, src), timeout=120)
    assert r.returncode == 0
    rc, _, err = finish(recv)
    assert rc == 0, err
    through_ipkitd(stats(err), rx=SIZE)
    assert sha(got1) == sha(got2) == sha(src)


def iperf_bytes(out, key):
    m = re.search(r'"%s":\s*\{[^{}]*"bytes":\s*(\d+)' % key, out)
    assert m, out[-3000:]
    return int(m.group(1))


def test_preload_iperf3_both_ways(rig):
    """iperf3 client under the shim against a Linux iperf3 server, then the reverse
    (-R: the server under the shim sends); 2 s each, bytes counted by both sides."""
    link = rig.link
    srv = link.start("iperf3", "-s", "-1", "-p", "5201")
    time.sleep(0.5)
    rc, out, err = finish(shimmed(rig, "iperf3", "-c", link.linux_ip, "-p", "5201", "-t", "2",
                                  "-J"))
    assert rc == 0, out[-2000:] + err
    sent = iperf_bytes(out, "sum_sent")
    assert sent > 0
    through_ipkitd(stats(err), tx=sent, reset_at_end=True)
    finish(srv)
    srv = shimmed(rig, "iperf3", "-s", "-1", "-4", "-p", "5202")  # -4: IPv6 stays on the kernel
    time.sleep(0.5)
    r = link.run("iperf3", "-c", link.ipk_ip, "-p", "5202", "-t", "2", "-R", "-J",
                 check=False, timeout=60)
    assert r.returncode == 0, r.stdout.decode()[-2000:]
    got = iperf_bytes(r.stdout.decode(), "sum_received")
    rc, out, err = finish(srv)
    through_ipkitd(stats(err), tx=got, reset_at_end=True)


def test_preload_wrk_epoll_client_against_linux_http_server(rig):
    """wrk (an epoll event loop, non-blocking connects) under the shim, 4
    connections against Linux's http.server for 2 s: requests complete, no socket
    errors, all of it through ipkitd."""
    link = rig.link
    link.start("/usr/bin/python3", "-m", "http.server", "--bind", link.linux_ip, "8001",
               "--directory", str(rig.data))
    url = "http://%s:8001/" % link.linux_ip
    wait_http(link, url)
    rc, out, err = finish(shimmed(rig, "wrk", "-t", "1", "-c", "4", "-d", "2", url))
    assert rc == 0, out + err
    m = re.search(r"(\d+) requests in", out)
    assert m and int(m.group(1)) > 10, out
    assert "Socket errors" not in out, out
    st = stats(err)
    through_ipkitd(st)
    assert st["connects"] >= 4, st


# ------------------------------------------------------------ IPv6 (ipkitd --ip6)

@pytest.fixture
def rig6(make_link, tmp_path):
    from test_ipkitd import Svc6
    if not os.path.exists(SHIM):
        pytest.skip("libipkit-preload not built in %s" % BUILD)
    svc = Svc6(make_link("tap"), tmp_path)
    data = tmp_path / "www"
    data.mkdir()
    with open(data / "big", "wb") as f:
        f.write(os.urandom(SIZE))
    svc.data = data
    return svc


def test_preload6_curl_get_32mib_over_ipv6(rig6, tmp_path):
    """curl -6 -g http://[linux6]:8000/big under the shim, from Linux's python3 -m
    http.server bound to its IPv6 address: 32 MiB, SHA-256 equal, the AF_INET6
    socket ipkitd's (no kernel socket of either family)."""
    link = rig6.link
    link.start("/usr/bin/python3", "-m", "http.server", "--bind", rig6.linux6, "8000",
               "--directory", str(rig6.data))
    url = "http://[%s]:8000/big" % rig6.linux6
    wait_http(link, url)
    out = tmp_path / "got"
    rc, _, err = finish(shimmed(rig6, "curl", "-6", "-g", "-sS", "-o", str(out), url))
    assert rc == 0, err
    assert sha(out) == sha(rig6.data / "big")
    st = stats(err)
    through_ipkitd(st, rx=SIZE)
    assert st["connects"] == 1, st


def test_preload6_python_http_server_bind_any_dual_stack(rig6, tmp_path):
    """python3 -m http.server --bind :: under the shim (an AF_INET6 socket, V6ONLY
    0): Linux's curl -6 and curl over IPv4 both fetch 32 MiB (SHA-256); the
    server's log shows the IPv4 client as ::ffff:a.b.c.d, as on Linux."""
    link = rig6.link
    srv = shimmed(rig6, "/usr/bin/python3", "-m", "http.server", "--bind", "::", "8080",
                  "--directory", str(rig6.data))
    url6 = "http://[%s]:8080/big" % rig6.ipk6
    url4 = "http://%s:8080/big" % link.ipk_ip
    wait_http(link, url6)
    outs = [tmp_path / "got6", tmp_path / "got4"]
    curls = [link.start("curl", "-6", "-g", "-sS", "-o", str(outs[0]), url6),
             link.start("curl", "-4", "-sS", "-o", str(outs[1]), url4)]
    for c in curls:
        rc, _, err = finish(c)
        assert rc == 0, err
    want = sha(rig6.data / "big")
    assert all(sha(o) == want for o in outs)
    srv.send_signal(signal.SIGINT)
    rc, _, err = finish(srv, 30)
    assert ("::ffff:%s" % link.linux_ip) in err, err[-3000:]
    assert rig6.linux6 in err, err[-3000:]
    st = stats(err)
    through_ipkitd(st, tx=2 * SIZE)
    assert st["accepts"] >= 3, st


def test_preload6_socat_accepted_socket_name_dual_stack(rig6):
    """A dual-stack listener (TCP6-LISTEN on ::, ipv6only=0) under the shim: the
    accepted socket's own name is the IPv6 address the client connected to, or
    ::ffff:a.b.c.d for an IPv4 client, as Linux answers (socat prints IPv6
    addresses in full)."""
    import ipaddress

    def full(a):
        return "[%s]" % ipaddress.IPv6Address(a).exploded
    link = rig6.link
    srv = shimmed(rig6, "socat", "TCP6-LISTEN:9005,reuseaddr,fork,ipv6only=0", NAMES)
    time.sleep(0.5)
    got = socat_names(link, "TCP6:[%s]:9005" % rig6.ipk6)
    assert got == [full(rig6.ipk6), "9005", full(rig6.linux6)], got
    got = socat_names(link, "TCP4:%s:9005" % link.ipk_ip)
    assert got == [full("::ffff:" + link.ipk_ip), "9005", full("::ffff:" + link.linux_ip)], got
    srv.send_signal(signal.SIGTERM)
    rc, _, err = finish(srv, 30)
    st = stats(err)
    assert st["ipk"] >= 1 and st["kern"] == 0 and st["accepts"] >= 2, st


def redis_dir():
    """An unpacked Debian redis (tests/preload/debroot.sh): $IPKIT_REDIS_DIR or
    build-debroot at the repo's root; None when there is none."""
    d = os.environ.get("IPKIT_REDIS_DIR") or os.path.join(os.path.dirname(__file__), "..", "..",
                                                           "build-debroot")
    ok = all(os.path.exists(os.path.join(d, "usr", "bin", n)) for n in ("redis-server",
                                                                       "redis-cli"))
    return d if ok else None


NGINX_PROXY_CONF = """master_process on;
user root;
daemon off;
worker_processes 2;
error_log %(d)s/error.log;
pid %(d)s/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %(d)s/tmp; proxy_temp_path %(d)s/tmp; fastcgi_temp_path %(d)s/tmp;
  uwsgi_temp_path %(d)s/tmp; scgi_temp_path %(d)s/tmp;
  upstream wire { server %(linux)s:8000; keepalive 8; }
  upstream lo { server 127.0.0.1:8004; }
  server { listen 8080;
    location /wire/ { proxy_pass http://wire/; proxy_http_version 1.1;
                      proxy_set_header Connection ""; }
    location /lo/ { proxy_pass http://lo/; }
  }
}
"""


def test_preload_nginx_reverse_proxy_to_wire_and_loopback(rig, tmp_path):
    """Debian's nginx under the shim (a master, two workers) as a reverse proxy:
    to Linux's http.server over the link (upstream keep-alive) and to another on
    the kernel's 127.0.0.1. Linux curls fetch 32 MiB through each three times
    (SHA-256; nginx spools to its temp files), then wrk runs 2 s through the link
    upstream with no error. nginx adds its upstream socket to epoll before
    connect(): the loopback one must move to the kernel with that registration
    (before: "connect() failed (111: Connection refused) while connecting to
    upstream", a 502)."""
    d = redis_dir()  # the same unpack (tests/preload/debroot.sh)
    nginx = os.path.join(d, "usr", "sbin", "nginx") if d else None
    if not nginx or not os.path.exists(nginx):
        pytest.skip("no unpacked nginx (tests/preload/debroot.sh)")
    link = rig.link
    big = rig.data / "big"
    (rig.data / "small").write_bytes(b"ipkit\n")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "nginx.conf").write_text(NGINX_PROXY_CONF % {"d": tmp_path,
                                                             "linux": link.linux_ip})
    link.start("/usr/bin/python3", "-m", "http.server", "--bind", link.linux_ip, "8000",
               "--directory", str(rig.data))
    link.start("/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1", "8004",
               "--directory", str(rig.data))
    wait_http(link, "http://%s:8000/small" % link.linux_ip)
    wait_http(link, "http://127.0.0.1:8004/small")
    srv = shimmed(rig, nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"))
    wait_http(link, "http://%s:8080/wire/small" % link.ipk_ip, timeout=30)
    for path in ("wire", "lo"):
        for k in range(3):
            out = tmp_path / ("got_%s%d" % (path, k))
            r = link.run("curl", "-s", "-o", str(out), "-w", "%{http_code}",
                         "http://%s:8080/%s/big" % (link.ipk_ip, path), timeout=120)
            assert r.stdout == b"200" and sha(out) == sha(big), (path, k, r.stdout,
                                                                  (tmp_path / "error.log").read_text()[-2000:])
    r = link.run("wrk", "-t", "2", "-c", "16", "-d", "2",
                 "http://%s:8080/wire/small" % link.ipk_ip, timeout=60)
    out = r.stdout.decode()
    assert r.returncode == 0 and "Socket errors" not in out and "Non-2xx" not in out, out
    srv.send_signal(signal.SIGTERM)
    finish(srv, 30)
    log = (tmp_path / "error.log").read_text()  # nginx's stderr: the shim's lines too
    m = [int(x) for x in re.findall(r"loopback_to_kernel (\d+)", log)]
    assert sum(m) >= 3, log[-3000:]  # the three loopback upstream connections


def test_preload6_redis_default_bind_both_families(rig6, tmp_path):
    """Debian's redis-server under the shim with its default bind (`* -::*`: an
    AF_INET socket on 0.0.0.0 and an AF_INET6 V6ONLY one on ::, the same port);
    Linux's redis-cli SETs a 1 MiB value over IPv4 and GETs it over IPv6, and the
    other way round (SHA-256 compared); every socket of the server ipkitd's."""
    import base64
    d = redis_dir()
    if not d:
        pytest.skip("no unpacked redis (tests/preload/debroot.sh or IPKIT_REDIS_DIR)")
    link = rig6.link
    server, cli = (os.path.join(d, "usr", "bin", n) for n in ("redis-server", "redis-cli"))
    lib = "LD_LIBRARY_PATH=" + os.path.join(d, "usr", "lib", "x86_64-linux-gnu")
    srv = link.start("env", lib, "LD_PRELOAD=" + SHIM, "IPKITD_SOCKET=" + rig6.sock,
                     "IPKIT_PRELOAD_STATS=1", server, "--port", "6379", "--save", "",
                     "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
                     "--dir", str(tmp_path))

    def cli_run(host, *args, data=None):
        return link.run("env", lib, cli, "-h", host, "-p", "6379", *args, input=data,
                        check=False, timeout=30)

    end = time.monotonic() + 30
    while b"PONG" not in cli_run(rig6.ipk6, "PING").stdout:
        assert time.monotonic() < end and srv.poll() is None, "redis not serving"
        time.sleep(0.1)
    for a, b in ((link.ipk_ip, rig6.ipk6), (rig6.ipk6, link.ipk_ip)):
        val = base64.b64encode(os.urandom(1 << 20))
        r = cli_run(a, "-x", "SET", "big", data=val)
        assert r.stdout.strip() == b"OK", r.stdout + r.stderr
        r = cli_run(b, "--raw", "GET", "big")
        got = r.stdout[:-1]  # --raw adds a newline
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(val).hexdigest(), len(got)
    srv.send_signal(signal.SIGINT)
    rc, out, err = finish(srv, 30)
    st = stats(err)
    assert st["ipk"] >= 2 and st["kern"] == 0 and st["accepts"] >= 5, st
    assert st["rx"] >= 2 * len(val) and st["tx"] >= 2 * len(val), st
