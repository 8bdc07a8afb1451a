/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: one communicator's reliable multicast broadcast at one rank:
 * the protocol window (src/proto/mcast_window.h) over the sock wire's
 * multicast (bcast_net.h), with the state the MPI binding needs between
 * calls: messages delivered before their MPI_Bcast was called, and the
 * failure of a silent peer.
 *
 * Free of MPI. Two threads use an engine: the application's, inside
 * MPI_Bcast (it drives the protocol itself while it waits, so that a
 * broadcast costs no thread hand-off), and the progress thread
 * (bcast_progress.c), which serves repairs and ACKs while the application
 * is elsewhere. The engine's lock serialises them.
 */
#ifndef APTUS_BCAST_ENGINE_H_
#define APTUS_BCAST_ENGINE_H_

#include "bcast_net.h"
#include "proto/mcast_window.h"

#include <pthread.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    APTUS_BC_OK = 0,
    APTUS_BC_ERR_FAILED,   /* a peer went silent (see engine->why) */
    APTUS_BC_ERR_ORDER,    /* the ranks disagree on the broadcasts' order
                              or roots */
    APTUS_BC_ERR_TRUNCATE, /* the message is longer than the buffer */
    APTUS_BC_ERR_NOMEM
} aptus_bc_status_t;

/* A message delivered before the application asked for it. */
typedef struct aptus_bc_msg {
    struct aptus_bc_msg *next;
    uint32_t seq;
    uint32_t root;
    uint32_t len;
    uint8_t data[];
} aptus_bc_msg_t;

typedef struct aptus_bc_engine_stats {
    uint64_t rx_dgrams;
    uint64_t foreign; /* another job's or communicator's datagrams */
    uint64_t own;     /* my own multicast, looped back */
    uint64_t bad;     /* failed the parser (not foreign) */
    uint64_t probes;  /* set-up probes heard */
    uint64_t queued;  /* messages delivered before their MPI_Bcast */
    uint64_t queued_bytes_max;
    uint64_t spins; /* wait iterations without news */
} aptus_bc_engine_stats_t;

typedef struct aptus_bc_engine {
    pthread_mutex_t lock;
    aptus_mc_window_t w;
    aptus_bc_net_t net;      /* knows every rank's address */
    uint64_t *waiting_since; /* usec: a repair or poll to the rank went
                                unanswered since then (0: none) */
    uint32_t n_waiting;      /* ranks with waiting_since set */
    uint8_t *probe_heard;    /* set-up: a probe of the rank arrived */
    uint32_t probe_count;
    aptus_mc_limits_t limits;
    uint8_t *rxbuf;
    size_t rxlen;
    uint64_t peer_timeout_us;

    aptus_bc_msg_t *q_head; /* delivered, waiting for their MPI_Bcast */
    aptus_bc_msg_t *q_tail;
    uint64_t q_bytes;

    struct {
        int active;
        int done;
        uint32_t seq;
        uint32_t root;
        uint32_t len;
        uint32_t cap;
        void *buf;
    } wait; /* the receive the application waits in */

    /* Called (without the lock) now and then while the application's
     * thread waits: the MPI binding drives the MPI library's own progress
     * there, as any blocking MPI call does, so that its transport keeps
     * acknowledging while a broadcast waits. NULL: nothing. */
    void (*idle_cb)(void *arg);
    void *idle_arg;

    uint32_t next;             /* sequence of the next broadcast call */
    volatile int in_call;      /* the application drives progress now */
    volatile uint64_t left_us; /* when the application's last call ended */
    int failed;
    char why[192];

    aptus_bc_engine_stats_t stats;
    struct aptus_bc_engine *next_engine; /* the progress thread's list */
} aptus_bc_engine_t;

/* Takes over net (closed by cleanup, also on failure) and hands it peers
 * (comm_size addresses). */
aptus_bc_status_t aptus_bc_engine_init(aptus_bc_engine_t *e,
                                       const aptus_mc_config_t *cfg,
                                       uint32_t comm_size, uint32_t rank,
                                       uint64_t key, aptus_bc_net_t *net,
                                       const aptus_bc_addr_t *peers,
                                       uint64_t peer_timeout_us);

void aptus_bc_engine_cleanup(aptus_bc_engine_t *e);

/* Root: multicast len bytes as the next broadcast; returns once the data
 * is copied into the window. */
aptus_bc_status_t aptus_bc_engine_bcast(aptus_bc_engine_t *e, const void *buf,
                                        uint32_t len);

/* Receiver: the next broadcast, from root, into buf (cap bytes); waits
 * for it. *len_p gets its length. */
aptus_bc_status_t aptus_bc_engine_recv(aptus_bc_engine_t *e, uint32_t root,
                                       void *buf, uint32_t cap,
                                       uint32_t *len_p);

/* Set-up: multicast a probe of this rank (round: the caller's attempt). */
void aptus_bc_engine_probe_send(aptus_bc_engine_t *e, uint32_t round);

/* Set-up: receive probes until every other rank's was heard or timeout_us
 * passed. Returns how many ranks were heard (not counting this one). */
uint32_t aptus_bc_engine_probe_wait(aptus_bc_engine_t *e, uint64_t timeout_us);

/* Datagrams one progress call takes at most. */
#define APTUS_BC_DRAIN_MAX 64u

/* Drain the wire and run the protocol's timers; the caller holds the
 * lock. Returns how many datagrams arrived (APTUS_BC_DRAIN_MAX: more may
 * wait, unannounced by the wire's fds). */
unsigned aptus_bc_engine_progress(aptus_bc_engine_t *e, uint64_t now_us);

/* Whether a timer may be due soon (an ACK, a repair, a report). */
int aptus_bc_engine_busy(const aptus_bc_engine_t *e);

uint64_t aptus_bc_now_us(void);

const char *aptus_bc_status_str(aptus_bc_status_t status);

#ifdef __cplusplus
}
#endif

#endif
