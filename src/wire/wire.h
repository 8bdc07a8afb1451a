/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the wire interface under every transport.
 *
 * Verbs-shaped: a datagram wire sends a gathered datagram (at most mtu bytes)
 * to an address and receives into buffers the caller posts, reporting the
 * sender's reply address. The sock wire (UDP) and, later, the verbs wire (UD
 * QPs) implement it; channels above never see sockets or queue pairs, and
 * unit tests plug in a deterministic fake wire.
 */
#ifndef APTUS_WIRE_H_
#define APTUS_WIRE_H_

#include "base/aptus_stat.h"
#include "proto/fault.h"

#include <ucs/type/status.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An address on a wire. Opaque to channels; each wire defines the layout
 * and keeps unused bytes zero so addresses compare and hash bytewise. */
#define APTUS_WIRE_ADDR_LEN 20
typedef struct aptus_wire_addr {
    uint8_t raw[APTUS_WIRE_ADDR_LEN];
} aptus_wire_addr_t;

/* One datagram to send: a gather list of at most APTUS_DGRAM_MAX_IOV. */
#define APTUS_DGRAM_MAX_IOV 8
typedef struct aptus_dgram_tx {
    const aptus_wire_addr_t *dst;
    const struct iovec *iov;
    unsigned iovcnt;
} aptus_dgram_tx_t;

/* A posted receive buffer and, once filled, what arrived in it. */
typedef struct aptus_dgram_rx {
    void *buf;             /* in: posted buffer of wire->mtu bytes */
    size_t length;         /* out: datagram length */
    aptus_wire_addr_t src; /* out: where replies to the sender go */
} aptus_dgram_rx_t;

typedef struct aptus_dgram_wire_stats {
    uint64_t tx_dgrams;
    uint64_t tx_bytes;
    uint64_t tx_errors; /* send failed for a reason other than loss */
    uint64_t rx_dgrams;
    uint64_t rx_bytes;
    uint64_t rx_truncated;     /* larger than the MTU: dropped */
    uint64_t rx_trains;        /* trains of datagrams received as one */
    uint64_t rx_trains_copied; /* of them, some datagrams copied out of a
                                  staging area (the others landed one
                                  datagram a buffer) */
    uint64_t fault_drop;       /* fault injector verdicts applied */
    uint64_t fault_dup;
    uint64_t fault_reorder;
    uint64_t fault_delay;
    uint64_t rxqs_opened; /* receive queues opened so far */
} aptus_dgram_wire_stats_t;

/* What a datagram wire is opened with. */
typedef struct aptus_dgram_wire_config {
    size_t mtu;            /* datagram size, bytes */
    unsigned rx_queue_len; /* datagrams the wire may buffer */
    unsigned tx_queue_len;
    int force_bufs; /* buffers past the system's limits where the wire has
                       such limits (the sock wire: SO_*BUFFORCE, which needs
                       CAP_NET_ADMIN); else the limits hold */
    aptus_fault_config_t fault;
    int numa_node; /* the wire's own buffers that the device writes (a verbs
                      wire's registered ones, the sock wire's GRO area) go
                      on this node; -1: wherever they fall */
} aptus_dgram_wire_config_t;

typedef struct aptus_dgram_wire aptus_dgram_wire_t;

/* A dedicated receive queue with an address of its own: what arrives there
 * lands in buffers the caller posts with each receive call, scattered over
 * a list of pieces (a UD QP's receive work requests). UD-ZCopy points the
 * pieces straight into the destination of a transfer. */
typedef struct aptus_dgram_rxq {
    aptus_dgram_wire_t *wire;
    aptus_wire_addr_t addr;
} aptus_dgram_rxq_t;

/* One posted scatter receive and, once filled, its result. */
typedef struct aptus_dgram_rxv {
    const struct iovec *iov; /* in */
    unsigned iovcnt;         /* in */
    size_t length;           /* out: bytes received */
    size_t seg_size;         /* out: a train of datagrams of this size
                                (the last may be shorter) arrived
                                together; 0: one datagram */
    int truncated;           /* out: it did not fit */
} aptus_dgram_rxv_t;

