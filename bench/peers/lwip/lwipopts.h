/*
 * lwIP 2.1.3 options for the in-memory peer harness: raw API only, NO_SYS=1, IPv4 +
 * Ethernet + TCP, sizes matched to ipkit's defaults (256 KiB send buffer and window,
 * MSS 1460). Checksums are switched per netif so one build serves both profiles.
 */
#ifndef IM_LWIPOPTS_H
#define IM_LWIPOPTS_H

#include <stdlib.h>

#define NO_SYS 1
#define SYS_LIGHTWEIGHT_PROT 0
#define LWIP_SOCKET 0
#define LWIP_NETCONN 0
#define LWIP_IPV4 1
#define LWIP_IPV6 0
#define LWIP_ARP 1
#define LWIP_ETHERNET 1
#define LWIP_ICMP 1
#define LWIP_UDP 0
#define LWIP_TCP 1
#define LWIP_DHCP 0
#define LWIP_AUTOIP 0
#define LWIP_IGMP 0
#define LWIP_DNS 0
#define LWIP_RAW 0
#define IP_REASSEMBLY 0
#define IP_FRAG 0
#define LWIP_RAND() ((u32_t)rand())

/* memory: the heap holds tcp_write copies (PBUF_RAM); pools hold pcbs, segments and
 * received frames */
#define MEM_ALIGNMENT 8
#define MEM_SIZE (64 * 1024 * 1024)
#define MEMP_NUM_TCP_PCB 4200
#define MEMP_NUM_TCP_PCB_LISTEN 4
#define MEMP_NUM_TCP_SEG 16384
#define MEMP_NUM_PBUF 16384
#define PBUF_POOL_SIZE 16384
#define PBUF_POOL_BUFSIZE 1600
#define MEMP_NUM_SYS_TIMEOUT 8
#define ARP_TABLE_SIZE 4

/* TCP, matched to ipkit's defaults */
#define TCP_MSS 1460
#define LWIP_WND_SCALE 1
#define TCP_RCV_SCALE 3
#define TCP_WND (256 * 1024)
#define TCP_SND_BUF (256 * 1024)
#define TCP_SND_QUEUELEN 8192
#define TCP_SNDLOWAT 1
#define TCP_QUEUE_OOSEQ 1
#define LWIP_TCP_SACK_OUT 0
#define LWIP_TCP_TIMESTAMPS 0
#define TCP_LISTEN_BACKLOG 0

#define LWIP_CHECKSUM_CTRL_PER_NETIF 1
#define ETHARP_SUPPORT_STATIC_ENTRIES 1
#define LWIP_NETIF_STATUS_CALLBACK 0
#define LWIP_NETIF_LINK_CALLBACK 0

/* Statistics off, as a speed build has them (lwIP's default, LWIP_STATS 1, counts
 * in every layer on every frame). lwip-inmem-stats (build.sh: IM_LWIP_STATS) turns on
 * only what the harness reports: checksum drops (TCP_STATS) and retransmissions
 * (MIB2_STATS), for --corrupt. */
#ifdef IM_LWIP_STATS
#define LWIP_STATS 1
#define TCP_STATS 1
#define MIB2_STATS 1
#else
#define LWIP_STATS 0
#define TCP_STATS 0
#define MIB2_STATS 0
#endif
#define LWIP_STATS_DISPLAY 0
#define LINK_STATS 0
#define ETHARP_STATS 0
#define IP_STATS 0
#define ICMP_STATS 0
#define MEM_STATS 0
#define MEMP_STATS 0
#define SYS_STATS 0

/* --wire handoff: the receiver gets a PBUF_REF custom pbuf over the sender's frame
 * (lw_inst.c) */
#define LWIP_SUPPORT_CUSTOM_PBUF 1

/* Checksum: lwIP's default algorithm (inet_chksum.c, #2), which gcc -O3 vectorises:
 * 5,667 instructions per 1460 B of bulk sw against 6,401 with #3 (32 bits at a time),
 * 4,456 against 4,238 per ping-pong request (README, "How each peer is built"); bulk is
 * where the checksum matters. CFLAGS=-DLWIP_CHKSUM_ALGORITHM=3 picks #3. */

#define LWIP_NOASSERT 1
#define LWIP_DEBUG 0
#endif
