#!/usr/bin/env python3
"""Ping-pong tools for the demo and the figures (Linux sockets).

  pingpong.py server HOST PORT [--spin] epoll echo server (the Linux twin of ipkit-echo);
      --spin polls epoll with a zero timeout (the busy-poll variant of ipkit --busy-poll)
  pingpong.py client HOST PORT SECS [CONNS]
      CONNS connections, each sends 1 byte and waits for it back, for SECS seconds;
      prints "requests/s p50_us p99_us".
"""
import select
import socket
import sys
import time


def server(host, port, spin=False):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(128)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    conns = {}
    while True:
        for fd, _ in ep.poll(0 if spin else 1.0):
            if fd == ls.fileno():
                c, _ = ls.accept()
                c.setblocking(False)
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conns[c.fileno()] = c
                ep.register(c.fileno(), select.EPOLLIN)
                continue
            c = conns[fd]
            try:
                d = c.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            if not d:
                ep.unregister(fd)
                c.close()
                del conns[fd]
            else:
                c.sendall(d)


def client(host, port, secs, nconns):
    socks = []
    for _ in range(nconns):
        s = socket.create_connection((host, port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
    ep = select.epoll()
    sent_at = {}
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN)
    by_fd = {s.fileno(): s for s in socks}
    lat = []
    end = time.monotonic() + secs
    for s in socks:
        sent_at[s.fileno()] = time.monotonic()
        s.send(b"x")
    while time.monotonic() < end:
        for fd, _ in ep.poll(0.5):
            s = by_fd[fd]
            try:
                d = s.recv(64)
            except BlockingIOError:
                continue
            if not d:
                raise SystemExit("peer closed")
            now = time.monotonic()
            lat.append(now - sent_at[fd])
            sent_at[fd] = now
            s.send(b"x")
    for s in socks:
        s.close()
    lat.sort()
    if not lat:
        print("0 0 0")
        return
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e6
    print("%d %.0f %.0f" % (len(lat) / secs, p(0.50), p(0.99)))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]), "--spin" in sys.argv[4:])
    else:
        client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
               int(sys.argv[5]) if len(sys.argv) > 5 else 1)
