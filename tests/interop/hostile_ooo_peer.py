"""The out-of-order flood of issue 14 item 1, run inside a test's namespace.

    hostile_ooo_peer.py DEV IPKIT_IP ATTACKER_IP PORT NCONN NSEG [inorder]

A Linux connection (a plain socket, SHA-256 of both directions) keeps echo traffic
moving through ipkit-echo while a raw-frame attacker (scapy, from ATTACKER_IP, an
address the kernel does not own, so Linux never answers for it) opens NCONN
connections and sends each NSEG one-byte segments, none of them in order (the first
byte is never sent). Even connections send contiguous bytes (collapsible), odd ones
every other byte (only pruning helps). After the flood: ping and a new connection
must be answered within 1 s, the attacker's RSTs sent, and the Linux connection
drained and checked. Prints one JSON object; every wait is bounded.

With "inorder" the segments are in order instead (bytes 0, 1, 2, ...) and the attacker
never acknowledges the echoes: what the application holds then grows, one packet
buffer per byte when every segment is kept as it came.
"""
import hashlib
import json
import os
import random
import select
import socket
import subprocess
import sys
import threading
import time

from scapy.all import ARP, IP, TCP, AsyncSniffer, Ether, Raw, conf  # noqa: E402

conf.verb = 0
DEV, IPK_IP, ATK_IP = sys.argv[1], sys.argv[2], sys.argv[3]
PORT, NCONN, NSEG = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
INORDER = len(sys.argv) > 7 and sys.argv[7] in ("inorder", "inorder-full")
# "inorder-full": first PREFILL bytes per connection in full-sized segments, so the
# echo's send buffer (256 KiB, never acknowledged) is full when the one-byte
# segments come: they then wait in the application
PREFILL = 320 * 1024 if len(sys.argv) > 7 and sys.argv[7] == "inorder-full" else 0
ATK_MAC = "02:00:00:%02x:%02x:%02x" % tuple(random.randrange(256) for _ in range(3))


