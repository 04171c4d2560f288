/*
 * IpkitStack: ipkit contexts on an ns-3 Node (see <ipkit/ns3/ipkit-ns3.h> for the model).
 */
#include <ipkit/ns3/ipkit-ns3.h>

#include "pkt.h"

#include "ns3/boolean.h"
#include "ns3/log.h"
#include "ns3/mac48-address.h"
#include "ns3/net-device-queue-interface.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("IpkitStack");
NS_OBJECT_ENSURE_REGISTERED(IpkitStack);

/* What ipk_config.opaque points to: sim_pkt_ops wants the pool first. */
struct IfaceOpaque
{
    struct sim_pool* pool;
    IpkitStack::Iface* iface;
};

struct IpkitStack::Iface
{
    IfaceOpaque op;
    IpkitStack* stack = nullptr;
    uint32_t index = 0;
    Ptr<NetDevice> dev;
    bool eth = false;
    Ipv4Address addr, gateway;
    Ipv4Mask mask;
    void* ctxMem = nullptr;
    void* connMem = nullptr;
    void* pbMem = nullptr;
    struct ipk_ctx* ctx = nullptr;
    struct ipk_ops ops;
    Ptr<UniformRandomVariable> rng;
    EventId timer;
    uint64_t timerAt = UINT64_MAX;
    /* Transmit backpressure: the device's queue as its NetDeviceQueueInterface
     * reports it (stopped when full), and the frames waiting for it to wake. */
    Ptr<NetDeviceQueue> txq;
    struct Held
    {
        Ptr<Packet> p;
        Address dst;
        uint16_t type;
    };
    std::deque<Held> backlog;
    bool inRun = false;
    bool kickAgain = false;

    ~Iface()
    {
        timer.Cancel();
        /* Packets the core still holds go with the pool. */
        std::free(ctxMem);
        std::free(connMem);
        std::free(pbMem);
        sim_pool_destroy(op.pool);
    }
};

/* The ops that are not packet ops: C callbacks into the stack. */
struct IpkitStackOps
{
    static IpkitStack::Iface* F(void* opaque)
    {
        return static_cast<IfaceOpaque*>(opaque)->iface;
    }

    static void Tx(void* pkt, void* opaque)
    {
        IpkitStack::Iface* f = F(opaque);
        f->stack->Transmit(f, pkt);
    }

    static uint32_t Random(void* opaque)
    {
        return F(opaque)->rng->GetInteger(0, UINT32_MAX);
    }

    static IpkitConn Ref(IpkitStack::Iface* f, struct ipk_conn* c)
    {
        IpkitConn r;
        r.iface = f->index;
        r.conn = c;
        return r;
    }

    static void* Accepted(struct ipk_ctx* ctx, struct ipk_conn* c, void* opaque)
    {
        IpkitStack::Iface* f = F(opaque);
        struct ipk_tuple t;
        IpkitTcpHandler* h = nullptr;

        if (ipk_tcp_tuple(c, &t) == 0)
        {
            auto it = f->stack->m_listeners.find(ipk_ntohs(t.local_port_be));
            if (it != f->stack->m_listeners.end())
            {
                h = it->second(Ref(f, c));
            }
        }
        if (!h)
        {
            ipk_tcp_abort(ctx, c, Simulator::Now().GetNanoSeconds());
        }
        return h;
    }

    static void Connected(struct ipk_ctx*, struct ipk_conn* c, void* user, void* opaque)
    {
        static_cast<IpkitTcpHandler*>(user)->Connected(Ref(F(opaque), c));
    }

    static void Payload(struct ipk_ctx* ctx,
                        struct ipk_conn* c,
                        void* user,
                        void* pkt,
                        uint32_t off,
                        uint32_t len,
                        void* opaque)
    {
        IpkitTcpHandler* h = static_cast<IpkitTcpHandler*>(user);
        if (!h)
        {
            return; /* refused in Accepted: being aborted */
        }
        const uint8_t* d = pkt ? sim_pkt_data(static_cast<struct sim_pkt*>(pkt)) + off : nullptr;
        h->Data(Ref(F(opaque), c), d, len);
        if (len > 0)
        {
            ipk_tcp_recved(ctx, c, len, Simulator::Now().GetNanoSeconds());
        }
    }

