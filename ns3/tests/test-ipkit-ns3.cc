/*
 * test-ipkit-ns3 (meson suite ns3): ipkit inside ns-3.
 *
 *   - ipkit <-> ipkit over point-to-point (raw IP) and CSMA (Ethernet, ARP):
 *     handshake, 16 MiB each way at once, SHA-256 of each stream checked at the
 *     receiver, at 0 % and 1 % packet loss (ns-3's RateErrorModel on both ends);
 *   - ipkit <-> ns-3's own TCP (TcpSocketBase, its default congestion control) on
 *     the same link, both directions, bytes and SHA-256 checked end to end;
 *   - the same scenario and seed give byte-identical pcaps twice (and another run
 *     number gives different ones, so the comparison can fail);
 *   - ECN: an ipkit flow negotiates it and ns-3's FqCoDel marks its packets;
 *   - hostile frames from a third host on a CSMA segment: dropped and counted while
 *     a transfer goes on whole, and a new connection succeeds after;
 *   - UDP request/response (IpkitEcho*): every request answered;
 *   - API misuse returns errors.
 * Each scenario runs in a child process (a fresh ns-3 simulator, no state carried
 * between scenarios). Nothing is timed: every bound is simulated time.
 *
 * Usage: test-ipkit-ns3 [NAME...]   (no name: all; a failing one prints its name)
 */
#include <ipkit/ns3/ipkit-ns3.h>
#include <ipkit/ns3/ipkit-scenarios.h>

#include "sha256.h"

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/csma-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace ns3;

static int g_fail;

#define CHECK(cond, ...)                                                                           \
    do                                                                                             \
    {                                                                                              \
        if (!(cond))                                                                               \
        {                                                                                          \
            std::printf("  check failed: %s: ", #cond);                                            \
            std::printf(__VA_ARGS__);                                                              \
            std::printf("\n");                                                                     \
            g_fail++;                                                                              \
        }                                                                                          \
    } while (0)

static const uint64_t MiB = 1ull << 20;

static std::string
PatternDigest(uint32_t seed, uint64_t n)
{
    struct sha256 s;
    std::vector<uint8_t> b(1 << 16);
    uint8_t d[32];
    char h[65];
    sha256_init(&s);
    for (uint64_t off = 0; off < n; off += b.size())
    {
        uint32_t k = static_cast<uint32_t>(n - off < b.size() ? n - off : b.size());
        IpkitPatternFill(seed, off, b.data(), k);
        sha256_update(&s, b.data(), k);
    }
    sha256_final(&s, d);
    sha256_hex(d, h);
    return h;
}

enum class Link
{
    P2P,
    CSMA
};

/* Two nodes on one link; devices with a RateErrorModel when loss > 0. */
struct TwoNodes
{
    NodeContainer nodes;
    NetDeviceContainer devs;
    PointToPointHelper p2p;
    CsmaHelper csma;
    Link link;

    TwoNodes(Link l, double loss)
        : link(l)
    {
        nodes.Create(2);
        if (l == Link::P2P)
        {
            p2p.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
            p2p.SetChannelAttribute("Delay", StringValue("1ms"));
            p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("200p"));
            devs = p2p.Install(nodes);
        }
        else
        {
            csma.SetChannelAttribute("DataRate", StringValue("1Gbps"));
            csma.SetChannelAttribute("Delay", StringValue("2us"));
            csma.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("200p"));
            devs = csma.Install(nodes);
        }
        if (loss > 0)
        {
            for (uint32_t i = 0; i < 2; i++)
            {
                Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
                em->SetAttribute("ErrorRate", DoubleValue(loss));
                em->SetAttribute("ErrorUnit", StringValue("ERROR_UNIT_PACKET"));
                em->AssignStreams(100 + i);
                devs.Get(i)->SetAttribute("ReceiveErrorModel", PointerValue(em));
            }
        }
    }

    void Pcap(const std::string& prefix)
    {
        if (link == Link::P2P)
        {
            p2p.EnablePcapAll(prefix);
        }
        else
        {
            csma.EnablePcapAll(prefix);
        }
    }
};

/* What node 0's sender reports through its trace sources. */
struct Traces
{
    uint32_t cwndSamples = 0, maxCwnd = 0, lastRetrans = 0;
    Time minRtt = Seconds(1000);

