/*
 * ipkit-ns3-figures: the figures of docs/ns3-figures.md (make ns3-figures).
 * Not a test: it measures and writes a table; nothing passes or fails on a value.
 *
 *   1. dumbbell, 100 Mbit/s bottleneck, 20 ms RTT, DropTail of one BDP, 1..16
 *      flows of one kind (ipkit CUBIC / NewReno, ns-3 TcpCubic / TcpNewReno):
 *      goodput per flow (mean, min, max), total, Jain's index;
 *   2. ipkit and ns-3 flows sharing the bottleneck, under DropTail, RED, FqCoDel;
 *   3. goodput against the loss rate of a 100 Mbit/s, 20 ms RTT link, beside the
 *      Mathis bound MSS/RTT * sqrt(3/2) / sqrt(p);
 *   4. simulation speed: simulated seconds and events per CPU second, ipkit vs
 *      ns-3 TCP, from the runs of part 1;
 *   5. the packet boundary: what one frame costs the adapter's pool-and-copy
 *      design and what an ns-3-Packet-backed one would add.
 *
 *   ipkit-ns3-figures --out=docs/ns3-figures.md [--duration=30] [--quick]
 */
#include <ipkit/ns3/ipkit-scenarios.h>

#include "pkt.h"

#include "ns3/core-module.h"
#include "ns3/network-module.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <map>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <sys/utsname.h>

using namespace ns3;

static double g_duration = 25, g_warmup = 8;

static std::string
Fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

