/*
 * ipkit-chain: one TCP transfer over a chain of point-to-point links with packet
 * loss on every link (ns-3's RateErrorModel), through ns-3 IPv4 routers:
 *
 *   ipkit-chain --hops=4 --loss=0.001 --bytes=33554432 --cwnd=cwnd.dat
 *
 * Prints the goodput, retransmissions and, for ipkit, whether the receiver's
 * SHA-256 equals the sender's (exit status 1 when not). --cwnd writes the ipkit
 * sender's CongestionWindow trace source, --pcap the first link's pcap.
 */
#include <ipkit/ns3/ipkit-scenarios.h>

#include "ns3/core-module.h"

#include <cstdio>

using namespace ns3;

int
main(int argc, char** argv)
{
    IpkitChainConfig cfg;
    std::string kind = "ipkit-cubic", rate = cfg.rate;
    double delayMs = 5, limit = 300;
    uint64_t bytes = cfg.bytes;
    CommandLine cmd;
    cmd.AddValue("kind", "ipkit-cubic, ipkit-newreno, ns3-cubic or ns3-newreno", kind);
    cmd.AddValue("hops", "links in the chain (1..64)", cfg.hops);
    cmd.AddValue("rate", "rate of every link", rate);
    cmd.AddValue("delay", "one-way delay of every link, ms", delayMs);
    cmd.AddValue("loss", "packet loss rate of every link, each direction", cfg.loss);
    cmd.AddValue("bytes", "bytes to transfer", bytes);
    cmd.AddValue("limit", "simulated seconds at most", limit);
    cmd.AddValue("cwnd", "file for the ipkit sender's cwnd trace", cfg.cwndTrace);
    cmd.AddValue("pcap", "pcap prefix for the first link", cfg.pcapPrefix);
    cmd.Parse(argc, argv);
    if (!IpkitFlowKindParse(kind, &cfg.kind) || cfg.hops < 1 || cfg.hops > 64 || cfg.loss < 0 ||
        cfg.loss >= 1 || bytes == 0)
    {
        std::fprintf(stderr, "bad arguments\n");
        return 2;
    }
    cfg.rate = rate;
    cfg.delay = MicroSeconds(static_cast<int64_t>(delayMs * 1000));
    cfg.bytes = bytes;
    cfg.limit = Seconds(limit);
    IpkitChainResult r = IpkitRunChain(cfg);
    std::printf("%s over %u hops, %.4f loss per link: %llu of %llu bytes in %.3f s, %.2f Mbit/s, "
                "%llu retransmits, %llu RTOs%s\n",
                kind.c_str(), cfg.hops, cfg.loss, static_cast<unsigned long long>(r.received),
                static_cast<unsigned long long>(bytes), r.seconds, r.goodputMbps,
                static_cast<unsigned long long>(r.retransmits),
                static_cast<unsigned long long>(r.rtos),
                kind.rfind("ipkit", 0) == 0 ? (r.digestOk ? ", sha256 matches" : ", sha256 DIFFERS")
                                            : "");
    Simulator::Destroy();
    bool ok = r.received == bytes && (kind.rfind("ipkit", 0) != 0 || r.digestOk);
    return ok ? 0 : 1;
}
