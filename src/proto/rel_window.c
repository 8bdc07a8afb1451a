/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR reliability window (see rel_window.h).
 */
#include "rel_window.h"
#include "rtt.h"

#define APTUS_REL_MAX_BACKOFF 16

const char *aptus_rel_config_check(const aptus_rel_config_t *cfg)
{
    const char *bad;

    if ((cfg->tx_window == 0) || (cfg->tx_window > APTUS_REL_TX_WINDOW_MAX)) {
        return "TX_WINDOW must be between 1 and 1024";
    }
    if (cfg->ack_count == 0) {
        return "ACK_COUNT must be at least 1";
    }
    bad = aptus_rtt_bounds_check(cfg->rto_min_us, cfg->rto_max_us,
                                 cfg->rto_init_us);
    if (bad != NULL) {
        return bad;
    }
    if (cfg->peer_timeout_us <= cfg->rto_min_us) {
        return "TIMEOUT must exceed RTO_MIN";
    }
    return NULL;
}

void aptus_rel_tx_init(aptus_rel_tx_t *tx, uint64_t now_us)
{
    tx->tail       = NULL;
    tx->srtt_us    = 0;
    tx->rttvar_us  = 0;
    tx->last_heard = aptus_rel_coarse_time(now_us);
    tx->probe_time = 0;
    tx->next_psn   = 0;
    tx->acked_psn  = 0;
    tx->backoff    = 0;
    tx->sacked     = 0;
    tx->probing    = 0;
    tx->since_ask  = UINT8_MAX; /* the first packet that wants one asks */
}

void aptus_rel_tx_park(const aptus_rel_tx_t *tx, aptus_rel_tx_parked_t *parked)
{
    uint32_t units = (tx->srtt_us + APTUS_REL_PARK_RTT_UNIT_US - 1) /
                     APTUS_REL_PARK_RTT_UNIT_US;

    parked->next_psn = tx->next_psn;
    parked->srtt     = (units > UINT16_MAX) ? UINT16_MAX : (uint16_t)units;
}

void aptus_rel_tx_unpark(aptus_rel_tx_t *tx,
                         const aptus_rel_tx_parked_t *parked, uint64_t now_us)
{
    aptus_rel_tx_init(tx, now_us);
    tx->next_psn  = parked->next_psn;
    tx->acked_psn = parked->next_psn;
    tx->srtt_us   = aptus_rel_tx_parked_srtt_us(parked);
    tx->rttvar_us = tx->srtt_us / 2;
}

static inline aptus_rel_txe_t *aptus_rel_tx_head(const aptus_rel_tx_t *tx)
{
    return (tx->tail == NULL) ? NULL : tx->tail->next;
}

void aptus_rel_tx_push(aptus_rel_tx_t *tx, aptus_rel_txe_t *txe,
                       uint64_t now_us)
{
    if (tx->tail == NULL) {
        /* The silence clock runs only while we wait for the peer. */
        txe->next      = txe;
        tx->last_heard = aptus_rel_coarse_time(now_us);
    } else {
        txe->next      = tx->tail->next;
        tx->tail->next = txe;
    }
    tx->tail       = txe;
    txe->psn       = tx->next_psn++;
    txe->send_time = now_us;
    txe->flags     = 0;
    txe->sends     = 1;
    if (tx->since_ask != UINT8_MAX) {
        ++tx->since_ask;
    }
}

uint32_t aptus_rel_tx_rto(const aptus_rel_tx_t *tx,
                          const aptus_rel_config_t *cfg)
{
    uint64_t rto =
        (uint64_t)aptus_rtt_rto(tx->srtt_us, tx->rttvar_us, cfg->rto_init_us,
                                cfg->rto_min_us, cfg->rto_max_us)
        << tx->backoff;

    return (rto > cfg->rto_max_us) ? cfg->rto_max_us : (uint32_t)rto;
}

static void aptus_rel_rtt_sample(aptus_rel_tx_t *tx, uint64_t rtt)
{
    aptus_rtt_sample(&tx->srtt_us, &tx->rttvar_us, rtt);
}

