/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: reliable multicast broadcast, the protocol (see
 * mcast_window.h).
 */
#include "mcast_window.h"
#include "rtt.h"

#include <stdlib.h>
#include <string.h>

#define APTUS_MC_MAX_BACKOFF 16

void aptus_mc_config_default(aptus_mc_config_t *cfg)
{
    cfg->window       = APTUS_MC_DEFAULT_WINDOW;
    cfg->group_size   = 0;
    cfg->ack_every    = APTUS_MC_DEFAULT_ACK_EVERY;
    cfg->frag_size    = 1024;
    cfg->max_msg      = 8192;
    cfg->ack_delay_us = 200;
    cfg->rto_min_us   = 200;
    cfg->rto_max_us   = 100000;
    cfg->rto_init_us  = 1000;
}

const char *aptus_mc_config_check(const aptus_mc_config_t *cfg,
                                  uint32_t comm_size)
{
    if ((comm_size == 0) || (comm_size > INT32_MAX)) {
        return "communicator size must be between 1 and 2^31 - 1";
    }
    if ((cfg->window < 2) || (cfg->window > APTUS_MC_WINDOW_MAX)) {
        return "WINDOW must be between 2 and 4096";
    }
    if ((cfg->ack_every == 0) || (cfg->ack_every > cfg->window / 2)) {
        /* otherwise the window fills before the skewed ACKs come round,
         * and every root waits for ack_delay */
        return "ACK_EVERY must be between 1 and WINDOW/2";
    }
    if (cfg->group_size > comm_size) {
        return "GROUP_SIZE must not exceed the communicator size (0: auto)";
    }
    if ((cfg->frag_size == 0) || (cfg->frag_size > UINT16_MAX)) {
        return "FRAG_SIZE must be between 1 and 65535";
    }
    if ((uint64_t)cfg->max_msg >
        (uint64_t)cfg->frag_size * APTUS_MC_MAX_FRAGS) {
        return "MAX_MSG must fit in 64 fragments of FRAG_SIZE";
    }
    if (cfg->ack_delay_us == 0) {
        return "ACK_DELAY must be positive";
    }
    return aptus_rtt_bounds_check(cfg->rto_min_us, cfg->rto_max_us,
                                  cfg->rto_init_us);
}

uint32_t aptus_mc_group_size(const aptus_mc_config_t *cfg, uint32_t comm_size)
{
    uint64_t prod;
    uint32_t g;

    if (cfg->group_size != 0) {
        return cfg->group_size;
    }
    /* the integer nearest to sqrt(N * M) (no libm for one square root) */
    prod = (uint64_t)comm_size * cfg->ack_every;
    for (g = 1; (uint64_t)(g + 1) * (g + 1) <= prod; ++g) {
    }
    if ((uint64_t)g * g + g < prod) {
        g++; /* prod is past (g + 1/2)^2 */
    }
    if (g < 2) {
        g = 2;
    }
    return (g > comm_size) ? comm_size : g;
}

const char *aptus_mc_status_str(aptus_mc_status_t status)
{
    static const char *names[] = { "ok",          "bad configuration",
                                   "no memory",   "too big",
                                   "window full", "out of order" };

    return ((unsigned)status < APTUS_MC_ERR_LAST) ? names[status] : "?";
}

const char *aptus_mc_recv_status_str(aptus_mc_recv_status_t status)
{
    static const char *names[] = { "ok",        "early",
                                   "duplicate", "out of window",
                                   "control",   "malformed" };

    return ((unsigned)status < APTUS_MC_RECV_LAST) ? names[status] : "?";
}

/* ---- helpers ------------------------------------------------------------ */

/* x lies in [from, to] (from not after to). Every point a peer reports is
 * checked this way against what this rank can know: a serial comparison
 * alone takes a value 2^31 away for either side. */
static inline int aptus_mc_seq_in(uint32_t x, uint32_t from, uint32_t to)
{
    return x - from <= to - from;
}

static inline aptus_mc_slot_t *aptus_mc_slot(const aptus_mc_window_t *w,
                                             uint32_t seq)
{
    return &w->slots[seq % w->cfg.window];
}

static inline uint8_t *aptus_mc_data(const aptus_mc_window_t *w, uint32_t seq)
{
    return w->data + (size_t)(seq % w->cfg.window) * w->cfg.max_msg;
}

/* The slot of seq, if it holds that whole message. */
static aptus_mc_slot_t *aptus_mc_held(const aptus_mc_window_t *w, uint32_t seq)
{
    aptus_mc_slot_t *slot = aptus_mc_slot(w, seq);

    if ((seq - w->lo >= w->cfg.window) ||
        (slot->state != APTUS_MC_SLOT_COMPLETE) || (slot->seq != seq)) {
        return NULL;
    }
    return slot;
}

static uint16_t aptus_mc_nfrag(const aptus_mc_window_t *w, uint32_t len)
{
    return (len == 0)
               ? 1
               : (uint16_t)((len + w->cfg.frag_size - 1) / w->cfg.frag_size);
}

static uint64_t aptus_mc_all_frags(uint16_t nfrag)
{
    return (nfrag >= 64) ? UINT64_MAX : ((1ull << nfrag) - 1);
}

