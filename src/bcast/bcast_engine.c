/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: one communicator's multicast broadcast at one rank (see
 * bcast_engine.h).
 */
#include "bcast_engine.h"

#include "proto/le.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The set-up probe: not a protocol datagram (shorter than a header, and
 * its first bytes are not the protocol's magic). */
#define APTUS_BC_PROBE_MAGIC 0x42525041u /* "APRB" */
#define APTUS_BC_PROBE_LEN   24u

uint64_t aptus_bc_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

const char *aptus_bc_status_str(aptus_bc_status_t status)
{
    switch (status) {
    case APTUS_BC_OK:
        return "ok";
    case APTUS_BC_ERR_FAILED:
        return "peer failure";
    case APTUS_BC_ERR_ORDER:
        return "ranks disagree on the order or root of broadcasts";
    case APTUS_BC_ERR_TRUNCATE:
        return "message longer than the receive buffer";
    case APTUS_BC_ERR_NOMEM:
        return "out of memory";
    }
    return "?";
}

/* ---- what the protocol asks for ---------------------------------------- */

static void aptus_bc_tx(aptus_bc_engine_t *e, int dest, const aptus_mc_hdr_t *h,
                        const void *payload)
{
    uint8_t hdr[APTUS_MC_HDR_LEN];
    struct iovec iov[2];

    aptus_mc_hdr_build(hdr, h);
    iov[0].iov_base = hdr;
    iov[0].iov_len  = sizeof(hdr);
    iov[1].iov_base = (void *)payload;
    iov[1].iov_len  = h->payload_len;
    if (dest < 0) {
        (void)aptus_bc_net_mcast(&e->net, iov, (h->payload_len > 0) ? 2 : 1);
    } else {
        (void)aptus_bc_net_send(&e->net, (uint32_t)dest, iov,
                                (h->payload_len > 0) ? 2 : 1);
    }
}

static void aptus_bc_op_mcast(void *arg, const aptus_mc_hdr_t *hdr,
                              const void *payload)
{
    aptus_bc_tx(arg, -1, hdr, payload);
}

static void aptus_bc_op_send(void *arg, uint32_t dest,
                             const aptus_mc_hdr_t *hdr, const void *payload)
{
    aptus_bc_engine_t *e = arg;

    /* a repair or poll wants an answer: the peer is silent from now on
     * until one comes (see aptus_bc_check_peers) */
    if (((hdr->type == APTUS_MC_TYPE_REPAIR) ||
         (hdr->type == APTUS_MC_TYPE_POLL)) &&
        (e->waiting_since[dest] == 0)) {
        e->waiting_since[dest] = aptus_bc_now_us();
        e->n_waiting++;
    }
    aptus_bc_tx(e, (int)dest, hdr, payload);
}

static void aptus_bc_op_deliver(void *arg, uint32_t seq, uint32_t root,
                                const void *data, uint32_t len)
{
    aptus_bc_engine_t *e = arg;
    aptus_bc_msg_t *m;

    if (e->wait.active && !e->wait.done && (e->wait.seq == seq)) {
        /* the application waits for it: straight to its buffer */
        e->wait.root = root;
        e->wait.len  = len;
        if (len <= e->wait.cap) {
            memcpy(e->wait.buf, data, len);
        }
        e->wait.done = 1;
        return;
    }
    m = malloc(sizeof(*m) + len);
    if (m == NULL) {
        e->failed = 1;
        snprintf(e->why, sizeof(e->why),
                 "out of memory keeping a broadcast of %u bytes", len);
        return;
    }
    m->next = NULL;
    m->seq  = seq;
    m->root = root;
    m->len  = len;
    memcpy(m->data, data, len);
    if (e->q_tail == NULL) {
        e->q_head = m;
    } else {
        e->q_tail->next = m;
    }
    e->q_tail = m;
    e->q_bytes += len;
    e->stats.queued++;
    if (e->q_bytes > e->stats.queued_bytes_max) {
        e->stats.queued_bytes_max = e->q_bytes;
    }
}

/* ---- set-up and teardown ----------------------------------------------- */