aptus_rel_ack_status_t
aptus_rel_tx_ack(aptus_rel_tx_t *tx, const aptus_rel_config_t *cfg,
                 aptus_psn_t ack, const uint64_t *sack, unsigned sack_words,
                 uint64_t now_us, aptus_rel_txe_cb_t release_cb, void *arg)
{
    aptus_rel_txe_t *txe, *next;
    uint64_t sample = 0;
    int have_sample = 0;
    uint16_t dist;

    (void)cfg;

    /* An ack may not run ahead of what was sent, nor behind the point
     * already acknowledged by more than the PSN half-space allows. */
    if (aptus_psn_lt(tx->next_psn, ack)) {
        return APTUS_REL_ACK_INVALID;
    }
    if (aptus_psn_lt(ack, tx->acked_psn)) {
        return APTUS_REL_ACK_OK; /* stale, reordered ack */
    }

    if (ack != tx->acked_psn) {
        tx->backoff   = 0; /* progress: the peer is alive and reachable */
        tx->probing   = 0;
        tx->acked_psn = ack;
        txe           = aptus_rel_tx_head(tx);
        while ((txe != NULL) && aptus_psn_lt(txe->psn, ack)) {
            next = txe->next;
            /* A packet held behind a hole was acknowledged when it was
             * SACKed, not now: its wait for the hole is not a round trip. */
            if ((txe->sends == 1) && !(txe->flags & APTUS_REL_TXE_SACKED)) {
                sample      = now_us - txe->send_time;
                have_sample = 1;
            }
            if (txe == tx->tail) {
                tx->tail = NULL;
                next     = NULL;
            } else {
                tx->tail->next = next;
            }
            release_cb(arg, txe);
            txe = next;
        }
    }

    if (sack_words > APTUS_REL_SACK_WORDS) {
        sack_words = APTUS_REL_SACK_WORDS;
    }
    if ((sack_words == 0) || (tx->tail == NULL)) {
        if (have_sample) {
            aptus_rel_rtt_sample(tx, sample);
        }
        return APTUS_REL_ACK_OK;
    }

    /* Mark selectively acknowledged packets; remember that holes exist so
     * fast retransmit can look for them. */
    txe = aptus_rel_tx_head(tx);
    for (;;) {
        dist = aptus_psn_dist(ack, txe->psn);
        if (dist >= sack_words * 64) {
            break;
        }
        if ((dist != 0) && (sack[dist / 64] & (1ull << (dist % 64)))) {
            if (!(txe->flags & APTUS_REL_TXE_SACKED)) {
                txe->flags |= APTUS_REL_TXE_SACKED;
                tx->backoff = 0;
                if (txe->sends == 1) {
                    sample      = now_us - txe->send_time;
                    have_sample = 1;
                }
            }
            tx->sacked = 1;
        }
        if (txe == tx->tail) {
            break;
        }
        txe = txe->next;
    }
    if (have_sample) {
        aptus_rel_rtt_sample(tx, sample);
    }
    return APTUS_REL_ACK_OK;
}

static void aptus_rel_resend(aptus_rel_txe_t *txe, uint64_t now_us,
                             aptus_rel_txe_cb_t resend_cb, void *arg)
{
    txe->send_time = now_us;
    if (txe->sends < UINT8_MAX) {
        txe->sends++;
    }
    resend_cb(arg, txe);
}

/* Whether to resend a packet the receiver lacks. A reply proves a packet
 * sent once is lost; otherwise (a hole below a SACK, which may be mere
 * reordering, or a packet already resent whose copy may be on its way)
 * wait one smoothed RTT since it was last sent. */
static inline int aptus_rel_resend_due(const aptus_rel_tx_t *tx,
                                       const aptus_rel_config_t *cfg,
                                       const aptus_rel_txe_t *txe,
                                       uint64_t now_us, int proven)
{
    uint64_t min_wait;

    if (proven && (txe->sends == 1)) {
        return 1;
    }
    min_wait = (tx->srtt_us != 0)         ? tx->srtt_us
               : (cfg->probe_min_us != 0) ? cfg->probe_min_us
                                          : cfg->rto_min_us;
    return (now_us - txe->send_time) >= min_wait;
}