uint32_t aptus_mc_window_rto(const aptus_mc_window_t *w)
{
    uint64_t rto =
        (uint64_t)aptus_rtt_rto(w->srtt_us, w->rttvar_us, w->cfg.rto_init_us,
                                w->cfg.rto_min_us, w->cfg.rto_max_us)
        << w->rto_backoff;

    return (rto > w->cfg.rto_max_us) ? w->cfg.rto_max_us : (uint32_t)rto;
}

/* The wait before the next try after 'backoff' unanswered ones. */
static uint64_t aptus_mc_backed_off(const aptus_mc_window_t *w, uint8_t backoff)
{
    uint64_t rto = (uint64_t)aptus_mc_window_rto(w) << backoff;

    return (rto > w->cfg.rto_max_us) ? w->cfg.rto_max_us : rto;
}

/* RFC 6298 smoothing, one estimator per rank: the peers of a communicator
 * sit on one fabric, and a co-root takes few samples of its own. */
static void aptus_mc_rtt_sample(aptus_mc_window_t *w, uint64_t rtt)
{
    w->stats.rtt_samples++;
    w->rto_backoff = 0;
    aptus_rtt_sample(&w->srtt_us, &w->rttvar_us, rtt);
}

/* Bit i: message have + i is held here (bit 0 never: it is missing). */
static uint32_t aptus_mc_sack(const aptus_mc_window_t *w)
{
    uint32_t map = 0, i;

    for (i = 1; (i < APTUS_MC_SACK_BITS) && (i < w->cfg.window); ++i) {
        if (aptus_mc_held(w, w->have + i) != NULL) {
            map |= 1u << i;
        }
    }
    return map;
}

static void aptus_mc_hdr_init(const aptus_mc_window_t *w, aptus_mc_hdr_t *h,
                              uint8_t type, uint32_t seq, uint32_t root)
{
    memset(h, 0, sizeof(*h));
    h->type   = type;
    h->flags  = APTUS_MC_F_ACK;
    h->key    = w->key;
    h->seq    = seq;
    h->ack    = w->have;
    h->root   = root;
    h->sender = w->rank;
    h->stable = w->stable;
}

/* Send every fragment of held message seq: multicast (DATA) when dest is
 * the comm size, else a REPAIR to dest. */
static void aptus_mc_send_msg(aptus_mc_window_t *w, aptus_mc_slot_t *slot,
                              uint32_t dest)
{
    const uint8_t *data = aptus_mc_data(w, slot->seq);
    int mcast           = (dest == w->comm_size);
    aptus_mc_hdr_t h;
    uint32_t left;
    uint16_t f;

    aptus_mc_hdr_init(w, &h, mcast ? APTUS_MC_TYPE_DATA : APTUS_MC_TYPE_REPAIR,
                      slot->seq, slot->root);
    if (!mcast) {
        h.flags |= APTUS_MC_F_ACK_REQ;
    }
    h.msg_len = slot->len;
    h.nfrag   = slot->nfrag;
    for (f = 0; f < slot->nfrag; ++f) {
        h.frag   = f;
        h.offset = (uint32_t)f * w->cfg.frag_size;
        left     = slot->len - h.offset;
        h.payload_len =
            (uint16_t)((left < w->cfg.frag_size) ? left : w->cfg.frag_size);
        h.payload = data + h.offset;
        if (mcast) {
            w->ops.mcast(w->arg, &h, h.payload);
        } else {
            w->ops.send(w->arg, dest, &h, h.payload);
        }
    }
}

static void aptus_mc_repair(aptus_mc_window_t *w, aptus_mc_slot_t *slot,
                            uint32_t dest)
{
    slot->repaired = 1;
    w->stats.repairs_sent++;
    aptus_mc_send_msg(w, slot, dest);
}

/* A leaf's acknowledgement reached its co-root (explicitly or carried). */
static void aptus_mc_ack_carried(aptus_mc_window_t *w)
{
    w->acked   = w->have;
    w->ack_due = 0;
}

static void aptus_mc_send_ack(aptus_mc_window_t *w, uint8_t type, uint32_t dest,
                              uint16_t flags, uint32_t seq, uint64_t now_us)
{
    aptus_mc_hdr_t h;

    aptus_mc_hdr_init(w, &h, type, seq, 0);
    h.flags |= flags;
    h.sack = aptus_mc_sack(w);
    if (type == APTUS_MC_TYPE_REPORT) {
        h.group_ack       = w->group_ack;
        w->group_reported = w->group_ack;
        w->report_time    = now_us;
        w->stats.reports_sent++;
    } else if (type == APTUS_MC_TYPE_NACK) {
        w->stats.nacks_sent++;
    } else {
        w->stats.acks_sent++;
    }
    if (dest == w->coroot) {
        aptus_mc_ack_carried(w);
    }
    w->ops.send(w->arg, dest, &h, NULL);
}

/* A child's cumulative acknowledgement (and selective map, when it comes
 * with one); returns 1 if it moved. */
