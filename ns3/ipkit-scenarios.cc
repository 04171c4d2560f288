/*
 * The dumbbell and chain scenarios (<ipkit/ns3/ipkit-scenarios.h>).
 */
#include <ipkit/ns3/ipkit-scenarios.h>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <memory>

namespace ns3
{

const char*
IpkitFlowKindName(IpkitFlowKind k)
{
    switch (k)
    {
    case IpkitFlowKind::IpkitCubic:
        return "ipkit-cubic";
    case IpkitFlowKind::IpkitNewReno:
        return "ipkit-newreno";
    case IpkitFlowKind::Ns3Cubic:
        return "ns3-cubic";
    case IpkitFlowKind::Ns3NewReno:
        return "ns3-newreno";
    }
    return "?";
}

bool
IpkitFlowKindParse(const std::string& s, IpkitFlowKind* k)
{
    for (IpkitFlowKind v : {IpkitFlowKind::IpkitCubic,
                            IpkitFlowKind::IpkitNewReno,
                            IpkitFlowKind::Ns3Cubic,
                            IpkitFlowKind::Ns3NewReno})
    {
        if (s == IpkitFlowKindName(v))
        {
            *k = v;
            return true;
        }
    }
    return false;
}

static bool
IsIpkit(IpkitFlowKind k)
{
    return k == IpkitFlowKind::IpkitCubic || k == IpkitFlowKind::IpkitNewReno;
}

double
IpkitJain(const std::vector<double>& x)
{
    double s = 0, q = 0;
    for (double v : x)
    {
        s += v;
        q += v * v;
    }
    return x.empty() || q == 0 ? 0 : s * s / (static_cast<double>(x.size()) * q);
}

/* ns-3 TCP defaults for a fair comparison with ipkit's: full-sized segments,
 * 1 MiB buffers (ipkit's SndBufSize / RcvBufSize defaults). */
static void
Ns3TcpDefaults(uint32_t delAckCount = 2)
{
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(delAckCount));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 20));
}

/* One end host: ipkit (stack with the flow's congestion control) or ns-3's
 * Internet stack with it; address .host of net (1 or 2), gateway the other. */
static void
SetupHost(IpkitFlowKind k, Ptr<NetDevice> dev, Ipv4Address net, Ipv4Address* addr,
          uint32_t host = 1, bool ecn = false)
{
    Ptr<Node> node = dev->GetNode();
    Ipv4Address gw(net.Get() | (3 - host));
    if (IsIpkit(k))
    {
        IpkitStackHelper h;
        h.SetAttribute("CongestionControl",
                       StringValue(k == IpkitFlowKind::IpkitCubic ? "Cubic" : "NewReno"));
        h.SetAttribute("Ecn", BooleanValue(ecn));
        h.SetBase(net, "255.255.255.0", Ipv4Address(host));
        h.SetGateway(gw);
        *addr = h.AssignOne(dev);
        return;
    }
    InternetStackHelper inet;
    inet.Install(node);
    node->GetObject<TcpL4Protocol>()->SetAttribute(
        "SocketType",
        TypeIdValue(k == IpkitFlowKind::Ns3Cubic ? TcpCubic::GetTypeId()
                                                 : TcpNewReno::GetTypeId()));
    Ipv4AddressHelper v4;
    v4.SetBase(net, "255.255.255.0", Ipv4Address(host));
    *addr = v4.Assign(NetDeviceContainer(dev)).GetAddress(0);
    Ipv4StaticRoutingHelper rh;
    rh.GetStaticRouting(node->GetObject<Ipv4>())->SetDefaultRoute(gw, 1);
}

static Ipv4Address
RouterSide(Ptr<NetDevice> dev, Ipv4Address net)
{
    Ipv4AddressHelper v4;
    v4.SetBase(net, "255.255.255.0", "0.0.0.2");
    return v4.Assign(NetDeviceContainer(dev)).GetAddress(0);
}

/* A flow's sender and receiver applications, with a byte counter of what the
 * receiver got. */
struct Flow
{
    IpkitFlowKind kind;
    Ptr<Application> tx, rx;
    uint64_t rxBytes = 0, rxAtWarmup = 0;
    Time lastRx;

    void OnIpkitRx(uint32_t n, Ipv4Address)
    {
        rxBytes += n;
        lastRx = Simulator::Now();
    }

    void OnNsRx(Ptr<const Packet> p, const Address&)
    {
        rxBytes += p->GetSize();
        lastRx = Simulator::Now();
    }

    void Snapshot() { rxAtWarmup = rxBytes; }
};