aptus_bc_status_t aptus_bc_engine_init(aptus_bc_engine_t *e,
                                       const aptus_mc_config_t *cfg,
                                       uint32_t comm_size, uint32_t rank,
                                       uint64_t key, aptus_bc_net_t *net,
                                       const aptus_bc_addr_t *peers,
                                       uint64_t peer_timeout_us)
{
    aptus_mc_ops_t ops = { aptus_bc_op_mcast, aptus_bc_op_send,
                           aptus_bc_op_deliver };

    memset(e, 0, sizeof(*e));
    e->net              = *net;
    e->peer_timeout_us  = peer_timeout_us;
    e->limits.key       = key;
    e->limits.comm_size = comm_size;
    e->rxlen            = APTUS_MC_HDR_LEN + cfg->frag_size;
    e->rxbuf            = malloc(e->rxlen);
    e->waiting_since    = calloc(comm_size, sizeof(uint64_t));
    e->probe_heard      = calloc(comm_size, 1);
    if ((e->rxbuf == NULL) || (e->waiting_since == NULL) ||
        (e->probe_heard == NULL) ||
        (aptus_bc_net_connect(&e->net, peers, comm_size) != 0)) {
        goto err;
    }
    if (aptus_mc_window_init(&e->w, cfg, comm_size, rank, key, &ops, e) !=
        APTUS_MC_OK) {
        goto err;
    }
    pthread_mutex_init(&e->lock, NULL);
    return APTUS_BC_OK;

err:
    free(e->rxbuf);
    free(e->waiting_since);
    free(e->probe_heard);
    aptus_bc_net_close(&e->net);
    return APTUS_BC_ERR_NOMEM;
}

void aptus_bc_engine_cleanup(aptus_bc_engine_t *e)
{
    aptus_bc_msg_t *m;

    while ((m = e->q_head) != NULL) {
        e->q_head = m->next;
        free(m);
    }
    aptus_mc_window_cleanup(&e->w);
    aptus_bc_net_close(&e->net);
    pthread_mutex_destroy(&e->lock);
    free(e->rxbuf);
    free(e->waiting_since);
    free(e->probe_heard);
}

/* ---- receive ----------------------------------------------------------- */

static void aptus_bc_probe_in(aptus_bc_engine_t *e, const uint8_t *buf,
                              long len)
{
    uint32_t r;

    if (aptus_get64(buf + 4) != e->limits.key) {
        e->stats.foreign++;
        return;
    }
    r = aptus_get32(buf + 12);
    if ((r >= e->limits.comm_size) || (r == e->w.rank)) {
        return;
    }
    e->stats.probes++;
    if (!e->probe_heard[r]) {
        e->probe_heard[r] = 1;
        e->probe_count++;
    }
}

static void aptus_bc_dgram_in(aptus_bc_engine_t *e, long len, uint64_t now_us)
{
    aptus_mc_hdr_t h;
    aptus_mc_parse_status_t st;

    e->stats.rx_dgrams++;
    if ((len == APTUS_BC_PROBE_LEN) &&
        (aptus_get32(e->rxbuf) == APTUS_BC_PROBE_MAGIC)) {
        aptus_bc_probe_in(e, e->rxbuf, len); /* shorter than a header */
        return;
    }
    st = aptus_mc_hdr_parse(e->rxbuf, (size_t)len, &e->limits, &h);
    if (st == APTUS_MC_PARSE_FOREIGN) {
        e->stats.foreign++;
        return;
    }
    if (st != APTUS_MC_PARSE_OK) {
        e->stats.bad++;
        return;
    }
    if (h.sender == e->w.rank) {
        e->stats.own++; /* the multicast loops back to its sender */
        return;
    }
    if (e->waiting_since[h.sender] != 0) {
        e->waiting_since[h.sender] = 0; /* it is alive */
        e->n_waiting--;
    }
    (void)aptus_mc_window_recv(&e->w, &h, now_us);
}

/* One datagram, if one waits: 1, else 0. */
static unsigned aptus_bc_recv_one(aptus_bc_engine_t *e, uint64_t now_us)
{
    int truncated = 0;
    long len      = aptus_bc_net_recv(&e->net, e->rxbuf, e->rxlen, &truncated);

    if (len == 0) {
        return 0;
    }
    if (len > 0) {
        aptus_bc_dgram_in(e, len, now_us);
    } else {
        e->stats.bad++; /* larger than any datagram of the protocol */
    }
    return 1;
}

