/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's datagram internals, shared by the wire
 * (verbs_dgram.c), its receive queues (verbs_rxq.c) and the UD QPs under
 * both (verbs_ud.c).
 */
#ifndef APTUS_VERBS_DGRAM_INT_H_
#define APTUS_VERBS_DGRAM_INT_H_

#include "verbs_ah.h"
#include "verbs_dgram.h"
#include "verbs_hca.h"

#include "proto/fault.h"

#include <infiniband/verbs.h>

/* Bytes of the Global Routing Header before every UD receive's payload:
 * there on every receive, valid only with IBV_WC_GRH. */
#define APTUS_VERBS_GRH_LEN 40

/* Completions polled at once. */
#define APTUS_VERBS_BATCH 64

/* A UD QP with registered receive buffers of its own, kept posted; the
 * wire's also carries the send buffers after them in the same region. */
typedef struct aptus_verbs_ud {
    struct ibv_qp *qp;
    struct ibv_cq *recv_cq;
    struct ibv_mr *mr;
    uint8_t *buf;
    size_t rx_stride; /* GRH + port MTU */
    unsigned rx_count;
    unsigned rx_posted;
    int broken;        /* a receive failed: the QP is in the error state */
    int dead;          /* and could not be taken back */
    unsigned rebuilds; /* times it was taken back */
} aptus_verbs_ud_t;

/* A datagram the fault injector holds back (reorder or delay): its send
 * buffer, not yet posted. */
typedef struct aptus_verbs_held {
    unsigned slot;
    size_t length;
    aptus_wire_addr_t dst;
    uint64_t release_us;
    int after_next;
} aptus_verbs_held_t;

#define APTUS_VERBS_HELD_MAX 64

typedef struct aptus_verbs_dgram {
    aptus_dgram_wire_t super;
    aptus_verbs_hca_t *hca;           /* shared with the HCA's other users */
    struct ibv_context *ctx;          /* the hca's */
    struct ibv_pd *pd;                /* the hca's */
    struct ibv_comp_channel *channel; /* NULL: no event fd */
    struct ibv_cq *send_cq;
    struct ibv_cq *recv_cq; /* the wire's QP's, with the channel */
    aptus_verbs_ud_t ud;
    uint8_t port;
    uint16_t lid;
    int global; /* RoCE: routed by GID, every packet has a GRH */
    union ibv_gid gid;
    size_t port_mtu;
    int numa_node; /* the HCA's (config->numa_node): registered buffers */
    /* send buffers, in ud.mr after the receive buffers */
    uint8_t *tx_buf;
    size_t tx_stride;
    unsigned tx_count;
    unsigned *tx_free; /* stack of free send buffers */
    unsigned tx_num_free;
    int armed; /* notification requested on the receive CQ */
    aptus_verbs_ah_cache_t ahs;
    aptus_fault_t fault;
    uint64_t now_us;
    aptus_verbs_held_t held[APTUS_VERBS_HELD_MAX];
    unsigned num_held;
    uint64_t rx_errors; /* receive completions in error */
    uint64_t tx_cq_errors;
} aptus_verbs_dgram_t;

/* A UD QP on the wire's port with rx_count receive buffers of rx_stride
 * bytes and extra bytes after them in the same registration, brought to
 * RTS with its receives posted. */
ucs_status_t aptus_verbs_ud_open(aptus_verbs_dgram_t *v, aptus_verbs_ud_t *ud,
                                 unsigned rx_count, size_t extra,
                                 unsigned max_send_wr, struct ibv_cq *recv_cq);
void aptus_verbs_ud_close(aptus_verbs_ud_t *ud);

/* The attributes of the active HCA port dev_name names ("<hca>:<port>"):
 * 1, or 0 when there is no such port or it is not active. */
int aptus_verbs_port_query(const char *dev_name, struct ibv_port_attr *attr);

/* Take a QP in the error state back to RTS through RESET, keeping its QP
 * number (peers' addresses of it stay right), and post every receive
 * buffer again: once every receive came back flushed, and idle_sends
 * (nothing of the QP's on the send queue, whose work RESET would drop
 * without a completion). Returns whether it did; a QP the HCA refuses to
 * take back is dead: it stays out of service, said once. */
int aptus_verbs_ud_recover(aptus_verbs_ud_t *ud, uint8_t port, int idle_sends);

/* Post receive buffer slot (again), in batches: add, then flush. */
typedef struct aptus_verbs_repost {
    struct ibv_recv_wr wr[APTUS_VERBS_BATCH];
    struct ibv_sge sge[APTUS_VERBS_BATCH];
    unsigned count;
} aptus_verbs_repost_t;

void aptus_verbs_ud_repost_add(aptus_verbs_ud_t *ud, aptus_verbs_repost_t *r,
                               unsigned slot);
void aptus_verbs_ud_repost_flush(aptus_verbs_ud_t *ud, aptus_verbs_repost_t *r);

/* The sender's address from a receive completion and its buffer. */
void aptus_verbs_ud_src(aptus_verbs_dgram_t *v, const struct ibv_wc *wc,
                        const uint8_t *buf, aptus_wire_addr_t *src);

/* Receive queues (verbs_rxq.c). */
ucs_status_t aptus_verbs_rxq_open(aptus_dgram_wire_t *wire, unsigned depth,
                                  aptus_dgram_rxq_t **rxq_p);
unsigned aptus_verbs_rxq_recv(aptus_dgram_rxq_t *rxq, aptus_dgram_rxv_t *rx,
                              unsigned count);
void aptus_verbs_rxq_drain(aptus_dgram_rxq_t *rxq);
void aptus_verbs_rxq_close(aptus_dgram_rxq_t *rxq);

#endif
