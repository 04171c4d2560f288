/*
 * ipkit inside ns-3 (issue 22): the adapter that runs ipkit contexts on ns-3 Nodes,
 * the applications built on it and their ns-3-style helpers.
 *
 * Model:
 *   - IpkitStack is an ns3::Object aggregated to a Node. It owns one ipkit context
 *     per NetDevice given to AddInterface. A device that carries Ethernet (CSMA)
 *     gets an IPK_LINK_ETH context with the device's MAC; one that does not
 *     (point-to-point, PPP framing) gets an IPK_LINK_RAWIP context.
 *   - Receive: a promiscuous protocol handler on the device (Node::
 *     RegisterProtocolHandler, promiscuous) copies each frame once into a packet of
 *     the context's pool (rebuilding the Ethernet header the device stripped) and
 *     hands it to ipk_run. Frames for other hosts on a shared CSMA segment are not
 *     passed on.
 *   - Transmit: ops->tx copies the frame once into a fresh ns3::Packet and calls
 *     NetDevice::Send with the destination MAC and EtherType taken from the frame's
 *     Ethernet header (CSMA) or the broadcast address and 0x0800 (point-to-point).
 *     While the device's queue is full (its NetDeviceQueueInterface says stopped)
 *     frames wait, in order, in a bounded backlog (attribute TxBacklog) and go
 *     when the queue wakes: backpressure, not loss, as a host's qdisc gives.
 *   - Time: ipkit's `now` is Simulator::Now in nanoseconds. The deadline ipk_run
 *     returns becomes one ns-3 event per context, moved earlier when a new deadline
 *     is earlier and left in place when it is later (it then fires, runs the
 *     context and schedules the next one): never a busy loop.
 *   - Randomness: ops->random draws from an ns-3 UniformRandomVariable stream, so a
 *     scenario with the same seed and run numbers is the same simulation.
 *
 * ns-3 must compute checksums for ipkit to accept its frames: IpkitStackHelper's
 * constructor binds the global value ChecksumEnabled to true (ns-3 writes zero
 * IPv4 and TCP checksums otherwise, which ipkit drops as bad).
 *
 * Ownership: the stack owns its contexts and packet pools; a connection handler
 * given by an application stays the application's and must live until its
 * Closed call. Data shown to IpkitTcpHandler::Data is valid only during the call
 * and counts as consumed when the call returns (the window reopens).
 */
#ifndef IPKIT_NS3_H
#define IPKIT_NS3_H

#include <ipkit/core.h>

#include "ns3/application.h"
#include "ns3/address.h"
#include "ns3/application-container.h"
#include "ns3/event-id.h"
#include "ns3/ipv4-address.h"
#include "ns3/net-device.h"
#include "ns3/net-device-container.h"
#include "ns3/node-container.h"
#include "ns3/node.h"
#include "ns3/object-factory.h"
#include "ns3/object.h"
#include "ns3/packet.h"
#include "ns3/random-variable-stream.h"
#include "ns3/traced-callback.h"
#include "ns3/traced-value.h"
#include "ns3/nstime.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct sim_pool;

namespace ns3
{

class IpkitStack;

/* A TCP connection of an IpkitStack: the interface (context) it lives on and the
 * core's handle. Valid from Connect / the accept function until Closed returns. */
struct IpkitConn
{
    uint32_t iface = 0;
    struct ipk_conn* conn = nullptr;

    bool IsNull() const { return conn == nullptr; }
};

/* What an application implements to use a TCP connection. Every call runs inside
 * the stack's processing of a frame or timer; it may call IpkitStack's TCP and UDP
 * functions (Write, Close, Abort, ...) but must not destroy the stack. */
class IpkitTcpHandler
{
  public:
    virtual ~IpkitTcpHandler() = default;
    /* The active open completed. */
    virtual void Connected(IpkitConn c) { (void)c; }
    /* In-order payload; len 0 with data nullptr is the peer's FIN. The bytes are
     * taken as consumed when the call returns. */
    virtual void Data(IpkitConn c, const uint8_t* data, uint32_t len) = 0;
    /* `bytes` more were acknowledged: room to write more. */
    virtual void Acked(IpkitConn c, uint32_t bytes)
    {
        (void)c;
        (void)bytes;
    }
    /* The connection ended (enum ipk_close_reason); the handle is invalid after. */
    virtual void Closed(IpkitConn c, int reason)
    {
        (void)c;
        (void)reason;
    }
};

/* Runs ipkit contexts on a Node (see the top of this file). */
class IpkitStack : public Object
{
  public:
    /* Decides on a passive open on a listening port: returns the connection's
     * handler, or nullptr to refuse it (the connection is reset). */
    using AcceptFn = std::function<IpkitTcpHandler*(IpkitConn)>;
    /* A UDP datagram for a bound port: the sender, our port, the payload (valid
     * during the call). */
    using UdpRecvFn = std::function<void(Ipv4Address from,
                                         uint16_t fromPort,
                                         uint16_t localPort,
                                         const uint8_t* data,
                                         uint32_t len)>;

