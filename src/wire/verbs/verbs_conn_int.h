/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's connection internals, shared by the wire
 * (verbs_conn.c), its connection setup (verbs_conn_setup.c), the shared
 * receive pool and its credits (verbs_conn_rx.c) and the send side and
 * one-sided operations (verbs_conn_tx.c).
 */
#ifndef APTUS_VERBS_CONN_INT_H_
#define APTUS_VERBS_CONN_INT_H_

#include "verbs_conn.h"
#include "verbs_dgram_int.h"

#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/list.h>

#include <infiniband/verbs.h>

/* Credits (receive buffers) one connection is granted at most. */
#define APTUS_VERBS_CONN_CREDITS 16
/* The least a connection is given: one buffer is always kept for the
 * in-order close (DISC), so data needs two. */
#define APTUS_VERBS_CONN_MIN_CREDITS 2
/* Send work requests one RC QP may have outstanding. */
#define APTUS_VERBS_CONN_SQ_DEPTH 32
/* Send work requests of all QPs outstanding at once (the send CQ). */
#define APTUS_VERBS_CONN_TX_CQ 1024
/* Registered send buffers of the wire (bounce buffers). */
#define APTUS_VERBS_CONN_TX_BUFS 64
/* Bytes sent inline (no send buffer), asked of the QP. */
#define APTUS_VERBS_CONN_INLINE 64
/* Half-open setups (acceptor side, not yet confirmed) at most. */
#define APTUS_VERBS_CONN_MAX_HALF_OPEN 64
/* Setup retransmission: first timeout, doubled per try, and tries. */
#define APTUS_VERBS_CONN_RTO_US  2000
#define APTUS_VERBS_CONN_RETRIES 8
/* The acceptor sends its REP twice as many times: a connector that went up
 * (its RTU lost) must not find the other side given up. */
#define APTUS_VERBS_CONN_REP_RETRIES (2 * APTUS_VERBS_CONN_RETRIES)
/* The timeout doubles up to 2^7 times the first (256 ms). */
#define APTUS_VERBS_CONN_RTO_SHIFT_MAX 7

/* The immediate of a zero-length send that closes a connection in order;
 * data messages are plain sends, the user's write-with-immediate arrives
 * with another opcode. */
#define APTUS_VERBS_CONN_IMM_DISC 0x44495343u

/* send work request ids: kind << 32 | send buffer + 1 (0: none) */
enum {
    APTUS_VERBS_WR_SEND   = 1,
    APTUS_VERBS_WR_CREDIT = 2,
    APTUS_VERBS_WR_WRITE  = 3,
    APTUS_VERBS_WR_READ   = 4,
    APTUS_VERBS_WR_DISC   = 5
};

typedef enum {
    APTUS_VERBS_CONN_S_SETUP, /* REQ sent, or (acceptor) REP sent */
    APTUS_VERBS_CONN_S_UP,
    APTUS_VERBS_CONN_S_FAILED, /* broken: the owner is (to be) told */
    APTUS_VERBS_CONN_S_CLOSED  /* closed, freed at the end of progress */
} aptus_verbs_conn_state_t;

/* What waits in a connection's backlog, in order. */
enum {
    APTUS_VERBS_OP_MSG,
    APTUS_VERBS_OP_WRITE,
    APTUS_VERBS_OP_WRITE_IMM,
    APTUS_VERBS_OP_READ
};

typedef struct aptus_verbs_conn_op {
    struct aptus_verbs_conn_op *next;
    aptus_conn_rma_req_t *req; /* done once posted and complete */
    uint8_t kind;
    uint32_t imm;
    uint32_t rkey;
    uint64_t remote_addr;
    size_t length;
    size_t offset;   /* posted so far (a write goes in pieces) */
    unsigned iovcnt; /* OP_READ: where the bytes go */
    struct iovec iov[APTUS_CONN_RMA_MAX_IOV];
    uint8_t data[]; /* the bytes of a message or write */
} aptus_verbs_conn_op_t;

/* A request waiting for the connection's work requests up to seq. */
typedef struct aptus_verbs_conn_done {
    struct aptus_verbs_conn_done *next;
    aptus_conn_rma_req_t *req;
    uint64_t seq;
} aptus_verbs_conn_done_t;

/* The registered words a peer writes by RDMA: its grant of credits. */
typedef struct aptus_verbs_conn_ctl {
    volatile uint64_t granted; /* the peer's receive buffers granted, total */
    uint64_t pad[7];
} aptus_verbs_conn_ctl_t;

