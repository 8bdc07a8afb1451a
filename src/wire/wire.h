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
    uint64_t rx_truncated; /* larger than the MTU: dropped */
    uint64_t fault_drop;   /* fault injector verdicts applied */
    uint64_t fault_dup;
    uint64_t fault_reorder;
    uint64_t fault_delay;
} aptus_dgram_wire_stats_t;

typedef struct aptus_dgram_wire aptus_dgram_wire_t;

typedef struct aptus_dgram_wire_ops {
    /* Send count datagrams, in order. A datagram the wire cannot take now
     * (UCS_ERR_NO_RESOURCE) stops the batch; *sent_p says how many went.
     * Loss after the wire took a datagram is silent, as on UD. */
    ucs_status_t (*send)(aptus_dgram_wire_t *wire, const aptus_dgram_tx_t *tx,
                         unsigned count, unsigned *sent_p);

    /* Fill up to count posted buffers with arrived datagrams; returns how
     * many were filled (0 when none is waiting). */
    unsigned (*recv)(aptus_dgram_wire_t *wire, aptus_dgram_rx_t *rx,
                     unsigned count);

    /* Time-driven work (datagrams the fault injector holds back). */
    unsigned (*progress)(aptus_dgram_wire_t *wire, uint64_t now_us);

    /* Print an address, e.g. "127.0.0.1:41234". */
    const char *(*addr_str)(const aptus_wire_addr_t *addr, char *buf,
                            size_t max);

    /* File descriptor that becomes readable when datagrams arrive, or -1. */
    int (*event_fd)(aptus_dgram_wire_t *wire);

    void (*close)(aptus_dgram_wire_t *wire);
} aptus_dgram_wire_ops_t;

struct aptus_dgram_wire {
    const aptus_dgram_wire_ops_t *ops;
    size_t mtu;             /* largest datagram, bytes */
    aptus_wire_addr_t addr; /* this wire's own address */
    aptus_dgram_wire_stats_t stats;
};

#ifdef __cplusplus
}
#endif

#endif