static int aptus_mc_child_ack(const aptus_mc_window_t *w, aptus_mc_child_t *c,
                              uint32_t ack, int has_sack, uint32_t sack)
{
    uint32_t shift;
    int moved = 0;

    /* it only moves forward, and no rank can be further ahead of this one
     * than a window */
    if (!aptus_mc_seq_in(ack, c->ack, w->have + w->cfg.window)) {
        return 0;
    }
    if (ack != c->ack) {
        shift   = ack - c->ack;
        c->sack = (shift < APTUS_MC_SACK_BITS) ? (c->sack >> shift) : 0;
        c->sack &= ~1u;
        c->ack     = ack;
        c->backoff = 0;
        moved      = 1;
    }
    if (has_sack && (ack == c->ack)) {
        c->sack |= sack & ~1u;
    }
    return moved;
}

static aptus_mc_child_t *aptus_mc_member(aptus_mc_window_t *w, uint32_t r)
{
    if (!aptus_mc_window_is_coroot(w) || (r <= w->rank) ||
        (r - w->rank > w->nmembers)) {
        return NULL;
    }
    return &w->members[r - w->rank - 1];
}

static aptus_mc_child_t *aptus_mc_coroot_entry(aptus_mc_window_t *w, uint32_t r)
{
    if ((r % w->group_size != 0) || (r == w->rank) || (r >= w->comm_size)) {
        return NULL;
    }
    return &w->coroots[r / w->group_size];
}

/* Move the stable point with what this rank knows as a root, and free the
 * slots nobody needs: below what I hold, what my group holds (co-root:
 * I repair its leaves) and what every co-root holds (root: I repair the
 * co-roots my own messages; they repair their leaves). The last is known
 * at once, from the co-roots' prompt reports; waiting for the stable
 * point instead would tie my slots to reports about other roots'
 * messages, which go to those roots. */
static void aptus_mc_release(aptus_mc_window_t *w)
{
    uint32_t cand = w->have, need = w->have, g, lo, s;
    const aptus_mc_child_t *c;

    for (g = 0; g < w->ngroups; ++g) {
        c = &w->coroots[g];
        if (c->rank == w->rank) {
            if (aptus_mc_seq_lt(w->group_ack, cand)) {
                cand = w->group_ack;
            }
            continue;
        }
        if (aptus_mc_seq_lt(c->group_ack, cand)) {
            cand = c->group_ack;
        }
        if (aptus_mc_seq_lt(c->ack, need)) {
            need = c->ack;
        }
    }
    if (aptus_mc_seq_lt(w->stable, cand)) {
        w->stable = cand;
    }
    if (aptus_mc_seq_lt(need, w->stable)) {
        need = w->stable; /* whoever told me stable knew more than I */
    }

    lo = w->have;
    if (aptus_mc_window_is_coroot(w) && aptus_mc_seq_lt(w->group_ack, lo)) {
        lo = w->group_ack;
    }
    if (w->has_own && aptus_mc_seq_le(need, w->own_last) &&
        aptus_mc_seq_lt(need, lo)) {
        lo = need;
    }
    if (aptus_mc_seq_lt(w->lo, lo)) {
        /* lo - w->lo slots to free; more than W is every slot once */
        for (s = 0; (s < lo - w->lo) && (s < w->cfg.window); ++s) {
            aptus_mc_slot(w, w->lo + s)->state = APTUS_MC_SLOT_EMPTY;
        }
        w->lo = lo;
    }
}

/* Co-root: recompute the group's point; report it to the root of its
 * latest message when the group has caught up with me (unless that root is
 * skip_dest, which the caller reports to anyway). */
static void aptus_mc_group_update(aptus_mc_window_t *w, uint32_t skip_dest,
                                  uint64_t now_us)
{
    uint32_t ga = w->have, i;
    aptus_mc_slot_t *slot;

    if (!aptus_mc_window_is_coroot(w)) {
        return;
    }
    for (i = 0; i < w->nmembers; ++i) {
        if (aptus_mc_seq_lt(w->members[i].ack, ga)) {
            ga = w->members[i].ack;
        }
    }
    if (!aptus_mc_seq_lt(w->group_ack, ga)) {
        return;
    }
    slot = aptus_mc_held(w, ga - 1); /* below have, not yet released */
    if (slot != NULL) {
        w->group_root = slot->root;
    }
    w->group_ack = ga;
    if ((ga == w->have) && (w->group_root != w->rank) &&
        (w->group_root != skip_dest)) {
        aptus_mc_send_ack(w, APTUS_MC_TYPE_REPORT, w->group_root, 0, ga - 1,
                          now_us);
    }
}

static void aptus_mc_settle(aptus_mc_window_t *w, uint64_t now_us)
{
    aptus_mc_group_update(w, w->comm_size, now_us);
    aptus_mc_release(w);
}

/* ---- init --------------------------------------------------------------- */