typedef struct aptus_verbs_conn {
    aptus_conn_t super;
    ucs_list_link_t list;       /* wire->conns */
    ucs_list_link_t tx_list;    /* wire->tx_pending, while in_tx_list */
    ucs_list_link_t setup_list; /* wire->setups, while in_setup */
    int in_setup;
    int half_open; /* counted in wire->num_half_open */
    int in_ids;    /* in wire->ids */
    aptus_verbs_conn_state_t state;
    int accepted;   /* the acceptor's side */
    int in_tx_list; /* backlog, credits or requests to finish */
    int fail_told;
    ucs_status_t fail_status;
    struct ibv_qp *qp;
    /* setup */
    aptus_wire_addr_t peer; /* the peer wire's setup address */
    uint64_t id;            /* the connector's connection id */
    uint32_t peer_qpn;
    uint64_t peer_ctl_addr;
    uint32_t peer_ctl_rkey;
    uint64_t next_tx_us; /* setup retransmission */
    unsigned tries;
    /* credits this side grants (receive) and holds (send) */
    aptus_verbs_conn_ctl_t *ctl;
    struct ibv_mr *ctl_mr;
    uint64_t rx_granted;  /* buffers granted to the peer, total */
    uint64_t rx_received; /* of them used */
    uint64_t rx_written;  /* rx_granted as last written to the peer */
    uint64_t tx_used;     /* the peer's buffers used by our sends */
    int rx_gone; /* its grant moved to the orphans: nothing more arrives */
    /* send queue */
    unsigned sq_outstanding;
    uint64_t sq_posted; /* work requests, total */
    uint64_t sq_completed;
    aptus_verbs_conn_op_t *backlog, **backlog_tail;
    size_t backlog_bytes;
    int want_writable;
    aptus_verbs_conn_done_t *dones, **dones_tail;
    unsigned rma_pending;    /* requests not yet done */
    unsigned writes_pending; /* direct writes posted, not yet complete */
} aptus_verbs_conn_t;

KHASH_MAP_INIT_INT(aptus_verbs_qpn, aptus_verbs_conn_t *)
/* connection id -> connection, for setup datagrams */
KHASH_MAP_INIT_INT64(aptus_verbs_id, aptus_verbs_conn_t *)
/* a key's token -> the setup address of the peer whose key it is */
KHASH_MAP_INIT_INT64(aptus_verbs_key, aptus_wire_addr_t)

/* A chunk of receive buffers, one registration. */
typedef struct aptus_verbs_rx_chunk {
    struct aptus_verbs_rx_chunk *next;
    struct ibv_mr *mr;
    void *mem;
    size_t size;
} aptus_verbs_rx_chunk_t;

typedef struct aptus_verbs_conn_wire {
    aptus_conn_wire_t super;
    aptus_conn_wire_config_t config;
    aptus_dgram_wire_t *setup; /* the setup UD QP: the listening address */
    aptus_verbs_dgram_t *dev;  /* setup's context, PD, port, MTU */
    enum ibv_mtu path_mtu;
    struct ibv_cq *send_cq;
    struct ibv_cq *recv_cq;
    struct ibv_srq *srq;
    khash_t(aptus_verbs_qpn) qps;
    ucs_list_link_t conns;         /* every connection not yet freed */
    ucs_list_link_t tx_pending;    /* connections with sends to push */
    ucs_list_link_t dead;          /* closed in a handler: freed later */
    khash_t(aptus_verbs_key) keys; /* checked keys (write_ordered) */
    khash_t(aptus_verbs_id) ids;
    ucs_list_link_t setups; /* connections being set up (timers) */
    uint8_t setup_rx[16][APTUS_VERBS_DGRAM_MTU_MIN];
    int in_progress;
    unsigned num_fail_pending; /* broken, the owner not yet told */
    unsigned num_half_open;
    unsigned num_up;
    int unpaced; /* tests: credits ignored */
    /* receive pool */
    aptus_verbs_rx_chunk_t *chunks;
    aptus_conn_buf_t **rx_free; /* buffers not posted, not in use */
    unsigned rx_num_free;
    size_t rx_stride, rx_lead;
    unsigned rx_total;    /* allocated */
    unsigned rx_posted;   /* in the SRQ */
    unsigned rx_max;      /* allocated at most */
    uint64_t rx_promised; /* posted buffers granted to live connections */
    unsigned rx_orphans;  /* granted to connections closed since */
    int rx_regrant;       /* buffers or wants changed: grant again */
    unsigned rx_in_use;   /* buffers with the owner (held ones too) */
    size_t rx_headroom;   /* config's, grown to keep headers aligned */
    /* send buffers */
    struct ibv_mr *tx_mr;
    uint8_t *tx_buf;
    size_t tx_stride;
    unsigned *tx_free;
    unsigned tx_num_free;
    unsigned tx_outstanding; /* work requests of all QPs */
    uint32_t max_inline;
    /* a direct read waits for its completion */
    int read_done;
    enum ibv_wc_status read_status;
    uint64_t now_us;
    const uint64_t *test_clock; /* tests: the time, in microseconds */
    uint64_t setup_dropped;     /* setup datagrams refused or malformed */
    uint64_t half_open_refused;
} aptus_verbs_conn_wire_t;

