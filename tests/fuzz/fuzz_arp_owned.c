/* fuzz_arp with the ARP table owned by the integrator (ops->arp_resolve): see
 * fuzz_arp.c. */
#define FZ_ARP_OWNED 1
#include "fuzz_arp.c"