aptus_mc_status_t aptus_mc_window_init(aptus_mc_window_t *w,
                                       const aptus_mc_config_t *cfg,
                                       uint32_t comm_size, uint32_t rank,
                                       uint64_t key, const aptus_mc_ops_t *ops,
                                       void *arg)
{
    uint32_t g, i;

    memset(w, 0, sizeof(*w));
    if ((aptus_mc_config_check(cfg, comm_size) != NULL) ||
        (rank >= comm_size)) {
        return APTUS_MC_ERR_CONFIG;
    }
    w->cfg        = *cfg;
    w->ops        = *ops;
    w->arg        = arg;
    w->key        = key;
    w->comm_size  = comm_size;
    w->rank       = rank;
    w->group_size = aptus_mc_group_size(cfg, comm_size);
    w->ngroups    = (comm_size + w->group_size - 1) / w->group_size;
    w->coroot     = (rank / w->group_size) * w->group_size;
    if (w->coroot == rank) {
        w->nmembers = ((comm_size - rank < w->group_size) ? comm_size - rank
                                                          : w->group_size) -
                      1;
    }
    w->group_root = rank;
    w->nack_first = UINT32_MAX; /* the first hole is new */

    w->slots = calloc(cfg->window, sizeof(*w->slots));
    w->data  = malloc((size_t)cfg->window * (cfg->max_msg ? cfg->max_msg : 1));
    w->members = calloc(w->nmembers + 1, sizeof(*w->members));
    w->coroots = calloc(w->ngroups, sizeof(*w->coroots));
    if ((w->slots == NULL) || (w->data == NULL) || (w->members == NULL) ||
        (w->coroots == NULL)) {
        aptus_mc_window_cleanup(w);
        return APTUS_MC_ERR_NOMEM;
    }
    for (i = 0; i < w->nmembers; ++i) {
        w->members[i].rank = rank + 1 + i;
    }
    for (g = 0; g < w->ngroups; ++g) {
        w->coroots[g].rank = g * w->group_size;
    }
    return APTUS_MC_OK;
}

void aptus_mc_window_cleanup(aptus_mc_window_t *w)
{
    free(w->slots);
    free(w->data);
    free(w->members);
    free(w->coroots);
    w->slots   = NULL;
    w->data    = NULL;
    w->members = NULL;
    w->coroots = NULL;
}

/* ---- root --------------------------------------------------------------- */

int aptus_mc_window_can_bcast(const aptus_mc_window_t *w)
{
    return (w->have - w->stable < w->cfg.window) &&
           (w->have - w->lo < w->cfg.window);
}

/* The window is full: ask the co-roots that hold it back where their
 * groups are (rate-limited to one poll per backed-off timeout each). */
static void aptus_mc_poll_laggards(aptus_mc_window_t *w, uint64_t now_us)
{
    uint32_t need = w->have - w->cfg.window + 1, g;
    aptus_mc_child_t *c;
    aptus_mc_hdr_t h;

    for (g = 0; g < w->ngroups; ++g) {
        c = &w->coroots[g];
        if ((c->rank == w->rank) || !aptus_mc_seq_lt(c->group_ack, need) ||
            ((c->poll_time != 0) &&
             (now_us <
              c->poll_time + aptus_mc_backed_off(w, c->poll_backoff)))) {
            continue;
        }
        aptus_mc_hdr_init(w, &h, APTUS_MC_TYPE_POLL, need - 1, w->rank);
        c->poll_time = now_us;
        if (c->poll_backoff < APTUS_MC_MAX_BACKOFF) {
            c->poll_backoff++;
        }
        w->stats.polls_sent++;
        w->ops.send(w->arg, c->rank, &h, NULL);
    }
}

aptus_mc_status_t aptus_mc_window_bcast(aptus_mc_window_t *w, const void *buf,
                                        uint32_t len, uint64_t now_us,
                                        uint32_t *seq_p)
{
    uint32_t seq = w->have;
    aptus_mc_slot_t *slot;

    if (len > w->cfg.max_msg) {
        return APTUS_MC_ERR_TOO_BIG;
    }
    if (!aptus_mc_window_can_bcast(w)) {
        w->stats.window_full++;
        aptus_mc_poll_laggards(w, now_us);
        return APTUS_MC_ERR_FULL;
    }
    slot = aptus_mc_slot(w, seq);
    if (slot->state != APTUS_MC_SLOT_EMPTY) {
        /* another root's message has this number: the ranks disagree on
         * the order of their broadcasts */
        return APTUS_MC_ERR_ORDER;
    }
    if (len > 0) {
        memcpy(aptus_mc_data(w, seq), buf, len);
    }
    slot->seq      = seq;
    slot->root     = w->rank;
    slot->len      = len;
    slot->nfrag    = aptus_mc_nfrag(w, len);
    slot->frags    = aptus_mc_all_frags(slot->nfrag);
    slot->state    = APTUS_MC_SLOT_COMPLETE;
    slot->time_us  = now_us;
    slot->repaired = 0;
    w->have        = seq + 1;
    w->own_last    = seq;
    w->has_own     = 1;
    w->stats.bcasts++;

    /* The multicast carries my point to my co-root, but a pending lazy ACK
     * stays due: if the multicast is lost there, the co-root would take me
     * for a rank that lacks what I acknowledged and repair it to me. */
    aptus_mc_send_msg(w, slot, w->comm_size);
    aptus_mc_settle(w, now_us);
    if (seq_p != NULL) {
        *seq_p = seq;
    }
    return APTUS_MC_OK;
}

/* ---- receive ------------------------------------------------------------ */

/* Whether the cumulative point crossed a message this leaf acknowledges:
 * (seq mod M) == (rank mod M), the paper's skewed ACK. */
static int aptus_mc_skew_hit(const aptus_mc_window_t *w, uint32_t from,
                             uint32_t to)
{
    uint32_t m = w->cfg.ack_every;
    uint32_t first;

    if (m == 1) {
        return from != to;
    }
    first = from + ((w->rank % m) + m - (from % m)) % m;
    return aptus_mc_seq_lt(first, to);
}