    static void Acked(struct ipk_ctx*, struct ipk_conn* c, void* user, uint32_t bytes, void* opaque)
    {
        if (user)
        {
            static_cast<IpkitTcpHandler*>(user)->Acked(Ref(F(opaque), c), bytes);
        }
    }

    static void Closed(struct ipk_ctx*,
                       struct ipk_conn* c,
                       void* user,
                       enum ipk_close_reason why,
                       void* opaque)
    {
        if (user)
        {
            static_cast<IpkitTcpHandler*>(user)->Closed(Ref(F(opaque), c), static_cast<int>(why));
        }
    }

    static void UdpRecv(struct ipk_ctx* ctx,
                        const struct ipk_tuple* t,
                        void* pkt,
                        uint32_t off,
                        uint32_t len,
                        void* opaque)
    {
        IpkitStack::Iface* f = F(opaque);
        uint16_t lport = ipk_ntohs(t->local_port_be);
        auto it = f->stack->m_udp.find(lport);
        if (it == f->stack->m_udp.end())
        {
            return;
        }
        /* After reassembly the payload may continue in the chain: copy it flat. */
        std::vector<uint8_t>& b = f->stack->m_scratch;
        b.resize(len);
        uint32_t got = ipk_pkt_copy(ctx, pkt, off, b.data(), len);
        it->second(Ipv4Address(ipk_ntohl(t->peer_ip4_be)),
                   ipk_ntohs(t->peer_port_be),
                   lport,
                   b.data(),
                   got);
    }
};

TypeId
IpkitStack::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::IpkitStack")
            .SetParent<Object>()
            .SetGroupName("Ipkit")
            .AddConstructor<IpkitStack>()
            .AddAttribute("CongestionControl",
                          "ipkit congestion control of new connections: NewReno or Cubic",
                          StringValue("Cubic"),
                          MakeStringAccessor(&IpkitStack::m_cc),
                          MakeStringChecker())
            .AddAttribute("Sack",
                          "RFC 2018/6675 SACK (and RACK-TLP with it)",
                          BooleanValue(true),
                          MakeBooleanAccessor(&IpkitStack::m_sack),
                          MakeBooleanChecker())
            .AddAttribute("Ecn",
                          "RFC 3168 ECN: ask for it and accept it",
                          BooleanValue(false),
                          MakeBooleanAccessor(&IpkitStack::m_ecn),
                          MakeBooleanChecker())
            .AddAttribute("Timestamps",
                          "RFC 7323 timestamps and PAWS",
                          BooleanValue(true),
                          MakeBooleanAccessor(&IpkitStack::m_timestamps),
                          MakeBooleanChecker())
            .AddAttribute("SndBufSize",
                          "TCP send buffer per connection, bytes",
                          UintegerValue(1 << 20),
                          MakeUintegerAccessor(&IpkitStack::m_sndBuf),
                          MakeUintegerChecker<uint32_t>(4096, 1u << 30))
            .AddAttribute("RcvBufSize",
                          "TCP receive window ceiling per connection, bytes",
                          UintegerValue(1 << 20),
                          MakeUintegerAccessor(&IpkitStack::m_rcvBuf),
                          MakeUintegerChecker<uint32_t>(4096, 1u << 30))
            .AddAttribute("DelAckTimeout",
                          "Delayed-ACK timer; 0 = ACK every segment",
                          TimeValue(MilliSeconds(40)),
                          MakeTimeAccessor(&IpkitStack::m_delAck),
                          MakeTimeChecker())
            .AddAttribute("DelAckCount",
                          "ACK at least every Nth full segment",
                          UintegerValue(2),
                          MakeUintegerAccessor(&IpkitStack::m_ackEvery),
                          MakeUintegerChecker<uint32_t>(1, 255))
            .AddAttribute("TxBacklog",
                          "Frames held per interface while the device's queue is full "
                          "(beyond: dropped, GetTxDrops)",
                          UintegerValue(1000),
                          MakeUintegerAccessor(&IpkitStack::m_backlogMax),
                          MakeUintegerChecker<uint32_t>(0, 1u << 20))
            .AddAttribute("PoolPackets",
                          "Packet buffers (2 KiB each) in each interface's pool",
                          UintegerValue(8192),
                          MakeUintegerAccessor(&IpkitStack::m_pool),
                          MakeUintegerChecker<uint32_t>(256, 1u << 22));
    return tid;
}

