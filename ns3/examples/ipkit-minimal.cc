/*
 * ipkit-minimal: the README's scenario. Two nodes on a 100 Mbit/s, 10 ms
 * point-to-point link, each running ipkit; node 0 sends 10 MiB to node 1 over
 * ipkit TCP. Prints the goodput and whether the receiver's SHA-256 equals the
 * sender's; writes ipkit-minimal-*.pcap. Exit status 0 when the digests match.
 */
#include <ipkit/ns3/ipkit-ns3.h>

#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/internet-module.h"

#include <cstdio>

using namespace ns3;

int
main(int argc, char** argv)
{
    CommandLine cmd;
    cmd.Parse(argc, argv);
    // README begin
    NodeContainer nodes;
    nodes.Create(2);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue("100Mbps"));
    p2p.SetChannelAttribute("Delay", StringValue("10ms"));
    NetDeviceContainer devs = p2p.Install(nodes);
    IpkitStackHelper ipkit;
    ipkit.SetBase("10.0.0.0", "255.255.255.0");
    std::vector<Ipv4Address> addr = ipkit.Assign(devs);
    ApplicationContainer sink = IpkitPacketSinkHelper(9).Install(nodes.Get(1));
    IpkitBulkSendHelper bulk(InetSocketAddress(addr[1], 9));
    bulk.SetAttribute("MaxBytes", UintegerValue(10 << 20));
    ApplicationContainer send = bulk.Install(nodes.Get(0));
    send.Start(Seconds(0.1));
    p2p.EnablePcapAll("ipkit-minimal");
    Simulator::Stop(Seconds(30));
    Simulator::Run();
    // README end
    Ptr<IpkitBulkSend> tx = DynamicCast<IpkitBulkSend>(send.Get(0));
    Ptr<IpkitPacketSink> rx = DynamicCast<IpkitPacketSink>(sink.Get(0));
    double secs = (tx->GetFinishTime() - Seconds(0.1)).GetSeconds();
    bool ok = !rx->GetDigests().empty() && rx->GetDigests()[0] == tx->GetDigestHex();
    std::printf("sent %llu bytes in %.3f simulated s: %.1f Mbit/s goodput; sha256 %s %s\n",
                static_cast<unsigned long long>(rx->GetTotalRx()), secs,
                secs > 0 ? rx->GetTotalRx() * 8.0 / secs / 1e6 : 0.0,
                tx->GetDigestHex().c_str(), ok ? "matches" : "DIFFERS");
    Simulator::Destroy();
    return ok ? 0 : 1;
}