/* Deliver what is now in order; a leaf then acknowledges at once when the
 * skew says so, else by ack_delay at the latest. */
static void aptus_mc_advance(aptus_mc_window_t *w, uint64_t now_us)
{
    uint32_t from = w->have;
    aptus_mc_slot_t *slot;

    while ((slot = aptus_mc_held(w, w->have)) != NULL) {
        w->have++;
        if (slot->root != w->rank) {
            w->stats.delivered++;
            w->ops.deliver(w->arg, slot->seq, slot->root,
                           aptus_mc_data(w, slot->seq), slot->len);
        }
    }
    if ((from == w->have) || aptus_mc_window_is_coroot(w)) {
        return;
    }
    if (aptus_mc_skew_hit(w, from, w->have)) {
        aptus_mc_send_ack(w, APTUS_MC_TYPE_ACK, w->coroot, 0, w->have - 1,
                          now_us);
    } else if (w->ack_due == 0) {
        w->ack_due = now_us + w->cfg.ack_delay_us;
    }
}

/* Answer a repair that asked for an acknowledgement. */
static void aptus_mc_reply(aptus_mc_window_t *w, uint32_t dest, uint32_t seq,
                           uint64_t now_us)
{
    aptus_mc_send_ack(w,
                      aptus_mc_window_is_coroot(w) ? APTUS_MC_TYPE_REPORT
                                                   : APTUS_MC_TYPE_ACK,
                      dest, APTUS_MC_F_REPLY, seq, now_us);
}

/* Repair at once what a child says it misses below a message it holds
 * (its NACK, or a co-root's REPORT with holes). A message completed here
 * less than half a round trip ago (at most half the smallest timeout) may
 * still be on its way to the child;
 * one repaired within a timeout is on its way (the child's next messages
 * still show the hole until it lands): only new holes go at once. */
static void aptus_mc_fast_repair(aptus_mc_window_t *w, aptus_mc_child_t *c,
                                 int own_only, uint64_t now_us)
{
    int recent =
        (c->rtx_time != 0) && (now_us < c->rtx_time + aptus_mc_window_rto(w));
    /* the reordering a NACK may be early by: half a round trip, but no
     * more than half the smallest timeout, so that a round trip inflated
     * by a busy host (milliseconds) does not make every hole wait for a
     * timeout instead */
    uint32_t settle = (w->srtt_us < w->cfg.rto_min_us) ? w->srtt_us / 2
                                                       : w->cfg.rto_min_us / 2;
    uint32_t i, top = 0, n = 0, upto = c->rtx_upto;
    aptus_mc_slot_t *slot;

    if (c->sack == 0) {
        return;
    }
    for (i = 1; i < APTUS_MC_SACK_BITS; ++i) {
        if (c->sack & (1u << i)) {
            top = i;
        }
    }
    for (i = 0; i < top; ++i) {
        if (c->sack & (1u << i)) {
            continue;
        }
        slot = aptus_mc_held(w, c->ack + i);
        if ((slot == NULL) || (own_only && (slot->root != w->rank)) ||
            (now_us < slot->time_us + settle) ||
            (recent && aptus_mc_seq_lt(c->ack + i, c->rtx_upto))) {
            continue;
        }
        aptus_mc_repair(w, slot, c->rank);
        if (aptus_mc_seq_le(upto, c->ack + i)) {
            upto = c->ack + i + 1;
        }
        n++;
    }
    if (n > 0) {
        c->rtx_time = now_us;
        c->rtx_upto = upto;
        if (c->backoff < APTUS_MC_MAX_BACKOFF) {
            c->backoff++;
        }
    }
}

