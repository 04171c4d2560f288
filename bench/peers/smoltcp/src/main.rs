//! smoltcp-inmem: the in-memory harness (bench/inmem) with two smoltcp interfaces in
//! place of the two ipkit engines: same workloads, same checks (pattern and request
//! offsets as im_common.c), same command line and output. Built only by
//! `make bench-peers`.
//!
//! The wire (--wire): `copy` (default) copies each transmitted frame into a fresh
//! buffer for the receiver, as a NIC's DMA would, and returns the transmit buffer at
//! once; `handoff` moves the frame's Vec itself from one interface's transmit token to
//! the other's receive queue. Either way buffers come from one free list.
//!
//! The loop is smoltcp's fastest documented one (Interface::poll's own parts, in the
//! order that lets a frame the application writes leave in the same round, as the C
//! harnesses do): per interface, poll_ingress_single until nothing is left, then the
//! application, then poll_egress until it reports no change. poll_delay runs only in
//! rounds where no frame moved.
//! smoltcp has no counters for checksum drops or retransmissions: both print as 0,
//! and --corrupt is not offered.
use smoltcp::iface::{Config, Interface, PollIngressSingleResult, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Write;
use std::rc::Rc;
use std::time::Instant as WallInstant;

const PAT: usize = 65521;
const PAT_TAIL: usize = 65536;
const BUF: usize = 256 * 1024;
const PORT: u16 = 5001;
const VERSION: &str = "0.14.0"; // Cargo.toml pins it

struct Opts {
    bulk: bool,
    conns: usize,
    len: usize,
    msg: usize,
    requests: u64,
    bytes: u64,
    offload: bool,
    real_clock: bool,
    max_seconds: f64,
    json: Option<String>,
    quiet: bool,
    handoff: bool,
}

fn usage(code: i32) -> ! {
    let text = "usage: smoltcp-inmem [options]\n\
Two smoltcp interfaces in one process and one thread over an in-memory wire;\n\
the options, checks and output of ipkit-inmem (see ipkit-inmem --help):\n\
  -w pingpong|bulk  -c N  -l N  -m N  -n N  -b N  -p sw|offload\n\
  --wire copy|handoff  --clock virtual|real  -t S  --json FILE  -q  -h\n";
    if code == 0 {
        print!("{text}");
    } else {
        eprint!("{text}");
    }
    std::process::exit(code)
}

fn num(v: Option<String>, what: &str, lo: u64, hi: u64) -> u64 {
    match v.as_deref().map(str::parse::<u64>) {
        Some(Ok(n)) if n >= lo && n <= hi => n,
        _ => {
            eprintln!("smoltcp-inmem: bad {what} ({lo}..{hi})");
            std::process::exit(2)
        }
    }
}

fn parse() -> Opts {
    let mut o = Opts {
        bulk: false, conns: 1, len: 1, msg: 16384, requests: 1_000_000, bytes: 1 << 30,
        offload: false, real_clock: false, max_seconds: 120.0, json: None, quiet: false,
        handoff: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-w" | "--workload" => o.bulk = match it.next().as_deref() {
                Some("pingpong") => false,
                Some("bulk") => true,
                _ => usage(2),
            },
            "-c" | "--conns" => o.conns = num(it.next(), "-c", 1, 4096) as usize,
            "-l" | "--len" => o.len = num(it.next(), "-l", 1, 65536) as usize,
            "-m" | "--msg" => o.msg = num(it.next(), "-m", 1, 65536) as usize,
            "-n" | "--requests" => o.requests = num(it.next(), "-n", 1, 1 << 40),
            "-b" | "--bytes" => o.bytes = num(it.next(), "-b", 1, 1 << 44),
            "-p" | "--profile" => o.offload = match it.next().as_deref() {
                Some("sw") => false,
                Some("offload") => true,
                _ => usage(2),
            },
            "--wire" => o.handoff = match it.next().as_deref() {
                Some("copy") => false,
                Some("handoff") => true,
                _ => usage(2),
            },
            "--clock" => o.real_clock = match it.next().as_deref() {
                Some("virtual") => false,
                Some("real") => true,
                _ => usage(2),
            },
            "-t" | "--seconds" => o.max_seconds = num(it.next(), "-t", 1, 86400) as f64,
            "--json" => o.json = it.next(),
            "-q" | "--quiet" => o.quiet = true,
            "-h" | "--help" => usage(0),
            _ => usage(2),
        }
    }
    if o.bulk {
        o.conns = 1;
    }
    o
}