    void Cwnd(uint32_t, uint32_t v)
    {
        cwndSamples++;
        maxCwnd = std::max(maxCwnd, v);
    }

    void Rtt(Time, Time v)
    {
        if (v > Time(0))
        {
            minRtt = std::min(minRtt, v);
        }
    }

    void Retrans(uint32_t, uint32_t v) { lastRetrans = v; }
};

/* ipkit on both nodes, a bulk transfer each way at once. */
static void
IpkitPair(Link link, double loss, uint64_t bytes, const std::string& pcap)
{
    TwoNodes t(link, loss);
    IpkitStackHelper ipkit;
    ipkit.SetBase("10.1.1.0", "255.255.255.0");
    std::vector<Ipv4Address> a = ipkit.Assign(t.devs);
    for (uint32_t i = 0; i < 2; i++)
    {
        t.nodes.Get(i)->GetObject<IpkitStack>()->AssignStreams(10 + 8 * i);
    }
    if (!pcap.empty())
    {
        t.Pcap(pcap);
    }
    ApplicationContainer sinks = IpkitPacketSinkHelper(5001).Install(t.nodes);
    ApplicationContainer senders;
    for (uint32_t i = 0; i < 2; i++)
    {
        IpkitBulkSendHelper b(InetSocketAddress(a[1 - i], 5001));
        b.SetAttribute("MaxBytes", UintegerValue(bytes));
        b.SetAttribute("Seed", UintegerValue(7 + i));
        senders.Add(b.Install(t.nodes.Get(i)));
    }
    senders.Start(MilliSeconds(10));
    Traces tr;
    senders.Get(0)->TraceConnectWithoutContext("CongestionWindow",
                                               MakeCallback(&Traces::Cwnd, &tr));
    senders.Get(0)->TraceConnectWithoutContext("RTT", MakeCallback(&Traces::Rtt, &tr));
    senders.Get(0)->TraceConnectWithoutContext("Retransmissions",
                                               MakeCallback(&Traces::Retrans, &tr));
    Simulator::Stop(Seconds(120));
    Simulator::Run();

    /* The traces: sampled at ACK events (a TracedValue fires on change), the RTT never below the two
     * propagation delays (p2p 1 ms each way, CSMA 2 us), retransmissions seen when
     * the link loses packets. */
    Time floor = link == Link::P2P ? MilliSeconds(2) : MicroSeconds(4);
    CHECK(tr.cwndSamples >= 10, "%u cwnd changes seen", tr.cwndSamples);
    CHECK(tr.maxCwnd >= 10 * 1448, "largest cwnd %u", tr.maxCwnd);
    CHECK(tr.minRtt >= floor && tr.minRtt < Seconds(1), "smallest srtt sample %lld ns",
          (long long)tr.minRtt.GetNanoSeconds());
    if (loss > 0)
    {
        CHECK(tr.lastRetrans > 0, "Retransmissions trace stayed 0 at %.0f%% loss", loss * 100);
    }
    std::printf("  traces of node 0's sender: %u cwnd samples, largest %u B, smallest srtt %lld us, "
                "%u retransmissions\n",
                tr.cwndSamples, tr.maxCwnd, (long long)tr.minRtt.GetMicroSeconds(),
                tr.lastRetrans);

    for (uint32_t i = 0; i < 2; i++)
    {
        Ptr<IpkitBulkSend> tx = DynamicCast<IpkitBulkSend>(senders.Get(i));
        Ptr<IpkitPacketSink> rx = DynamicCast<IpkitPacketSink>(sinks.Get(1 - i));
        std::string want = PatternDigest(7 + i, bytes);
        CHECK(rx->GetAccepted() == 1, "node %u accepted %u connections", 1 - i,
              rx->GetAccepted());
        CHECK(tx->GetTotalWritten() == bytes, "node %u wrote %llu of %llu", i,
              (unsigned long long)tx->GetTotalWritten(), (unsigned long long)bytes);
        CHECK(tx->GetDigestHex() == want, "sender %u digest %s, pattern %s", i,
              tx->GetDigestHex().c_str(), want.c_str());
        CHECK(rx->GetDigests().size() == 1 && rx->GetDigests()[0] == want,
              "receiver of node %u: %zu streams, digest %s, want %s", i, rx->GetDigests().size(),
              rx->GetDigests().empty() ? "-" : rx->GetDigests()[0].c_str(), want.c_str());
        CHECK(rx->GetTotalRx() == bytes, "received %llu of %llu",
              (unsigned long long)rx->GetTotalRx(), (unsigned long long)bytes);
        CHECK(tx->IsDone(), "sender %u did not close normally (reason %d)", i,
              tx->GetCloseReason());
        const struct ipk_counters* c = t.nodes.Get(i)->GetObject<IpkitStack>()->GetCounters(0);
        std::printf("  node %u: sent %llu B in %.3f sim s (%.0f Mbit/s), %llu retransmits, "
                    "%llu RTOs, %llu frames waited for the device, %llu dropped, sha256 %.16s...\n",
                    i, (unsigned long long)bytes, (tx->GetFinishTime() - MilliSeconds(10)).GetSeconds(),
                    bytes * 8.0 / (tx->GetFinishTime() - MilliSeconds(10)).GetSeconds() / 1e6,
                    (unsigned long long)c->tcp_retransmits, (unsigned long long)c->tcp_rto,
                    (unsigned long long)t.nodes.Get(i)->GetObject<IpkitStack>()->GetTxHeld(),
                    (unsigned long long)t.nodes.Get(i)->GetObject<IpkitStack>()->GetTxDrops(),
                    rx->GetDigests().empty() ? "-" : rx->GetDigests()[0].c_str());
        if (loss > 0)
        {
            CHECK(c->tcp_retransmits > 0, "1%% loss but no retransmission on node %u", i);
        }
        uint32_t held = t.nodes.Get(i)->GetObject<IpkitStack>()->GetPacketsInUse(0);
        CHECK(held == 0, "node %u still holds %u packets after both connections ended", i, held);
    }
    Simulator::Destroy();
}