IpkitStack::IpkitStack() = default;
IpkitStack::~IpkitStack() = default;

void
IpkitStack::DoDispose()
{
    m_ifaces.clear();
    m_listeners.clear();
    m_udp.clear();
    Object::DoDispose();
}

static bool
CcFromName(const std::string& s, unsigned* algo)
{
    if (s == "NewReno" || s == "newreno")
    {
        *algo = IPK_CC_NEWRENO;
        return true;
    }
    if (s == "Cubic" || s == "cubic")
    {
        *algo = IPK_CC_CUBIC;
        return true;
    }
    return false;
}

/* The context's configuration from the device and the stack's attributes. */
void
IpkitStack::FillConfig(const Iface* f, unsigned algo, struct ipk_config* cfg) const
{
    ipk_config_default(cfg);
    cfg->opaque = const_cast<IfaceOpaque*>(&f->op);
    cfg->link = f->eth ? IPK_LINK_ETH : IPK_LINK_RAWIP;
    if (f->eth)
    {
        Mac48Address::ConvertFrom(f->dev->GetAddress()).CopyTo(cfg->mac);
    }
    cfg->ip4_be = ipk_htonl(f->addr.Get());
    cfg->netmask_be = ipk_htonl(f->mask.Get());
    cfg->gateway_be = ipk_htonl(f->gateway.Get());
    uint16_t mtu = f->dev->GetMtu();
    cfg->mtu = mtu < 9000 ? mtu : 9000;
    cfg->pkt_buf_size = 2048;
    if (cfg->mtu + 14u > cfg->pkt_buf_size)
    {
        cfg->pkt_buf_size = ((cfg->mtu + 14u + 1023u) / 1024u) * 1024u;
    }
    cfg->tcp_cc = static_cast<uint8_t>(algo);
    cfg->tcp_sack = m_sack;
    cfg->tcp_rack = m_sack; /* RACK-TLP needs SACK */
    cfg->tcp_ecn = m_ecn;
    cfg->tcp_timestamps = m_timestamps;
    cfg->tcp_sndbuf = m_sndBuf;
    cfg->tcp_rcvbuf = m_rcvBuf;
    cfg->tcp_delack_ns = static_cast<uint64_t>(m_delAck.GetNanoSeconds());
    cfg->tcp_ack_every = static_cast<uint8_t>(m_ackEvery);
}

static void
FillOps(struct ipk_ops* ops)
{
    std::memset(ops, 0, sizeof(*ops));
    sim_pkt_ops(ops);
    ops->tx = IpkitStackOps::Tx;
    ops->random = IpkitStackOps::Random;
    ops->tcp_accepted = IpkitStackOps::Accepted;
    ops->tcp_connected = IpkitStackOps::Connected;
    ops->tcp_payload = IpkitStackOps::Payload;
    ops->tcp_acked = IpkitStackOps::Acked;
    ops->tcp_closed = IpkitStackOps::Closed;
    ops->udp_recv = IpkitStackOps::UdpRecv;
}