static unsigned aptus_bc_drain(aptus_bc_engine_t *e, uint64_t now_us)
{
    unsigned n = 0;

    while ((n < APTUS_BC_DRAIN_MAX) && aptus_bc_recv_one(e, now_us)) {
        ++n;
    }
    return n;
}

/* A rank that answered no repair or poll for peer_timeout_us is gone. */
static void aptus_bc_check_peers(aptus_bc_engine_t *e, uint64_t now_us)
{
    uint32_t r;

    if (e->failed || (e->peer_timeout_us == 0) || (e->n_waiting == 0)) {
        return; /* nothing to look for: no pass over every rank */
    }
    for (r = 0; r < e->limits.comm_size; ++r) {
        if ((e->waiting_since[r] != 0) && (now_us > e->waiting_since[r]) &&
            (now_us - e->waiting_since[r] > e->peer_timeout_us)) {
            e->failed = 1;
            snprintf(e->why, sizeof(e->why),
                     "rank %u answered no repair or poll for %.1f s "
                     "(APTUS_BCAST_PEER_TIMEOUT)",
                     r, (double)(now_us - e->waiting_since[r]) / 1e6);
            return;
        }
    }
}

unsigned aptus_bc_engine_progress(aptus_bc_engine_t *e, uint64_t now_us)
{
    unsigned n = aptus_bc_drain(e, now_us);

    aptus_mc_window_progress(&e->w, now_us);
    aptus_bc_check_peers(e, now_us);
    return n;
}

int aptus_bc_engine_busy(const aptus_bc_engine_t *e)
{
    const aptus_mc_window_t *w = &e->w;
    uint32_t i;

    if (w->ack_due != 0) {
        return 1;
    }
    if (aptus_mc_window_root_pending(w)) {
        return 1; /* a repair or a poll of mine may be due */
    }
    if (aptus_mc_window_is_coroot(w)) {
        if (w->group_ack != w->group_reported) {
            return 1;
        }
        for (i = 0; i < w->nmembers; ++i) {
            if (aptus_mc_seq_lt(w->members[i].ack, w->have)) {
                return 1;
            }
        }
    }
    return 0;
}

/* ---- the application's calls ------------------------------------------- */

/* One turn of a wait: progress, then let another thread have the core
 * (ranks often outnumber cores). A wait that lasts (a root far ahead of a
 * computing rank, a rank waiting for a late root) sleeps in poll() on the
 * sockets instead, until a datagram or the next timer; not sooner, since
 * a sleeping receiver woken by the multicast preempts the root that sent
 * it on a crowded host. */
#define APTUS_BC_SPIN_US           1000
#define APTUS_BC_SPINS_PER_IDLE_CB 16

static void aptus_bc_spin(aptus_bc_engine_t *e, unsigned *idle,
                          uint64_t start_us)
{
    struct pollfd fds[2];
    struct timespec ts;
    uint64_t now = aptus_bc_now_us();

    if (aptus_bc_engine_progress(e, now) > 0) {
        *idle = 0;
        return;
    }
    e->stats.spins++;
    pthread_mutex_unlock(&e->lock);
    if ((e->idle_cb != NULL) && ((*idle % APTUS_BC_SPINS_PER_IDLE_CB) == 0)) {
        e->idle_cb(e->idle_arg);
    }
    ++(*idle);
    if (now - start_us < APTUS_BC_SPIN_US) {
        sched_yield();
    } else {
        fds[0].fd     = e->net.mfd;
        fds[0].events = POLLIN;
        fds[1].fd     = e->net.ufd;
        fds[1].events = POLLIN;
        ts.tv_sec     = 0;
        ts.tv_nsec    = (long)e->w.cfg.ack_delay_us * 1000;
        (void)ppoll(fds, 2, &ts, NULL);
    }
    pthread_mutex_lock(&e->lock);
}