static aptus_mc_recv_status_t aptus_mc_recv_data(aptus_mc_window_t *w,
                                                 const aptus_mc_hdr_t *h,
                                                 uint64_t now_us)
{
    uint32_t seq = h->seq, left;
    aptus_mc_child_t *c;
    aptus_mc_slot_t *slot;
    uint64_t bit;

    /* the fragment must sit where this configuration puts it */
    left = (h->msg_len > h->offset) ? h->msg_len - h->offset : 0;
    if ((h->msg_len > w->cfg.max_msg) ||
        (h->nfrag != aptus_mc_nfrag(w, h->msg_len)) ||
        (h->offset != (uint32_t)h->frag * w->cfg.frag_size) ||
        (h->payload_len !=
         ((left < w->cfg.frag_size) ? left : w->cfg.frag_size))) {
        w->stats.malformed++;
        return APTUS_MC_RECV_MALFORMED;
    }

    /* the root of a message holds every message up to it (MPI order) */
    c = aptus_mc_member(w, h->root);
    if (c == NULL) {
        c = aptus_mc_coroot_entry(w, h->root);
    }
    if (c != NULL) {
        aptus_mc_child_ack(w, c, seq + 1, 0, 0);
    }

    if (aptus_mc_seq_lt(seq, w->have) || (h->root == w->rank)) {
        w->stats.duplicates++;
        if ((h->flags & APTUS_MC_F_ACK_REQ) && (h->frag == h->nfrag - 1)) {
            /* one answer a repaired message (its last datagram) */
            aptus_mc_reply(w, h->sender, seq, now_us);
        }
        return APTUS_MC_RECV_DUPLICATE;
    }
    if (seq - w->lo >= w->cfg.window) {
        w->stats.out_of_window++;
        return APTUS_MC_RECV_OUT_OF_WINDOW;
    }

    slot = aptus_mc_slot(w, seq);
    if (slot->state == APTUS_MC_SLOT_EMPTY) {
        slot->seq      = seq;
        slot->root     = h->root;
        slot->len      = h->msg_len;
        slot->nfrag    = h->nfrag;
        slot->frags    = 0;
        slot->state    = APTUS_MC_SLOT_PARTIAL;
        slot->repaired = 0;
    } else if ((slot->seq != seq) || (slot->root != h->root) ||
               (slot->len != h->msg_len)) {
        w->stats.malformed++;
        return APTUS_MC_RECV_MALFORMED;
    }
    bit = 1ull << h->frag;
    if ((slot->state == APTUS_MC_SLOT_COMPLETE) || (slot->frags & bit)) {
        w->stats.duplicates++;
        if ((h->flags & APTUS_MC_F_ACK_REQ) && (h->frag == h->nfrag - 1)) {
            /* one answer a repaired message (its last datagram) */
            aptus_mc_reply(w, h->sender, seq, now_us);
        }
        return APTUS_MC_RECV_DUPLICATE;
    }
    if (h->payload_len > 0) {
        memcpy(aptus_mc_data(w, seq) + h->offset, h->payload, h->payload_len);
    }
    slot->frags |= bit;
    if (slot->frags != aptus_mc_all_frags(slot->nfrag)) {
        return APTUS_MC_RECV_OK;
    }
    slot->state   = APTUS_MC_SLOT_COMPLETE;
    slot->time_us = now_us;

    if (seq != w->have) {
        w->stats.early++;
    }
    aptus_mc_advance(w, now_us);

    if (aptus_mc_window_is_coroot(w)) {
        /* the co-root scheme: the root hears from every co-root at once;
         * a hole shows in the selective map and is repaired as a NACK */
        aptus_mc_group_update(w, h->root, now_us);
        if (h->root != w->rank) {
            aptus_mc_send_ack(w, APTUS_MC_TYPE_REPORT, h->root,
                              (h->flags & APTUS_MC_F_ACK_REQ) ? APTUS_MC_F_REPLY
                                                              : 0,
                              seq, now_us);
        }
    } else if (h->flags & APTUS_MC_F_ACK_REQ) {
        aptus_mc_reply(w, h->sender, seq, now_us);
    } else if (aptus_mc_seq_lt(w->have, seq)) {
        if ((w->nack_first != w->have) ||
            (now_us >= w->nack_time + aptus_mc_window_rto(w))) {
            /* a hole under a message that arrived: ask now, not at the
             * co-root's timeout */
            w->nack_first = w->have;
            w->nack_time  = now_us;
            aptus_mc_send_ack(w, APTUS_MC_TYPE_NACK, w->coroot, 0, w->have,
                              now_us);
        } else if (w->ack_due == 0) {
            /* the co-root must learn that this one is here before its
             * timeout, or it would repair it too */
            w->ack_due = now_us + w->cfg.ack_delay_us;
        }
    }
    return aptus_mc_seq_lt(seq, w->have) ? APTUS_MC_RECV_OK
                                         : APTUS_MC_RECV_EARLY;
}

/* An acknowledgement from src: a leaf of my group, or a co-root. */
static aptus_mc_child_t *aptus_mc_ack_from(aptus_mc_window_t *w, uint32_t src,
                                           uint32_t ack, int has_sack,
                                           uint32_t sack, int *moved_p)
{
    aptus_mc_child_t *c = aptus_mc_member(w, src);

    if (c == NULL) {
        c = aptus_mc_coroot_entry(w, src);
    }
    if (c != NULL) {
        *moved_p = aptus_mc_child_ack(w, c, ack, has_sack, sack);
    }
    return c;
}

static void aptus_mc_recv_report(aptus_mc_window_t *w, aptus_mc_child_t *c,
                                 const aptus_mc_hdr_t *h, uint32_t old_ack,
                                 uint64_t now_us)
{
    aptus_mc_slot_t *slot;

    if ((c == NULL) || (c->rank % w->group_size != 0)) {
        return; /* not from a co-root */
    }
    if ((h->group_ack != c->group_ack) &&
        aptus_mc_seq_in(h->group_ack, c->group_ack, c->ack)) {
        c->group_ack    = h->group_ack;
        c->poll_backoff = 0;
    }
    /* the prompt report of a message I sent once: a round trip */
    if (aptus_mc_seq_le(old_ack, h->seq) && aptus_mc_seq_lt(h->seq, c->ack)) {
        slot = aptus_mc_held(w, h->seq);
        if ((slot != NULL) && (slot->root == w->rank) && !slot->repaired) {
            aptus_mc_rtt_sample(w, now_us - slot->time_us);
        }
    }
    aptus_mc_fast_repair(w, c, 1, now_us);
}