unsigned aptus_rel_tx_fast_retransmit(aptus_rel_tx_t *tx,
                                      const aptus_rel_config_t *cfg,
                                      uint64_t now_us,
                                      aptus_rel_txe_cb_t resend_cb, void *arg)
{
    aptus_rel_txe_t *txe, *last_sacked = NULL;
    unsigned count = 0;

    if (!tx->sacked || (tx->tail == NULL)) {
        tx->sacked = 0;
        return 0;
    }

    /* Find the newest selectively acknowledged packet. */
    txe = aptus_rel_tx_head(tx);
    for (;;) {
        if (txe->flags & APTUS_REL_TXE_SACKED) {
            last_sacked = txe;
        }
        if (txe == tx->tail) {
            break;
        }
        txe = txe->next;
    }
    tx->sacked = 0;
    if (last_sacked == NULL) {
        return 0;
    }

    /* A packet sent after a hole arrived, so the hole is most likely lost;
     * wait one smoothed RTT since its last send before resending so a
     * reordered datagram is not resent needlessly. */
    for (txe = aptus_rel_tx_head(tx); txe != last_sacked; txe = txe->next) {
        if (txe->flags & APTUS_REL_TXE_SACKED) {
            continue;
        }
        if (aptus_rel_resend_due(tx, cfg, txe, now_us, 0)) {
            aptus_rel_resend(txe, now_us, resend_cb, arg);
            ++count;
        } else {
            tx->sacked = 1; /* look again on the next ack or timer */
        }
    }
    return count;
}

unsigned aptus_rel_tx_resend_oldest(aptus_rel_tx_t *tx, uint64_t now_us,
                                    aptus_rel_txe_cb_t resend_cb, void *arg)
{
    if (tx->tail == NULL) {
        return 0;
    }
    aptus_rel_resend(tx->tail->next, now_us, resend_cb, arg);
    return 1;
}

unsigned aptus_rel_tx_resend_all(aptus_rel_tx_t *tx, uint64_t now_us,
                                 aptus_rel_txe_cb_t resend_cb, void *arg)
{
    aptus_rel_txe_t *txe, *next;
    unsigned count = 0;

    if (tx->tail == NULL) {
        return 0;
    }
    txe = tx->tail->next;
    for (;;) {
        next = txe->next;
        aptus_rel_resend(txe, now_us, resend_cb, arg);
        ++count;
        if (txe == tx->tail) {
            break;
        }
        txe = next;
    }
    return count;
}

unsigned aptus_rel_tx_reply(aptus_rel_tx_t *tx, const aptus_rel_config_t *cfg,
                            aptus_psn_t upto, uint64_t now_us,
                            aptus_rel_txe_cb_t resend_cb, void *arg)
{
    aptus_rel_txe_t *txe;
    unsigned count = 0;

    tx->probing = 0;
    if (tx->tail == NULL) {
        return 0;
    }
    if (aptus_psn_lt(tx->next_psn, upto)) {
        return 0; /* covers PSNs never sent: not ours */
    }

    txe = aptus_rel_tx_head(tx);
    for (;;) {
        if (!aptus_psn_lt(txe->psn, upto)) {
            break;
        }
        if (!(txe->flags & APTUS_REL_TXE_SACKED) &&
            aptus_rel_resend_due(tx, cfg, txe, now_us, 1)) {
            aptus_rel_resend(txe, now_us, resend_cb, arg);
            ++count;
        }
        if (txe == tx->tail) {
            break;
        }
        txe = txe->next;
    }
    return count;
}

/* Gap before the next repeat of an unanswered probe. */
static inline uint64_t aptus_rel_probe_gap(const aptus_rel_tx_t *tx,
                                           const aptus_rel_config_t *cfg,
                                           uint64_t probe_after)
{
    uint64_t gap    = probe_after << (tx->probing < 3 ? tx->probing : 3);
    uint64_t repeat = cfg->probe_repeat_us;

    return (gap < repeat) ? repeat : gap;
}

/* When the timer may next act, given the oldest send time of a packet not
 * selectively acknowledged (UINT64_MAX: none). */
static uint64_t aptus_rel_tx_due_from(const aptus_rel_tx_t *tx,
                                      const aptus_rel_config_t *cfg,
                                      uint64_t now_us, uint64_t oldest)
{
    uint64_t due, probe_due;

    if (oldest == UINT64_MAX) {
        return now_us + aptus_rel_tx_rto(tx, cfg); /* all held: wait */
    }
    due = oldest + aptus_rel_tx_rto(tx, cfg);
    if (cfg->probe_min_us != 0) {
        probe_due = oldest + aptus_rel_tx_probe_after(tx, cfg);
        if (tx->probing) {
            /* probe_time keeps the low 32 bits of the last probe's time */
            probe_due =
                now_us - (uint32_t)((uint32_t)now_us - tx->probe_time) +
                aptus_rel_probe_gap(tx, cfg, aptus_rel_tx_probe_after(tx, cfg));
        }
        if (probe_due < due) {
            due = probe_due;
        }
    }
    return due;
}