/* Memory, pools and the context itself; false (reason on stderr) on failure. */
bool
IpkitStack::InitContext(Iface* f, const struct ipk_config* cfg)
{
    const char* why = nullptr;
    if (ipk_config_check(cfg, &f->ops, &why) != IPK_OK)
    {
        std::fprintf(stderr, "IpkitStack: config refused: %s\n", why);
        return false;
    }
    const size_t sz = ipk_ctx_size(cfg);
    const uint32_t nconn = 256;
    f->op.pool = sim_pool_create(m_pool, cfg->pkt_buf_size, m_pool * 2);
    f->ctxMem = std::aligned_alloc(64, (sz + 63) / 64 * 64);
    f->connMem = std::aligned_alloc(64, (ipk_conn_size() * nconn + 63) / 64 * 64);
    f->pbMem = std::aligned_alloc(64, (ipk_pb_size() * m_pool + 63) / 64 * 64);
    if (!f->op.pool || !f->ctxMem || !f->connMem || !f->pbMem)
    {
        std::fprintf(stderr, "IpkitStack: out of memory\n");
        return false;
    }
    f->ctx = ipk_ctx_init(f->ctxMem, sz, cfg, &f->ops);
    if (!f->ctx || ipk_add_conns(f->ctx, f->connMem, nconn) < 0 ||
        ipk_add_pbs(f->ctx, f->pbMem, m_pool) < 0)
    {
        std::fprintf(stderr, "IpkitStack: context init failed\n");
        return false;
    }
    return true;
}

int
IpkitStack::AddInterface(Ptr<NetDevice> dev, Ipv4Address addr, Ipv4Mask mask, Ipv4Address gateway)
{
    Ptr<Node> node = GetObject<Node>();
    if (!dev || !node || dev->GetNode() != node)
    {
        std::fprintf(stderr, "IpkitStack: device is not on this stack's node\n");
        return -1;
    }
    for (const auto& g : m_ifaces)
    {
        if (g->dev == dev)
        {
            std::fprintf(stderr, "IpkitStack: device already has an interface\n");
            return -1;
        }
    }
    unsigned algo;
    if (!CcFromName(m_cc, &algo))
    {
        std::fprintf(stderr, "IpkitStack: unknown CongestionControl '%s'\n", m_cc.c_str());
        return -1;
    }
    auto f = std::make_unique<Iface>();
    f->stack = this;
    f->index = static_cast<uint32_t>(m_ifaces.size());
    f->dev = dev;
    /* Ethernet framing where the device carries it (CSMA); raw IP otherwise. */
    f->eth = Mac48Address::IsMatchingType(dev->GetAddress()) && dev->NeedsArp();
    f->addr = addr;
    f->mask = mask;
    f->gateway = gateway;
    f->op.iface = f.get();
    f->rng = CreateObject<UniformRandomVariable>();
    if (m_stream >= 0)
    {
        f->rng->SetStream(m_stream + f->index);
    }
    struct ipk_config cfg;
    FillConfig(f.get(), algo, &cfg);
    FillOps(&f->ops);
    if (!InitContext(f.get(), &cfg))
    {
        return -1;
    }
    node->RegisterProtocolHandler(MakeCallback(&IpkitStack::Receive, this), 0, dev, true);
    Ptr<NetDeviceQueueInterface> ndqi = dev->GetObject<NetDeviceQueueInterface>();
    if (ndqi && ndqi->GetNTxQueues() > 0)
    {
        /* The helpers connect the device queue to it: stopped when full, woken
         * when a frame leaves. Nobody else (no traffic-control layer on an ipkit
         * node's device) uses the wake callback. */
        f->txq = ndqi->GetTxQueue(0);
        f->txq->SetWakeCallback(MakeCallback(&IpkitStack::Wake, this, f->index));
    }
    Iface* raw = f.get();
    m_ifaces.push_back(std::move(f));
    for (const auto& l : m_listeners)
    {
        ipk_tcp_listen(raw->ctx, ipk_htons(l.first), m_backlogs[l.first]);
    }
    for (const auto& u : m_udp)
    {
        ipk_udp_bind(raw->ctx, ipk_htons(u.first));
    }
    return static_cast<int>(raw->index);
}

