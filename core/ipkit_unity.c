/*
 * The whole core as one translation unit.
 *
 * Compile this file instead of linking the library when you want the compiler to see
 * the entire stack at once. Its main use: bind the ops table at compile time.
 *
 *     static const struct ipk_ops my_ops = { ... };
 *     #define IPK_OPS_STATIC my_ops
 *     #include "ipkit_unity.c"
 *
 * With IPK_OPS_STATIC defined, every op call in the core goes to &my_ops directly
 * (see IPK_OPS in internal.h), so packet ops and tx become direct calls the compiler
 * can inline; the table passed to ipk_ctx_init is then ignored.
 *
 * Every core .c file must be listed here; tests/port/gate.sh fails when one is not.
 * Static helpers of different files share this one scope, so two files must not
 * define static functions or macros with the same name.
 */
#include "wire/csum.c"
#include "wire/eth.c"
#include "wire/arp.c"
#include "wire/ip4.c"
#include "wire/icmp4.c"
#include "wire/udp.c"
#include "wire/tcp.c"
#include "wire/ip6.c"
#include "wire/icmp6.c"
#include "wire/nd.c"

#include "stack.c"
#include "link.c"
#include "arp.c"
#include "ip4.c"
#include "icmp4.c"
#include "udp.c"
#include "tcp.c"
#include "tcp_in.c"
#include "tcp_out.c"
#include "tcp_timer.c"
#include "tcp_cc.c"
#include "tcp_defence.c"
#include "tcp_syncookie.c"
#include "tcp_tw.c"
#include "tcp_cubic.c"
#include "tcp_keepalive.c"
#include "tcp_ack.c"
#include "tcp_ts.c"
#include "tcp_sack.c"
#include "tcp_sb.c"
#include "tcp_mem.c"
#include "tcp_rack.c"
#include "tcp_ecn.c"
#include "rss.c"
#include "tcp_prr.c"
#include "tcp_undo.c"
#include "ip6.c"
#include "nd.c"
#include "frag6.c"
#include "mld.c"
#include "tcp6.c"
