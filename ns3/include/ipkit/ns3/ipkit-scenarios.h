/*
 * Ready-made scenarios on IpkitStack, shared by the examples (ipkit-dumbbell,
 * ipkit-chain) and the figures program: each builds its topology in the current
 * ns-3 simulation, runs it and returns what it measured. Call Simulator::Destroy
 * between two of them.
 */
#ifndef IPKIT_NS3_SCENARIOS_H
#define IPKIT_NS3_SCENARIOS_H

#include <ipkit/ns3/ipkit-ns3.h>

#include <string>
#include <vector>

namespace ns3
{

/* A TCP flow's implementation and congestion control. */
enum class IpkitFlowKind
{
    IpkitCubic,
    IpkitNewReno,
    Ns3Cubic,
    Ns3NewReno
};
const char* IpkitFlowKindName(IpkitFlowKind k);
/* "ipkit-cubic", "ipkit-newreno", "ns3-cubic", "ns3-newreno"; false if unknown. */
bool IpkitFlowKindParse(const std::string& s, IpkitFlowKind* k);

/* Cost of a run: wall-clock and this process's CPU time (the machine may be
 * shared: CPU time is the figure to compare). */
struct IpkitRunCost
{
    double simSeconds = 0, wallSeconds = 0, cpuSeconds = 0;
    uint64_t events = 0;
};

/*
 * Dumbbell: flows.size() senders, each on its own 1 Gbit/s access link to router
 * L, one bottleneck L -> R, and as many receivers behind R. Access links take
 * 1 ms each way, the bottleneck rtt/2 - 2 ms, so the base RTT is `rtt`. The
 * bottleneck's queue discipline is `queue`: "DropTail" (FifoQueueDisc),
 * "RED" (RedQueueDisc, adaptive) or "FqCoDel", limited to `queuePackets`
 * (0 = one bandwidth-delay product). Routers run ns-3's IPv4; ipkit flows use
 * IpkitBulkSend -> IpkitPacketSink, ns-3 flows BulkSend -> PacketSink over
 * TcpSocketBase with the named congestion control. Flow i starts at
 * 0.1 s + i * 0.05 s; goodput counts the bytes received in [warmup, duration].
 */
struct IpkitDumbbellConfig
{
    std::vector<IpkitFlowKind> flows;
    std::string rate = "100Mbps";
    Time rtt = MilliSeconds(20);
    std::string queue = "DropTail";
    uint32_t queuePackets = 0;
    Time duration = Seconds(20);
    Time warmup = Seconds(5);
    std::string pcapPrefix; /* non-empty: pcap on the bottleneck devices */
    /* ns-3 receivers ACK every this many full segments (ns-3's default, 2). Its
     * congestion avoidance adds per ACK, not per byte acknowledged, so this sets
     * how fast its senders grow. */
    uint32_t ns3DelAckCount = 2;
    /* RFC 3168 ECN: ipkit stacks' Ecn attribute, ns-3 TCP's UseEcn, and RED /
     * FqCoDel marking instead of dropping (DropTail cannot mark). */
    bool ecn = false;
};

struct IpkitDumbbellResult
{
    std::vector<double> goodputMbps; /* per flow, in config order */
    std::vector<uint64_t> retransmits; /* ipkit flows: the sender's count; ns-3: 0 */
    double jain = 0;
    uint64_t bottleneckDrops = 0, bottleneckMarks = 0;
    /* ipkit flows whose connection negotiated ECN */
    uint32_t ecnFlows = 0;
    IpkitRunCost cost;
};

IpkitDumbbellResult IpkitRunDumbbell(const IpkitDumbbellConfig& cfg);

/*
 * Chain: sender - R1 - ... - Rhops-1 - receiver over `hops` point-to-point links
 * of `rate` and `delay` each, every link dropping packets at `loss` in both
 * directions (RateErrorModel). One flow of `bytes`, its SHA-256 checked at the
 * receiver. With cwndTrace set, the sender's CongestionWindow trace is written
 * there ("time_s cwnd_bytes" lines).
 */
struct IpkitChainConfig
{
    IpkitFlowKind kind = IpkitFlowKind::IpkitCubic;
    uint32_t hops = 4;
    std::string rate = "100Mbps";
    Time delay = MilliSeconds(5);
    double loss = 0.001;
    uint64_t bytes = 32u << 20;
    Time limit = Seconds(300);
    std::string cwndTrace;
    std::string pcapPrefix;
};

struct IpkitChainResult
{
    uint64_t received = 0;
    bool digestOk = false; /* ipkit receiver: its SHA-256 equals the sender's */
    double seconds = 0;    /* from start to the last byte */
    double goodputMbps = 0;
    uint64_t retransmits = 0, rtos = 0;
    IpkitRunCost cost;
};

IpkitChainResult IpkitRunChain(const IpkitChainConfig& cfg);

/* Jain's fairness index of x: (sum x)^2 / (n * sum x^2); 0 for an empty or zero x. */
double IpkitJain(const std::vector<double>& x);

} // namespace ns3

#endif
