/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the wire interface, connection part.
 *
 * Verbs-shaped: reliable ordered connections that carry framed messages,
 * received into buffers of one pool shared by every connection of the wire
 * (a shared receive queue), and one-sided write, read and write-with-
 * immediate into memory a peer registered, named by a key that carries the
 * region's bounds. The sock wire implements it with TCP and
 * process_vm_writev/readv (same host only); the verbs wire with RC queue
 * pairs and an SRQ.
 *
 * The process a direct one-sided operation touches is the peer of the
 * connection it goes over, as the kernel proved it, never the pid a key
 * names: a key or fast-path grant is the peer's word, and an edited one
 * would name another process of the same user. The sock wire proves a
 * same-host peer's pid when the connection comes up: each side asks the
 * other (PROVE_REQ, first frame) to connect to its abstract AF_UNIX
 * socket -- reachable only from its own network namespace -- and to send
 * there the challenge it got over TCP and its view of the TCP connection's
 * two addresses; the asker reads SO_PEERCRED (the pid in its own PID
 * namespace) and ties it to the TCP connection whose challenge and
 * addresses match, so that a peer can neither name a process that did not
 * connect nor relay another UCX process's answer for a connection of its
 * own. Without a proven pid, the direct operations are refused as
 * unreachable and go over the connection (write_conn, read_conn); a key
 * whose pid differs from the proven one is refused and counted
 * (pid_refused).
 */
#ifndef APTUS_WIRE_CONN_H_
#define APTUS_WIRE_CONN_H_

#include "wire/wire.h"

#include <ucs/type/status.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_conn_wire aptus_conn_wire_t;

/* One reliable connection. */
typedef struct aptus_conn {
    aptus_conn_wire_t *wire;
    void *user; /* the owner's, set after connect/accept */
} aptus_conn_t;

/* A buffer of the shared receive pool. Messages arrive in it; one that
 * starts at the beginning of the receive area may be kept in place by
 * taking a reference (aptus_conn_buf_hold), released later. The owner's
 * headroom (config.rx_headroom bytes) lies just before the area. */
typedef struct aptus_conn_buf {
    aptus_conn_wire_t *wire;
    uint32_t refs;
    uint32_t reserved;
} aptus_conn_buf_t;

/* Memory a peer registered: where, how much, and whose. */
typedef struct aptus_mem_key {
    uint64_t address;
    uint64_t length;
    uint64_t host_id;
    uint64_t token; /* the registration's secret (over the connection) */
    uint32_t pid;
} aptus_mem_key_t;

/* A read carried over the connection: done runs once, in the order reads
 * were issued on the connection, with UCS_OK, UCS_ERR_INVALID_ADDR (the
 * target refused the range), or the connection's error (UCS_ERR_CANCELED
 * when it was closed here). */
typedef struct aptus_conn_rma_req {
    void (*done)(struct aptus_conn_rma_req *req, ucs_status_t status);
} aptus_conn_rma_req_t;

/* Whose memory a process can reach by pid (process_vm_readv/writev):
 * those of its host and its PID namespace -- across namespaces a pid names
 * another process, or none, as UCX's cma checks. It stands where a host id
 * is carried (remote keys, fast-path grants, the wire's own): two
 * processes compare equal only when both hold. */
uint64_t aptus_conn_reach_id(void);

/* This process's pid without a system call each time (a remote key names
 * it on every rendezvous); a forked child gets its own. */
pid_t aptus_conn_pid(void);

/* A piece of an ordered write: length local bytes to remote_addr. */
typedef struct aptus_conn_piece {
    const void *local;
    uint64_t remote_addr;
    size_t length;
} aptus_conn_piece_t;

#define APTUS_CONN_MAX_PIECES 4
/* Reads one connection may have outstanding; a target serves no more
 * (and cuts a connection that asks for more). */
#define APTUS_CONN_MAX_READS 64
/* Gather entries of one read or write over the connection. */
#define APTUS_CONN_RMA_MAX_IOV 8

