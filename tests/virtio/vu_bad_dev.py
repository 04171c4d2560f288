#!/usr/bin/python3
"""A deliberately bad vhost-user-net device (the back-end side), for issue 21.

    vu_bad_dev.py SOCKET_PATH [SECONDS] [MODE]

MODE ring (default) is described below. MODE badreply answers GET_FEATURES with a
reply to another request and a wrong size; MODE silent never answers it: in both the
driver's open must fail with a message, within its reply bound, not hang.

Listens on SOCKET_PATH, takes one driver, answers the set-up messages (features
VERSION_1 | MRG_RXBUF, protocol feature REPLY_ACK), maps the driver's memory table and
then, on the receive queue (0), writes used entries a correct driver must refuse:

  bad_id      an id past the queue size
  bad_len     a length 100 bytes past the buffer the driver posted
  dup_id      the same id again (no longer in flight)
  short       a length shorter than the virtio-net header
  bad_mrg     a header saying num_buffers = 0

then GOOD frames the driver (tests/virtio/vu_reflect.c) must still receive and send
back on the transmit queue (1), where the device checks each byte, answers one used
entry with a bad id, and finally moves the receive queue's used index 1000 ahead of
what it was given (used_ahead), puts it back, and checks AFTER more good frames still
come back (the driver recovers). Prints "result key=value ..." lines on stdout; exits
non-zero when the driver did not send the good frames back. Every wait is bounded.
"""
import mmap
import os
import socket
import struct
import sys
import time

GOOD = 20
AFTER = 5
F_VERSION_1, F_MRG, F_PROTO = 1 << 32, 1 << 15, 1 << 30
P_REPLY_ACK = 1 << 3
HDR = 12


class Ring:
    def __init__(self):
        self.num = 0
        self.addr = None      # (desc, used, avail) driver addresses
        self.enabled = False
        self.avail_seen = 0   # next avail entry the device reads
        self.used = 0         # device's used index