uint32_t
IpkitStack::GetNInterfaces() const
{
    return static_cast<uint32_t>(m_ifaces.size());
}

Ipv4Address
IpkitStack::GetAddress(uint32_t iface) const
{
    return iface < m_ifaces.size() ? m_ifaces[iface]->addr : Ipv4Address::GetZero();
}

uint32_t
IpkitStack::GetPacketsInUse(uint32_t iface) const
{
    return iface < m_ifaces.size() ? m_ifaces[iface]->op.pool->bufs_out : 0;
}

const struct ipk_counters*
IpkitStack::GetCounters(uint32_t iface) const
{
    return iface < m_ifaces.size() ? ipk_counters(m_ifaces[iface]->ctx) : nullptr;
}

int64_t
IpkitStack::AssignStreams(int64_t stream)
{
    m_stream = stream;
    for (const auto& f : m_ifaces)
    {
        f->rng->SetStream(stream + f->index);
    }
    return static_cast<int64_t>(m_ifaces.size());
}

/* ------------------------------------------------------------ the data path */

void
IpkitStack::Receive(Ptr<NetDevice> dev,
                    Ptr<const Packet> p,
                    uint16_t proto,
                    const Address& from,
                    const Address& to,
                    NetDevice::PacketType type)
{
    Iface* f = nullptr;
    for (const auto& g : m_ifaces)
    {
        if (g->dev == dev)
        {
            f = g.get();
            break;
        }
    }
    /* Frames for other hosts on a shared segment: not ours, not even to count. */
    if (!f || type == NetDevice::PACKET_OTHERHOST)
    {
        return;
    }
    uint32_t hdr = f->eth ? 14 : 0;
    uint32_t len = p->GetSize();
    if (!f->eth && proto != 0x0800)
    {
        m_rxDrops++; /* raw IP carries IPv4 only */
        return;
    }
    if (len + hdr > f->op.pool->buf_size)
    {
        m_rxDrops++;
        return;
    }
    struct sim_pkt* k = sim_pkt_alloc(f->op.pool);
    if (!k)
    {
        m_rxDrops++;
        return;
    }
    uint8_t* d = sim_pkt_data(k);
    if (f->eth)
    {
        /* The device took the Ethernet header off: put it back for the core. */
        if (!Mac48Address::IsMatchingType(to) || !Mac48Address::IsMatchingType(from))
        {
            sim_pkt_free(k);
            m_rxDrops++;
            return;
        }
        Mac48Address::ConvertFrom(to).CopyTo(d);
        Mac48Address::ConvertFrom(from).CopyTo(d + 6);
        d[12] = static_cast<uint8_t>(proto >> 8);
        d[13] = static_cast<uint8_t>(proto);
    }
    p->CopyData(d + hdr, len);
    k->len = len + hdr;
    void* one = k;
    Run(f, &one, 1);
}

void
IpkitStack::Transmit(Iface* f, void* pkt)
{
    struct sim_pkt* k = static_cast<struct sim_pkt*>(pkt);
    uint32_t total = sim_pkt_chain_len(k);
    uint32_t hdr = f->eth ? 14 : 0;
    if (total < hdr + 20)
    {
        sim_pkt_free_chain(k);
        m_txDrops++;
        return;
    }
    /* One copy at the boundary: the frame (or chain) into a fresh ns-3 Packet. */
    const uint8_t* flat;
    if (!k->next)
    {
        flat = sim_pkt_data(k);
    }
    else
    {
        m_scratch.resize(total);
        uint32_t at = 0;
        for (struct sim_pkt* q = k; q; q = q->next)
        {
            std::memcpy(m_scratch.data() + at, sim_pkt_data(q), q->len);
            at += q->len;
        }
        flat = m_scratch.data();
    }
    Ptr<Packet> p = Create<Packet>(flat + hdr, total - hdr);
    if (f->eth)
    {
        Mac48Address dst;
        dst.CopyFrom(flat);
        DeviceSend(f, p, dst, static_cast<uint16_t>(flat[12] << 8 | flat[13]));
    }
    else
    {
        DeviceSend(f, p, f->dev->GetBroadcast(), 0x0800);
    }
    sim_pkt_free_chain(k);
}