uint64_t aptus_rel_tx_next_due(const aptus_rel_tx_t *tx,
                               const aptus_rel_config_t *cfg, uint64_t now_us)
{
    const aptus_rel_txe_t *txe;
    uint64_t oldest = UINT64_MAX;

    if (tx->tail == NULL) {
        return UINT64_MAX;
    }
    txe = tx->tail->next;
    for (;;) {
        if (!(txe->flags & APTUS_REL_TXE_SACKED) && (txe->send_time < oldest)) {
            oldest = txe->send_time;
        }
        if (txe == tx->tail) {
            break;
        }
        txe = txe->next;
    }
    return aptus_rel_tx_due_from(tx, cfg, now_us, oldest);
}

aptus_rel_timer_status_t
aptus_rel_tx_timer(aptus_rel_tx_t *tx, const aptus_rel_config_t *cfg,
                   uint64_t now_us, aptus_rel_txe_cb_t resend_cb, void *arg,
                   unsigned *resent_p, int *probe_p, uint64_t *next_due_p)
{
    aptus_rel_txe_t *txe;
    uint64_t oldest = UINT64_MAX, probe_after;
    uint32_t silence, rto;
    unsigned count = 0;

    *resent_p   = 0;
    *probe_p    = 0;
    *next_due_p = UINT64_MAX;
    if (tx->tail == NULL) {
        return APTUS_REL_TIMER_IDLE;
    }

    silence = aptus_rel_coarse_time(now_us) - tx->last_heard;
    if ((uint64_t)silence << 10 > cfg->peer_timeout_us) {
        return APTUS_REL_TIMER_FAILED;
    }

    /* On timeout resend only the oldest expired packet (it asks for an
     * acknowledgement, and the reply names whatever else is missing): a
     * receiver that was merely off the CPU is not sent the whole window
     * again. Without probes, every expired packet goes. */
    rto = aptus_rel_tx_rto(tx, cfg);
    txe = aptus_rel_tx_head(tx);
    for (;;) {
        if (!(txe->flags & APTUS_REL_TXE_SACKED)) {
            if (((now_us - txe->send_time) >= rto) &&
                ((count == 0) || (cfg->probe_min_us == 0))) {
                aptus_rel_resend(txe, now_us, resend_cb, arg);
                ++count;
            } else if (txe->send_time < oldest) {
                oldest = txe->send_time;
            }
        }
        if (txe == tx->tail) {
            break;
        }
        txe = txe->next;
    }

    if (count > 0) {
        if (tx->backoff < APTUS_REL_MAX_BACKOFF) {
            tx->backoff++;
        }
        tx->probing = 0;
    } else if ((cfg->probe_min_us != 0) && (oldest != UINT64_MAX)) {
        /* Nothing is due yet, but the ACK is late: ask for it rather than
         * wait for the timeout, which may be far longer than the RTT. */
        probe_after = aptus_rel_tx_probe_after(tx, cfg);
        /* an unanswered probe is repeated, less often each time (at most
         * 8 periods apart, none sooner than probe_repeat_us) so a sleeping
         * peer is not flooded */
        if (((now_us - oldest) >= probe_after) &&
            (!tx->probing || ((uint32_t)((uint32_t)now_us - tx->probe_time) >=
                              aptus_rel_probe_gap(tx, cfg, probe_after)))) {
            tx->probe_time = (uint32_t)now_us;
            if (tx->probing < UINT8_MAX) {
                tx->probing++;
            }
            *probe_p = 1;
        }
    }
    *resent_p = count;
    /* what was resent now is the oldest no longer */
    if ((count > 0) && (now_us < oldest)) {
        oldest = now_us;
    }
    *next_due_p = aptus_rel_tx_due_from(tx, cfg, now_us, oldest);
    return APTUS_REL_TIMER_ARMED;
}

void aptus_rel_tx_for_each(aptus_rel_tx_t *tx, aptus_rel_txe_cb_t cb, void *arg)
{
    aptus_rel_txe_t *txe, *next;

    if (tx->tail == NULL) {
        return;
    }
    txe = tx->tail->next;
    for (;;) {
        next = txe->next;
        cb(arg, txe);
        if (txe == tx->tail) {
            break;
        }
        txe = next;
    }
}

