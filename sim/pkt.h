/*
 * A reference packet implementation for hosted programs (simulator, tests, examples):
 * descriptors over reference-counted buffers, with scatter-gather chains and transmit
 * offload marks. It implements every packet op of struct ipk_ops.
 *
 * Ownership: sim_pkt_free releases one descriptor and, at the last reference, its
 * buffer. Pools count what is out so tests can prove nothing leaked.
 */
#ifndef IPKIT_SIM_PKT_H
#define IPKIT_SIM_PKT_H

#include <ipkit/core.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sim_buf {
	uint32_t refcnt;
	uint32_t size;
	uint8_t *mem;
	struct sim_buf *next_free;
};

struct sim_pkt {
	struct sim_buf *buf;
	uint32_t off, len;       /* data window inside buf->mem */
	struct sim_pkt *next;    /* scatter-gather chain */
	struct sim_pool *pool;
	struct ipk_tx_meta meta; /* transmit offload marks (flags 0 = none) */
	uint32_t rx_csum;        /* IPK_RXCSUM_* set by a simulated NIC */
	struct sim_pkt *next_free;
	void *user;              /* free for the holder (link queues) */
};

struct sim_pool {
	struct sim_buf *bufs;
	uint8_t *mem;
	struct sim_pkt *descs;
	struct sim_buf *free_bufs;
	struct sim_pkt *free_descs;
	uint32_t nbufs, ndescs, buf_size;
	uint32_t bufs_out, descs_out; /* in use now */
	uint64_t alloc_fail;          /* allocations refused */
	uint32_t fail_every;          /* fault injection: refuse every Nth alloc (0 = off) */
	uint32_t alloc_count;
	uint64_t bad_set_len;         /* set_len past the buffer's end, refused (core misuse) */
};

/* Create a pool of nbufs buffers of buf_size bytes and ndescs descriptors
 * (ndescs >= nbufs; clones need extra descriptors). NULL when out of memory. */
struct sim_pool *sim_pool_create(uint32_t nbufs, uint32_t buf_size, uint32_t ndescs);
void sim_pool_destroy(struct sim_pool *p);

struct sim_pkt *sim_pkt_alloc(struct sim_pool *p);
void sim_pkt_free(struct sim_pkt *k);
void sim_pkt_free_chain(struct sim_pkt *k);
struct sim_pkt *sim_pkt_clone(struct sim_pkt *k);
uint32_t sim_pkt_chain_len(const struct sim_pkt *k);
/* Copy a chain into one fresh packet (NULL when it does not fit or the pool is empty). */
struct sim_pkt *sim_pkt_linearize(struct sim_pool *p, const struct sim_pkt *k);
/* Fresh packet holding a copy of bytes. */
struct sim_pkt *sim_pkt_from(struct sim_pool *p, const void *bytes, uint32_t len);
static inline uint8_t *sim_pkt_data(struct sim_pkt *k) { return k->buf->mem + k->off; }

/*
 * Fill the packet ops of `ops` with this implementation. The ipk_config.opaque of the
 * context must point to a struct whose first member is `struct sim_pool *` (the pool
 * pkt_alloc draws from).
 */
void sim_pkt_ops(struct ipk_ops *ops);

#ifdef __cplusplus
}
#endif
#endif
