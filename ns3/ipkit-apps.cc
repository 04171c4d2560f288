/*
 * Applications on IpkitStack: IpkitBulkSend, IpkitPacketSink (TCP) and
 * IpkitEchoServer / IpkitEchoClient (UDP request/response).
 */
#include <ipkit/ns3/ipkit-ns3.h>

#include "sha256.h"

#include "ns3/address-utils.h"
#include "ns3/inet-socket-address.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <cstring>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("IpkitApps");
NS_OBJECT_ENSURE_REGISTERED(IpkitBulkSend);
NS_OBJECT_ENSURE_REGISTERED(IpkitPacketSink);
NS_OBJECT_ENSURE_REGISTERED(IpkitEchoServer);
NS_OBJECT_ENSURE_REGISTERED(IpkitEchoClient);

/* splitmix64 of the 8-byte block index: any offset is computable on its own. */
static uint64_t
PatternWord(uint32_t seed, uint64_t block)
{
    uint64_t z = block + (static_cast<uint64_t>(seed) << 40) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void
IpkitPatternFill(uint32_t seed, uint64_t off, uint8_t* out, uint32_t len)
{
    uint32_t i = 0;
    while (i < len)
    {
        uint64_t pos = off + i;
        uint64_t w = PatternWord(seed, pos >> 3);
        uint32_t b = static_cast<uint32_t>(pos & 7);
        for (; b < 8 && i < len; b++, i++)
        {
            out[i] = static_cast<uint8_t>(w >> (8 * b));
        }
    }
}

static std::string
Hex(const uint8_t d[32])
{
    char h[65];
    sha256_hex(d, h);
    return std::string(h);
}

/* ---------------------------------------------------------- IpkitBulkSend */

class IpkitBulkSend::Handler : public IpkitTcpHandler
{
  public:
    explicit Handler(IpkitBulkSend* a)
        : m_app(a)
    {
    }

    void Connected(IpkitConn c) override
    {
        m_app->m_connected = true;
        m_app->Sample(c);
        m_app->Fill();
    }

    void Data(IpkitConn, const uint8_t*, uint32_t) override
    {
        /* a sender ignores what comes back */
    }

    void Acked(IpkitConn c, uint32_t bytes) override
    {
        m_app->m_acked += bytes;
        m_app->m_txTrace(bytes);
        m_app->Sample(c);
        m_app->Fill();
    }

    void Closed(IpkitConn, int reason) override
    {
        m_app->m_closed = true;
        m_app->m_closeReason = reason;
        m_app->m_conn = IpkitConn();
        m_app->m_finish = Simulator::Now();
    }

  private:
    IpkitBulkSend* m_app;
};

TypeId
IpkitBulkSend::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::IpkitBulkSend")
            .SetParent<Application>()
            .SetGroupName("Ipkit")
            .AddConstructor<IpkitBulkSend>()
            .AddAttribute("Remote",
                          "The receiver (InetSocketAddress)",
                          AddressValue(),
                          MakeAddressAccessor(&IpkitBulkSend::m_remote),
                          MakeAddressChecker())
            .AddAttribute("MaxBytes",
                          "Bytes to send; 0 = until the application stops",
                          UintegerValue(0),
                          MakeUintegerAccessor(&IpkitBulkSend::m_maxBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("SendSize",
                          "Bytes offered to the stack per write",
                          UintegerValue(65536),
                          MakeUintegerAccessor(&IpkitBulkSend::m_sendSize),
                          MakeUintegerChecker<uint32_t>(1, 1u << 24))
            .AddAttribute("Seed",
                          "Seed of the pseudo-random byte stream sent",
                          UintegerValue(1),
                          MakeUintegerAccessor(&IpkitBulkSend::m_seed),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("CongestionControl",
                          "NewReno or Cubic for this connection; empty = the stack's",
                          StringValue(""),
                          MakeStringAccessor(&IpkitBulkSend::m_cc),
                          MakeStringChecker())
            .AddTraceSource("CongestionWindow",
                            "cwnd in bytes, sampled at every ACK event",
                            MakeTraceSourceAccessor(&IpkitBulkSend::m_cwnd),
                            "ns3::TracedValueCallback::Uint32")
            .AddTraceSource("RTT",
                            "Smoothed RTT, sampled at every ACK event",
                            MakeTraceSourceAccessor(&IpkitBulkSend::m_srtt),
                            "ns3::TracedValueCallback::Time")
            .AddTraceSource("Retransmissions",
                            "Segments sent again so far, sampled at every ACK event",
                            MakeTraceSourceAccessor(&IpkitBulkSend::m_retrans),
                            "ns3::TracedValueCallback::Uint32")
            .AddTraceSource("Tx",
                            "Bytes newly acknowledged",
                            MakeTraceSourceAccessor(&IpkitBulkSend::m_txTrace),
                            "ns3::TracedValueCallback::Uint32");
    return tid;
}

IpkitBulkSend::IpkitBulkSend()
{
    m_sha = new struct sha256;
    sha256_init(static_cast<struct sha256*>(m_sha));
}

IpkitBulkSend::~IpkitBulkSend()
{
    delete static_cast<struct sha256*>(m_sha);
}

void
IpkitBulkSend::DoDispose()
{
    m_handler.reset();
    Application::DoDispose();
}

std::string
IpkitBulkSend::GetDigestHex() const
{
    if (!m_digestDone)
    {
        return std::string();
    }
    return Hex(m_digest);
}

void
IpkitBulkSend::StartApplication()
{
    Ptr<IpkitStack> st = GetNode()->GetObject<IpkitStack>();
    if (!st || !InetSocketAddress::IsMatchingType(m_remote))
    {
        NS_LOG_ERROR("IpkitBulkSend: no IpkitStack on the node or Remote not set");
        return;
    }
    InetSocketAddress r = InetSocketAddress::ConvertFrom(m_remote);
    m_handler = std::make_unique<Handler>(this);
    if (st->Connect(r.GetIpv4(), r.GetPort(), m_handler.get(), &m_conn) < 0)
    {
        m_conn = IpkitConn();
        m_closed = true;
        m_closeReason = IPK_CLOSE_UNREACH;
        return;
    }
    if (!m_cc.empty())
    {
        ipk_tcp_set_cc(m_conn.conn, m_cc == "NewReno" || m_cc == "newreno" ? IPK_CC_NEWRENO
                                                                           : IPK_CC_CUBIC);
    }
}

void
IpkitBulkSend::StopApplication()
{
    if (!m_conn.IsNull() && !m_closed)
    {
        GetNode()->GetObject<IpkitStack>()->Abort(m_conn);
    }
}

void
IpkitBulkSend::Sample(IpkitConn c)
{
    struct ipk_tcp_info ti;
    Ptr<IpkitStack> st = GetNode()->GetObject<IpkitStack>();
    if (st->Info(c, &ti) == 0)
    {
        m_cwnd = ti.cwnd;
        m_srtt = NanoSeconds(static_cast<int64_t>(ti.srtt_ns));
        m_retrans = static_cast<uint32_t>(ti.retransmits);
        m_ecn = ti.ecn != 0;
    }
}

/* Write until the send buffer is full or MaxBytes is out; then FIN once. */
void
IpkitBulkSend::Fill()
{
    if (m_conn.IsNull() || m_finSent || !m_connected)
    {
        return;
    }
    Ptr<IpkitStack> st = GetNode()->GetObject<IpkitStack>();
    struct sha256* sha = static_cast<struct sha256*>(m_sha);
    m_buf.resize(m_sendSize);
    /* Bounded: each pass writes at least one byte or stops. */
    for (;;)
    {
        uint64_t left = m_maxBytes ? m_maxBytes - m_written : m_sendSize;
        if (left == 0)
        {
            break;
        }
        uint32_t want = static_cast<uint32_t>(left < m_sendSize ? left : m_sendSize);
        uint32_t room = st->SendBufferFree(m_conn);
        if (room == 0)
        {
            return;
        }
        if (want > room)
        {
            want = room;
        }
        IpkitPatternFill(m_seed, m_written, m_buf.data(), want);
        int rc = st->Write(m_conn, m_buf.data(), want);
        if (rc <= 0)
        {
            return; /* full (wait for Acked) or an error (Closed follows) */
        }
        sha256_update(sha, m_buf.data(), static_cast<size_t>(rc));
        m_written += static_cast<uint64_t>(rc);
    }
    sha256_final(sha, m_digest);
    m_digestDone = true;
    m_finSent = true;
    st->Close(m_conn);
}

/* -------------------------------------------------------- IpkitPacketSink */

class IpkitPacketSink::Conn : public IpkitTcpHandler
{
  public:
    Conn(IpkitPacketSink* s, Ipv4Address peer)
        : m_sink(s),
          m_peer(peer)
    {
        sha256_init(&m_sha);
    }

    void Data(IpkitConn c, const uint8_t* d, uint32_t len) override
    {
        if (!d)
        {
            /* FIN: the stream is whole; answer with ours. */
            uint8_t dig[32];
            sha256_final(&m_sha, dig);
            m_sink->m_digests.push_back(Hex(dig));
            m_sink->m_streamBytes.push_back(m_bytes);
            m_sink->GetNode()->GetObject<IpkitStack>()->Close(c);
            return;
        }
        sha256_update(&m_sha, d, len);
        m_bytes += len;
        m_sink->m_total += len;
        m_sink->m_rxTrace(len, m_peer);
    }

  private:
    IpkitPacketSink* m_sink;
    Ipv4Address m_peer;
    struct sha256 m_sha;
    uint64_t m_bytes = 0;
};

TypeId
IpkitPacketSink::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::IpkitPacketSink")
            .SetParent<Application>()
            .SetGroupName("Ipkit")
            .AddConstructor<IpkitPacketSink>()
            .AddAttribute("Port",
                          "TCP port to listen on",
                          UintegerValue(9),
                          MakeUintegerAccessor(&IpkitPacketSink::m_port),
                          MakeUintegerChecker<uint16_t>(1))
            .AddTraceSource("Rx",
                            "Bytes received and the peer they came from",
                            MakeTraceSourceAccessor(&IpkitPacketSink::m_rxTrace),
                            "ns3::IpkitPacketSink::RxTracedCallback");
    return tid;
}

IpkitPacketSink::IpkitPacketSink() = default;
IpkitPacketSink::~IpkitPacketSink() = default;

void
IpkitPacketSink::DoDispose()
{
    m_conns.clear();
    Application::DoDispose();
}

void
IpkitPacketSink::StartApplication()
{
    Ptr<IpkitStack> st = GetNode()->GetObject<IpkitStack>();
    if (!st)
    {
        NS_LOG_ERROR("IpkitPacketSink: no IpkitStack on the node");
        return;
    }
    int rc = st->Listen(m_port, [this](IpkitConn c) -> IpkitTcpHandler* {
        struct ipk_tuple t;
        Ipv4Address peer;
        if (ipk_tcp_tuple(c.conn, &t) == 0)
        {
            peer = Ipv4Address(ipk_ntohl(t.peer_ip4_be));
        }
        m_accepted++;
        m_conns.push_back(std::make_unique<Conn>(this, peer));
        return m_conns.back().get();
    });
    if (rc < 0)
    {
        NS_LOG_ERROR("IpkitPacketSink: listen on " << m_port << ": " << ipk_strerror(rc));
    }
}

void
IpkitPacketSink::StopApplication()
{
}

/* ---------------------------------------------------------- echo (UDP) */

TypeId
IpkitEchoServer::GetTypeId()
{
    static TypeId tid = TypeId("ns3::IpkitEchoServer")
                            .SetParent<Application>()
                            .SetGroupName("Ipkit")
                            .AddConstructor<IpkitEchoServer>()
                            .AddAttribute("Port",
                                          "UDP port to answer on",
                                          UintegerValue(9),
                                          MakeUintegerAccessor(&IpkitEchoServer::m_port),
                                          MakeUintegerChecker<uint16_t>(1));
    return tid;
}

void
IpkitEchoServer::StartApplication()
{
    Ptr<IpkitStack> st = GetNode()->GetObject<IpkitStack>();
    if (!st)
    {
        return;
    }
    IpkitStack* raw = PeekPointer(st);
    st->BindUdp(m_port,
                [this, raw](Ipv4Address from, uint16_t fport, uint16_t lport, const uint8_t* d,
                            uint32_t len) {
                    if (raw->SendUdp(from, lport, fport, d, len) >= 0)
                    {
                        m_echoed++;
                    }
                });
}

void
IpkitEchoServer::StopApplication()
{
}

TypeId
IpkitEchoClient::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::IpkitEchoClient")
            .SetParent<Application>()
            .SetGroupName("Ipkit")
            .AddConstructor<IpkitEchoClient>()
            .AddAttribute("Remote",
                          "The server (InetSocketAddress)",
                          AddressValue(),
                          MakeAddressAccessor(&IpkitEchoClient::m_remote),
                          MakeAddressChecker())
            .AddAttribute("LocalPort",
                          "Our UDP port; 0 = 40000 + the node id",
                          UintegerValue(0),
                          MakeUintegerAccessor(&IpkitEchoClient::m_localPort),
                          MakeUintegerChecker<uint16_t>())
            .AddAttribute("MaxPackets",
                          "Requests to send",
                          UintegerValue(1),
                          MakeUintegerAccessor(&IpkitEchoClient::m_maxPackets),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("Interval",
                          "Time between requests",
                          TimeValue(Seconds(1)),
                          MakeTimeAccessor(&IpkitEchoClient::m_interval),
                          MakeTimeChecker())
            .AddAttribute("PacketSize",
                          "Request payload bytes (at least 4: a sequence number)",
                          UintegerValue(64),
                          MakeUintegerAccessor(&IpkitEchoClient::m_size),
                          MakeUintegerChecker<uint32_t>(4, 65507))
            .AddTraceSource("Rtt",
                            "Round-trip time of each answered request",
                            MakeTraceSourceAccessor(&IpkitEchoClient::m_rttTrace),
                            "ns3::TracedValueCallback::Time");
    return tid;
}

void
IpkitEchoClient::StartApplication()
{
    Ptr<IpkitStack> st = GetNode()->GetObject<IpkitStack>();
    if (!st || !InetSocketAddress::IsMatchingType(m_remote))
    {
        return;
    }
    if (m_localPort == 0)
    {
        m_localPort = static_cast<uint16_t>(40000 + GetNode()->GetId() % 20000);
    }
    st->BindUdp(m_localPort,
                [this](Ipv4Address, uint16_t, uint16_t, const uint8_t* d, uint32_t len) {
                    if (len < 4)
                    {
                        return; /* not one of ours: ignore */
                    }
                    uint32_t seq = static_cast<uint32_t>(d[0]) << 24 | d[1] << 16 | d[2] << 8 | d[3];
                    auto it = m_pending.find(seq);
                    if (it == m_pending.end())
                    {
                        return; /* duplicate or unknown answer */
                    }
                    Time rtt = Simulator::Now() - it->second;
                    m_pending.erase(it);
                    m_replies++;
                    m_rtts.push_back(rtt);
                    m_rttTrace(rtt);
                });
    Send();
}

void
IpkitEchoClient::StopApplication()
{
    m_next.Cancel();
}

void
IpkitEchoClient::Send()
{
    if (m_sent >= m_maxPackets)
    {
        return;
    }
    InetSocketAddress r = InetSocketAddress::ConvertFrom(m_remote);
    std::vector<uint8_t> b(m_size);
    uint32_t seq = m_sent;
    b[0] = static_cast<uint8_t>(seq >> 24);
    b[1] = static_cast<uint8_t>(seq >> 16);
    b[2] = static_cast<uint8_t>(seq >> 8);
    b[3] = static_cast<uint8_t>(seq);
    IpkitPatternFill(seq, 4, b.data() + 4, m_size - 4);
    m_pending[seq] = Simulator::Now();
    GetNode()->GetObject<IpkitStack>()->SendUdp(r.GetIpv4(), m_localPort, r.GetPort(), b.data(),
                                                m_size);
    m_sent++;
    if (m_sent < m_maxPackets)
    {
        m_next = Simulator::Schedule(m_interval, &IpkitEchoClient::Send, this);
    }
}

} // namespace ns3