/* ---------------------------------------------- ns-3's own TCP as the peer */

/* Sends `bytes` of the IpkitPatternFill stream through an ns-3 TCP socket. */
class NsSender : public Application
{
  public:
    Address remote;
    uint64_t bytes = 0, sent = 0;
    uint32_t seed = 0;
    bool closed = false;

  private:
    Ptr<Socket> m_sock;
    std::vector<uint8_t> m_buf;

    void StartApplication() override
    {
        m_sock = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
        m_sock->Bind();
        m_sock->SetConnectCallback(MakeCallback(&NsSender::Connected, this),
                                   MakeNullCallback<void, Ptr<Socket>>());
        m_sock->SetSendCallback(MakeCallback(&NsSender::More, this));
        m_sock->Connect(remote);
    }

    void StopApplication() override
    {
        if (m_sock)
        {
            m_sock->Close();
        }
    }

    void Connected(Ptr<Socket> s)
    {
        More(s, s->GetTxAvailable());
    }

    void More(Ptr<Socket> s, uint32_t)
    {
        m_buf.resize(65536);
        while (sent < bytes && s->GetTxAvailable() > 0)
        {
            uint64_t left = bytes - sent;
            uint32_t k = s->GetTxAvailable();
            if (k > m_buf.size())
            {
                k = static_cast<uint32_t>(m_buf.size());
            }
            if (k > left)
            {
                k = static_cast<uint32_t>(left);
            }
            IpkitPatternFill(seed, sent, m_buf.data(), k);
            int rc = s->Send(m_buf.data(), k, 0);
            if (rc <= 0)
            {
                return;
            }
            sent += static_cast<uint64_t>(rc);
        }
        if (sent == bytes && !closed)
        {
            closed = true;
            s->Close();
        }
    }
};

/* Hashes what an ns-3 PacketSink receives. */
struct NsHasher
{
    struct sha256 s;
    uint64_t n = 0;
    std::vector<uint8_t> b;

    NsHasher() { sha256_init(&s); }

    void Rx(Ptr<const Packet> p, const Address&)
    {
        b.resize(p->GetSize());
        p->CopyData(b.data(), p->GetSize());
        sha256_update(&s, b.data(), b.size());
        n += p->GetSize();
    }

    std::string Hex()
    {
        uint8_t d[32];
        char h[65];
        sha256_final(&s, d);
        sha256_hex(d, h);
        return h;
    }
};