class Dev:
    def __init__(self, conn, deadline):
        self.c = conn
        self.deadline = deadline
        self.regions = []     # (guest_phys, size, user_addr, mmap)
        self.rings = [Ring(), Ring()]
        self.reply_ack = False

    # -- messages
    def recv_exact(self, n):
        b = b""
        while len(b) < n:
            chunk = self.c.recv(n - len(b))
            if not chunk:
                raise EOFError("driver hung up")
            b += chunk
        return b

    def recv_msg(self):
        hdr, anc, _, _ = self.c.recvmsg(12, socket.CMSG_SPACE(8 * 4))
        if len(hdr) == 0:
            raise EOFError("driver hung up")
        hdr += self.recv_exact(12 - len(hdr))
        req, flags, size = struct.unpack("<III", hdr)
        fds = []
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds += list(struct.unpack("<%di" % (len(data) // 4), data[:len(data) // 4 * 4]))
        body = self.recv_exact(size) if size else b""
        return req, flags, body, fds

    def reply_u64(self, req, v):
        self.c.sendall(struct.pack("<IIIQ", req, 0x1 | 0x4, 8, v))

    def handle(self, req, flags, body, fds):
        if req == 1:                                     # GET_FEATURES
            self.reply_u64(req, F_VERSION_1 | F_MRG | F_PROTO)
            return
        if req == 15:                                    # GET_PROTOCOL_FEATURES
            self.reply_u64(req, P_REPLY_ACK)
            return
        if req == 16:                                    # SET_PROTOCOL_FEATURES
            self.reply_ack = bool(struct.unpack("<Q", body)[0] & P_REPLY_ACK)
        elif req == 5:                                   # SET_MEM_TABLE
            n = struct.unpack("<I", body[:4])[0]
            for i in range(n):
                gpa, size, uva, off = struct.unpack("<QQQQ", body[8 + 32 * i:40 + 32 * i])
                m = mmap.mmap(fds[i], size + off, mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)
                self.regions.append((gpa, size, uva, off, m))
            for fd in fds:
                os.close(fd)
            fds = []
        elif req == 8:                                   # SET_VRING_NUM
            i, num = struct.unpack("<II", body)
            self.rings[i].num = num
        elif req == 9:                                   # SET_VRING_ADDR
            i, _, desc, used, avail, _ = struct.unpack("<IIQQQQ", body)
            self.rings[i].addr = (desc, used, avail)
        elif req == 18:                                  # SET_VRING_ENABLE
            i, on = struct.unpack("<II", body)
            self.rings[i].enabled = bool(on)
        for fd in fds:                                   # kick/call: not used
            os.close(fd)
        if flags & 0x8 and self.reply_ack:
            self.reply_u64(req, 0)

    def ready(self):
        return all(r.enabled and r.addr and r.num for r in self.rings) and self.regions

    # -- memory (addresses are the driver's; one region maps them 1:1)
    def at(self, addr):
        for gpa, size, uva, off, m in self.regions:
            if gpa <= addr < gpa + size:
                return m, addr - gpa + off
        raise ValueError("address %#x outside the memory table" % addr)

    def rd(self, addr, fmt):
        m, o = self.at(addr)
        return struct.unpack_from(fmt, m, o)

    def wr(self, addr, fmt, *v):
        m, o = self.at(addr)
        struct.pack_into(fmt, m, o, *v)

    def wr_bytes(self, addr, data):
        m, o = self.at(addr)
        m[o:o + len(data)] = data

    def rd_bytes(self, addr, n):
        m, o = self.at(addr)
        return bytes(m[o:o + n])

    # -- ring work
    def pop_avail(self, q):
        r = self.rings[q]
        desc, used, avail = r.addr
        while time.monotonic() < self.deadline:
            idx = self.rd(avail + 2, "<H")[0]
            if idx != r.avail_seen:
                head = self.rd(avail + 4 + 2 * (r.avail_seen % r.num), "<H")[0]
                r.avail_seen = (r.avail_seen + 1) & 0xffff
                return head
            time.sleep(0.001)
        raise TimeoutError("queue %d: driver posted nothing" % q)

    def desc(self, q, i):
        return self.rd(self.rings[q].addr[0] + 16 * i, "<QIHH")  # addr, len, flags, next

    def put_used(self, q, entries, publish=True):
        r = self.rings[q]
        used = r.addr[1]
        for id_, ln in entries:
            self.wr(used + 4 + 8 * (r.used % r.num), "<II", id_, ln)
            r.used = (r.used + 1) & 0xffff
        if publish:
            self.wr(used + 2, "<H", r.used)

    def set_used_idx(self, q, idx):
        self.wr(self.rings[q].addr[1] + 2, "<H", idx & 0xffff)


def frame(i):
    payload = bytes((i + k) & 0xff for k in range(100 + i))
    return b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + b"\x88\xb5" + payload


def vnet_hdr(num_buffers):
    return struct.pack("<BBHHHHH", 0, 0, 0, 0, 0, 0, num_buffers)


def read_tx_chain(d, complete=True):
    """The next frame the driver posted on the transmit queue (header stripped) and
    its head; complete=True also returns the chain as used."""
    h = d.pop_avail(1)
    data, i, hops = b"", h, 0
    while hops < 64:
        addr, ln, fl, nxt = d.desc(1, i)
        data += d.rd_bytes(addr, min(ln, 65536))
        hops += 1
        if not fl & 1:
            break
        i = nxt
    if complete:
        d.put_used(1, [(h, 0)])
    return data[HDR:], h


def attack(d):
    rx = 0
    q = d.rings[rx]
    # the device polls: tell the driver not to kick (§2.7.10)
    d.wr(q.addr[1], "<H", 1)
    d.wr(d.rings[1].addr[1], "<H", 1)
    h0, h1, h2 = d.pop_avail(rx), d.pop_avail(rx), d.pop_avail(rx)
    cap0 = d.desc(rx, h0)[1]
    d.put_used(rx, [(q.num + 5, 64),          # bad_id: out of range
                    (h0, cap0 + 100),          # bad_len: past the posted buffer
                    (h0, 64)])                 # bad_id: no longer in flight
    a1 = d.desc(rx, h1)[0]
    d.wr_bytes(a1, vnet_hdr(1))
    d.put_used(rx, [(h1, 5)])                  # short: not even a header
    a2 = d.desc(rx, h2)[0]
    d.wr_bytes(a2, vnet_hdr(0) + frame(0))
    d.put_used(rx, [(h2, HDR + len(frame(0)))])  # bad_mrg: num_buffers 0
    # the good frames, one buffer each
    sent = []
    for i in range(GOOD):
        h = d.pop_avail(rx)
        a, cap = d.desc(rx, h)[:2]
        f = frame(i)
        assert HDR + len(f) <= cap
        d.wr_bytes(a, vnet_hdr(1) + f)
        d.put_used(rx, [(h, HDR + len(f))])
        sent.append(f)
    # read them back from the transmit queue: one chain each
    got, heads = [], []
    while len(got) < GOOD:
        data, h = read_tx_chain(d, complete=False)
        got.append(data)
        heads.append(h)
    # a bad id on the transmit side first, then the right ones
    d.put_used(1, [(d.rings[1].num + 7, 0)] + [(h, 0) for h in heads])
    ok = sum(1 for a, b in zip(sent, got) if a == b)
    print("result good_sent=%d good_back=%d" % (GOOD, ok), flush=True)
    time.sleep(0.5)
    # the used index runs 1000 ahead of anything posted, for a while; then it is put
    # back and AFTER more good frames must still come back (the driver recovers)
    d.set_used_idx(rx, q.used + 1000)
    time.sleep(0.5)
    d.set_used_idx(rx, q.used)
    sent = []
    for i in range(AFTER):
        h = d.pop_avail(rx)
        a = d.desc(rx, h)[0]
        f = frame(50 + i)
        d.wr_bytes(a, vnet_hdr(1) + f)
        d.put_used(rx, [(h, HDR + len(f))])
        sent.append(f)
    got = [read_tx_chain(d)[0] for _ in range(AFTER)]
    ok2 = sum(1 for a, b in zip(sent, got) if a == b)
    print("result used_ahead_written=1 after_sent=%d after_back=%d" % (AFTER, ok2), flush=True)
    return ok == GOOD and ok2 == AFTER


def main():
    path = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 60
    deadline = time.monotonic() + secs
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)
    s.settimeout(secs)
    print("listening", flush=True)
    conn, _ = s.accept()
    conn.settimeout(max(1.0, deadline - time.monotonic()))
    d = Dev(conn, deadline)
    mode = sys.argv[3] if len(sys.argv) > 3 else "ring"
    if mode != "ring":
        while True:
            req, flags, body, fds = d.recv_msg()
            for fd in fds:
                os.close(fd)
            if req == 1 and mode == "badreply":    # a SET_OWNER "reply", 4 bytes
                conn.sendall(struct.pack("<IIII", 3, 0x5, 4, 0))
            if req == 1:
                break
        print("result proto_attack=%s" % mode, flush=True)
        conn.settimeout(max(0.5, deadline - time.monotonic()))
        try:
            while conn.recv(4096):
                pass
        except (OSError, socket.timeout):
            pass
        sys.exit(0)
    while not d.ready():
        d.handle(*d.recv_msg())
    ok = attack(d)
    print("result done", flush=True)
    # stay until the driver hangs up (bounded), answering nothing more
    conn.settimeout(max(0.5, deadline - time.monotonic()))
    try:
        while conn.recv(4096):
            pass
    except (OSError, socket.timeout):
        pass
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