static inline aptus_verbs_conn_wire_t *aptus_verbs_cw(aptus_conn_wire_t *wire)
{
    return ucs_container_of(wire, aptus_verbs_conn_wire_t, super);
}

static inline aptus_verbs_conn_t *aptus_verbs_conn(aptus_conn_t *conn)
{
    return ucs_container_of(conn, aptus_verbs_conn_t, super);
}

/* verbs_conn.c */
void aptus_verbs_conn_update_time(aptus_verbs_conn_wire_t *cw);
aptus_verbs_conn_t *aptus_verbs_conn_alloc(aptus_verbs_conn_wire_t *cw);
void aptus_verbs_conn_fail(aptus_verbs_conn_t *conn, ucs_status_t status);
aptus_verbs_conn_t *aptus_verbs_conn_by_qpn(aptus_verbs_conn_wire_t *cw,
                                            uint32_t qpn);
void aptus_verbs_conn_release(aptus_verbs_conn_t *conn);

/* verbs_conn_setup.c */
ucs_status_t aptus_verbs_conn_connect(aptus_conn_wire_t *wire,
                                      const aptus_wire_addr_t *dst, void *user,
                                      aptus_conn_t **conn_p);
unsigned aptus_verbs_setup_progress(aptus_verbs_conn_wire_t *cw);
void aptus_verbs_setup_forget(aptus_verbs_conn_t *conn);

/* verbs_conn_rx.c */
ucs_status_t aptus_verbs_rx_init(aptus_verbs_conn_wire_t *cw);
void aptus_verbs_rx_cleanup(aptus_verbs_conn_wire_t *cw);
unsigned aptus_verbs_rx_progress(aptus_verbs_conn_wire_t *cw);
void aptus_verbs_rx_grant(aptus_verbs_conn_wire_t *cw);
void aptus_verbs_rx_conn_gone(aptus_verbs_conn_t *conn);
void aptus_verbs_conn_buf_put(aptus_conn_buf_t *buf);

/* verbs_conn_tx.c */
ucs_status_t aptus_verbs_tx_init(aptus_verbs_conn_wire_t *cw);
void aptus_verbs_tx_cleanup(aptus_verbs_conn_wire_t *cw);
unsigned aptus_verbs_tx_poll(aptus_verbs_conn_wire_t *cw);
unsigned aptus_verbs_tx_progress(aptus_verbs_conn_wire_t *cw);
void aptus_verbs_tx_wake(aptus_verbs_conn_t *conn);
void aptus_verbs_tx_conn_gone(aptus_verbs_conn_t *conn);
ucs_status_t aptus_verbs_tx_credit(aptus_verbs_conn_t *conn);
ucs_status_t aptus_verbs_tx_disc(aptus_verbs_conn_t *conn);
ucs_status_t aptus_verbs_conn_send(aptus_conn_t *conn, const struct iovec *iov,
                                   unsigned iovcnt);
size_t aptus_verbs_conn_backlog(aptus_conn_t *conn);
ucs_status_t aptus_verbs_conn_write(aptus_conn_t *conn,
                                    const aptus_mem_key_t *key,
                                    uint64_t remote_addr,
                                    const struct iovec *iov, unsigned iovcnt);
ucs_status_t aptus_verbs_conn_read(aptus_conn_t *conn,
                                   const aptus_mem_key_t *key,
                                   uint64_t remote_addr,
                                   const struct iovec *iov, unsigned iovcnt);
ucs_status_t aptus_verbs_conn_write_imm(aptus_conn_t *conn,
                                        const aptus_mem_key_t *key,
                                        uint64_t remote_addr,
                                        const struct iovec *iov,
                                        unsigned iovcnt, uint32_t imm);
ucs_status_t aptus_verbs_conn_write_ordered(aptus_conn_wire_t *wire,
                                            const aptus_mem_key_t *key,
                                            const aptus_conn_piece_t *pieces,
                                            unsigned count);
ucs_status_t
aptus_verbs_conn_write_conn(aptus_conn_t *conn, const aptus_mem_key_t *key,
                            uint64_t remote_addr, const struct iovec *iov,
                            unsigned iovcnt, aptus_conn_rma_req_t *req);
ucs_status_t
aptus_verbs_conn_read_conn(aptus_conn_t *conn, const aptus_mem_key_t *key,
                           uint64_t remote_addr, const struct iovec *iov,
                           unsigned iovcnt, aptus_conn_rma_req_t *req);

#endif