/* Node 0 ipkit, node 1 ns-3's Internet stack; bulk each way at once. */
static void
InteropNs3(Link link, double loss, uint64_t bytes)
{
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 20));
    TwoNodes t(link, loss);
    IpkitStackHelper ipkit;
    ipkit.SetBase("10.1.1.0", "255.255.255.0");
    Ipv4Address ipkitAddr = ipkit.AssignOne(t.devs.Get(0));
    InternetStackHelper inet;
    inet.Install(t.nodes.Get(1));
    Ipv4AddressHelper v4;
    v4.SetBase("10.1.1.0", "255.255.255.0", "0.0.0.2");
    Ipv4InterfaceContainer ifs = v4.Assign(NetDeviceContainer(t.devs.Get(1)));
    Ipv4Address nsAddr = ifs.GetAddress(0);

    TypeIdValue cc;
    Ptr<TcpL4Protocol> l4 = t.nodes.Get(1)->GetObject<TcpL4Protocol>();
    l4->GetAttribute("SocketType", cc);
    std::printf("  ns-3 TCP congestion control (its default): %s\n",
                cc.Get().GetName().c_str());

    /* ipkit -> ns-3 */
    PacketSinkHelper nsSink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 6001));
    ApplicationContainer nsSinkApp = nsSink.Install(t.nodes.Get(1));
    NsHasher h;
    nsSinkApp.Get(0)->TraceConnectWithoutContext("Rx", MakeCallback(&NsHasher::Rx, &h));
    IpkitBulkSendHelper b(InetSocketAddress(nsAddr, 6001));
    b.SetAttribute("MaxBytes", UintegerValue(bytes));
    b.SetAttribute("Seed", UintegerValue(21));
    ApplicationContainer ipkitTx = b.Install(t.nodes.Get(0));
    ipkitTx.Start(MilliSeconds(10));

    /* ns-3 -> ipkit */
    ApplicationContainer ipkitSink = IpkitPacketSinkHelper(6002).Install(t.nodes.Get(0));
    Ptr<NsSender> ns = CreateObject<NsSender>();
    ns->remote = InetSocketAddress(ipkitAddr, 6002);
    ns->bytes = bytes;
    ns->seed = 22;
    t.nodes.Get(1)->AddApplication(ns);
    ns->SetStartTime(MilliSeconds(20));

    Simulator::Stop(Seconds(120));
    Simulator::Run();

    Ptr<IpkitBulkSend> tx = DynamicCast<IpkitBulkSend>(ipkitTx.Get(0));
    Ptr<IpkitPacketSink> rx = DynamicCast<IpkitPacketSink>(ipkitSink.Get(0));
    std::string want1 = PatternDigest(21, bytes), want2 = PatternDigest(22, bytes);
    std::string got1 = h.Hex();
    CHECK(h.n == bytes, "ns-3 sink got %llu of %llu", (unsigned long long)h.n,
          (unsigned long long)bytes);
    CHECK(got1 == want1, "ipkit->ns-3 digest %s, want %s", got1.c_str(), want1.c_str());
    CHECK(tx->GetTotalTx() == bytes, "ipkit sender saw %llu of %llu acknowledged",
          (unsigned long long)tx->GetTotalTx(), (unsigned long long)bytes);
    CHECK(ns->sent == bytes, "ns-3 sender wrote %llu of %llu", (unsigned long long)ns->sent,
          (unsigned long long)bytes);
    CHECK(rx->GetDigests().size() == 1 && rx->GetDigests()[0] == want2,
          "ns-3->ipkit: %zu streams, digest %s, want %s", rx->GetDigests().size(),
          rx->GetDigests().empty() ? "-" : rx->GetDigests()[0].c_str(), want2.c_str());
    CHECK(rx->GetTotalRx() == bytes, "ipkit sink got %llu of %llu",
          (unsigned long long)rx->GetTotalRx(), (unsigned long long)bytes);
    const struct ipk_counters* c = t.nodes.Get(0)->GetObject<IpkitStack>()->GetCounters(0);
    std::printf("  ipkit->ns-3 %llu B sha256 %.16s..., ns-3->ipkit %llu B sha256 %.16s...; "
                "ipkit dropped %llu bad IPv4 csum, %llu bad TCP csum\n",
                (unsigned long long)h.n, got1.c_str(), (unsigned long long)rx->GetTotalRx(),
                rx->GetDigests().empty() ? "-" : rx->GetDigests()[0].c_str(),
                (unsigned long long)c->drop[IPK_DROP_IP4_CSUM],
                (unsigned long long)c->drop[IPK_DROP_TCP_CSUM]);
    Simulator::Destroy();
}