aptus_bc_status_t aptus_bc_engine_bcast(aptus_bc_engine_t *e, const void *buf,
                                        uint32_t len)
{
    aptus_bc_status_t status = APTUS_BC_OK;
    aptus_mc_status_t st;
    unsigned idle  = 0;
    uint64_t start = aptus_bc_now_us();
    uint32_t seq;

    pthread_mutex_lock(&e->lock);
    e->in_call = 1;
    if ((e->q_head != NULL) || (e->w.have != e->next)) {
        /* another root's message already took this turn */
        status = APTUS_BC_ERR_ORDER;
        goto out;
    }
    for (;;) {
        if (e->failed) {
            status = APTUS_BC_ERR_FAILED;
            goto out;
        }
        st = aptus_mc_window_bcast(&e->w, buf, len, aptus_bc_now_us(), &seq);
        if (st == APTUS_MC_OK) {
            break;
        }
        if (st != APTUS_MC_ERR_FULL) {
            status = (st == APTUS_MC_ERR_NOMEM) ? APTUS_BC_ERR_NOMEM
                                                : APTUS_BC_ERR_ORDER;
            goto out;
        }
        aptus_bc_spin(e, &idle, start); /* no credit: a slow rank holds it */
    }
    e->next++;
out:
    e->in_call = 0;
    e->left_us = aptus_bc_now_us();
    pthread_mutex_unlock(&e->lock);
    return status;
}

aptus_bc_status_t aptus_bc_engine_recv(aptus_bc_engine_t *e, uint32_t root,
                                       void *buf, uint32_t cap, uint32_t *len_p)
{
    aptus_bc_status_t status = APTUS_BC_OK;
    unsigned idle            = 0;
    uint64_t start           = aptus_bc_now_us();
    aptus_bc_msg_t *m;

    pthread_mutex_lock(&e->lock);
    e->in_call = 1;
    m          = e->q_head;
    if (m != NULL) {
        e->q_head = m->next;
        if (e->q_head == NULL) {
            e->q_tail = NULL;
        }
        e->q_bytes -= m->len;
        e->wait.seq  = m->seq;
        e->wait.root = m->root;
        e->wait.len  = m->len;
        if (m->len <= cap) {
            memcpy(buf, m->data, m->len);
        }
        free(m);
    } else {
        e->wait.active = 1;
        e->wait.done   = 0;
        e->wait.seq    = e->next;
        e->wait.buf    = buf;
        e->wait.cap    = cap;
        while (!e->wait.done && !e->failed) {
            aptus_bc_spin(e, &idle, start);
        }
        e->wait.active = 0;
        if (!e->wait.done) {
            status = APTUS_BC_ERR_FAILED;
            goto out;
        }
    }
    if ((e->wait.seq != e->next) || (e->wait.root != root)) {
        status = APTUS_BC_ERR_ORDER;
    } else if (e->wait.len > cap) {
        status = APTUS_BC_ERR_TRUNCATE;
    }
    *len_p = e->wait.len;
    e->next++;
out:
    e->in_call = 0;
    e->left_us = aptus_bc_now_us();
    pthread_mutex_unlock(&e->lock);
    return status;
}

/* ---- set-up probes ----------------------------------------------------- */

void aptus_bc_engine_probe_send(aptus_bc_engine_t *e, uint32_t round)
{
    uint8_t buf[APTUS_BC_PROBE_LEN] = { 0 };
    struct iovec iov                = { buf, sizeof(buf) };

    aptus_put32(buf, APTUS_BC_PROBE_MAGIC);
    aptus_put64(buf + 4, e->limits.key);
    aptus_put32(buf + 12, e->w.rank);
    aptus_put32(buf + 16, round);
    (void)aptus_bc_net_mcast(&e->net, &iov, 1);
}

uint32_t aptus_bc_engine_probe_wait(aptus_bc_engine_t *e, uint64_t timeout_us)
{
    uint64_t end  = aptus_bc_now_us() + timeout_us;
    uint32_t want = e->limits.comm_size - 1;

    pthread_mutex_lock(&e->lock);
    /* at least one look, even if this rank was off the CPU past the end */
    (void)aptus_bc_drain(e, aptus_bc_now_us());
    while ((e->probe_count < want) && (aptus_bc_now_us() < end)) {
        if (aptus_bc_drain(e, aptus_bc_now_us()) == 0) {
            pthread_mutex_unlock(&e->lock);
            sched_yield();
            pthread_mutex_lock(&e->lock);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return e->probe_count;
}