aptus_mc_recv_status_t aptus_mc_window_recv(aptus_mc_window_t *w,
                                            const aptus_mc_hdr_t *h,
                                            uint64_t now_us)
{
    aptus_mc_recv_status_t status = APTUS_MC_RECV_CONTROL;
    aptus_mc_child_t *c           = NULL;
    uint32_t old_ack              = 0;
    uint8_t old_backoff           = 0;
    int moved                     = 0;
    int is_ctl_ack;

    if ((h->key != w->key) || (h->sender >= w->comm_size) ||
        (h->root >= w->comm_size)) {
        w->stats.malformed++;
        return APTUS_MC_RECV_MALFORMED;
    }
    if (h->sender == w->rank) {
        w->stats.duplicates++; /* my own multicast, looped back */
        return APTUS_MC_RECV_DUPLICATE;
    }

    /* what every datagram carries: the sender's point and the stable one
     * (which can never pass mine: I am one of the ranks it counts) */
    if (aptus_mc_seq_in(h->stable, w->stable, w->have)) {
        w->stable = h->stable;
    }
    is_ctl_ack = (h->type == APTUS_MC_TYPE_ACK) ||
                 (h->type == APTUS_MC_TYPE_NACK) ||
                 (h->type == APTUS_MC_TYPE_REPORT);
    if (h->flags & APTUS_MC_F_ACK) {
        c = aptus_mc_member(w, h->sender);
        if (c == NULL) {
            c = aptus_mc_coroot_entry(w, h->sender);
        }
        if (c != NULL) {
            old_ack     = c->ack;
            old_backoff = c->backoff;
        }
        c = aptus_mc_ack_from(w, h->sender, h->ack, is_ctl_ack, h->sack,
                              &moved);
    }

    switch (h->type) {
    case APTUS_MC_TYPE_DATA:
    case APTUS_MC_TYPE_REPAIR:
        status = aptus_mc_recv_data(w, h, now_us);
        break;
    case APTUS_MC_TYPE_ACK:
    case APTUS_MC_TYPE_NACK:
        if ((c == NULL) || (c->rank % w->group_size == 0)) {
            break; /* only my leaves ACK to me */
        }
        /* the answer to a first repair of the hole: a round trip (Karn:
         * not after a second one, which it may answer instead) */
        if ((h->flags & APTUS_MC_F_REPLY) && (old_backoff == 1) &&
            (h->seq == old_ack) && moved) {
            aptus_mc_rtt_sample(w, now_us - c->rtx_time);
        }
        if (h->type == APTUS_MC_TYPE_NACK) {
            aptus_mc_fast_repair(w, c, 0, now_us);
        }
        break;
    case APTUS_MC_TYPE_REPORT:
        aptus_mc_recv_report(w, c, h, old_ack, now_us);
        break;
    case APTUS_MC_TYPE_POLL:
        if (aptus_mc_window_is_coroot(w)) {
            aptus_mc_send_ack(w, APTUS_MC_TYPE_REPORT, h->sender,
                              APTUS_MC_F_REPLY, h->seq, now_us);
        }
        break;
    default:
        w->stats.malformed++;
        return APTUS_MC_RECV_MALFORMED;
    }
    aptus_mc_settle(w, now_us);
    return status;
}

/* ---- timers ------------------------------------------------------------- */

/* Resend to child c, after a timeout, each message it lacks: those I hold
 * as a co-root (leaves, whose ACKs may wait ack_delay) or my own (as a
 * root, to a co-root, which acknowledges at once). */
static void aptus_mc_timeout_repair(aptus_mc_window_t *w, aptus_mc_child_t *c,
                                    int leaf, uint64_t now_us)
{
    uint64_t timeout =
        aptus_mc_window_rto(w) + (leaf ? w->cfg.ack_delay_us : 0);
    uint32_t s, end, n = 0;
    aptus_mc_slot_t *slot;

    if ((c->backoff > 0) &&
        (now_us < c->rtx_time + aptus_mc_backed_off(w, c->backoff))) {
        return;
    }
    end = leaf ? w->have : w->own_last + 1;
    if (!leaf && !w->has_own) {
        return;
    }
    /* below lo I hold nothing, below stable everyone holds everything */
    s = aptus_mc_seq_lt(c->ack, w->lo) ? w->lo : c->ack;
    if (aptus_mc_seq_lt(s, w->stable)) {
        s = w->stable;
    }
    for (; aptus_mc_seq_lt(s, end); ++s) {
        if ((s - c->ack < APTUS_MC_SACK_BITS) &&
            (c->sack & (1u << (s - c->ack)))) {
            continue; /* it holds this one */
        }
        slot = aptus_mc_held(w, s);
        if ((slot == NULL) || (!leaf && (slot->root != w->rank)) ||
            (now_us < slot->time_us + timeout)) {
            continue;
        }
        aptus_mc_repair(w, slot, c->rank);
        n++;
    }
    if (n > 0) {
        c->rtx_time = now_us;
        c->rtx_upto = end;
        if (c->backoff < APTUS_MC_MAX_BACKOFF) {
            c->backoff++;
        }
        if (w->rto_backoff < APTUS_MC_MAX_BACKOFF) {
            w->rto_backoff++; /* the timeout may be short: Karn */
        }
    }
}

/* The first of my messages from the group's point (or lo) on that I still
 * hold, or NULL: what a poll would ask about. */