static void
InstallFlow(Flow& f, Ptr<Node> src, Ptr<Node> dst, Ipv4Address dstAddr, uint16_t port,
            uint64_t maxBytes, uint32_t seed)
{
    if (IsIpkit(f.kind))
    {
        f.rx = IpkitPacketSinkHelper(port).Install(dst).Get(0);
        f.rx->TraceConnectWithoutContext("Rx", MakeCallback(&Flow::OnIpkitRx, &f));
        IpkitBulkSendHelper b(InetSocketAddress(dstAddr, port));
        b.SetAttribute("MaxBytes", UintegerValue(maxBytes));
        b.SetAttribute("Seed", UintegerValue(seed));
        f.tx = b.Install(src).Get(0);
        return;
    }
    PacketSinkHelper s("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
    f.rx = s.Install(dst).Get(0);
    f.rx->TraceConnectWithoutContext("Rx", MakeCallback(&Flow::OnNsRx, &f));
    BulkSendHelper b("ns3::TcpSocketFactory", InetSocketAddress(dstAddr, port));
    b.SetAttribute("MaxBytes", UintegerValue(maxBytes));
    b.SetAttribute("SendSize", UintegerValue(65536));
    f.tx = b.Install(src).Get(0);
}

static IpkitRunCost
TimedRun()
{
    uint64_t e0 = Simulator::GetEventCount();
    Time t0 = Simulator::Now();
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    auto w0 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto w1 = std::chrono::steady_clock::now();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    IpkitRunCost c;
    c.cpuSeconds = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) / 1e9;
    c.wallSeconds = std::chrono::duration<double>(w1 - w0).count();
    c.simSeconds = (Simulator::Now() - t0).GetSeconds();
    c.events = Simulator::GetEventCount() - e0;
    return c;
}

static void
InstallQueueDisc(const IpkitDumbbellConfig& cfg, Ptr<NetDevice> dev, uint32_t limit,
                 double bps, Time delay)
{
    TrafficControlHelper tch;
    tch.Uninstall(dev);
    std::string lim = std::to_string(limit) + "p";
    if (cfg.queue == "RED")
    {
        tch.SetRootQueueDisc("ns3::RedQueueDisc",
                             "MaxSize", QueueSizeValue(QueueSize(lim)),
                             "ARED", BooleanValue(true),
                             "MinTh", DoubleValue(limit * 0.15),
                             "MaxTh", DoubleValue(limit * 0.45),
                             "MeanPktSize", UintegerValue(1500),
                             "LinkBandwidth", DataRateValue(DataRate(static_cast<uint64_t>(bps))),
                             "LinkDelay", TimeValue(delay),
                             "UseEcn", BooleanValue(cfg.ecn));
    }
    else if (cfg.queue == "FqCoDel")
    {
        tch.SetRootQueueDisc("ns3::FqCoDelQueueDisc", "UseEcn", BooleanValue(cfg.ecn));
    }
    else
    {
        tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", QueueSizeValue(QueueSize(lim)));
    }
    tch.Install(dev);
}