static std::string
Fmt(const char* f, ...)
{
    char b[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(b, sizeof(b), f, ap);
    va_end(ap);
    return b;
}

struct Speed
{
    double sim = 0, cpu = 0, wall = 0;
    uint64_t events = 0;
};

static std::map<std::string, Speed> g_speed; /* kind/flows -> cost */

static IpkitDumbbellResult
Dumbbell(const std::vector<IpkitFlowKind>& flows, const std::string& queue, uint32_t delAck = 2)
{
    IpkitDumbbellConfig cfg;
    cfg.ns3DelAckCount = delAck;
    cfg.flows = flows;
    cfg.queue = queue;
    cfg.duration = Seconds(g_duration);
    cfg.warmup = Seconds(g_warmup);
    IpkitDumbbellResult r = IpkitRunDumbbell(cfg);
    Simulator::Destroy();
    return r;
}

static void
PartOne(std::ostream& md, const std::vector<uint32_t>& ns)
{
    const IpkitFlowKind kinds[] = {IpkitFlowKind::IpkitCubic, IpkitFlowKind::IpkitNewReno,
                                   IpkitFlowKind::Ns3Cubic, IpkitFlowKind::Ns3NewReno};
    md << "## 1. Dumbbell: flows of one kind\n\n"
       << "100 Mbit/s bottleneck, 20 ms base RTT, DropTail (FifoQueueDisc) of one BDP (166 "
          "packets), 1 Gbit/s access links; flows start 50 ms apart; goodput is what the "
          "receivers got in ["
       << g_warmup << " s, " << g_duration
       << " s]. ipkit: IpkitBulkSend -> IpkitPacketSink, 1 MiB buffers, SACK, timestamps; "
          "ns-3: BulkSend -> PacketSink over TcpSocketBase, 1448-byte segments, 1 MiB buffers "
          "(its defaults otherwise: SACK, timestamps, PRR).\n\n"
       << "| flows | kind | per-flow mean Mbit/s | min | max | total Mbit/s | Jain's index | "
          "bottleneck drops |\n|---:|---|---:|---:|---:|---:|---:|---:|\n";
    for (uint32_t n : ns)
    {
        for (IpkitFlowKind k : kinds)
        {
            IpkitDumbbellResult r = Dumbbell(std::vector<IpkitFlowKind>(n, k), "DropTail");
            double sum = 0, mn = 1e18, mx = 0;
            for (double g : r.goodputMbps)
            {
                sum += g;
                mn = std::min(mn, g);
                mx = std::max(mx, g);
            }
            md << Fmt("| %u | %s | %.2f | %.2f | %.2f | %.2f | %.4f | %llu |\n", n,
                      IpkitFlowKindName(k), sum / n, mn, mx, sum, r.jain,
                      static_cast<unsigned long long>(r.bottleneckDrops));
            md.flush();
            Speed& s = g_speed[Fmt("%s %u", IpkitFlowKindName(k), n)];
            s.sim = r.cost.simSeconds;
            s.cpu = r.cost.cpuSeconds;
            s.wall = r.cost.wallSeconds;
            s.events = r.cost.events;
            std::fprintf(stderr, "part 1: %u x %s: %.2f Mbit/s, Jain %.4f (%.1f CPU s)\n", n,
                         IpkitFlowKindName(k), sum, r.jain, r.cost.cpuSeconds);
        }
    }
    md << "\n";
}

static void
PartTwo(std::ostream& md, const std::vector<uint32_t>& ns)
{
    md << "## 2. ipkit and ns-3 TCP sharing the bottleneck\n\n"
       << "Same dumbbell; half the flows ipkit, half ns-3 (alternating, ipkit first), same "
          "congestion control on both sides. Share = the implementation's part of the total "
          "goodput (1/2 is an even split). 'ns-3 ACKs' is the ns-3 receivers' DelAckCount, 2 "
          "by ns-3's default. ns-3's TCP model documentation notes that its TcpNewReno adds "
          "to cwnd per ACK in congestion avoidance, so delayed ACKs slow its growth (ipkit "
          "counts the bytes acknowledged, RFC 3465); the rows with 1 show the split when the "
          "ns-3 receivers ACK every segment.\n\n"
       << "| queue | ns-3 ACKs | flows | congestion control | ipkit Mbit/s (per flow) | ns-3 "
          "Mbit/s (per flow) | ipkit share | Jain's index (all flows) |\n"
       << "|---|---:|---:|---|---:|---:|---:|---:|\n";
    struct Pair
    {
        IpkitFlowKind a, b;
        const char* name;
    };
    const Pair pairs[] = {{IpkitFlowKind::IpkitCubic, IpkitFlowKind::Ns3Cubic, "CUBIC"},
                          {IpkitFlowKind::IpkitNewReno, IpkitFlowKind::Ns3NewReno, "NewReno"}};
    struct Setting
    {
        const char* q;
        uint32_t delAck;
    };
    for (Setting st : {Setting{"DropTail", 2}, Setting{"RED", 2}, Setting{"FqCoDel", 2},
                       Setting{"DropTail", 1}})
    {
        const char* q = st.q;
        for (uint32_t n : ns)
        {
            if (n < 2)
            {
                continue;
            }
            for (const Pair& p : pairs)
            {
                std::vector<IpkitFlowKind> flows;
                for (uint32_t i = 0; i < n; i++)
                {
                    flows.push_back(i % 2 ? p.b : p.a);
                }
                IpkitDumbbellResult r = Dumbbell(flows, q, st.delAck);
                double ip = 0, ns = 0;
                for (uint32_t i = 0; i < n; i++)
                {
                    (i % 2 ? ns : ip) += r.goodputMbps[i];
                }
                md << Fmt("| %s | %u | %u | %s | %.2f (%.2f) | %.2f (%.2f) | %.3f | %.4f |\n", q,
                          st.delAck, n, p.name, ip, ip / ((n + 1) / 2), ns, ns / (n / 2), ip / (ip + ns), r.jain);
                md.flush();
                std::fprintf(stderr, "part 2: %s/%u %u %s: ipkit %.2f ns-3 %.2f\n", q, st.delAck,
                             n, p.name, ip, ns);
            }
        }
    }
    md << "\n";
}

static void
PartThree(std::ostream& md, const std::vector<double>& losses)
{
    const double mss = 1448, rtt = 0.020;
    md << "## 3. Goodput against loss\n\n"
       << "One flow over one 100 Mbit/s point-to-point link of 10 ms each way (RTT 20 ms), "
          "RateErrorModel dropping packets at rate p in both directions (data and ACKs). The "
          "transfer is long enough for about 20 s at the bound (8..64 MiB); goodput = bytes / "
          "time to the last byte, slow start included. Mathis bound: MSS/RTT * sqrt(3/2) / "
          "sqrt(p) with MSS 1448 bytes (the model's C = 1.22 assumes an ACK per segment; with "
          "delayed ACKs, C = 0.87), capped at the link rate. The model is NewReno's; CUBIC is "
          "shown beside it for reference.\n\n"
       << "| p | Mathis bound Mbit/s | ipkit NewReno | ns-3 TcpNewReno | ipkit CUBIC | ns-3 "
          "TcpCubic | ipkit NewReno / bound |\n|---:|---:|---:|---:|---:|---:|---:|\n";
    for (double p : losses)
    {
        double bound = mss * 8 / rtt * std::sqrt(1.5) / std::sqrt(p) / 1e6;
        double cap = std::min(bound, 100.0);
        uint64_t bytes = static_cast<uint64_t>(cap * 1e6 / 8 * 20);
        bytes = std::max<uint64_t>(8u << 20, std::min<uint64_t>(64u << 20, bytes));
        double g[4];
        int i = 0;
        for (IpkitFlowKind k : {IpkitFlowKind::IpkitNewReno, IpkitFlowKind::Ns3NewReno,
                                IpkitFlowKind::IpkitCubic, IpkitFlowKind::Ns3Cubic})
        {
            IpkitChainConfig c;
            c.kind = k;
            c.hops = 1;
            c.rate = "100Mbps";
            c.delay = MilliSeconds(10);
            c.loss = p;
            c.bytes = bytes;
            c.limit = Seconds(600);
            IpkitChainResult r = IpkitRunChain(c);
            Simulator::Destroy();
            g[i++] = r.received == bytes ? r.goodputMbps : -1;
            std::fprintf(stderr, "part 3: p=%g %s: %.2f Mbit/s%s\n", p, IpkitFlowKindName(k),
                         r.goodputMbps,
                         r.received == bytes ? "" : " (did not finish)");
        }
        auto cell = [](double v) { return v < 0 ? std::string("unfinished") : Fmt("%.2f", v); };
        md << Fmt("| %g | %.2f%s | %s | %s | %s | %s | %.2f |\n", p, cap,
                  bound > 100 ? " (link)" : "", cell(g[0]).c_str(), cell(g[1]).c_str(),
                  cell(g[2]).c_str(), cell(g[3]).c_str(), g[0] / cap);
        md.flush();
    }
    md << "\n";
}

static void
PartFour(std::ostream& md, const std::vector<uint32_t>& ns)
{
    md << "## 4. Simulation speed\n\n"
       << "From the runs of part 1 (" << g_duration
       << " simulated seconds each). CPU seconds are this process's (the machine is shared, "
          "so wall time is shown but not compared). Events: ns-3 events executed (ipkit adds "
          "one timer event per context at its deadlines; ns-3 TCP schedules its own timers).\n\n"
       << "| flows | kind | sim s per CPU s | events per CPU s | events | CPU s | wall s | "
          "ipkit / ns-3 speed (same cc) |\n|---:|---|---:|---:|---:|---:|---:|---:|\n";
    for (uint32_t n : ns)
    {
        for (const char* k : {"ipkit-cubic", "ns3-cubic", "ipkit-newreno", "ns3-newreno"})
        {
            auto it = g_speed.find(Fmt("%s %u", k, n));
            if (it == g_speed.end() || it->second.cpu <= 0)
            {
                continue;
            }
            const Speed& s = it->second;
            std::string ratio = "";
            if (std::string(k).rfind("ipkit", 0) == 0)
            {
                std::string other = std::string("ns3") + (k + 5);
                auto o = g_speed.find(Fmt("%s %u", other.c_str(), n));
                if (o != g_speed.end() && o->second.cpu > 0)
                {
                    ratio = Fmt("%.2f", (s.sim / s.cpu) / (o->second.sim / o->second.cpu));
                }
            }
            md << Fmt("| %u | %s | %.2f | %.0f | %llu | %.2f | %.2f | %s |\n", n, k, s.sim / s.cpu,
                      s.events / s.cpu, static_cast<unsigned long long>(s.events), s.cpu, s.wall,
                      ratio.c_str());
        }
    }
    md << "\n";
}

/* ------------------------------------------------- 5. the packet boundary */

static double
CpuNow()
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void
PartFive(std::ostream& md, uint32_t iters)
{
    const uint32_t len = 1514;
    struct sim_pool* pool = sim_pool_create(64, 2048, 128);
    std::vector<uint8_t> src(len, 0x5a);
    uint64_t sink = 0;

    /* (a) transmit: pool frame -> a fresh ns-3 Packet (one copy) */
    double t0 = CpuNow();
    for (uint32_t i = 0; i < iters; i++)
    {
        struct sim_pkt* k = sim_pkt_alloc(pool);
        std::memcpy(sim_pkt_data(k), src.data(), len); /* the core writing the frame */
        k->len = len;
        Ptr<Packet> p = Create<Packet>(sim_pkt_data(k), len);
        sink += p->GetSize();
        sim_pkt_free(k);
    }
    double tx = (CpuNow() - t0) / iters * 1e9;

    /* (b) receive: ns-3 Packet -> a pool packet (one copy) */
    Ptr<Packet> in = Create<Packet>(src.data(), len);
    t0 = CpuNow();
    for (uint32_t i = 0; i < iters; i++)
    {
        struct sim_pkt* k = sim_pkt_alloc(pool);
        in->CopyData(sim_pkt_data(k), len);
        k->len = len;
        sink += sim_pkt_data(k)[i % len];
        sim_pkt_free(k);
    }
    double rx = (CpuNow() - t0) / iters * 1e9;

    /* (c) an ns-3 Packet as ipkit's packet: ns-3 gives no writable pointer into a
     * Packet's bytes, so pkt_alloc creates a Packet and the core works in a shadow
     * buffer that goes into the Packet at transmit (a Packet per pkt_alloc: also
     * for every pure ACK and header the core builds) */
    t0 = CpuNow();
    for (uint32_t i = 0; i < iters; i++)
    {
        Ptr<Packet> p = Create<Packet>(2048); /* pkt_alloc */
        std::vector<uint8_t> shadow(2048);    /* what pkt_data would point to */
        std::memcpy(shadow.data(), src.data(), len);
        p = Create<Packet>(shadow.data(), len); /* its bytes into the Packet at tx */
        sink += p->GetSize();
    }
    double alt = (CpuNow() - t0) / iters * 1e9;
    sim_pool_destroy(pool);
    std::fprintf(stderr, "part 5: boundary %.0f / %.0f / %.0f ns (sum %llu)\n", tx, rx, alt,
                 static_cast<unsigned long long>(sink));

    md << "## 5. The packet boundary: pool with one copy, or ns-3 Packets\n\n"
       << "ipkit reads and writes packets through a data pointer (ops->pkt_data). An ns-3 "
          "Packet exposes none (its Buffer's PeekData is const and Packet hides it), so ipkit "
          "packets cannot live inside ns-3 Packets without a shadow buffer copied in and out. "
          "The adapter keeps ipkit's packets in a per-context pool (sim/pkt.c, a free list of "
          "2 KiB buffers) and copies each frame once at the boundary each way. CPU ns per "
          "1514-byte frame, "
       << iters << " iterations each:\n\n"
       << "| path | ns per frame |\n|---|---:|\n"
       << Fmt("| transmit: pool frame -> new ns-3 Packet (chosen) | %.0f |\n", tx)
       << Fmt("| receive: ns-3 Packet -> pool packet (chosen) | %.0f |\n", rx)
       << Fmt("| transmit with ipkit packets as ns-3 Packets (Packet per pkt_alloc + shadow "
              "buffer) | %.0f |\n",
              alt)
       << "\nChosen: the pool with one copy at the boundary, "
       << Fmt("%.2f", alt / tx) << "x cheaper on transmit than the Packet-backed variant.\n\n"
       << "When a device's queue is full (its NetDeviceQueueInterface says stopped), the "
          "adapter holds frames in a bounded backlog (IpkitStack attribute TxBacklog, 1000 "
          "frames) until the queue wakes, as a host's qdisc would: a full NIC queue is "
          "backpressure, not loss.\n\n";
}

int
main(int argc, char** argv)
{
    std::string out = "docs/ns3-figures.md";
    bool quick = false;
    CommandLine cmd;
    cmd.AddValue("out", "markdown file to write", out);
    cmd.AddValue("duration", "simulated seconds of each dumbbell run", g_duration);
    cmd.AddValue("warmup", "seconds left out of dumbbell goodputs", g_warmup);
    cmd.AddValue("quick", "a few short runs (to try the program, not for the note)", quick);
    cmd.Parse(argc, argv);
    std::vector<uint32_t> ns = {1, 2, 4, 8, 16};
    std::vector<uint32_t> mixNs = {2, 4, 16};
    std::vector<double> losses = {0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02};
    uint32_t iters = 2000000;
    if (quick)
    {
        g_duration = 4;
        g_warmup = 1;
        ns = {1, 4};
        mixNs = {2};
        losses = {0.01};
        iters = 100000;
    }
    if (g_warmup >= g_duration)
    {
        std::fprintf(stderr, "warmup must be below duration\n");
        return 2;
    }
    /* Hand-written notes below the marker survive a rerun. */
    const std::string marker = "<!-- notes below this line are kept by ipkit-ns3-figures -->";
    std::string notes;
    {
        std::ifstream old(out);
        std::stringstream ss;
        ss << old.rdbuf();
        std::string prev = ss.str();
        size_t at = prev.find(marker);
        if (at != std::string::npos)
        {
            notes = prev.substr(at + marker.size());
        }
    }
    std::ofstream md(out);
    if (!md)
    {
        std::fprintf(stderr, "cannot write %s\n", out.c_str());
        return 1;
    }
    struct utsname u;
    uname(&u);
    time_t now = time(nullptr);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    md << "# ipkit inside ns-3: figures\n\n"
       << "Written by `make ns3-figures` (build/ns3/ipkit-ns3-figures"
       << (quick ? " --quick" : "") << ") on " << date << ", " << u.machine << ", ns-3 3.37 "
       << "(Debian libns3-dev). Every number below was measured by that run; "
          "simulated results are deterministic (same seed, same numbers), CPU costs are not.\n\n";
    double t0 = CpuNow();
    std::ostringstream boundary; /* measured first, written last */
    PartFive(boundary, iters);
    PartOne(md, ns);
    PartTwo(md, mixNs);
    PartThree(md, losses);
    PartFour(md, ns);
    md << boundary.str();
    md << Fmt("All runs: %.0f CPU s.\n\n", CpuNow() - t0) << marker << notes;
    if (notes.empty())
    {
        md << "\n";
    }
    std::fprintf(stderr, "wrote %s\n", out.c_str());
    return 0;
}