/// The pattern of im_common.c: xorshift32 bytes, period PAT, PAT_TAIL repeated.
fn pattern() -> Vec<u8> {
    let mut p = vec![0u8; PAT + PAT_TAIL];
    let mut x: u32 = 0x9e37_79b9;
    for b in p.iter_mut().take(PAT) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = (x >> 24) as u8;
    }
    for i in 0..PAT_TAIL {
        p[PAT + i] = p[i];
    }
    p
}

fn req_off(id: usize, k: u64) -> usize {
    ((id as u64 * 4099 + k * REQ_STEP as u64) % PAT as u64) as usize
}

/// im_req_next: request k + 1 starts REQ_STEP bytes after request k (mod PAT), so a
/// connection steps its offset without a division; req_next(req_off(i, k)) ==
/// req_off(i, k + 1).
const REQ_STEP: usize = 1;
fn req_next(off: usize) -> usize {
    let o = off + REQ_STEP;
    if o >= PAT { o - PAT } else { o }
}

// ------------------------------------------------------------------ the wire

/// A frame: a buffer and the length in use. Buffers keep their size across uses, so
/// a transmit token does not clear and zero-fill one per frame (ipkit's and lwIP's
/// harnesses hand out buffers as they are, too).
type Frame = (Vec<u8>, usize);

struct Wire {
    q: [VecDeque<Frame>; 2], // frames waiting for interface i
    free: Vec<Vec<u8>>,
    frames: [u64; 2],     // frames sent by interface i (0 client, 1 server)
    wire_bytes: [u64; 2], // and their bytes
}

struct Dev {
    wire: Rc<RefCell<Wire>>,
    me: usize,
    caps: DeviceCapabilities,
    copy: bool,
}

struct Rx {
    buf: Frame,
    wire: Rc<RefCell<Wire>>,
}

struct Tx {
    wire: Rc<RefCell<Wire>>,
    to: usize,
    copy: bool,
}

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(&self.buf.0[..self.buf.1]);
        self.wire.borrow_mut().free.push(self.buf.0);
        r
    }
}

impl phy::TxToken for Tx {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut w = self.wire.borrow_mut();
        let mut b = w.free.pop().unwrap_or_default();
        if b.len() < len {
            b.resize(len, 0);
        }
        let r = f(&mut b[..len]);
        if self.copy {
            // DMA into a fresh receive buffer; the transmit buffer is free again
            let mut c = w.free.pop().unwrap_or_default();
            if c.len() < len {
                c.resize(len, 0);
            }
            c[..len].copy_from_slice(&b[..len]);
            w.free.push(b);
            b = c;
        }
        w.frames[1 - self.to] += 1;
        w.wire_bytes[1 - self.to] += len as u64;
        w.q[self.to].push_back((b, len));
        r
    }
}

impl Device for Dev {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx;

    fn receive(&mut self, _t: Instant) -> Option<(Rx, Tx)> {
        let buf = self.wire.borrow_mut().q[self.me].pop_front()?;
        Some((
            Rx { buf, wire: self.wire.clone() },
            Tx { wire: self.wire.clone(), to: 1 - self.me, copy: self.copy },
        ))
    }

    fn transmit(&mut self, _t: Instant) -> Option<Tx> {
        Some(Tx { wire: self.wire.clone(), to: 1 - self.me, copy: self.copy })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.caps.clone()
    }
}

// ------------------------------------------------------------------ the app

#[derive(Default, Clone)]
struct Conn {
    k: u64,        // ping-pong: current request; bulk sender: bytes written
    off: usize,    // ping-pong client: req_off(i, k), stepped by req_next
    got: usize,    // ping-pong: bytes of the current reply
    rx_total: u64, // bulk receiver: bytes checked
}