typedef struct aptus_dgram_wire_ops {
    /* Send count datagrams, in order. A datagram the wire cannot take now
     * (UCS_ERR_NO_RESOURCE) stops the batch; *sent_p says how many went.
     * Loss after the wire took a datagram is silent, as on UD. */
    ucs_status_t (*send)(aptus_dgram_wire_t *wire, const aptus_dgram_tx_t *tx,
                         unsigned count, unsigned *sent_p);

    /* Fill up to count posted buffers with arrived datagrams; returns how
     * many were filled (0 when none is waiting). The filled ones come
     * first, in the order the datagrams arrived; the wire may move the
     * posted buffers among the count slots (a train that arrived as one is
     * cut into buffers the call did not fill otherwise). Between two calls
     * the caller may put new buffers in the slots the previous call
     * filled, and post more slots (a larger count); the other slots keep
     * their buffers. A wire may keep its view of the posted buffers across
     * calls, and datagrams that arrived but did not fit a call's buffers
     * for the next calls. */
    unsigned (*recv)(aptus_dgram_wire_t *wire, aptus_dgram_rx_t *rx,
                     unsigned count);

    /* Optional (NULL, or UCS_ERR_UNSUPPORTED when the path refuses it): send
     * a train of datagrams of seg_size bytes each (the last may be shorter)
     * to one address in one call, at most wire->seg_max_bytes in all and
     * wire->seg_max_count datagrams. The receiving end may get them one by
     * one or together (rxv.seg_size). */
    ucs_status_t (*send_seg)(aptus_dgram_wire_t *wire,
                             const aptus_wire_addr_t *dst,
                             const struct iovec *iov, unsigned iovcnt,
                             size_t seg_size);

    /* Time-driven work (datagrams the fault injector holds back). */
    unsigned (*progress)(aptus_dgram_wire_t *wire, uint64_t now_us);

    /* Print an address, e.g. "127.0.0.1:41234". */
    const char *(*addr_str)(const aptus_wire_addr_t *addr, char *buf,
                            size_t max);

    /* File descriptor that becomes readable when datagrams arrive, or -1. */
    int (*event_fd)(aptus_dgram_wire_t *wire);

    /* A receive queue that holds at least depth datagrams of wire->mtu. */
    ucs_status_t (*rxq_open)(aptus_dgram_wire_t *wire, unsigned depth,
                             aptus_dgram_rxq_t **rxq_p);

    /* Fill up to count posted scatter receives, in arrival order; returns
     * how many were filled (0 when nothing is waiting). A receive may hold
     * a train of datagrams sent with send_seg (rxv.seg_size). */
    unsigned (*rxq_recv)(aptus_dgram_rxq_t *rxq, aptus_dgram_rxv_t *rx,
                         unsigned count);

    /* Throw away whatever is queued (before the queue serves a new user). */
    void (*rxq_drain)(aptus_dgram_rxq_t *rxq);

    void (*rxq_close)(aptus_dgram_rxq_t *rxq);

    void (*close)(aptus_dgram_wire_t *wire);

    /* Whether two addresses are the same node (host and interface), ports
     * aside: what a peer may name as its own other address. NULL: the
     * wire cannot tell. */
    int (*same_node)(const aptus_wire_addr_t *a, const aptus_wire_addr_t *b);

    /* The wire's own figures for a transport's statistics line, named by
     * the wire (what it holds of the kernel or the adapter); returns how
     * many of at most max it filled. NULL: none. */
    unsigned (*stats)(aptus_dgram_wire_t *wire, aptus_stat_t *stats,
                      unsigned max);
} aptus_dgram_wire_ops_t;

/* Every peer of the wire is on this host (a loopback device): a datagram
 * that both ends take crosses the path, so nothing needs probing. */
#define APTUS_DGRAM_WIRE_F_LOCAL 1u

struct aptus_dgram_wire {
    const aptus_dgram_wire_ops_t *ops;
    size_t mtu;           /* largest datagram, bytes */
    unsigned flags;       /* APTUS_DGRAM_WIRE_F_* */
    size_t seg_max_bytes; /* send_seg limit; 0: none */
    unsigned seg_max_count;
    aptus_wire_addr_t addr; /* this wire's own address */
    aptus_dgram_wire_stats_t stats;
};

#ifdef __cplusplus
}
#endif

#endif
