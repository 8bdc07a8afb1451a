/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's connection objects, shared by its connection
 * files (sock_conn.c: open, connect, accept, progress, close;
 * sock_conn_frame.c: framing, send backlog and receive pool; sock_conn_vm.c:
 * direct one-sided operations; sock_conn_rma.c: one-sided operations
 * carried over a connection; sock_conn_prove.c: the peer's proof).
 */
#ifndef APTUS_SOCK_CONN_INT_H_
#define APTUS_SOCK_CONN_INT_H_

#include "wire/conn.h"
#include "sock_frame.h"

#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/datastruct/queue.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/time/time.h>

#include <sys/types.h>
#include <sys/uio.h>

/* A peer's read being served here, in arrival order. */
typedef struct aptus_sock_serve {
    uint64_t address;
    uint64_t length; /* 0: answered with a frame without body */
    uint64_t offset; /* bytes sent so far */
    uint64_t token;  /* the region's, checked again at every frame */
    unsigned answer; /* that frame: READ_ERR, or FENCE_ACK for a fence */
} aptus_sock_serve_t;

/* A one-sided frame whose payload is being received straight into the
 * memory its operation names (the rest of the frame, as it comes). */
typedef struct aptus_sock_sink {
    size_t left;    /* bytes still to come (0: none is being received) */
    size_t length;  /* the frame's payload (a WRITE's without its header) */
    unsigned type;  /* WRITE or READ_RESP */
    uint64_t token; /* a WRITE's region: checked before every receive */
    unsigned iovcnt;
    struct iovec iov[APTUS_CONN_RMA_MAX_IOV]; /* where the rest goes */
} aptus_sock_sink_t;

/* One-sided operations carried over one connection. */
typedef struct aptus_sock_rma {
    ucs_queue_head_t reads; /* this side's reads, in issue order */
    aptus_sock_sink_t sink;
    unsigned num_reads;
    unsigned serve_head;       /* the peer's reads: a ring of */
    unsigned serve_count;      /* APTUS_CONN_MAX_READS, allocated when the */
    aptus_sock_serve_t *serve; /* first arrives */
} aptus_sock_rma_t;

/* Bytes of a one-sided operation queued by reference, sent from the
 * memory they are in (a peer's read: registered memory; a write longer
 * than the largest message: the caller's, valid until the write completes)
 * after the first pos bytes the backlog copied, counted from the
 * connection's start: a large operation is never copied to be sent. */
typedef struct aptus_sock_zseg {
    ucs_queue_elem_t queue;
    uint64_t pos;
    uint64_t token;  /* a peer's read: its region's, else 0 */
    unsigned iovcnt; /* entries left, from iov[first] */
    unsigned first;
    struct iovec iov[APTUS_CONN_RMA_MAX_IOV];
} aptus_sock_zseg_t;

#define APTUS_SOCK_CONN_EVENTS          32
#define APTUS_SOCK_CONN_MAX_IOV         16
#define APTUS_SOCK_CONN_READS           4 /* full-buffer reads per progress */
#define APTUS_SOCK_CONN_BACKLOG         1024
#define APTUS_SOCK_CONN_COALESCE        512 /* frames sent from one buffer */
#define APTUS_SOCK_CONN_ACCEPT_PAUSE_MS 100 /* out of descriptors */

enum {
    APTUS_SOCK_CONN_CONNECTING   = UCS_BIT(0),
    APTUS_SOCK_CONN_BROKEN       = UCS_BIT(1), /* no more sends */
    APTUS_SOCK_CONN_REPORTED     = UCS_BIT(2), /* failed handler called */
    APTUS_SOCK_CONN_CLOSED       = UCS_BIT(3),
    APTUS_SOCK_CONN_PROVE_QUEUED = UCS_BIT(4) /* PROVE_REQ waits for the
                                                 connect, first in txq */
};

/* Where the proof of a connection's peer (its pid) stands. */
enum {
    APTUS_SOCK_PROVE_WAITING = 0, /* asked; the answer has not come */
    APTUS_SOCK_PROVE_PROVEN,      /* peer_pid is the peer's */
    APTUS_SOCK_PROVE_NONE         /* answered without proof: never direct */
};

/* What a peer sends on the rendezvous socket: the challenge, then its own
 * view of the TCP connection it answers for (local, then remote address). */
#define APTUS_SOCK_PROVE_MSG_LEN                                               \
    (APTUS_FRAME_CHALLENGE_LEN + 2 * APTUS_WIRE_ADDR_LEN)
/* Rendezvous connections taken per look (each is closed once read). */
#define APTUS_SOCK_PROVE_ACCEPTS 64
/* Rendezvous connections taken before their answer was written (the
 * answerer connects, then writes): kept until it is, the oldest closed
 * past this many, so that local processes connecting and writing nothing
 * hold no more descriptors than these. */
#define APTUS_SOCK_PROVE_PENDING 16

typedef struct aptus_sock_conn {
    aptus_conn_t super;
    int fd;
    unsigned flags;
    uint32_t events;          /* registered with epoll */
    aptus_conn_buf_t *rx_buf; /* a frame half received, or NULL */
    size_t rx_off;            /* where its first unconsumed byte is */
    size_t rx_len;            /* bytes in the receive area */
    uint8_t *txq;             /* bytes the socket did not take yet */
    size_t txq_off;
    size_t txq_len;
    size_t txq_cap;
    uint64_t txq_pos;       /* txq's bytes sent since the start */
    ucs_queue_head_t zsegs; /* queued by reference, in stream order */
    size_t zseg_bytes;
    ucs_list_link_t list; /* wire->conns, then wire->zombies */
    aptus_sock_rma_t rma; /* one-sided operations carried over it */
    pid_t peer_pid;       /* proven by the kernel (0: not) */
    uint8_t prove;        /* APTUS_SOCK_PROVE_* */
    uint8_t answered;     /* the peer's PROVE_REQ was answered */
    uint8_t challenge[APTUS_FRAME_CHALLENGE_LEN];
    /* this end's local and remote address, read once connected: a
     * connection the peer resets (the one given up in a merge) has no
     * peer name any more when the proof's answer comes */
    uint8_t view[2 * APTUS_WIRE_ADDR_LEN];
    uint8_t view_known;
} aptus_sock_conn_t;

typedef struct aptus_sock_conn_wire {
    aptus_conn_wire_t super;
    aptus_conn_wire_config_t config;
    int listen_fd;
    int epfd;
    ucs_mpool_t rx_mp;
    size_t area_size; /* receive area: frame header + largest frame */
    ucs_list_link_t conns;
    ucs_list_link_t zombies; /* closed from a handler, freed after */
    int in_progress;
    int *watch_ready; /* watch_fd's flag; its epoll data is &watch_ready */
    ucs_time_t accept_resume; /* accepting paused until then (0: not) */
    int accept_warned;        /* the pause was said once */
    int prove_fd;        /* abstract AF_UNIX rendezvous socket (-1: none) */
    uint64_t prove_name; /* its name's number, sent in PROVE_REQ */
    int prove_pending[APTUS_SOCK_PROVE_PENDING]; /* accepted, not written */
    unsigned prove_num_pending;
} aptus_sock_conn_wire_t;

static inline aptus_sock_conn_wire_t *aptus_sock_cw(aptus_conn_wire_t *wire)
{
    return ucs_derived_of(wire, aptus_sock_conn_wire_t);
}

static inline aptus_sock_conn_t *aptus_sock_conn(aptus_conn_t *conn)
{
    return ucs_derived_of(conn, aptus_sock_conn_t);
}

void aptus_sock_conn_fail(aptus_sock_conn_t *conn, ucs_status_t status);
/* Watch these epoll events of the connection (unless failed or closed). */
void aptus_sock_conn_set_events(aptus_sock_conn_t *conn, uint32_t events);

/* Bytes queued, copied or by reference. */
static inline size_t aptus_sock_conn_pending(const aptus_sock_conn_t *conn)
{
    return conn->txq_len - conn->txq_off + conn->zseg_bytes;
}

/* Bytes of the owner's queued (the wire's own PROVE_REQ, queued while
 * connecting, takes no room of the owner's backlog). */
static inline size_t aptus_sock_conn_queued(const aptus_sock_conn_t *conn)
{
    size_t queued = aptus_sock_conn_pending(conn);

    if (conn->flags & APTUS_SOCK_CONN_PROVE_QUEUED) {
        queued -= APTUS_FRAME_HDR_LEN + APTUS_FRAME_PROVE_REQ_LEN;
    }
    return queued;
}

/* Send one frame of type gathered from iov; force: whatever the backlog
 * (what must follow what was sent, in full). */
ucs_status_t aptus_sock_conn_send_frame(aptus_sock_conn_t *conn, unsigned type,
                                        const struct iovec *iov,
                                        unsigned iovcnt, int force);
/* The same, where iov[zc_from..] stays valid until the operation it
 * carries completes: what the socket does not take at once is queued by
 * reference, not copied. token: the registered region they lie in when
 * they are a peer's read (checked again before they go), else 0. */
ucs_status_t aptus_sock_conn_send_frame_zc(aptus_sock_conn_t *conn,
                                           unsigned type,
                                           const struct iovec *iov,
                                           unsigned iovcnt, unsigned zc_from,
                                           uint64_t token, int force);
/* Drop what is queued by reference (the connection is gone). */
void aptus_sock_conn_zsegs_free(aptus_sock_conn_t *conn);

/* sock_conn_frame.c: framing */
/* A receive buffer's last reference went: back to the pool. */
void aptus_sock_conn_buf_put(aptus_conn_buf_t *buf);
ucs_status_t aptus_sock_conn_send(aptus_conn_t *conn, const struct iovec *iov,
                                  unsigned iovcnt);
size_t aptus_sock_conn_backlog(aptus_conn_t *tl_conn);
/* Send what the backlog holds; tell the owner when it is empty. */
void aptus_sock_conn_writable(aptus_sock_conn_t *conn);
/* Read and deliver what arrived; returns the reads that brought bytes. */
unsigned aptus_sock_conn_rx(aptus_sock_conn_t *conn);

/* sock_conn_vm.c: direct one-sided operations (process_vm_writev/readv) */
int aptus_sock_conn_key_reachable(aptus_conn_t *tl_conn,
                                  const aptus_mem_key_t *key);
ucs_status_t aptus_sock_conn_key_check(aptus_conn_t *tl_conn,
                                       const aptus_mem_key_t *key);
pid_t aptus_sock_conn_peer_pid(aptus_conn_t *tl_conn);
ucs_status_t aptus_sock_conn_write(aptus_conn_t *conn,
                                   const aptus_mem_key_t *key,
                                   uint64_t remote_addr,
                                   const struct iovec *iov, unsigned iovcnt);
ucs_status_t aptus_sock_conn_read(aptus_conn_t *conn,
                                  const aptus_mem_key_t *key,
                                  uint64_t remote_addr, const struct iovec *iov,
                                  unsigned iovcnt);
ucs_status_t aptus_sock_conn_write_imm(aptus_conn_t *tl_conn,
                                       const aptus_mem_key_t *key,
                                       uint64_t remote_addr,
                                       const struct iovec *iov, unsigned iovcnt,
                                       uint32_t imm);
ucs_status_t aptus_sock_conn_write_ordered(aptus_conn_wire_t *wire,
                                           const aptus_mem_key_t *key,
                                           const aptus_conn_piece_t *pieces,
                                           unsigned count);

/* sock_conn_prove.c: the proof of a connection's peer process */
void aptus_sock_prove_open(aptus_sock_conn_wire_t *cw);
void aptus_sock_prove_close(aptus_sock_conn_wire_t *cw);
/* Ask the peer of a new connection to prove itself (its first frame). */
void aptus_sock_prove_start(aptus_sock_conn_t *conn);
/* This end's local and remote address of conn (conn->view), read once it
 * is connected and kept: 0 while it is not. */
int aptus_sock_prove_own_view(aptus_sock_conn_t *conn);
/* Take the answers waiting on the rendezvous socket. */
void aptus_sock_prove_accept(aptus_sock_conn_wire_t *cw);
/* A PROVE_REQ or PROVE_ANS arrived; 0 when the connection was failed. */
int aptus_sock_prove_frame(aptus_sock_conn_t *conn, unsigned type,
                           const uint8_t *payload);
/* The peer's proven pid, 0 if none (yet). */
pid_t aptus_sock_prove_peer(aptus_sock_conn_t *conn);

/* sock_conn_rma.c */
void aptus_sock_rma_init(aptus_sock_conn_t *conn);
/* A one-sided frame arrived; 0 when the connection was failed for it. */
int aptus_sock_rma_frame(aptus_sock_conn_t *conn, unsigned type,
                         const uint8_t *payload, size_t length);
/* Send what the backlog has room for of the peer's reads. */
void aptus_sock_rma_serve(aptus_sock_conn_t *conn);
/* A one-sided frame is cut by the end of the bytes received (avail bytes
 * of it at frame's header, whose type and length are valid): place what
 * came and receive the rest straight into its memory. Returns the bytes
 * taken from the buffer (0: too few yet), or -1 when the connection was
 * failed for it. */
ssize_t aptus_sock_rma_sink_start(aptus_sock_conn_t *conn, unsigned type,
                                  size_t length, const uint8_t *frame,
                                  size_t avail);
/* Whether a peer's reads queued by reference may go: their regions may
 * have been deregistered since (the connection is cut: 0). */
int aptus_sock_rma_zsegs_valid(aptus_sock_conn_t *conn);
/* Whether the sink may receive its next bytes: a WRITE's region may have
 * been deregistered since its frame began (the connection is cut: 0). */
int aptus_sock_rma_sink_valid(aptus_sock_conn_t *conn);
/* length more bytes went to the sink's memory; 0 when the connection was
 * failed for the frame they complete. */
int aptus_sock_rma_sink_advance(aptus_sock_conn_t *conn, size_t length);
/* The connection is gone: reads complete with status, serving stops. */
void aptus_sock_rma_cleanup(aptus_sock_conn_t *conn, ucs_status_t status);
ucs_status_t
aptus_sock_conn_write_conn(aptus_conn_t *conn, const aptus_mem_key_t *key,
                           uint64_t remote_addr, const struct iovec *iov,
                           unsigned iovcnt, aptus_conn_rma_req_t *req);
ucs_status_t aptus_sock_conn_read_conn(aptus_conn_t *conn,
                                       const aptus_mem_key_t *key,
                                       uint64_t remote_addr,
                                       const struct iovec *iov, unsigned iovcnt,
                                       aptus_conn_rma_req_t *req);
unsigned aptus_sock_conn_reads_outstanding(aptus_conn_t *conn);

#endif