struct Side {
    iface: Interface,
    dev: Dev,
    socks: SocketSet<'static>,
    h: Vec<SocketHandle>,
    c: Vec<Conn>,
}

struct App {
    o: Opts,
    pat: Vec<u8>,
    issued: u64,
    done: u64,
    rx_bytes: u64,
    error: Option<&'static str>,
    tmp: Vec<u8>,
}

impl App {
    fn fail(&mut self, why: &'static str) {
        if self.error.is_none() {
            self.error = Some(why);
        }
    }

    fn send_req(&mut self, s: &mut tcp::Socket, off: usize) {
        match s.send_slice(&self.pat[off..off + self.o.len]) {
            Ok(n) if n == self.o.len => {}
            _ => self.fail("request did not fit the send buffer"),
        }
        self.issued += 1;
    }

    fn client(&mut self, side: &mut Side) {
        for i in 0..side.h.len() {
            let s = side.socks.get_mut::<tcp::Socket>(side.h[i]);
            let c = &mut side.c[i];
            if self.o.bulk {
                while c.k < self.o.bytes && s.can_send() {
                    let n = ((self.o.bytes - c.k) as usize).min(self.o.msg);
                    let off = (c.k % PAT as u64) as usize;
                    match s.send_slice(&self.pat[off..off + n]) {
                        Ok(0) | Err(_) => break,
                        Ok(w) => c.k += w as u64,
                    }
                }
                continue;
            }
            while s.can_recv() {
                let (want, len, pat) = (c.off + c.got, self.o.len, &self.pat);
                let got = c.got;
                let ok = s.recv(|b| {
                    let n = b.len().min(len - got);
                    (n, (n, b[..n] == pat[want..want + n]))
                });
                match ok {
                    Ok((n, true)) => {
                        c.got += n;
                        self.rx_bytes += n as u64;
                    }
                    _ => {
                        self.fail("echo mismatch");
                        return;
                    }
                }
                if c.got == self.o.len {
                    c.got = 0;
                    c.k += 1;
                    c.off = req_next(c.off);
                    self.done += 1;
                    if self.issued < self.o.requests {
                        let off = c.off;
                        self.send_req(s, off);
                    }
                }
            }
        }
    }

    fn server(&mut self, side: &mut Side) {
        for i in 0..side.h.len() {
            let s = side.socks.get_mut::<tcp::Socket>(side.h[i]);
            let c = &mut side.c[i];
            while s.can_recv() {
                if self.o.bulk {
                    let (at, pat) = ((c.rx_total % PAT as u64) as usize, &self.pat);
                    let r = s.recv(|b| {
                        let n = b.len().min(PAT_TAIL);
                        (n, (n, b[..n] == pat[at..at + n]))
                    });
                    match r {
                        Ok((n, true)) => {
                            c.rx_total += n as u64;
                            self.rx_bytes += n as u64;
                        }
                        _ => self.fail("bulk data mismatch"),
                    }
                } else {
                    let n = s.recv_slice(&mut self.tmp).unwrap_or(0);
                    if s.send_slice(&self.tmp[..n]) != Ok(n) {
                        self.fail("echo did not fit the send buffer");
                    }
                }
                if self.error.is_some() {
                    return;
                }
            }
        }
    }
}