typedef struct aptus_conn_handlers {
    /* A peer connected to this wire's listening address. */
    void (*accepted)(void *arg, aptus_conn_t *conn);
    /* A message arrived; data lies in buf, and at_start says whether it
     * begins buf's receive area (then it may be held). Valid until the
     * call returns unless held. */
    void (*recv)(void *arg, aptus_conn_t *conn, void *data, size_t length,
                 aptus_conn_buf_t *buf, int at_start);
    /* The immediate of a write-with-immediate: the data is in place. */
    void (*imm)(void *arg, aptus_conn_t *conn, uint32_t imm);
    /* Queued bytes went out (or the connection completed): more may be
     * sent. */
    void (*writable)(void *arg, aptus_conn_t *conn);
    /* The connection broke: UCS_ERR_NOT_CONNECTED when the peer closed it
     * in order, another error for a reset, a failed connect or a malformed
     * stream. Nothing more arrives on it; the owner closes it. */
    void (*failed)(void *arg, aptus_conn_t *conn, ucs_status_t status);
} aptus_conn_handlers_t;

typedef struct aptus_conn_wire_config {
    size_t max_frame;        /* largest message payload, bytes */
    size_t rx_headroom;      /* owner's bytes before each receive area */
    unsigned rx_buffers;     /* receive pool size expected (shared by all
                                connections), allocated as needed */
    unsigned rx_max_buffers; /* the pool grows on demand up to this (0:
                                rx_buffers); then reads wait, counted in
                                rx_pool_empty */
    size_t rx_alignment;     /* a receive area's byte at rx_align_offset is */
    size_t rx_align_offset;  /* aligned to rx_alignment (a power of 2) */
    size_t max_backlog;      /* queued bytes per connection before sends are
                                refused (messages beyond credits never queue) */
    const aptus_conn_handlers_t *handlers;
    void *arg;
    /* Whether [address, +length) lies in memory registered here under
     * token: a peer's one-sided operation over the connection is served
     * only then. NULL: none is served. */
    int (*mem_check)(void *arg, uint64_t token, uint64_t address,
                     uint64_t length);
    void *mem_arg;
    int numa_node; /* the receive pool's node (-1: wherever it falls) */
} aptus_conn_wire_config_t;

typedef struct aptus_conn_wire_stats {
    uint64_t connects;
    uint64_t accepts;
    uint64_t tx_frames;
    uint64_t tx_bytes;
    uint64_t tx_queued;       /* frames (or their tails) queued in a backlog */
    uint64_t tx_copied_bytes; /* bytes copied into a backlog */
    uint64_t rx_frames;
    uint64_t rx_bytes;
    uint64_t rx_syscalls;
    uint64_t rx_pool_empty;  /* reads deferred: the pool is at its ceiling */
    uint64_t rx_pool_in_use; /* receive buffers in use (held ones too) */
    uint64_t rx_pool_peak;   /* the most ever in use at once */
    uint64_t rx_malformed;   /* connections cut for a bad frame */
    uint64_t failures;       /* broken: reset, refused, malformed */
    uint64_t peer_closes;    /* closed by the peer in order */
    uint64_t writes;
    uint64_t write_bytes;
    uint64_t reads;
    uint64_t read_bytes;
    uint64_t imms;
    uint64_t refused;       /* one-sided operations refused */
    uint64_t accept_paused; /* out of descriptors: accepting paused */
    uint64_t conn_writes;   /* writes carried over connections */
    uint64_t conn_write_bytes;
    uint64_t conn_reads; /* reads carried over connections */
    uint64_t conn_read_bytes;
    uint64_t conn_served; /* peers' reads served here */
    uint64_t conn_served_bytes;
    uint64_t rx_placed_bytes; /* one-sided bytes received straight into
                                 their memory, no buffer between */
    uint64_t conn_refused;    /* peers' operations outside any region */
    uint64_t pid_proven;   /* connections whose peer's pid the kernel proved */
    uint64_t pid_unproven; /* answered, not proven: another host, another
                              PID namespace, or a wrong answer */
    uint64_t pid_refused;  /* keys or grants naming a process other than the
                              connection's proven peer */
} aptus_conn_wire_stats_t;