IpkitDumbbellResult
IpkitRunDumbbell(const IpkitDumbbellConfig& cfg)
{
    Ns3TcpDefaults(cfg.ns3DelAckCount);
    Config::SetDefault("ns3::TcpSocketBase::UseEcn",
                       EnumValue(cfg.ecn ? TcpSocketState::On : TcpSocketState::Off));
    const uint32_t n = static_cast<uint32_t>(cfg.flows.size());
    IpkitDumbbellResult res;
    if (n == 0 || n > 250)
    {
        return res;
    }
    NodeContainer routers, senders, receivers;
    routers.Create(2);
    senders.Create(n);
    receivers.Create(n);
    InternetStackHelper inet;
    inet.Install(routers);

    Time bnDelay = cfg.rtt / 2 - MilliSeconds(2);
    double bps = static_cast<double>(DataRate(cfg.rate).GetBitRate());
    uint32_t limit = cfg.queuePackets
                         ? cfg.queuePackets
                         : static_cast<uint32_t>(bps * cfg.rtt.GetSeconds() / (1500 * 8));
    if (limit < 10)
    {
        limit = 10;
    }

    PointToPointHelper bn;
    bn.SetDeviceAttribute("DataRate", StringValue(cfg.rate));
    bn.SetChannelAttribute("Delay", TimeValue(bnDelay));
    bn.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("5p"));
    NetDeviceContainer bnDevs = bn.Install(routers);
    Ipv4AddressHelper v4;
    v4.SetBase("10.0.0.0", "255.255.255.252");
    Ipv4InterfaceContainer bnIf = v4.Assign(bnDevs);
    InstallQueueDisc(cfg, bnDevs.Get(0), limit, bps, bnDelay);
    InstallQueueDisc(cfg, bnDevs.Get(1), limit, bps, bnDelay);

    PointToPointHelper acc;
    acc.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
    acc.SetChannelAttribute("Delay", StringValue("1ms"));
    std::vector<std::unique_ptr<Flow>> flows;
    for (uint32_t i = 0; i < n; i++)
    {
        auto f = std::make_unique<Flow>();
        f->kind = cfg.flows[i];
        NetDeviceContainer l = acc.Install(senders.Get(i), routers.Get(0));
        NetDeviceContainer r = acc.Install(receivers.Get(i), routers.Get(1));
        Ipv4Address ln(0x0a010000u | (i + 1) << 8), rn(0x0a020000u | (i + 1) << 8);
        RouterSide(l.Get(1), ln);
        RouterSide(r.Get(1), rn);
        Ipv4Address sa, ra;
        SetupHost(f->kind, l.Get(0), ln, &sa, 1, cfg.ecn);
        SetupHost(f->kind, r.Get(0), rn, &ra, 1, cfg.ecn);
        InstallFlow(*f, senders.Get(i), receivers.Get(i), ra, static_cast<uint16_t>(5000 + i), 0,
                    i + 1);
        f->tx->SetStartTime(Seconds(0.1) + MilliSeconds(50) * i);
        f->tx->SetStopTime(cfg.duration);
        flows.push_back(std::move(f));
    }
    Ipv4StaticRoutingHelper rh;
    Ptr<Ipv4> l4 = routers.Get(0)->GetObject<Ipv4>();
    Ptr<Ipv4> r4 = routers.Get(1)->GetObject<Ipv4>();
    rh.GetStaticRouting(l4)->AddNetworkRouteTo("10.2.0.0", "255.255.0.0", bnIf.GetAddress(1),
                                               l4->GetInterfaceForDevice(bnDevs.Get(0)));
    rh.GetStaticRouting(r4)->AddNetworkRouteTo("10.1.0.0", "255.255.0.0", bnIf.GetAddress(0),
                                               r4->GetInterfaceForDevice(bnDevs.Get(1)));
    if (!cfg.pcapPrefix.empty())
    {
        bn.EnablePcap(cfg.pcapPrefix, bnDevs, false);
    }
    for (auto& f : flows)
    {
        Simulator::Schedule(cfg.warmup, &Flow::Snapshot, f.get());
    }
    Simulator::Stop(cfg.duration);
    res.cost = TimedRun();

    double span = (cfg.duration - cfg.warmup).GetSeconds();
    for (auto& f : flows)
    {
        res.goodputMbps.push_back((f->rxBytes - f->rxAtWarmup) * 8.0 / span / 1e6);
        uint64_t rtx = 0;
        if (IsIpkit(f->kind))
        {
            const struct ipk_counters* c =
                f->tx->GetNode()->GetObject<IpkitStack>()->GetCounters(0);
            rtx = c ? c->tcp_retransmits : 0;
            res.ecnFlows += DynamicCast<IpkitBulkSend>(f->tx)->GetEcnNegotiated();
        }
        res.retransmits.push_back(rtx);
    }
    res.jain = IpkitJain(res.goodputMbps);
    Ptr<TrafficControlLayer> tc = routers.Get(0)->GetObject<TrafficControlLayer>();
    Ptr<QueueDisc> qd = tc->GetRootQueueDiscOnDevice(bnDevs.Get(0));
    if (qd)
    {
        res.bottleneckDrops = qd->GetStats().nTotalDroppedPackets;
        res.bottleneckMarks = qd->GetStats().nTotalMarkedPackets;
    }
    return res;
}

/* ---------------------------------------------------------------- chain */

struct CwndWriter
{
    std::ofstream out;

    void Cwnd(uint32_t, uint32_t v)
    {
        out << Simulator::Now().GetSeconds() << ' ' << v << '\n';
    }
};

/* Link i is 10.3.(i+1).0/24, its left end .1 and right end .2, except that a host
 * at the end of a chain of two or more links is .1 with its router at .2. */
static void
ChainAddresses(const IpkitChainConfig& cfg, const std::vector<NetDeviceContainer>& links,
               Ipv4Address* srcAddr, Ipv4Address* dstAddr)
{
    for (uint32_t i = 0; i < cfg.hops; i++)
    {
        Ipv4Address net(0x0a030000u | (i + 1) << 8);
        for (uint32_t e = 0; e < 2; e++)
        {
            Ptr<NetDevice> d = links[i].Get(e);
            bool host = (i == 0 && e == 0) || (i == cfg.hops - 1 && e == 1);
            if (host)
            {
                SetupHost(cfg.kind, d, net, e == 0 ? srcAddr : dstAddr,
                          cfg.hops == 1 ? e + 1 : 1);
            }
            else
            {
                Ipv4AddressHelper v4;
                v4.SetBase(net, "255.255.255.0", e == 0 ? "0.0.0.1" : "0.0.0.2");
                if (i == 0 || i == cfg.hops - 1)
                {
                    v4.SetBase(net, "255.255.255.0", "0.0.0.2");
                }
                v4.Assign(NetDeviceContainer(d));
            }
        }
    }
}