    static TypeId GetTypeId();
    IpkitStack();
    ~IpkitStack() override;

    /* Put an ipkit context on `dev` (a device of this stack's Node) with the
     * given address; gateway zero = on-link only. The stack's attributes at this
     * moment configure the context. Returns the interface index, or -1 (the
     * reason on stderr): device of another node, a device already taken, an
     * address the core refuses, or pool memory exhausted. */
    int AddInterface(Ptr<NetDevice> dev,
                     Ipv4Address addr,
                     Ipv4Mask mask,
                     Ipv4Address gateway = Ipv4Address::GetZero());
    uint32_t GetNInterfaces() const;
    Ipv4Address GetAddress(uint32_t iface) const;
    /* The core's counters of an interface (nullptr for a bad index). */
    const struct ipk_counters* GetCounters(uint32_t iface) const;
    /* Packet buffers of the interface's pool held now (by the core or in flight
     * inside the adapter); 0 once every connection is gone: tests check leaks. */
    uint32_t GetPacketsInUse(uint32_t iface) const;
    /* Frames dropped on transmit: the backlog full (TxBacklog) or a device
     * without a queue interface refusing one. */
    uint64_t GetTxDrops() const { return m_txDrops; }
    /* Frames that waited in the backlog for the device's queue. */
    uint64_t GetTxHeld() const { return m_txHeld; }
    uint64_t GetRxDrops() const { return m_rxDrops; }
    /* ipk_run calls made (per frame or per deadline) and deadline events fired:
     * the adapter's own cost figures. */
    uint64_t GetRunCalls() const { return m_runCalls; }
    uint64_t GetTimerEvents() const { return m_timerEvents; }

    /* Listen on `port` on every interface (present and later). Returns 0 or a
     * negative ipkit error (IPK_EADDRINUSE, ...). */
    int Listen(uint16_t port, AcceptFn accept, uint16_t backlog = 64);
    /* Active open to dst:port from the interface whose subnet holds dst, else the
     * first with a gateway, else interface 0. Returns 0 (handler gets Connected or
     * Closed later) or a negative ipkit error. */
    int Connect(Ipv4Address dst, uint16_t port, IpkitTcpHandler* h, IpkitConn* out);
    /* ipk_tcp_write: bytes queued (0 = buffer full: wait for Acked) or an error. */
    int Write(IpkitConn c, const uint8_t* buf, uint32_t len);
    uint32_t SendBufferFree(IpkitConn c) const;
    int Close(IpkitConn c);
    int Abort(IpkitConn c);
    int Info(IpkitConn c, struct ipk_tcp_info* info) const;

    int BindUdp(uint16_t port, UdpRecvFn fn);
    int SendUdp(Ipv4Address dst, uint16_t srcPort, uint16_t dstPort, const uint8_t* buf,
                uint32_t len);

    /* Fix the random streams this stack uses: interface i draws from stream
     * `stream + i` (also interfaces added later). Returns the number used now. */
    int64_t AssignStreams(int64_t stream);

    struct Iface; /* one context (ipkit-stack.cc) */

  protected:
    void DoDispose() override;

  private:
    friend struct IpkitStackOps;
    void FillConfig(const Iface* f, unsigned algo, struct ipk_config* cfg) const;
    bool InitContext(Iface* f, const struct ipk_config* cfg);
    Iface* PickIface(Ipv4Address dst) const;
    Iface* IfaceOf(IpkitConn c) const;
    void Receive(Ptr<NetDevice> dev, Ptr<const Packet> p, uint16_t proto,
                 const Address& from, const Address& to, NetDevice::PacketType type);
    void Run(Iface* f, void** pkts, uint32_t n);
    void Kick(Iface* f);
    void Timer(uint32_t idx);
    void Transmit(Iface* f, void* pkt);
    void DeviceSend(Iface* f, Ptr<Packet> p, const Address& dst, uint16_t type);
    void Wake(uint32_t idx);

