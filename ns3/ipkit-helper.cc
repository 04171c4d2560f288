/*
 * ns-3-style helpers for IpkitStack and the ipkit applications.
 */
#include <ipkit/ns3/ipkit-ns3.h>

#include "ns3/address.h"
#include "ns3/boolean.h"
#include "ns3/global-value.h"
#include "ns3/inet-socket-address.h"
#include "ns3/net-device-container.h"
#include "ns3/uinteger.h"

#include <stdexcept>

namespace ns3
{

IpkitStackHelper::IpkitStackHelper()
{
    m_factory.SetTypeId(IpkitStack::GetTypeId());
    /* ns-3 writes zero IPv4/TCP/UDP checksums unless told otherwise; ipkit checks
     * every checksum, so any ns-3 node talking to it must compute them. */
    GlobalValue::Bind("ChecksumEnabled", BooleanValue(true));
}

void
IpkitStackHelper::SetAttribute(const std::string& name, const AttributeValue& value)
{
    m_factory.Set(name, value);
}

void
IpkitStackHelper::Install(Ptr<Node> node) const
{
    if (!node->GetObject<IpkitStack>())
    {
        node->AggregateObject(m_factory.Create<IpkitStack>());
    }
}

void
IpkitStackHelper::Install(NodeContainer nodes) const
{
    for (auto it = nodes.Begin(); it != nodes.End(); ++it)
    {
        Install(*it);
    }
}

void
IpkitStackHelper::SetBase(Ipv4Address network, Ipv4Mask mask, Ipv4Address first)
{
    m_mask = mask.Get();
    m_network = network.Get() & m_mask;
    m_next = first.Get() & ~m_mask;
}

Ipv4Address
IpkitStackHelper::AssignOne(Ptr<NetDevice> dev)
{
    Ptr<Node> node = dev->GetNode();
    Install(node);
    Ipv4Address a(m_network | (m_next & ~m_mask));
    m_next++;
    if (node->GetObject<IpkitStack>()->AddInterface(dev, a, Ipv4Mask(m_mask), m_gateway) < 0)
    {
        throw std::runtime_error("IpkitStackHelper: AddInterface failed");
    }
    return a;
}

std::vector<Ipv4Address>
IpkitStackHelper::Assign(const NetDeviceContainer& devices)
{
    std::vector<Ipv4Address> out;
    for (auto it = devices.Begin(); it != devices.End(); ++it)
    {
        out.push_back(AssignOne(*it));
    }
    return out;
}

IpkitAppHelper::IpkitAppHelper(const std::string& typeId)
{
    m_factory.SetTypeId(typeId);
}

void
IpkitAppHelper::SetAttribute(const std::string& name, const AttributeValue& value)
{
    m_factory.Set(name, value);
}

ApplicationContainer
IpkitAppHelper::Install(Ptr<Node> node) const
{
    Ptr<Application> app = m_factory.Create<Application>();
    node->AddApplication(app);
    return ApplicationContainer(app);
}

ApplicationContainer
IpkitAppHelper::Install(NodeContainer nodes) const
{
    ApplicationContainer apps;
    for (auto it = nodes.Begin(); it != nodes.End(); ++it)
    {
        apps.Add(Install(*it));
    }
    return apps;
}

IpkitBulkSendHelper::IpkitBulkSendHelper(Address remote)
    : IpkitAppHelper("ns3::IpkitBulkSend")
{
    m_factory.Set("Remote", AddressValue(remote));
}

IpkitPacketSinkHelper::IpkitPacketSinkHelper(uint16_t port)
    : IpkitAppHelper("ns3::IpkitPacketSink")
{
    m_factory.Set("Port", UintegerValue(port));
}

IpkitEchoServerHelper::IpkitEchoServerHelper(uint16_t port)
    : IpkitAppHelper("ns3::IpkitEchoServer")
{
    m_factory.Set("Port", UintegerValue(port));
}

IpkitEchoClientHelper::IpkitEchoClientHelper(Ipv4Address server, uint16_t port)
    : IpkitAppHelper("ns3::IpkitEchoClient")
{
    m_factory.Set("Remote", AddressValue(InetSocketAddress(server, port)));
}

} // namespace ns3