/* Router k (between link k-1 and link k) sends 10.3.(j+1) for j > k right, the rest
 * left; directly connected links need nothing. */
static void
ChainRoutes(const NodeContainer& all, const std::vector<NetDeviceContainer>& links)
{
    const uint32_t hops = static_cast<uint32_t>(links.size());
    Ipv4StaticRoutingHelper rh;
    for (uint32_t k = 1; k < hops; k++)
    {
        Ptr<Ipv4> ip = all.Get(k)->GetObject<Ipv4>();
        Ptr<NetDevice> left = links[k - 1].Get(1), right = links[k].Get(0);
        for (uint32_t j = 0; j < hops; j++)
        {
            if (j == k - 1 || j == k)
            {
                continue;
            }
            Ipv4Address net(0x0a030000u | (j + 1) << 8);
            bool goRight = j > k;
            /* next hop: the far end of the adjacent link */
            Ptr<NetDevice> far = goRight ? links[k].Get(1) : links[k - 1].Get(0);
            Ptr<Ipv4> fip = far->GetNode()->GetObject<Ipv4>();
            Ipv4Address nh;
            if (fip)
            {
                nh = fip->GetAddress(fip->GetInterfaceForDevice(far), 0).GetLocal();
            }
            else
            {
                nh = far->GetNode()->GetObject<IpkitStack>()->GetAddress(0);
            }
            rh.GetStaticRouting(ip)->AddNetworkRouteTo(
                net, "255.255.255.0", nh,
                ip->GetInterfaceForDevice(goRight ? right : left));
        }
    }

}

IpkitChainResult
IpkitRunChain(const IpkitChainConfig& cfg)
{
    Ns3TcpDefaults();
    IpkitChainResult res;
    if (cfg.hops == 0 || cfg.hops > 64)
    {
        return res;
    }
    NodeContainer all;
    all.Create(cfg.hops + 1);
    NodeContainer routers;
    for (uint32_t i = 1; i < cfg.hops; i++)
    {
        routers.Add(all.Get(i));
    }
    InternetStackHelper inet;
    inet.Install(routers);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue(cfg.rate));
    p2p.SetChannelAttribute("Delay", TimeValue(cfg.delay));
    std::vector<NetDeviceContainer> links;
    for (uint32_t i = 0; i < cfg.hops; i++)
    {
        links.push_back(p2p.Install(all.Get(i), all.Get(i + 1)));
        for (uint32_t e = 0; e < 2 && cfg.loss > 0; e++)
        {
            Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
            em->SetAttribute("ErrorRate", DoubleValue(cfg.loss));
            em->SetAttribute("ErrorUnit", StringValue("ERROR_UNIT_PACKET"));
            links[i].Get(e)->SetAttribute("ReceiveErrorModel", PointerValue(em));
        }
    }
    Ipv4Address srcAddr, dstAddr;
    ChainAddresses(cfg, links, &srcAddr, &dstAddr);
    ChainRoutes(all, links);

    Flow f;
    f.kind = cfg.kind;
    InstallFlow(f, all.Get(0), all.Get(cfg.hops), dstAddr, 5001, cfg.bytes, 3);
    Time start = Seconds(0.1);
    f.tx->SetStartTime(start);
    CwndWriter cw;
    if (!cfg.cwndTrace.empty() && IsIpkit(cfg.kind))
    {
        cw.out.open(cfg.cwndTrace);
        f.tx->TraceConnectWithoutContext("CongestionWindow", MakeCallback(&CwndWriter::Cwnd, &cw));
    }
    if (!cfg.pcapPrefix.empty())
    {
        p2p.EnablePcap(cfg.pcapPrefix, links[0].Get(0), false);
    }
    Simulator::Stop(cfg.limit);
    res.cost = TimedRun();
    res.received = f.rxBytes;
    res.seconds = (f.lastRx - start).GetSeconds();
    res.goodputMbps = res.seconds > 0 ? f.rxBytes * 8.0 / res.seconds / 1e6 : 0;
    if (IsIpkit(cfg.kind))
    {
        Ptr<IpkitBulkSend> tx = DynamicCast<IpkitBulkSend>(f.tx);
        Ptr<IpkitPacketSink> rx = DynamicCast<IpkitPacketSink>(f.rx);
        res.digestOk = rx->GetDigests().size() == 1 && rx->GetDigests()[0] == tx->GetDigestHex();
        const struct ipk_counters* c = all.Get(0)->GetObject<IpkitStack>()->GetCounters(0);
        res.retransmits = c->tcp_retransmits;
        res.rtos = c->tcp_rto;
    }
    return res;
}

} // namespace ns3