/* ------------------------------------------------------------ the rest */

static void
Echo()
{
    TwoNodes t(Link::CSMA, 0);
    IpkitStackHelper ipkit;
    ipkit.SetBase("10.1.1.0", "255.255.255.0");
    std::vector<Ipv4Address> a = ipkit.Assign(t.devs);
    ApplicationContainer srv = IpkitEchoServerHelper(7).Install(t.nodes.Get(1));
    IpkitEchoClientHelper cl(a[1], 7);
    cl.SetAttribute("MaxPackets", UintegerValue(100));
    cl.SetAttribute("Interval", TimeValue(MilliSeconds(5)));
    cl.SetAttribute("PacketSize", UintegerValue(3000)); /* > MTU: IPv4 fragments */
    ApplicationContainer c = cl.Install(t.nodes.Get(0));
    c.Start(MilliSeconds(1));
    Simulator::Stop(Seconds(10));
    Simulator::Run();
    Ptr<IpkitEchoClient> ec = DynamicCast<IpkitEchoClient>(c.Get(0));
    CHECK(ec->GetSent() == 100 && ec->GetReplies() == 100, "sent %u, answered %u",
          ec->GetSent(), ec->GetReplies());
    /* No answer can come back faster than the request's and the answer's
     * payload bits at 1 Gbit/s plus two 2 us propagation delays. */
    CHECK(!ec->GetRtts().empty() && ec->GetRtts()[0] >= MicroSeconds(2 * (24 + 2)),
          "first RTT %s us below two transmissions of 3000 B and two link delays",
          ec->GetRtts().empty() ? "-" : std::to_string(ec->GetRtts()[0].GetMicroSeconds()).c_str());
    std::printf("  %u of %u requests (3000 B, fragmented) answered, first RTT %lld us\n",
                ec->GetReplies(), ec->GetSent(),
                ec->GetRtts().empty() ? -1LL : (long long)ec->GetRtts()[0].GetMicroSeconds());
    Simulator::Destroy();
}

/* ipkit's RFC 3168 ECN through ns-3's AQM: an ipkit and an ns-3 CUBIC flow share
 * a 100 Mbit/s FqCoDel bottleneck that marks instead of dropping. The ipkit
 * connection must negotiate ECN with ipkit's receiver, its ECT packets must be
 * marked by ns-3's queue disc (which reads ipkit's IPv4 header), and it must keep
 * a fair part of the link. */
static void
EcnAqm()
{
    IpkitDumbbellConfig cfg;
    cfg.flows = {IpkitFlowKind::IpkitCubic, IpkitFlowKind::Ns3Cubic};
    cfg.queue = "FqCoDel";
    cfg.ecn = true;
    cfg.duration = Seconds(6);
    cfg.warmup = Seconds(2);
    IpkitDumbbellResult r = IpkitRunDumbbell(cfg);
    CHECK(r.ecnFlows == 1, "%u ipkit flows negotiated ECN", r.ecnFlows);
    CHECK(r.bottleneckMarks > 0, "FqCoDel marked nothing");
    CHECK(r.goodputMbps.size() == 2 && r.goodputMbps[0] > 20 && r.goodputMbps[0] + r.goodputMbps[1] > 80,
          "goodputs %.2f / %.2f Mbit/s", r.goodputMbps[0], r.goodputMbps[1]);
    std::printf("  FqCoDel: %llu CE marks, %llu drops; ipkit %.2f Mbit/s (%llu retransmits), "
                "ns-3 %.2f Mbit/s\n",
                (unsigned long long)r.bottleneckMarks, (unsigned long long)r.bottleneckDrops,
                r.goodputMbps[0], (unsigned long long)r.retransmits[0], r.goodputMbps[1]);
    Simulator::Destroy();
}

