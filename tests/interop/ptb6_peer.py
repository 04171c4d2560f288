"""Packet Too Big injector for test_ipv6_ptb.py (run inside the test's namespace).

Reads frames on DEV with an AF_PACKET socket; once ipkit (IPK6) has sent MIN_BIG
TCP datagrams above 1280 bytes, answers the next one with an ICMPv6 Packet Too
Big (MTU 1280, RFC 4443 §3.2) quoting that datagram, from the router address
FROM6. If big datagrams keep coming 0.3 s after a PTB (the quoted segment may
have been acknowledged already, and RFC 5927 says to ignore it then), it sends
another, at most MAX_PTB (20: a loaded machine may read the frames late).
Prints one JSON line with what it saw; bounded in time.
usage: ptb6_peer.py DEV IPK6 FROM6 SECONDS
"""
import json
import socket
import struct
import sys
import time

from scapy.layers.inet6 import IPv6, ICMPv6PacketTooBig
from scapy.layers.l2 import Ether
from scapy.packet import Raw

MIN_BIG = 100
MAX_PTB = 20
MTU = 1280


def main():
    dev, ipk6, from6, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    ipk = socket.inet_pton(socket.AF_INET6, ipk6)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86dd))
    s.bind((dev, 0))
    s.settimeout(0.2)
    st = {"big_before": 0, "ptb": 0, "big_after": 0, "big_late": 0, "small_after": 0,
          "max_after": 0, "fin": False}
    t_ptb = None
    end = time.monotonic() + secs
    print("ready", flush=True)
    while time.monotonic() < end and not st["fin"]:
        try:
            f, addr = s.recvfrom(65536)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or len(f) < 14 + 40 + 20:
            continue
        ip = f[14:]
        if ip[6] != 6 or ip[8:24] != ipk:
            continue
        size = 40 + struct.unpack("!H", ip[4:6])[0]
        if ip[40 + 13] & 1:
            st["fin"] = True
        now = time.monotonic()
        if t_ptb is None:
            if size <= MTU:
                continue
            st["big_before"] += 1
            if st["big_before"] < MIN_BIG:
                continue
        elif size > MTU:
            st["big_after"] += 1
            st["max_after"] = max(st["max_after"], size)
            if now - t_ptb < 0.3:
                continue
            if st["ptb"] >= MAX_PTB:
                st["big_late"] += 1
                continue
        else:
            if size > 40 + 20 + 12:
                st["small_after"] += 1
            continue
        pkt = (Ether(dst=f[6:12].hex(":"), src=f[0:6].hex(":")) /
               IPv6(src=from6, dst=ipk6, hlim=64) / ICMPv6PacketTooBig(mtu=MTU) /
               Raw(ip[:MTU - 48]))
        s.send(bytes(pkt))
        st["ptb"] += 1
        t_ptb = now
    print(json.dumps(st), flush=True)


if __name__ == "__main__":
    main()