    std::vector<std::unique_ptr<Iface>> m_ifaces;
    std::map<uint16_t, AcceptFn> m_listeners;
    std::map<uint16_t, uint16_t> m_backlogs;
    std::map<uint16_t, UdpRecvFn> m_udp;
    std::vector<uint8_t> m_scratch;
    uint64_t m_txDrops = 0, m_txHeld = 0, m_rxDrops = 0, m_runCalls = 0, m_timerEvents = 0;
    uint32_t m_backlogMax = 1000;
    int64_t m_stream = -1;

    /* attributes */
    std::string m_cc;
    bool m_sack = true, m_ecn = false, m_timestamps = true;
    uint32_t m_sndBuf = 0, m_rcvBuf = 0, m_pool = 0;
    Time m_delAck;
    uint32_t m_ackEvery = 2;
};

/* Bulk sender (ns-3's BulkSendApplication on ipkit): connects to Remote and sends
 * MaxBytes (0 = until stopped) of a pseudo-random byte stream drawn from Seed, then
 * closes. The SHA-256 of what it sent is GetDigestHex(). */
class IpkitBulkSend : public Application
{
  public:
    static TypeId GetTypeId();
    IpkitBulkSend();
    ~IpkitBulkSend() override;
    uint64_t GetTotalTx() const { return m_acked; }
    /* Bytes written into the connection (not all acknowledged yet perhaps). */
    uint64_t GetTotalWritten() const { return m_written; }
    bool IsDone() const { return m_closed && m_closeReason == IPK_CLOSE_NORMAL; }
    int GetCloseReason() const { return m_closeReason; }
    std::string GetDigestHex() const;
    Time GetFinishTime() const { return m_finish; }
    /* The connection negotiated RFC 3168 ECN (seen at its first ACK event). */
    bool GetEcnNegotiated() const { return m_ecn; }

  protected:
    void DoDispose() override;

  private:
    class Handler;
    friend class Handler;
    void StartApplication() override;
    void StopApplication() override;
    void Fill();
    void Sample(IpkitConn c);

    Address m_remote;
    uint64_t m_maxBytes = 0;
    uint32_t m_sendSize = 65536;
    uint32_t m_seed = 1;
    std::string m_cc;
    std::unique_ptr<Handler> m_handler;
    IpkitConn m_conn;
    uint64_t m_written = 0, m_acked = 0;
    bool m_connected = false, m_closed = false, m_finSent = false;
    int m_closeReason = -1;
    Time m_finish;
    std::vector<uint8_t> m_buf;
    void* m_sha = nullptr; /* struct sha256 */
    uint8_t m_digest[32] = {};
    bool m_digestDone = false;
    bool m_ecn = false;

    TracedValue<uint32_t> m_cwnd;
    TracedValue<Time> m_srtt;
    TracedValue<uint32_t> m_retrans;
    TracedCallback<uint32_t> m_txTrace;
};

/* Sink (ns-3's PacketSink on ipkit TCP): listens on Port, takes any number of
 * connections and hashes each one's stream; GetTotalRx counts all bytes. */
class IpkitPacketSink : public Application
{
  public:
    static TypeId GetTypeId();
    IpkitPacketSink();
    ~IpkitPacketSink() override;
    uint64_t GetTotalRx() const { return m_total; }
    /* Streams that ended with the peer's FIN, their SHA-256 in hex (in order of
     * ending) and byte counts. */
    const std::vector<std::string>& GetDigests() const { return m_digests; }
    const std::vector<uint64_t>& GetStreamBytes() const { return m_streamBytes; }
    uint32_t GetAccepted() const { return m_accepted; }

  protected:
    void DoDispose() override;

  private:
    class Conn;
    friend class Conn;
    void StartApplication() override;
    void StopApplication() override;