/* Sends `count` frames of random length (0..1500) and random bytes, with an
 * EtherType drawn from IPv4, ARP, IPv6 and anything, to one MAC through an ns-3
 * packet socket: a hostile host on the shared segment. Many frames start with a
 * plausible IPv4 header (version 4, IHL 5) over random lengths and protocols so
 * they get past the first checks. */
class GarbageSender : public Application
{
  public:
    Address dstMac;
    uint32_t count = 0, sent = 0;
    Time gap = MicroSeconds(50);

  private:
    Ptr<Socket> m_sock;
    Ptr<UniformRandomVariable> m_rng;

    void StartApplication() override
    {
        m_rng = CreateObject<UniformRandomVariable>();
        m_rng->SetStream(77);
        m_sock = Socket::CreateSocket(GetNode(), PacketSocketFactory::GetTypeId());
        m_sock->Bind();
        Send();
    }

    void StopApplication() override {}

    void Send()
    {
        static const uint16_t types[] = {0x0800, 0x0800, 0x0806, 0x86dd, 0x1234};
        uint32_t len = m_rng->GetInteger(0, 1500);
        std::vector<uint8_t> b(len);
        for (auto& x : b)
        {
            x = static_cast<uint8_t>(m_rng->GetInteger(0, 255));
        }
        uint16_t type = types[m_rng->GetInteger(0, 4)];
        if (type == 0x0800 && len >= 20 && m_rng->GetInteger(0, 1))
        {
            b[0] = 0x45; /* IPv4, IHL 5: deeper into the parser */
            b[9] = static_cast<uint8_t>(m_rng->GetInteger(0, 2) == 0 ? 6 : (m_rng->GetInteger(0, 1) ? 17 : 1));
            const uint8_t to[4] = {10, 1, 1, 2}; /* the victim */
            std::memcpy(&b[16], to, 4);
        }
        PacketSocketAddress a;
        a.SetSingleDevice(GetNode()->GetDevice(0)->GetIfIndex());
        a.SetPhysicalAddress(dstMac);
        a.SetProtocol(type);
        m_sock->SendTo(Create<Packet>(b.data(), len), 0, a);
        if (++sent < count)
        {
            Simulator::Schedule(gap, &GarbageSender::Send, this);
        }
    }
};

/* A transfer on a CSMA segment keeps going, whole, while a third host throws
 * 3000 malformed frames at the receiver; the adapter and the core drop and count
 * them (nothing from the wire is trusted), and a new connection succeeds after. */
