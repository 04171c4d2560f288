/* Calls the simulator's files make to each other; not for tests or apps. */
#ifndef IPKIT_SIM_INT_H
#define IPKIT_SIM_INT_H

#include "sim.h"

enum { SIM_EV_ARRIVE = 1, SIM_EV_NODE = 2, SIM_EV_CALL = 3 };

/* sim.c */
int sim_ev_push(struct sim *s, uint64_t t, int type, uint32_t gen, void *p,
                void (*fn)(struct sim *, void *));
int sim_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem);

/* node.c */
void sim_node_run(struct sim_node *n);
void sim_node_destroy(struct sim_node *n);
/* A frame arrived at a node's port (bytes valid during the call). */
void sim_node_rx(struct sim_node *n, const uint8_t *frame, uint32_t len);

/* link.c: a frame's arrival event fired; frees the frame. */
void sim_link_arrive(struct sim *s, void *frame);
/* Enter a finished frame (after NIC work) into the port's link. */
void sim_link_enter(struct sim_port *p, const uint8_t *frame, uint32_t len);
void sim_link_destroy(struct sim_link *l);
void sim_frame_free(void *frame);
/* Transmit path of a port: gather, offload, enter the link. Frees the chain. */
void sim_port_tx_pkt(struct sim_port *p, struct sim_pkt *k);
int sim_port_init(struct sim_port *p, struct sim *s, uint8_t linktype, uint16_t mtu,
                  uint32_t caps);
void sim_port_fini(struct sim_port *p);

#endif