/* A device whose queue is full is backpressure, not loss: the frame waits in
 * the interface's backlog (in order, bounded by TxBacklog) until the queue wakes,
 * as a host's qdisc holds what its NIC cannot take yet. Without a queue interface
 * to wake us, or past the bound, a refused frame is dropped and counted. */
void
IpkitStack::DeviceSend(Iface* f, Ptr<Packet> p, const Address& dst, uint16_t type)
{
    bool stopped = f->txq && f->txq->IsStopped();
    if (f->backlog.empty() && !stopped && f->dev->Send(p, dst, type))
    {
        return;
    }
    if (!f->txq || f->backlog.size() >= m_backlogMax)
    {
        m_txDrops++;
        return;
    }
    f->backlog.push_back(Iface::Held{p, dst, type});
    m_txHeld++;
}

void
IpkitStack::Wake(uint32_t idx)
{
    if (idx >= m_ifaces.size())
    {
        return;
    }
    Iface* f = m_ifaces[idx].get();
    /* Bounded by the backlog's length: each pass sends one frame or stops. */
    while (!f->backlog.empty() && !f->txq->IsStopped())
    {
        Iface::Held& h = f->backlog.front();
        if (!f->dev->Send(h.p, h.dst, h.type))
        {
            break;
        }
        f->backlog.pop_front();
    }
}

/* ipk_run, then move the context's one timer event when the deadline came
 * earlier. Calls from inside a callback of the same context (an application
 * writing from Acked) only note that the context needs another pass. */
void
IpkitStack::Run(Iface* f, void** pkts, uint32_t n)
{
    if (f->inRun)
    {
        f->kickAgain = true;
        return;
    }
    uint64_t now = static_cast<uint64_t>(Simulator::Now().GetNanoSeconds());
    f->inRun = true;
    uint64_t dl = ipk_run(f->ctx, pkts, n, now);
    m_runCalls++;
    if (f->kickAgain)
    {
        /* One more pass for calls made from the callbacks; bounded: its own
         * callbacks' calls were already taken by the core as it went. */
        f->kickAgain = false;
        dl = ipk_run(f->ctx, nullptr, 0, now);
        m_runCalls++;
    }
    f->inRun = false;
    if (dl == UINT64_MAX)
    {
        return; /* nothing armed; a pending event just fires once more */
    }
    if (dl < now)
    {
        dl = now;
    }
    if (f->timer.IsRunning() && f->timerAt <= dl)
    {
        return; /* fires first; it will look at the new deadline then */
    }
    f->timer.Cancel();
    f->timerAt = dl;
    f->timer = Simulator::Schedule(NanoSeconds(static_cast<int64_t>(dl - now)),
                                   &IpkitStack::Timer,
                                   this,
                                   f->index);
}

void
IpkitStack::Kick(Iface* f)
{
    Run(f, nullptr, 0);
}

void
IpkitStack::Timer(uint32_t idx)
{
    if (idx >= m_ifaces.size())
    {
        return;
    }
    Iface* f = m_ifaces[idx].get();
    f->timerAt = UINT64_MAX;
    m_timerEvents++;
    Run(f, nullptr, 0);
}

/* -------------------------------------------------------------- the API */

IpkitStack::Iface*
IpkitStack::PickIface(Ipv4Address dst) const
{
    for (const auto& f : m_ifaces)
    {
        if (f->mask.IsMatch(f->addr, dst))
        {
            return f.get();
        }
    }
    for (const auto& f : m_ifaces)
    {
        if (f->gateway != Ipv4Address::GetZero())
        {
            return f.get();
        }
    }
    return m_ifaces.empty() ? nullptr : m_ifaces[0].get();
}