    uint16_t m_port = 9;
    uint64_t m_total = 0;
    uint32_t m_accepted = 0;
    std::vector<std::unique_ptr<Conn>> m_conns;
    std::vector<std::string> m_digests;
    std::vector<uint64_t> m_streamBytes;
    TracedCallback<uint32_t, Ipv4Address> m_rxTrace;
};

/* Request/response over ipkit UDP, in the manner of ns-3's UdpEcho: the server
 * echoes every datagram on Port; the client sends MaxPackets of PacketSize at
 * Interval to Remote and counts the answers and their round-trip times. */
class IpkitEchoServer : public Application
{
  public:
    static TypeId GetTypeId();
    uint64_t GetEchoed() const { return m_echoed; }

  private:
    void StartApplication() override;
    void StopApplication() override;
    uint16_t m_port = 9;
    uint64_t m_echoed = 0;
};

class IpkitEchoClient : public Application
{
  public:
    static TypeId GetTypeId();
    uint32_t GetSent() const { return m_sent; }
    uint32_t GetReplies() const { return m_replies; }
    /* Round-trip times of the answered requests, in order. */
    const std::vector<Time>& GetRtts() const { return m_rtts; }

  private:
    void StartApplication() override;
    void StopApplication() override;
    void Send();

    Address m_remote;
    uint16_t m_localPort = 0;
    uint32_t m_maxPackets = 1, m_size = 64, m_sent = 0, m_replies = 0;
    Time m_interval;
    EventId m_next;
    std::map<uint32_t, Time> m_pending;
    std::vector<Time> m_rtts;
    TracedCallback<Time> m_rttTrace;
};

/* ------------------------------------------------------------- helpers */

/* Installs IpkitStack on nodes and ipkit interfaces on devices, like ns-3's
 * InternetStackHelper + Ipv4AddressHelper in one. */
class IpkitStackHelper
{
  public:
    IpkitStackHelper(); /* also binds ChecksumEnabled = true (see above) */
    /* Attribute of every IpkitStack installed after (e.g. "CongestionControl"). */
    void SetAttribute(const std::string& name, const AttributeValue& value);
    /* Aggregate an IpkitStack to each node that has none. */
    void Install(NodeContainer nodes) const;
    void Install(Ptr<Node> node) const;
    /* Give each device an interface: addresses base, base+1, ... in order.
     * Installs the stack on the device's node when missing. */
    void SetBase(Ipv4Address network, Ipv4Mask mask, Ipv4Address first = "0.0.0.1");
    void SetGateway(Ipv4Address gateway) { m_gateway = gateway; }
    /* Throws std::runtime_error when IpkitStack::AddInterface refuses a device
     * (the reason is on stderr). */
    std::vector<Ipv4Address> Assign(const NetDeviceContainer& devices);
    Ipv4Address AssignOne(Ptr<NetDevice> dev);

  private:
    ObjectFactory m_factory;
    uint32_t m_network = 0, m_mask = 0, m_next = 1;
    Ipv4Address m_gateway;
};

/* Common shape of the application helpers (ns-3's ApplicationHelper pattern). */
class IpkitAppHelper
{
  public:
    void SetAttribute(const std::string& name, const AttributeValue& value);
    ApplicationContainer Install(NodeContainer nodes) const;
    ApplicationContainer Install(Ptr<Node> node) const;

  protected:
    explicit IpkitAppHelper(const std::string& typeId);
    ObjectFactory m_factory;
};

class IpkitBulkSendHelper : public IpkitAppHelper
{
  public:
    /* Remote: an InetSocketAddress. */
    explicit IpkitBulkSendHelper(Address remote);
};

class IpkitPacketSinkHelper : public IpkitAppHelper
{
  public:
    explicit IpkitPacketSinkHelper(uint16_t port);
};

class IpkitEchoServerHelper : public IpkitAppHelper
{
  public:
    explicit IpkitEchoServerHelper(uint16_t port);
};

class IpkitEchoClientHelper : public IpkitAppHelper
{
  public:
    IpkitEchoClientHelper(Ipv4Address server, uint16_t port);
};

/* The pseudo-random byte stream of IpkitBulkSend: `len` bytes from offset `off` of
 * the stream drawn from `seed` (tests and ns-3-side senders use it too). */
void IpkitPatternFill(uint32_t seed, uint64_t off, uint8_t* out, uint32_t len);

} // namespace ns3

#endif
