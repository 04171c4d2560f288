/*
 * ipkit-dumbbell: N TCP flows through one bottleneck (100 Mbit/s, 20 ms RTT by
 * default) with a configurable queue discipline. Each flow is ipkit or ns-3's own
 * TCP, with CUBIC or NewReno, so both can share the bottleneck:
 *
 *   ipkit-dumbbell --flows=4 --kind=ipkit-cubic --queue=FqCoDel
 *   ipkit-dumbbell --mix=ipkit-cubic,ns3-cubic --queue=RED --duration=30
 *
 * Prints each flow's goodput over [warmup, duration], Jain's fairness index and
 * the bottleneck's drops; --pcap=PREFIX writes the bottleneck's pcaps. Exit
 * status 1 when a flow received nothing after the warm-up.
 */
#include <ipkit/ns3/ipkit-scenarios.h>

#include "ns3/core-module.h"

#include <cstdio>
#include <sstream>

using namespace ns3;

int
main(int argc, char** argv)
{
    uint32_t n = 4;
    std::string kind = "ipkit-cubic", mix, queue = "DropTail", rate = "100Mbps", pcap;
    double rttMs = 20, duration = 20, warmup = 5;
    uint32_t queuePackets = 0, ns3DelAck = 2;
    CommandLine cmd;
    cmd.AddValue("flows", "number of flows (with --kind)", n);
    cmd.AddValue("kind", "ipkit-cubic, ipkit-newreno, ns3-cubic or ns3-newreno", kind);
    cmd.AddValue("mix", "comma-separated kinds, one per flow (overrides flows/kind)", mix);
    cmd.AddValue("queue", "bottleneck queue discipline: DropTail, RED or FqCoDel", queue);
    cmd.AddValue("queuePackets", "queue limit in packets (0 = one BDP)", queuePackets);
    cmd.AddValue("rate", "bottleneck rate", rate);
    cmd.AddValue("rtt", "base RTT in ms (at least 5)", rttMs);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("warmup", "seconds left out of the goodput", warmup);
    cmd.AddValue("pcap", "pcap prefix for the bottleneck devices", pcap);
    cmd.AddValue("ns3DelAckCount", "ns-3 receivers ACK every N segments", ns3DelAck);
    bool ecn = false;
    cmd.AddValue("ecn", "RFC 3168 ECN in the hosts and marking in RED / FqCoDel", ecn);
    cmd.Parse(argc, argv);

    IpkitDumbbellConfig cfg;
    std::vector<std::string> kinds;
    if (!mix.empty())
    {
        std::stringstream ss(mix);
        for (std::string k; std::getline(ss, k, ',');)
        {
            kinds.push_back(k);
        }
    }
    else
    {
        kinds.assign(n, kind);
    }
    for (const std::string& k : kinds)
    {
        IpkitFlowKind fk;
        if (!IpkitFlowKindParse(k, &fk))
        {
            std::fprintf(stderr, "unknown flow kind '%s'\n", k.c_str());
            return 2;
        }
        cfg.flows.push_back(fk);
    }
    if (cfg.flows.empty() || cfg.flows.size() > 250 || rttMs < 5 || warmup >= duration ||
        (queue != "DropTail" && queue != "RED" && queue != "FqCoDel"))
    {
        std::fprintf(stderr, "bad arguments (1..250 flows, rtt >= 5 ms, warmup < duration, "
                             "queue DropTail|RED|FqCoDel)\n");
        return 2;
    }
    cfg.rate = rate;
    cfg.rtt = MilliSeconds(rttMs);
    cfg.queue = queue;
    cfg.queuePackets = queuePackets;
    cfg.duration = Seconds(duration);
    cfg.warmup = Seconds(warmup);
    cfg.pcapPrefix = pcap;
    cfg.ns3DelAckCount = ns3DelAck;
    cfg.ecn = ecn;
    IpkitDumbbellResult r = IpkitRunDumbbell(cfg);
    double sum = 0;
    bool stalled = false;
    for (size_t i = 0; i < r.goodputMbps.size(); i++)
    {
        stalled |= r.goodputMbps[i] <= 0;
        bool ipk = IpkitFlowKindName(cfg.flows[i])[0] == 'i';
        std::printf("flow %2zu %-14s %8.2f Mbit/s  %s retransmits\n", i,
                    IpkitFlowKindName(cfg.flows[i]), r.goodputMbps[i],
                    ipk ? std::to_string(r.retransmits[i]).c_str() : "-");
        sum += r.goodputMbps[i];
    }
    std::printf("total %.2f Mbit/s, Jain's index %.4f, %llu bottleneck drops, %llu ECN marks (%s)"
                "; %u ipkit flows negotiated ECN\n",
                sum, r.jain, static_cast<unsigned long long>(r.bottleneckDrops),
                static_cast<unsigned long long>(r.bottleneckMarks), queue.c_str(), r.ecnFlows);
    std::printf("%.1f simulated s in %.2f wall s (%.2f CPU s), %llu events\n", r.cost.simSeconds,
                r.cost.wallSeconds, r.cost.cpuSeconds,
                static_cast<unsigned long long>(r.cost.events));
    Simulator::Destroy();
    if (stalled)
    {
        std::printf("a flow received nothing after the warm-up\n");
    }
    return stalled ? 1 : 0;
}
