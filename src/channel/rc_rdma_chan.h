/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-RDMA channel: one-sided put and get into a peer's
 * registered memory, by key, over the peer's RC connection (the rendezvous
 * data path of Liu et al., "Design and Implementation of MPICH2 over
 * InfiniBand with RDMA Support", IPDPS 2004).
 *
 * It shares the RC-SR channel's links: a link is one connection, and an
 * operation on it waits (UCS_ERR_NO_RESOURCE) while active messages sent
 * before it are still queued there, so every operation on a link happens
 * in the order it was issued. On the sock wire the data moves with
 * process_vm_writev/readv and is in place when the call returns, for a
 * peer on this host; for a peer on another host it is carried over the
 * link's connection (over_conn) and completes later, through the caller's
 * completion, once the data is in place at the target.
 */
#ifndef APTUS_RC_RDMA_CHAN_H_
#define APTUS_RC_RDMA_CHAN_H_

#include "rc_sr_chan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_rc_rdma_stats {
    uint64_t puts;
    uint64_t put_bytes;
    uint64_t gets;
    uint64_t get_bytes;
    uint64_t refused;   /* outside the key's region, or unreachable */
    uint64_t conn_puts; /* carried over the connection (another host) */
    uint64_t conn_gets;
    uint64_t ordered; /* carried over the connection behind earlier ones */
} aptus_rc_rdma_stats_t;

typedef struct aptus_rc_rdma_chan {
    aptus_chan_t super;
    aptus_rc_chan_t *rc; /* whose links carry the operations */
    /* Carry operations over the connection where the wire cannot reach
     * the memory directly. Off: those are refused (UCS_ERR_UNREACHABLE),
     * for an owner that has another way (aptus: UD-ZCopy) and whose
     * messages may take other channels than the data. */
    int over_conn;
    ucs_mpool_t req_mp; /* operations in flight over connections */
    aptus_rc_rdma_stats_t stats;
} aptus_rc_rdma_chan_t;

/* The channel interface's operations of RC-RDMA (chan.h): put and get; the
 * peers are RC-SR's links, pending requests wait on them. */
extern const aptus_chan_ops_t aptus_rc_rdma_chan_iface_ops;

ucs_status_t aptus_rc_rdma_chan_init(aptus_rc_rdma_chan_t *rdma,
                                     aptus_rc_chan_t *rc, int over_conn);
void aptus_rc_rdma_chan_cleanup(aptus_rc_rdma_chan_t *rdma);

/* Whether an operation with key may go straight into the memory of the
 * link's peer: UCS_OK when the wire reaches it directly; UCS_ERR_BUSY
 * when it does, but operations carried over the connection before are
 * still on their way (RC keeps one-sided operations in order: this one
 * goes over the connection behind them); else key_check's answer
 * (conn.h), UCS_ERR_UNREACHABLE without a connection. */
ucs_status_t aptus_rc_rdma_key_direct(aptus_rc_rdma_chan_t *rdma,
                                      aptus_rc_link_t *link,
                                      const aptus_mem_key_t *key);

/* Write iov to [remote_addr, +length) of key's region on the link's peer.
 * UCS_OK: done (over a connection: iov is free, the flush tells when the
 * data is in place, unless comp is given); UCS_INPROGRESS: comp runs when
 * it is; UCS_ERR_NO_RESOURCE: wait (earlier messages queued);
 * UCS_ERR_INVALID_ADDR: outside the region, nothing moved;
 * UCS_ERR_UNREACHABLE: another host and not over_conn; or the link's
 * error. A zero-length operation does nothing and ignores the key. */
ucs_status_t aptus_rc_rdma_put(aptus_rc_rdma_chan_t *rdma,
                               aptus_rc_link_t *link, const struct iovec *iov,
                               unsigned iovcnt, uint64_t remote_addr,
                               const aptus_mem_key_t *key,
                               uct_completion_t *comp);

/* Read [remote_addr, +length) of key's region into iov, as put; over a
 * connection only with comp (else UCS_ERR_UNREACHABLE). */
ucs_status_t aptus_rc_rdma_get(aptus_rc_rdma_chan_t *rdma,
                               aptus_rc_link_t *link, const struct iovec *iov,
                               unsigned iovcnt, uint64_t remote_addr,
                               const aptus_mem_key_t *key,
                               uct_completion_t *comp);

#ifdef __cplusplus
}
#endif

#endif