class Legit(threading.Thread):
    """Echo traffic over one Linux socket; log of (time, bytes echoed back)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.log = []
        self.error = None
        self.sent = self.got = 0
        self.next_send = 0.0
        self.sha_out, self.sha_in = hashlib.sha256(), hashlib.sha256()

    def run(self):
        try:
            self._run()
        except Exception as e:  # reported, never raised out of the thread
            self.error = repr(e)

    def _pump(self, s, sending):
        want = [s] if sending and self.sent - self.got < 65536 else []
        r, w, _ = select.select([s], want, [], 0.002 if want else 0.2)
        if w and time.monotonic() >= self.next_send:
            # about 2 MB/s: enough to see it move, little enough to leave the
            # machine's two cores to ipkit and the attacker
            self.next_send = time.monotonic() + 0.002
            chunk = os.urandom(4096)
            n = s.send(chunk)
            self.sha_out.update(chunk[:n])
            self.sent += n
        if r:
            data = s.recv(65536)
            if not data:
                raise RuntimeError("echo closed the connection")
            self.sha_in.update(data)
            self.got += len(data)
        self.log.append((time.monotonic(), self.got))

    def _run(self):
        s = socket.create_connection((IPK_IP, PORT), timeout=5)
        s.setblocking(False)
        end = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < end:
            self._pump(s, True)
        drain_end = time.monotonic() + 20
        while self.got < self.sent and time.monotonic() < drain_end:
            self._pump(s, False)
        s.close()

    def echoed_between(self, t0, t1):
        before = [g for t, g in self.log if t <= t0]
        upto = [g for t, g in self.log if t <= t1]
        return (upto[-1] if upto else 0) - (before[-1] if before else 0)


def arp_responder():
    """Answer ipkit's ARP requests for the attacker's address."""
    l2 = conf.L2socket(iface=DEV)

    def reply(p):
        if ARP in p and p[ARP].op == 1 and p[ARP].pdst == ATK_IP:
            l2.send(Ether(src=ATK_MAC, dst=p[ARP].hwsrc) /
                    ARP(op=2, hwsrc=ATK_MAC, psrc=ATK_IP, hwdst=p[ARP].hwsrc,
                        pdst=p[ARP].psrc))

    sn = AsyncSniffer(iface=DEV, filter="arp", prn=reply, store=False)
    sn.start()
    return sn


def ipk_mac(l2):
    """ipkit's MAC, asked for from the attacker's address (which also tells ipkit ours)."""
    sn = AsyncSniffer(iface=DEV, filter="arp and src host %s" % IPK_IP, count=1, timeout=5)
    sn.start()
    time.sleep(0.3)
    l2.send(Ether(src=ATK_MAC, dst="ff:ff:ff:ff:ff:ff") /
            ARP(op=1, hwsrc=ATK_MAC, psrc=ATK_IP, pdst=IPK_IP))
    sn.join(6)
    got = [p for p in (sn.results or []) if ARP in p and p[ARP].op == 2]
    if not got:
        raise RuntimeError("ipkit did not answer ARP")
    return got[0][ARP].hwsrc


def handshakes(l2, mac):
    """Open NCONN connections; returns [(sport, our_next_seq, ipkit_next_seq)]."""
    base = 20000 + random.randrange(20000)
    isn = {base + i: random.randrange(1 << 32) for i in range(NCONN)}
    flt = "tcp and src host %s and dst host %s" % (IPK_IP, ATK_IP)
    conns = {}

    def synack(p):
        t = p[TCP]
        if t.flags & 0x12 == 0x12 and t.dport in isn:
            conns[t.dport] = (isn[t.dport] + 1) & 0xffffffff, (t.seq + 1) & 0xffffffff

    # results are only filled in when a sniffer stops: collect through prn
    sn = AsyncSniffer(iface=DEV, filter=flt, timeout=8, prn=synack, store=False)
    sn.start()
    time.sleep(0.3)
    eth = Ether(src=ATK_MAC, dst=mac)
    deadline = time.monotonic() + 6
    # SYNs again every second for the ports not answered yet (a SYN-ACK the sniffer
    # missed on a busy machine): ipkit answers a repeated SYN with its SYN-ACK
    while time.monotonic() < deadline and len(conns) < NCONN:
        for sp, s in isn.items():
            if sp not in conns:
                l2.send(eth / IP(src=ATK_IP, dst=IPK_IP) /
                        TCP(sport=sp, dport=PORT, flags="S", seq=s, window=65535,
                            options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]))
        wait = time.monotonic() + 1.0
        while time.monotonic() < min(wait, deadline) and len(conns) < NCONN:
            time.sleep(0.1)
    sn.stop()
    for sp, (mine, theirs) in conns.items():
        l2.send(eth / IP(src=ATK_IP, dst=IPK_IP) /
                TCP(sport=sp, dport=PORT, flags="A", seq=mine, ack=theirs, window=65535))
    return [(sp, m, t) for sp, (m, t) in sorted(conns.items())]


def flood_frames(mac, conns):
    """Every connection's NSEG one-byte segments, each connection's in a random order,
    the connections interleaved. Byte 0 is never sent: nothing is ever in order."""
    per = []
    for i, (sp, mine, theirs) in enumerate(conns):
        if INORDER:
            offs = [PREFILL + k for k in range(NSEG)]
        else:
            offs = [1 + k for k in range(NSEG)] if i % 2 == 0 else \
                [1 + 2 * k for k in range(NSEG)]
            random.shuffle(offs)
        hdr = Ether(src=ATK_MAC, dst=mac) / IP(src=ATK_IP, dst=IPK_IP)
        per.append([bytes(hdr / TCP(sport=sp, dport=PORT, flags="A",
                                    seq=(mine + o) & 0xffffffff, ack=theirs,
                                    window=65535) / Raw(b"x")) for o in offs])
    out = []
    for at in range(0, PREFILL, 1400):
        for sp, mine, theirs in conns:
            out.append(bytes(Ether(src=ATK_MAC, dst=mac) / IP(src=ATK_IP, dst=IPK_IP) /
                             TCP(sport=sp, dport=PORT, flags="A", seq=(mine + at) & 0xffffffff,
                                 ack=theirs, window=65535) /
                             Raw(b"y" * min(1400, PREFILL - at))))
    for k in range(NSEG):
        out.extend(f[k] for f in per)
    return out


def timed(fn):
    t = time.monotonic()
    ok = fn()
    return ok, time.monotonic() - t


def ping_ok():
    r = subprocess.run(["ping", "-c", "1", "-W", "1", IPK_IP], capture_output=True, timeout=5)
    return r.returncode == 0


def new_conn_ok():
    try:
        with socket.create_connection((IPK_IP, PORT), timeout=1) as s:
            s.settimeout(1)
            s.sendall(b"hello after the flood")
            return s.recv(100) == b"hello after the flood"
    except OSError:
        return False


def main():
    res = {}
    l2 = conf.L2socket(iface=DEV)
    arp = arp_responder()
    mac = ipk_mac(l2)
    legit = Legit()
    legit.start()
    time.sleep(0.5)
    conns = handshakes(l2, mac)
    res["attack_conns"] = len(conns)
    frames = flood_frames(mac, conns)
    t0 = time.monotonic()
    for f in frames:
        l2.send(f)
    t1 = time.monotonic()
    res["flood_frames"] = len(frames)
    res["flood_s"] = t1 - t0
    res["ping_ok"], res["ping_s"] = timed(ping_ok)
    res["conn_ok"], res["conn_s"] = timed(new_conn_ok)
    # the attacker's own RSTs (in window: at its next sequence number)
    for sp, mine, theirs in conns:
        l2.send(Ether(src=ATK_MAC, dst=mac) / IP(src=ATK_IP, dst=IPK_IP) /
                TCP(sport=sp, dport=PORT, flags="R",
                    seq=(mine + PREFILL + NSEG) & 0xffffffff if INORDER else mine))
    time.sleep(1.0)
    t2 = time.monotonic()
    legit.stop.set()
    legit.join(30)
    arp.stop()
    res["legit_error"] = legit.error
    res["legit_alive"] = legit.is_alive()
    res["legit_sent"], res["legit_got"] = legit.sent, legit.got
    res["legit_sha_ok"] = legit.sent == legit.got and \
        legit.sha_out.hexdigest() == legit.sha_in.hexdigest()
    res["echoed_during"] = legit.echoed_between(t0, t1 + 0.2)
    res["echoed_after"] = legit.echoed_between(t1, t2)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