fn side(wire: &Rc<RefCell<Wire>>, me: usize, o: &Opts, now: Instant) -> Side {
    let mut caps = DeviceCapabilities::default();
    caps.medium = Medium::Ethernet;
    caps.max_transmission_unit = 1514;
    let ck = if o.offload { Checksum::None } else { Checksum::Both };
    let mut cc = ChecksumCapabilities::default();
    cc.ipv4 = ck;
    cc.tcp = ck;
    caps.checksum = cc;
    let mut dev = Dev { wire: wire.clone(), me, caps, copy: !o.handoff };
    let mac = EthernetAddress([2, 0, 0, 0, 0, 1 + me as u8]);
    let mut cfg = Config::new(HardwareAddress::Ethernet(mac));
    cfg.random_seed = 0x1234 + me as u64;
    let mut iface = Interface::new(cfg, &mut dev, now);
    iface.update_ip_addrs(|a| {
        a.push(IpCidr::new(IpAddress::v4(10, 0, 0, 1 + me as u8), 24)).unwrap();
    });
    let mut socks = SocketSet::new(vec![]);
    let mut h = Vec::new();
    for i in 0..o.conns {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; BUF]),
            tcp::SocketBuffer::new(vec![0u8; BUF]),
        );
        s.set_nagle_enabled(false);
        if me == 1 {
            s.listen(PORT).expect("listen");
        } else {
            s.connect(iface.context(), (IpAddress::v4(10, 0, 0, 2), PORT), 49152 + i as u16)
                .expect("connect");
        }
        h.push(socks.add(s));
    }
    let c = (0..o.conns).map(|i| Conn { off: req_off(i, 0), ..Conn::default() }).collect();
    Side { iface, dev, socks, h, c }
}

struct World {
    s: [Side; 2],
    wire: Rc<RefCell<Wire>>,
    app: App,
    vnow: i64, // microseconds
    t_start: WallInstant,
    wall_end: f64,
}

impl World {
    fn now(&self) -> Instant {
        if self.app.o.real_clock {
            Instant::from_micros(self.t_start.elapsed().as_micros() as i64)
        } else {
            Instant::from_micros(self.vnow)
        }
    }

    /// One round, for each side: every waiting frame in, the application, every
    /// frame out (so what the application wrote leaves in this round); rounds where
    /// no frame moved jump to the next timer.
    fn run(&mut self, done: fn(&World) -> bool) {
        let mut rounds: u32 = 0;
        while self.app.error.is_none() && !done(self) {
            let now = self.now();
            let mut moved = 0u32;
            for i in 0..2 {
                let sd = &mut self.s[i];
                while sd.iface.poll_ingress_single(now, &mut sd.dev, &mut sd.socks)
                    != PollIngressSingleResult::None
                {
                    moved += 1;
                }
                if i == 0 {
                    self.app.client(&mut self.s[0]);
                } else {
                    self.app.server(&mut self.s[1]);
                }
                let sd = &mut self.s[i];
                while sd.iface.poll_egress(now, &mut sd.dev, &mut sd.socks) != PollResult::None {}
            }
            self.vnow += 1;
            rounds += 1;
            if rounds % 1024 == 0 && self.t_start.elapsed().as_secs_f64() > self.wall_end {
                self.app.fail("time bound exceeded");
                return;
            }
            if moved > 0 || self.app.o.real_clock {
                continue;
            }
            let w = self.wire.borrow();
            if w.q[0].is_empty() && w.q[1].is_empty() {
                drop(w);
                let d = (0..2)
                    .filter_map(|i| self.s[i].iface.poll_delay(now, &self.s[i].socks))
                    .min();
                if let Some(d) = d {
                    self.vnow = self.vnow.max(now.total_micros() + d.total_micros() as i64);
                }
            }
        }
    }
}

fn established(w: &World) -> bool {
    w.s.iter().all(|sd| {
        sd.h.iter().all(|h| sd.socks.get::<tcp::Socket>(*h).state() == tcp::State::Established)
    })
}

fn measured(w: &World) -> bool {
    if w.app.o.bulk {
        w.app.rx_bytes >= w.app.o.bytes
    } else {
        w.app.done >= w.app.o.requests
    }
}

fn quiet(w: &World) -> bool {
    w.s.iter().all(|sd| sd.h.iter().all(|h| sd.socks.get::<tcp::Socket>(*h).send_queue() == 0))
}