static void
HostileFrames()
{
    NodeContainer nodes;
    nodes.Create(3);
    CsmaHelper csma;
    csma.SetChannelAttribute("DataRate", StringValue("1Gbps"));
    csma.SetChannelAttribute("Delay", StringValue("2us"));
    NetDeviceContainer devs = csma.Install(nodes);
    IpkitStackHelper ipkit;
    ipkit.SetBase("10.1.1.0", "255.255.255.0");
    ipkit.AssignOne(devs.Get(0));
    Ipv4Address victim = ipkit.AssignOne(devs.Get(1));
    PacketSocketHelper ps;
    ps.Install(nodes.Get(2));
    Ptr<GarbageSender> g = CreateObject<GarbageSender>();
    g->dstMac = devs.Get(1)->GetAddress();
    g->count = 3000;
    nodes.Get(2)->AddApplication(g);
    g->SetStartTime(MilliSeconds(5));

    ApplicationContainer sink = IpkitPacketSinkHelper(5001).Install(nodes.Get(1));
    IpkitBulkSendHelper b(InetSocketAddress(victim, 5001));
    b.SetAttribute("MaxBytes", UintegerValue(4 * MiB));
    b.SetAttribute("Seed", UintegerValue(31));
    ApplicationContainer tx = b.Install(nodes.Get(0));
    tx.Start(MilliSeconds(1));
    /* the new connection after the attack: 64 KiB */
    IpkitBulkSendHelper b2(InetSocketAddress(victim, 5001));
    b2.SetAttribute("MaxBytes", UintegerValue(65536));
    b2.SetAttribute("Seed", UintegerValue(32));
    ApplicationContainer tx2 = b2.Install(nodes.Get(0));
    tx2.Start(MilliSeconds(300));
    Simulator::Stop(Seconds(60));
    Simulator::Run();

    Ptr<IpkitPacketSink> rx = DynamicCast<IpkitPacketSink>(sink.Get(0));
    const struct ipk_counters* c = nodes.Get(1)->GetObject<IpkitStack>()->GetCounters(0);
    uint64_t drops = 0;
    for (uint32_t i = 0; i < IPK_DROP__COUNT; i++)
    {
        drops += c->drop[i];
    }
    std::string want1 = PatternDigest(31, 4 * MiB), want2 = PatternDigest(32, 65536);
    CHECK(g->sent == 3000, "garbage sent %u", g->sent);
    CHECK(rx->GetDigests().size() == 2, "%zu streams ended", rx->GetDigests().size());
    CHECK(rx->GetDigests().size() == 2 && rx->GetDigests()[0] == want1 &&
              rx->GetDigests()[1] == want2,
          "a stream arrived damaged");
    CHECK(drops > 1000, "only %llu frames dropped by the core", (unsigned long long)drops);
    CHECK(DynamicCast<IpkitBulkSend>(tx2.Get(0))->IsDone(), "the new connection did not finish");
    std::printf("  3000 garbage frames: the core dropped %llu (runt %llu, ip4 malformed %llu, "
                "ip4 csum %llu, ethertype %llu, arp malformed %llu), adapter %llu; 4 MiB and "
                "then 64 KiB arrived whole\n",
                (unsigned long long)drops, (unsigned long long)c->drop[IPK_DROP_RUNT],
                (unsigned long long)c->drop[IPK_DROP_IP4_MALFORMED],
                (unsigned long long)c->drop[IPK_DROP_IP4_CSUM],
                (unsigned long long)c->drop[IPK_DROP_ETHERTYPE],
                (unsigned long long)c->drop[IPK_DROP_ARP_MALFORMED],
                (unsigned long long)nodes.Get(1)->GetObject<IpkitStack>()->GetRxDrops());
    Simulator::Destroy();
}

class NullHandler : public IpkitTcpHandler
{
  public:
    void Data(IpkitConn, const uint8_t*, uint32_t) override {}
};

static void
Misuse()
{
    TwoNodes t(Link::P2P, 0);
    Ptr<IpkitStack> s = CreateObject<IpkitStack>();
    t.nodes.Get(0)->AggregateObject(s);
    /* a device of another node */
    CHECK(s->AddInterface(t.devs.Get(1), "10.1.1.1", "255.255.255.0") == -1, "foreign device");
    CHECK(s->AddInterface(t.devs.Get(0), "10.1.1.1", "255.255.255.0") == 0, "first interface");
    CHECK(s->AddInterface(t.devs.Get(0), "10.1.1.1", "255.255.255.0") == -1, "device twice");
    IpkitConn c;
    CHECK(s->Connect("10.1.1.2", 80, nullptr, &c) == IPK_EINVAL, "null handler");
    NullHandler h;
    CHECK(s->Connect("10.1.1.2", 0, &h, &c) == IPK_EINVAL, "port 0");
    CHECK(s->Write(IpkitConn(), nullptr, 0) == IPK_EINVAL, "null connection");
    CHECK(s->Listen(0, [](IpkitConn) { return nullptr; }) == IPK_EINVAL, "listen port 0");
    CHECK(s->Listen(80, [](IpkitConn) { return nullptr; }) == 0, "listen");
    CHECK(s->Listen(80, [](IpkitConn) { return nullptr; }) == IPK_EADDRINUSE, "listen twice");
    Ptr<IpkitStack> s2 = CreateObject<IpkitStack>();
    s2->SetAttribute("CongestionControl", StringValue("Vegas"));
    t.nodes.Get(1)->AggregateObject(s2);
    CHECK(s2->AddInterface(t.devs.Get(1), "10.1.1.2", "255.255.255.0") == -1,
          "unknown congestion control accepted");
    Simulator::Destroy();
}

/* ---------------------------------------------------- determinism (pcaps) */

