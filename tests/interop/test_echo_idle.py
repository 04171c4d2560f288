"""ipkit-echo's --idle-timeout (issue 14: no client holds a connection forever; the
same option and approach as ipkit-httpd's), and the RST ipkit sends when it aborts a
connection whose peer stopped reading: inside the peer's window (Linux's
tcp_acceptable_seq), so Linux takes it without the client sending anything more.

Each test runs a small Python client in the link's namespace (Linux's own TCP as the
peer, over TAP) that reports what it saw as JSON. Every wait is bounded.
"""
import json

import pytest

from test_httpd_limits import client as httpd_client

# idle: connection A sends one message, reads the echo and goes quiet; connection B
# echoes a message every 0.2 s (SHA-256 of everything sent and received compared)
# until 2 s after A ended. Reports when A saw EOF / reset, measured from its last
# activity, and whether B kept moving.
IDLE = r"""
import hashlib, json, os, select, socket, sys, time
ip, port, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
a = socket.create_connection((ip, port), timeout=5)
b = socket.create_connection((ip, port), timeout=5)
a.sendall(b"hello"); got = b""
while len(got) < 5:
    got += a.recv(16)
a_last = time.monotonic(); a.setblocking(False)
a_end, a_how = None, None
hs, hr, rounds, b_ok = hashlib.sha256(), hashlib.sha256(), 0, True
t0 = time.monotonic()
while time.monotonic() - t0 < limit:
    if a_end is None:
        r, _, _ = select.select([a], [], [], 0)
        if r:
            try:
                d = a.recv(16)
                if not d:
                    a_end, a_how = time.monotonic() - a_last, "eof"
            except ConnectionResetError:
                a_end, a_how = time.monotonic() - a_last, "reset"
    elif time.monotonic() - t0 > a_end + 2.0 + (a_last - t0):
        break
    msg = os.urandom(100)
    hs.update(msg)
    try:
        b.sendall(msg)
        got = b""
        while len(got) < len(msg):
            d = b.recv(len(msg) - len(got))
            if not d:
                break
            got += d
        hr.update(got)
        rounds += 1
    except OSError:
        b_ok = False
        break
    time.sleep(0.2)
b_ok = b_ok and hs.hexdigest() == hr.hexdigest()
print(json.dumps({"a_end": a_end, "a_how": a_how, "b_ok": b_ok, "b_rounds": rounds}))
"""

# noread: send as much as the server lets through without ever reading (the echoes
# fill our small receive buffer, our window closes), then wait, without sending
# again, for the socket to be reset (SO_ERROR ECONNRESET: Linux took ipkit's RST).
NOREAD = r"""
import errno, json, socket, sys, time
ip, port, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.settimeout(5)
s.connect((ip, port))
s.setblocking(False)
data = b"x" * (1 << 20)
sent, reset, t0, last_send = 0, False, time.monotonic(), time.monotonic()
while time.monotonic() - t0 < limit and not reset:
    if sent < len(data) and time.monotonic() - last_send < 0.5:
        try:
            n = s.send(data[sent:sent + 65536])
            sent += n
            if n:
                last_send = time.monotonic()
        except BlockingIOError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            reset = True
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNRESET:
        reset = True
    time.sleep(0.02)
print(json.dumps({"sent": sent, "reset": reset, "secs": time.monotonic() - last_send}))
"""


@pytest.fixture
def tap(make_link):
    return make_link("tap")


def run_py(link, script, *args, limit=10.0):
    r = link.run("/usr/bin/python3", "-c", script, link.ipk_ip, "7", str(limit),
                 *[str(a) for a in args], timeout=limit + 20)
    return json.loads(r.stdout.decode())


def echo_ok(link):
    """A new connection is echoed within a second (the server still works)."""
    r = run_py(link, r"""
import socket, sys, time
t0 = time.monotonic()
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)
s.settimeout(1)
s.sendall(b"ping")
got = b""
while len(got) < 4:
    d = s.recv(4)
    if not d:
        break
    got += d
print('{"ok": %s, "secs": %f}' % ("true" if got == b"ping" else "false", time.monotonic() - t0))
""", limit=5)
    assert r["ok"] and r["secs"] < 1.0, r


def test_echo_idle_connection_closed_busy_one_kept(tap):
    """--idle-timeout 1: the quiet connection is closed (FIN) 1..3 s after its last
    byte; the one that echoes every 0.2 s is not touched and its bytes all come back;
    a new connection is served at once."""
    tap.start_ipk("ipkit-echo", "--udp-port", "0", "--idle-timeout", "1")
    tap.wait_reachable()
    out = run_py(tap, IDLE, limit=10)
    assert out["a_how"] == "eof", out
    assert 0.9 < out["a_end"] < 3.0, out
    assert out["b_ok"] and out["b_rounds"] >= 10, out
    echo_ok(tap)


def test_echo_client_that_stops_reading_is_reset(tap):
    """The client sends 1 MB and never reads: echoes wait in the server, nothing
    moves for the idle timeout, so the server aborts; the socket shows ECONNRESET
    without the client sending anything more."""
    tap.start_ipk("ipkit-echo", "--udp-port", "0", "--idle-timeout", "1")
    tap.wait_reachable()
    out = run_py(tap, NOREAD, limit=10)
    assert out["reset"], out
    assert out["secs"] < 4.0, out
    echo_ok(tap)


def test_echo_idle_timeout_zero_keeps_quiet_connections(tap):
    """--idle-timeout 0 (never): the quiet connection is still open after 3 s."""
    tap.start_ipk("ipkit-echo", "--udp-port", "0", "--idle-timeout", "0")
    tap.wait_reachable()
    out = run_py(tap, IDLE, limit=3)
    assert out["a_end"] is None, out
    assert out["b_ok"], out
    echo_ok(tap)


def test_abort_rst_taken_by_linux_with_closed_window(tap):
    """ipkit-httpd sends 64 MB to a client that never reads: Linux's receive buffer
    fills, it drops what ipkit still had in flight and ACKs with a zero window, so
    SND.NXT lies past the window's right edge. The idle timeout (1 s) aborts the
    connection: a RST at SND.NXT was ignored by Linux (RFC 5961 §3.2; the socket
    stayed open for the whole 6 s), one at the window's edge resets the socket at
    once. The client never sends again (no poke), so only ipkit's own RST counts."""
    tap.start_ipk("ipkit-httpd", "--size", "64M", "--idle-timeout", "1")
    tap.wait_reachable()
    out = httpd_client(tap, 0, r"GET / HTTP/1.1\r\nHost: x\r\n\r\n", limit=6, read=False,
                       poke=100.0)
    assert out["reset"], out
    assert out["secs"] < 4.0, out