fn report(o: &Opts, requests: u64, bytes: u64, secs: f64, conn_bytes: f64, wire: &Wire, err: Option<&str>) -> i32 {
    let (fr, wb) = (wire.frames, wire.wire_bytes);
    let s = if secs > 0.0 { secs } else { 1e-9 };
    let rps = if o.bulk { 0.0 } else { requests as f64 / s };
    let nspr = if requests > 0 { s * 1e9 / requests as f64 } else { 0.0 };
    let gbps = bytes as f64 * 8.0 / s / 1e9;
    let prof = if o.offload { "offload" } else { "sw" };
    let wire = if o.handoff { "handoff" } else { "copy" };
    if !o.quiet {
        if o.bulk {
            print!("smoltcp {VERSION} bulk {prof} {wire} m={}: {bytes} bytes in {secs:.3} s: {gbps:.2} Gbit/s", o.msg);
        } else {
            print!(
                "smoltcp {VERSION} pingpong {prof} {wire} c={} l={}: {requests} req in {secs:.3} s: {rps:.0} req/s, {nspr:.1} ns/req, {gbps:.3} Gbit/s",
                o.conns, o.len
            );
        }
        println!(", {conn_bytes:.0} B/idle conn, csum drops 0, rtx 0: {}", err.unwrap_or("verified"));
    }
    if let Some(path) = &o.json {
        let line = format!(
            "{{\"tool\":\"inmem\",\"stack\":\"smoltcp\",\"build\":\"{VERSION}\",\"workload\":\"{}\",\"profile\":\"{prof}\",\"clock\":\"{}\",\"conns\":{},\"len\":{},\"msg\":{},\"requests\":{requests},\"bytes\":{bytes},\"seconds\":{secs:.6},\"req_per_s\":{rps:.1},\"ns_per_req\":{nspr:.2},\"gbit_s\":{gbps:.4},\"conn_bytes\":{conn_bytes:.1},\"csum_drops\":0,\"retransmits\":0,\"corrupted\":0,\"zerocopy\":false,\"wire\":\"{wire}\",\"frames\":[{},{}],\"wire_bytes\":[{},{}],\"verified\":{},\"error\":{}}}\n",
            if o.bulk { "bulk" } else { "pingpong" },
            if o.real_clock { "real" } else { "virtual" },
            o.conns,
            if o.bulk { 0 } else { o.len },
            if o.bulk { o.msg } else { 0 },
            fr[0], fr[1], wb[0], wb[1],
            err.is_none(),
            err.map(|e| format!("\"{e}\"")).unwrap_or("null".into())
        );
        if path == "-" {
            print!("{line}");
        } else if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = f.write_all(line.as_bytes());
        }
    }
    if err.is_some() { 1 } else { 0 }
}

fn main() {
    let o = parse();
    let wire = Rc::new(RefCell::new(Wire {
        q: [VecDeque::new(), VecDeque::new()],
        free: Vec::new(),
        frames: [0; 2],
        wire_bytes: [0; 2],
    }));
    let now = Instant::from_micros(1_000_000);
    let s = [side(&wire, 0, &o, now), side(&wire, 1, &o, now)];
    let wall_end = o.max_seconds;
    let app = App { o, pat: pattern(), issued: 0, done: 0, rx_bytes: 0, error: None, tmp: vec![0u8; 65536] };
    let mut w = World { s, wire, app, vnow: 1_000_000, t_start: WallInstant::now(), wall_end };
    w.run(established);
    let t0 = WallInstant::now();
    if !w.app.o.bulk {
        for i in 0..w.app.o.conns {
            if w.app.issued < w.app.o.requests {
                let s = w.s[0].socks.get_mut::<tcp::Socket>(w.s[0].h[i]);
                let off = w.s[0].c[i].off;
                w.app.send_req(s, off);
            }
        }
    }
    w.run(measured);
    let secs = t0.elapsed().as_secs_f64();
    let (requests, bytes) = (w.app.done, if w.app.o.bulk { w.app.rx_bytes } else { 2 * w.app.rx_bytes });
    if w.app.error.is_none() {
        w.run(quiet);
    }
    // Per connection: the socket object (its two 256 KiB buffers come on top).
    let conn_bytes = std::mem::size_of::<tcp::Socket>() as f64;
    let rc = report(&w.app.o, requests, bytes, secs, conn_bytes, &w.wire.borrow(), w.app.error);
    std::process::exit(rc);
}