typedef struct aptus_conn_wire_ops {
    /* Start connecting to a listening address; messages may be sent at
     * once (they wait until the connection is up). */
    ucs_status_t (*connect)(aptus_conn_wire_t *wire,
                            const aptus_wire_addr_t *dst, void *user,
                            aptus_conn_t **conn_p);

    /* Send one message, gathered from iov. UCS_OK: it is the wire's (sent
     * or queued, in order); UCS_ERR_NO_RESOURCE: the backlog is full,
     * nothing was taken; another error: the connection is broken. */
    ucs_status_t (*send)(aptus_conn_t *conn, const struct iovec *iov,
                         unsigned iovcnt);

    /* Bytes queued on the connection, not yet handed to the network. */
    size_t (*backlog)(aptus_conn_t *conn);

    /* One-sided write, read into local iovecs, write-with-immediate (the
     * immediate is delivered on conn after the data is in place), into the
     * memory of conn's peer. A range outside the key's region, or a key
     * naming another process than the peer the wire proved (pid_refused),
     * is refused (UCS_ERR_INVALID_ADDR); a peer whose memory the wire
     * cannot reach (another host, or no proof) too (UCS_ERR_UNREACHABLE);
     * nothing is moved then. */
    ucs_status_t (*write)(aptus_conn_t *conn, const aptus_mem_key_t *key,
                          uint64_t remote_addr, const struct iovec *iov,
                          unsigned iovcnt);
    ucs_status_t (*read)(aptus_conn_t *conn, const aptus_mem_key_t *key,
                         uint64_t remote_addr, const struct iovec *iov,
                         unsigned iovcnt);
    ucs_status_t (*write_imm)(aptus_conn_t *conn, const aptus_mem_key_t *key,
                              uint64_t remote_addr, const struct iovec *iov,
                              unsigned iovcnt, uint32_t imm);

    /* One-sided write of pieces that the target's CPUs see in the order
     * given: every byte of a piece before any byte of a later one (within
     * a piece, in no particular order). For publishing a message behind a
     * flag the target polls. Checked against key's bounds; key must have
     * passed key_check on the connection to its owner (a fast-path block
     * is written long after its grant, whatever connection is up then). */
    ucs_status_t (*write_ordered)(aptus_conn_wire_t *wire,
                                  const aptus_mem_key_t *key,
                                  const aptus_conn_piece_t *pieces,
                                  unsigned count);

    /* Memory of this process that peers write or read one-sided through
     * the wire's connections, where the wire needs it registered (verbs:
     * in the HCA's protection domain; *key carries the rkey as its token);
     * NULL where a key needs no registration of the wire's (sock). *memh_p
     * goes back to mem_dereg, after which the key reaches nothing. */
    ucs_status_t (*mem_reg)(aptus_conn_wire_t *wire, void *address,
                            size_t length, aptus_mem_key_t *key, void **memh_p);
    void (*mem_dereg)(aptus_conn_wire_t *wire, void *memh);

    /* Whether write and read over conn reach memory behind key directly:
     * the wire proved conn's peer and the key says it is of this host. */
    int (*key_reachable)(aptus_conn_t *conn, const aptus_mem_key_t *key);

    /* Whether key names memory of conn's proven peer: UCS_OK, and then
     * write_ordered may use it; UCS_ERR_NO_RESOURCE while the proof is on
     * its way (ask again); UCS_ERR_UNREACHABLE as for write; or
     * UCS_ERR_INVALID_ADDR for a key naming another process (counted in
     * pid_refused). */
    ucs_status_t (*key_check)(aptus_conn_t *conn, const aptus_mem_key_t *key);

    /* The pid of conn's peer as the kernel proved it, in this process's
     * PID namespace; 0 while not proven (not yet, or never). */
    pid_t (*peer_pid)(aptus_conn_t *conn);

    /* The same carried over the connection, for memory the wire cannot
     * reach directly (a peer on another host): the target serves them
     * from its progress into or out of memory registered under the key's
     * token (config.mem_check). A write's bytes are the connection's when
     * the call returns, in order with the messages around it (with req,
     * they may be sent from iov itself until req is done: iov stays valid
     * until then, as UCT asks of a zcopy buffer; without, they are copied
     * if they must wait); it completes
     * through req->done (optional) once the target has them in place; a
     * read through req->done when its bytes are in. Both count in
     * reads_outstanding until then. UCS_ERR_NO_RESOURCE: the backlog is
     * full, or APTUS_CONN_MAX_READS are outstanding; nothing was taken. */
    ucs_status_t (*write_conn)(aptus_conn_t *conn, const aptus_mem_key_t *key,
                               uint64_t remote_addr, const struct iovec *iov,
                               unsigned iovcnt, aptus_conn_rma_req_t *req);
    ucs_status_t (*read_conn)(aptus_conn_t *conn, const aptus_mem_key_t *key,
                              uint64_t remote_addr, const struct iovec *iov,
                              unsigned iovcnt, aptus_conn_rma_req_t *req);

    /* One-sided operations issued on conn not yet complete: reads, and
     * writes the wire hands to the network before they land (verbs: until
     * the HCA's acknowledgement). A flush waits for them; the writable
     * handler runs when the last completes. */
    unsigned (*reads_outstanding)(aptus_conn_t *conn);

    /* Accept, receive, send queued bytes; calls the handlers. */
    unsigned (*progress)(aptus_conn_wire_t *wire);

    /* Share this wire's readiness check with another wire's descriptor
     * (the datagram socket): from now on, each progress call that finds
     * input or an error on fd sets *ready_p to 1 (the caller clears it),
     * so one system call tells whether either has something to read.
     * NULL where the wire has no such check to share. */
    ucs_status_t (*watch_fd)(aptus_conn_wire_t *wire, int fd, int *ready_p);

    /* Resources of one connection: bytes of state, kernel buffer space
     * (send + receive) its socket or queue pair may hold, and file
     * descriptors. */
    void (*conn_resources)(aptus_conn_t *conn, size_t *state_bytes_p,
                           size_t *kernel_bytes_p, unsigned *fds_p);

    /* Take back a receive buffer whose last reference was released
     * (aptus_conn_buf_release calls it when refs reaches 0). */
    void (*buf_put)(aptus_conn_buf_t *buf);

    /* Close a connection (also from a handler). Unsent bytes are lost. A
     * handler that closed it may still read conn->user: it is NULL. */
    void (*conn_close)(aptus_conn_t *conn);

    void (*close)(aptus_conn_wire_t *wire);
} aptus_conn_wire_ops_t;

struct aptus_conn_wire {
    const aptus_conn_wire_ops_t *ops;
    aptus_wire_addr_t addr; /* the listening address */
    uint64_t host_id;       /* one-sided operations reach this host */
    size_t rx_buf_size;     /* bytes of one pool buffer, headers included */
    unsigned num_conns;
    aptus_conn_wire_stats_t stats;
};

/* Start of a pool buffer's receive area, and the buffer from it. */
static inline void *aptus_conn_buf_area(aptus_conn_buf_t *buf,
                                        size_t rx_headroom)
{
    return (uint8_t *)(buf + 1) + rx_headroom;
}

static inline void aptus_conn_buf_hold(aptus_conn_buf_t *buf)
{
    buf->refs++;
}

/* Drop a reference to a pool buffer (the receiver's, taken by
 * aptus_conn_buf_hold, or the wire's own): the last one gives it back to
 * the wire it came from. */
static inline void aptus_conn_buf_release(aptus_conn_buf_t *buf)
{
    if (--buf->refs == 0) {
        buf->wire->ops->buf_put(buf);
    }
}

#ifdef __cplusplus
}
#endif

#endif