IpkitStack::Iface*
IpkitStack::IfaceOf(IpkitConn c) const
{
    return c.conn && c.iface < m_ifaces.size() ? m_ifaces[c.iface].get() : nullptr;
}

static uint64_t
NowNs()
{
    return static_cast<uint64_t>(Simulator::Now().GetNanoSeconds());
}

int
IpkitStack::Listen(uint16_t port, AcceptFn accept, uint16_t backlog)
{
    if (!accept || port == 0 || backlog == 0)
    {
        return IPK_EINVAL;
    }
    if (m_listeners.count(port))
    {
        return IPK_EADDRINUSE;
    }
    for (const auto& f : m_ifaces)
    {
        int rc = ipk_tcp_listen(f->ctx, ipk_htons(port), backlog);
        if (rc < 0)
        {
            return rc;
        }
    }
    m_listeners[port] = std::move(accept);
    m_backlogs[port] = backlog;
    return 0;
}

int
IpkitStack::Connect(Ipv4Address dst, uint16_t port, IpkitTcpHandler* h, IpkitConn* out)
{
    Iface* f = PickIface(dst);
    if (!f || !h || !out)
    {
        return IPK_EINVAL;
    }
    struct ipk_conn* c = nullptr;
    int rc = ipk_tcp_connect(f->ctx, ipk_htonl(dst.Get()), ipk_htons(port), 0, h, &c, NowNs());
    if (rc < 0)
    {
        return rc;
    }
    out->iface = f->index;
    out->conn = c;
    Kick(f);
    return 0;
}

int
IpkitStack::Write(IpkitConn c, const uint8_t* buf, uint32_t len)
{
    Iface* f = IfaceOf(c);
    if (!f)
    {
        return IPK_EINVAL;
    }
    int rc = ipk_tcp_write(f->ctx, c.conn, buf, len, NowNs());
    Kick(f);
    return rc;
}

uint32_t
IpkitStack::SendBufferFree(IpkitConn c) const
{
    return IfaceOf(c) ? ipk_tcp_sndbuf_free(c.conn) : 0;
}

int
IpkitStack::Close(IpkitConn c)
{
    Iface* f = IfaceOf(c);
    if (!f)
    {
        return IPK_EINVAL;
    }
    int rc = ipk_tcp_close(f->ctx, c.conn, NowNs());
    Kick(f);
    return rc;
}

int
IpkitStack::Abort(IpkitConn c)
{
    Iface* f = IfaceOf(c);
    if (!f)
    {
        return IPK_EINVAL;
    }
    int rc = ipk_tcp_abort(f->ctx, c.conn, NowNs());
    Kick(f);
    return rc;
}

int
IpkitStack::Info(IpkitConn c, struct ipk_tcp_info* info) const
{
    return IfaceOf(c) ? ipk_tcp_info(c.conn, info) : IPK_EINVAL;
}

int
IpkitStack::BindUdp(uint16_t port, UdpRecvFn fn)
{
    if (!fn || port == 0)
    {
        return IPK_EINVAL;
    }
    if (m_udp.count(port))
    {
        return IPK_EADDRINUSE;
    }
    for (const auto& f : m_ifaces)
    {
        int rc = ipk_udp_bind(f->ctx, ipk_htons(port));
        if (rc < 0)
        {
            return rc;
        }
    }
    m_udp[port] = std::move(fn);
    return 0;
}

int
IpkitStack::SendUdp(Ipv4Address dst, uint16_t srcPort, uint16_t dstPort, const uint8_t* buf,
                    uint32_t len)
{
    Iface* f = PickIface(dst);
    if (!f)
    {
        return IPK_EINVAL;
    }
    int rc = ipk_udp_sendto(f->ctx, ipk_htons(srcPort), ipk_htonl(dst.Get()), ipk_htons(dstPort),
                            buf, len, NowNs());
    Kick(f);
    return rc;
}

} // namespace ns3