static std::string
Slurp(const std::string& p)
{
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

static int RunChild(const std::function<void()>& fn);

static void
Determinism()
{
    const char* names[] = {"-0-0.pcap", "-1-0.pcap"};
    std::string dirs[3] = {"ns3-det-a", "ns3-det-b", "ns3-det-c"};
    for (int r = 0; r < 3; r++)
    {
        mkdir(dirs[r].c_str(), 0755);
        int rc = RunChild([&, r]() {
            RngSeedManager::SetSeed(1);
            RngSeedManager::SetRun(r == 2 ? 2 : 1);
            IpkitPair(Link::CSMA, 0.01, 2 * MiB, dirs[r] + "/det");
        });
        CHECK(rc == 0, "run %d failed", r);
    }
    for (const char* n : names)
    {
        std::string a = Slurp(dirs[0] + "/det" + n), b = Slurp(dirs[1] + "/det" + n),
                    c = Slurp(dirs[2] + "/det" + n);
        CHECK(a.size() > 4 * MiB, "%s: only %zu bytes", n, a.size());
        /* ns-3's own pcap writer, unchanged: a classic pcap file of Ethernet frames
         * (CSMA), in either byte order. */
        if (a.size() >= 24)
        {
            const uint8_t* h = reinterpret_cast<const uint8_t*>(a.data());
            bool le = h[0] == 0xd4 && h[1] == 0xc3 && h[2] == 0xb2 && h[3] == 0xa1;
            bool be = h[0] == 0xa1 && h[1] == 0xb2 && h[2] == 0xc3 && h[3] == 0xd4;
            uint32_t linktype = le ? (h[20] | h[21] << 8 | h[22] << 16 | (uint32_t)h[23] << 24)
                                   : ((uint32_t)h[20] << 24 | h[21] << 16 | h[22] << 8 | h[23]);
            CHECK((le || be) && linktype == 1, "%s: not a pcap of Ethernet frames", n);
        }
        CHECK(a == b, "%s differs between two runs with the same seed (%zu / %zu bytes)", n,
              a.size(), b.size());
        CHECK(a != c, "%s identical under another run number: the check could not fail", n);
        std::printf("  det%s: %zu bytes, identical twice; run 2: %zu bytes, different\n", n,
                    a.size(), c.size());
        for (int r = 0; r < 3; r++)
        {
            std::remove((dirs[r] + "/det" + n).c_str());
        }
    }
    for (int r = 0; r < 3; r++)
    {
        rmdir(dirs[r].c_str());
    }
}

/* -------------------------------------------------------------- driver */

static int
RunChild(const std::function<void()>& fn)
{
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
    {
        return -1;
    }
    if (pid == 0)
    {
        g_fail = 0;
        fn();
        std::fflush(stdout);
        _exit(g_fail ? 1 : 0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
    {
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct Case
{
    const char* name;
    std::function<void()> fn;
};

int
main(int argc, char** argv)
{
    const std::vector<Case> cases = {
        {"p2p_16M_each_way", [] { IpkitPair(Link::P2P, 0, 16 * MiB, ""); }},
        {"p2p_16M_each_way_loss1", [] { IpkitPair(Link::P2P, 0.01, 16 * MiB, ""); }},
        {"csma_16M_each_way", [] { IpkitPair(Link::CSMA, 0, 16 * MiB, ""); }},
        {"csma_16M_each_way_loss1", [] { IpkitPair(Link::CSMA, 0.01, 16 * MiB, ""); }},
        {"ns3tcp_p2p_16M_both_ways", [] { InteropNs3(Link::P2P, 0, 16 * MiB); }},
        {"ns3tcp_csma_4M_both_ways_loss1", [] { InteropNs3(Link::CSMA, 0.01, 4 * MiB); }},
        {"ecn_through_ns3_fqcodel", EcnAqm},
        {"hostile_frames_csma", HostileFrames},
        {"echo_udp_fragmented", Echo},
        {"misuse", Misuse},
        {"pcap_deterministic", Determinism},
    };
    int failed = 0, ran = 0;
    for (const Case& c : cases)
    {
        bool want = argc < 2;
        for (int i = 1; i < argc; i++)
        {
            want |= std::strcmp(argv[i], c.name) == 0;
        }
        if (!want)
        {
            continue;
        }
        std::printf("%s\n", c.name);
        int rc = RunChild(c.fn);
        ran++;
        std::printf("%s %s\n", rc == 0 ? "ok" : "FAIL", c.name);
        failed += rc != 0;
    }
    std::printf("%d of %d passed\n", ran - failed, ran);
    return failed || ran == 0 ? 1 : 0;
}