static aptus_mc_slot_t *aptus_mc_own_held(const aptus_mc_window_t *w,
                                          const aptus_mc_child_t *c,
                                          uint32_t *seq_p)
{
    aptus_mc_slot_t *slot;
    uint32_t s;

    for (s = aptus_mc_seq_lt(c->group_ack, w->lo) ? w->lo : c->group_ack;
         aptus_mc_seq_le(s, w->own_last); ++s) {
        slot = aptus_mc_held(w, s);
        if ((slot != NULL) && (slot->root == w->rank)) {
            *seq_p = s;
            return slot;
        }
    }
    return NULL;
}

int aptus_mc_window_root_pending(const aptus_mc_window_t *w)
{
    const aptus_mc_child_t *c;
    uint32_t g, s;

    if (!w->has_own || !aptus_mc_seq_le(w->stable, w->own_last)) {
        return 0;
    }
    for (g = 0; g < w->ngroups; ++g) {
        c = &w->coroots[g];
        if (c->rank == w->rank) {
            continue;
        }
        if (aptus_mc_seq_le(c->ack, w->own_last)) {
            return 1; /* a co-root may need a repair */
        }
        if (aptus_mc_seq_le(c->group_ack, w->own_last) &&
            (aptus_mc_own_held(w, c, &s) != NULL)) {
            return 1; /* a poll may be due */
        }
    }
    return 0;
}

/* Root: a co-root has my message but its group has not reported it after
 * the time a lazy ACK and a repair take: ask. */
static void aptus_mc_timeout_poll(aptus_mc_window_t *w, aptus_mc_child_t *c,
                                  uint64_t now_us)
{
    uint64_t due;
    uint32_t s            = 0;
    aptus_mc_slot_t *slot = aptus_mc_own_held(w, c, &s);
    aptus_mc_hdr_t h;

    if ((slot == NULL) || aptus_mc_seq_le(c->ack, s)) {
        return; /* nothing of mine outstanding, or a repair is the answer */
    }
    due = slot->time_us + 2 * (uint64_t)aptus_mc_window_rto(w) +
          w->cfg.ack_delay_us;
    if (c->poll_time != 0) {
        uint64_t again = c->poll_time + aptus_mc_backed_off(w, c->poll_backoff);
        if (again > due) {
            due = again;
        }
    }
    if (now_us < due) {
        return;
    }
    aptus_mc_hdr_init(w, &h, APTUS_MC_TYPE_POLL, s, w->rank);
    c->poll_time = now_us;
    if (c->poll_backoff < APTUS_MC_MAX_BACKOFF) {
        c->poll_backoff++;
    }
    w->stats.polls_sent++;
    w->ops.send(w->arg, c->rank, &h, NULL);
}

void aptus_mc_window_progress(aptus_mc_window_t *w, uint64_t now_us)
{
    uint32_t i, g;
    aptus_mc_child_t *c;

    if (!aptus_mc_window_is_coroot(w)) {
        if ((w->ack_due != 0) && (now_us >= w->ack_due)) {
            aptus_mc_send_ack(w, APTUS_MC_TYPE_ACK, w->coroot, 0, w->have - 1,
                              now_us);
        }
    } else {
        for (i = 0; i < w->nmembers; ++i) {
            if (aptus_mc_seq_lt(w->members[i].ack, w->have)) {
                aptus_mc_timeout_repair(w, &w->members[i], 1, now_us);
            }
        }
        /* the group moved but has not caught up with me: say where it is
         * now and then, so that roots need not poll */
        if ((w->group_ack != w->group_reported) && (w->group_root != w->rank) &&
            (now_us >= w->report_time + w->cfg.ack_delay_us)) {
            aptus_mc_send_ack(w, APTUS_MC_TYPE_REPORT, w->group_root, 0,
                              w->group_ack - 1, now_us);
        }
    }

    if (w->has_own && aptus_mc_seq_le(w->stable, w->own_last)) {
        for (g = 0; g < w->ngroups; ++g) {
            c = &w->coroots[g];
            if (c->rank == w->rank) {
                continue;
            }
            if (aptus_mc_seq_le(c->ack, w->own_last)) {
                aptus_mc_timeout_repair(w, c, 0, now_us);
            }
            if (aptus_mc_seq_le(c->group_ack, w->own_last)) {
                aptus_mc_timeout_poll(w, c, now_us);
            }
        }
    }
    aptus_mc_release(w);
}

/* ---- the caller's own traffic ------------------------------------------- */

int aptus_mc_window_piggyback(aptus_mc_window_t *w, uint32_t dest,
                              uint32_t *ack_p)
{
    if (aptus_mc_window_is_coroot(w)) {
        /* my own point helps any root decide on repairs */
        *ack_p = w->have;
        return 1;
    }
    if (dest != w->coroot) {
        return 0;
    }
    *ack_p = w->have;
    aptus_mc_ack_carried(w);
    return 1;
}

void aptus_mc_window_ack_in(aptus_mc_window_t *w, uint32_t src, uint32_t ack,
                            uint64_t now_us)
{
    int moved = 0;

    if ((src >= w->comm_size) || (src == w->rank)) {
        return;
    }
    (void)aptus_mc_ack_from(w, src, ack, 0, 0, &moved);
    aptus_mc_settle(w, now_us);
}