void aptus_rel_tx_purge(aptus_rel_tx_t *tx, aptus_rel_txe_cb_t release_cb,
                        void *arg)
{
    aptus_rel_txe_t *txe, *next;

    if (tx->tail != NULL) {
        txe            = tx->tail->next;
        tx->tail->next = NULL; /* open the ring into a list */
        tx->tail       = NULL;
        for (; txe != NULL; txe = next) {
            next = txe->next;
            release_cb(arg, txe);
        }
    }
    tx->acked_psn = tx->next_psn;
    tx->backoff   = 0;
    tx->sacked    = 0;
    tx->probing   = 0;
}

void aptus_rel_rx_init(aptus_rel_rx_t *rx)
{
    rx->expected   = 0;
    rx->unacked    = 0;
    rx->reply_upto = 0;
    rx->flags      = 0;
}

void aptus_rel_rx_map_init(aptus_rel_rx_map_t *map)
{
    unsigned i;

    for (i = 0; i < APTUS_REL_SACK_WORDS; ++i) {
        map->bits[i] = 0;
    }
    map->count = 0;
}

static inline int aptus_rel_rx_is_held(const aptus_rel_rx_t *rx,
                                       const aptus_rel_rx_map_t *map,
                                       aptus_psn_t psn)
{
    unsigned slot = aptus_rel_rx_slot(psn);

    return aptus_rel_rx_holding(rx) &&
           (map->bits[slot / 64] & (1ull << (slot % 64)));
}

aptus_rel_rx_verdict_t aptus_rel_rx_classify(const aptus_rel_rx_t *rx,
                                             const aptus_rel_rx_map_t *map,
                                             aptus_psn_t psn)
{
    if (psn == rx->expected) {
        return APTUS_REL_RX_DELIVER;
    }
    if (aptus_psn_lt(psn, rx->expected)) {
        return APTUS_REL_RX_DUPLICATE;
    }
    if (aptus_psn_dist(rx->expected, psn) >= APTUS_REL_RX_WINDOW) {
        return APTUS_REL_RX_OUT_OF_WINDOW;
    }
    return aptus_rel_rx_is_held(rx, map, psn) ? APTUS_REL_RX_DUPLICATE
                                              : APTUS_REL_RX_HOLD;
}

void aptus_rel_rx_commit(aptus_rel_rx_t *rx, aptus_rel_rx_map_t *map,
                         aptus_psn_t psn, aptus_rel_rx_verdict_t verdict)
{
    unsigned slot;

    switch (verdict) {
    case APTUS_REL_RX_DELIVER:
        rx->expected++;
        rx->unacked++;
        break;
    case APTUS_REL_RX_HOLD:
        slot = aptus_rel_rx_slot(psn);
        map->bits[slot / 64] |= 1ull << (slot % 64);
        map->count++;
        rx->flags |= APTUS_REL_RX_HOLDING;
        rx->unacked++;
        rx->flags |= APTUS_REL_RX_ACK_NOW; /* tell the sender about the hole */
        break;
    case APTUS_REL_RX_DUPLICATE:
        /* The sender missed our ack: repeat it. */
        rx->flags |= APTUS_REL_RX_ACK_NOW;
        break;
    case APTUS_REL_RX_OUT_OF_WINDOW:
        rx->flags |= APTUS_REL_RX_ACK_NOW;
        break;
    }
}

unsigned aptus_rel_rx_sack(const aptus_rel_rx_t *rx,
                           const aptus_rel_rx_map_t *map, uint64_t *sack)
{
    unsigned i, slot, dist, top = 0;
    uint64_t word;

    if (!aptus_rel_rx_holding(rx)) {
        return 0;
    }
    for (i = 0; i < APTUS_REL_SACK_WORDS; ++i) {
        sack[i] = 0;
    }
    /* rotate the ring so that bit 0 is the expected packet */
    for (i = 0; i < APTUS_REL_SACK_WORDS; ++i) {
        for (word = map->bits[i]; word != 0; word &= word - 1) {
            slot = i * 64 + (unsigned)__builtin_ctzll(word);
            dist = (slot - aptus_rel_rx_slot(rx->expected)) &
                   (APTUS_REL_RX_WINDOW - 1);
            sack[dist / 64] |= 1ull << (dist % 64);
            if (dist > top) {
                top = dist;
            }
        }
    }
    return top / 64 + 1;
}
