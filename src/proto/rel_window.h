/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR reliability window.
 *
 * Pure protocol logic, free of UCX and of any wire: per-peer packet sequence
 * numbers (PSN), cumulative acknowledgement piggybacked on every packet,
 * selective acknowledgement (a 64-bit map past the cumulative point), RTT
 * estimation (RFC 6298 style) for the retransmission timeout with exponential
 * backoff, duplicate detection and out-of-order holding on the receive side,
 * and peer failure after a silence limit.
 *
 * The window spans up to 1024 packets. What that costs stays off idle peers:
 * the receiver's map of held packets (128 bytes) is memory the caller
 * keeps apart and passes in (it needs it only while something is held past
 * a hole), and the selective acknowledgement carries only as many 64-bit
 * words as reach the highest held packet.
 *
 * The caller owns every packet record (aptus_rel_txe_t is embedded in its
 * transmit descriptor) and every buffer; this module only decides. All times
 * are microseconds on a monotonic clock chosen by the caller.
 *
 * Design notes (Friedley et al., "Scalable High Performance Message Passing
 * over InfiniBand for Open MPI", KiCC 2007, section 4; Koop et al.,
 * "MVAPICH-Aptus", IPDPS 2008, section 5.2): the UD BTL resent a whole VFRAG on
 * loss; the selective map lets one lost datagram be resent alone, and the
 * receiver holds up to APTUS_REL_RX_WINDOW packets past a hole so nothing that
 * arrived is resent.
 */
#ifndef APTUS_REL_WINDOW_H_
#define APTUS_REL_WINDOW_H_

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t aptus_psn_t;

/* Serial-number arithmetic (RFC 1982) on 16-bit PSNs; windows stay far
 * below 2^15 so the comparison is unambiguous. */
static inline int aptus_psn_lt(aptus_psn_t a, aptus_psn_t b)
{
    return (int16_t)(uint16_t)(a - b) < 0;
}

static inline int aptus_psn_le(aptus_psn_t a, aptus_psn_t b)
{
    return (int16_t)(uint16_t)(a - b) <= 0;
}

/* Distance from a to b, b "after" a. */
static inline uint16_t aptus_psn_dist(aptus_psn_t a, aptus_psn_t b)
{
    return (uint16_t)(b - a);
}

/* Out-of-order span the receiver can hold (a power of two): packets
 * (expected + 1) .. (expected + APTUS_REL_RX_WINDOW - 1). */
#define APTUS_REL_RX_WINDOW 1024
/* Sending further ahead than the receiver can hold only makes it drop. */
#define APTUS_REL_TX_WINDOW_MAX APTUS_REL_RX_WINDOW
/* Words of a full selective acknowledgement: bit i of word j is the packet
 * (cumulative ack + 64 j + i); bit 0 of word 0 is never set. */
#define APTUS_REL_SACK_WORDS (APTUS_REL_RX_WINDOW / 64)

typedef struct aptus_rel_config {
    uint16_t tx_window;  /* unacknowledged packets in flight per peer */
    uint16_t ack_count;  /* explicit ACK after this many unacked packets */
    uint32_t rto_min_us; /* retransmission timeout bounds */
    uint32_t rto_max_us;
    uint32_t rto_init_us;     /* before the first RTT sample */
    uint32_t peer_timeout_us; /* silence with data outstanding => failed */
    uint32_t probe_min_us;    /* earliest tail probe; 0: no probes */
    uint32_t probe_repeat_us; /* least gap before an unanswered probe is
                                 repeated (0: probe_min_us) */
} aptus_rel_config_t;

/* Returns NULL when the configuration is consistent, else a message naming
 * the field at fault. */
const char *aptus_rel_config_check(const aptus_rel_config_t *cfg);

/* ---- transmit side ---------------------------------------------------- */

enum {
    APTUS_REL_TXE_SACKED = 1u << 0, /* receiver holds it out of order */
};

typedef struct aptus_rel_txe {
    struct aptus_rel_txe *next; /* window list, owned by the window */
    uint64_t send_time;         /* last (re)transmission, usec */
    aptus_psn_t psn;
    uint8_t flags;
    uint8_t sends; /* transmissions so far (saturates) */
} aptus_rel_txe_t;

typedef struct aptus_rel_tx {
    aptus_rel_txe_t *tail; /* circular list, tail->next is the oldest */
    uint32_t srtt_us;      /* 0 until the first sample */
    uint32_t rttvar_us;
    uint32_t last_heard;   /* coarse time (usec >> 10) peer last heard */
    uint32_t probe_time;   /* usec (low 32 bits) of the last probe */
    aptus_psn_t next_psn;  /* PSN of the next new packet */
    aptus_psn_t acked_psn; /* every PSN before this is acknowledged */
    uint8_t backoff;       /* RTO doubling exponent */
    uint8_t sacked;        /* a hole exists below a SACKed packet */
    uint8_t probing;       /* probes sent without a reply (saturates) */
    uint8_t since_ask;     /* packets pushed since one asked for an ACK */
} aptus_rel_tx_t;

typedef void (*aptus_rel_txe_cb_t)(void *arg, aptus_rel_txe_t *txe);

typedef enum {
    APTUS_REL_ACK_OK,     /* processed (possibly nothing new) */
    APTUS_REL_ACK_INVALID /* acknowledges a PSN never sent: forged/corrupt */
} aptus_rel_ack_status_t;

typedef enum {
    APTUS_REL_TIMER_IDLE,  /* nothing outstanding */
    APTUS_REL_TIMER_ARMED, /* outstanding data, still waiting */
    APTUS_REL_TIMER_FAILED /* peer silent past peer_timeout_us */
} aptus_rel_timer_status_t;

static inline uint32_t aptus_rel_coarse_time(uint64_t now_us)
{
    return (uint32_t)(now_us >> 10);
}

void aptus_rel_tx_init(aptus_rel_tx_t *tx, uint64_t now_us);

/* What an idle window keeps when its owner gives the window's memory back
 * (a peer with nothing in flight): the next PSN, and the smoothed RTT in
 * units of APTUS_REL_PARK_RTT_UNIT_US (rounded up, saturating; 0: no
 * sample yet), so that a window opened again times out as the old one
 * would have, not from RTO_INIT. */
#define APTUS_REL_PARK_RTT_UNIT_US 8
typedef struct aptus_rel_tx_parked {
    aptus_psn_t next_psn;
    uint16_t srtt;
} aptus_rel_tx_parked_t;

/* A new stream's parked state: PSN 0, no RTT sample. */
static inline void aptus_rel_tx_parked_init(aptus_rel_tx_parked_t *parked)
{
    parked->next_psn = 0;
    parked->srtt     = 0;
}

/* Park tx, which must be idle (nothing in flight). */
void aptus_rel_tx_park(const aptus_rel_tx_t *tx, aptus_rel_tx_parked_t *parked);

/* Open a window from its parked state: nothing in flight, the PSNs go on
 * where they stopped, the RTT variance is half the RTT (as after a first
 * sample). */
void aptus_rel_tx_unpark(aptus_rel_tx_t *tx,
                         const aptus_rel_tx_parked_t *parked, uint64_t now_us);

/* The smoothed RTT a parked window had, usec (0: none). */
static inline uint32_t
aptus_rel_tx_parked_srtt_us(const aptus_rel_tx_parked_t *parked)
{
    return (uint32_t)parked->srtt * APTUS_REL_PARK_RTT_UNIT_US;
}

static inline unsigned aptus_rel_tx_inflight(const aptus_rel_tx_t *tx)
{
    return aptus_psn_dist(tx->acked_psn, tx->next_psn);
}

static inline int aptus_rel_tx_is_idle(const aptus_rel_tx_t *tx)
{
    return tx->tail == NULL;
}

static inline int aptus_rel_tx_window_full(const aptus_rel_tx_t *tx,
                                           const aptus_rel_config_t *cfg)
{
    return aptus_rel_tx_inflight(tx) >= cfg->tx_window;
}

/* Ask the receiver to acknowledge at once: the window is half used, so an
 * ACK must be on its way before the sender stalls. */
static inline int aptus_rel_tx_want_ack(const aptus_rel_tx_t *tx,
                                        const aptus_rel_config_t *cfg)
{
    return aptus_rel_tx_inflight(tx) * 2 >= cfg->tx_window;
}

/* At most one packet in this many asks for an acknowledgement while the
 * sender wants one (a quarter of the window if that is fewer). */
#define APTUS_REL_ASK_EVERY 32

/* Whether the packet just pushed asks the receiver for an acknowledgement,
 * given whether the sender wants one (aptus_rel_tx_want_ack, or a bound
 * of its own). The receiver answers each ask with an ACK datagram: asked
 * by every packet of a stream that keeps the window half full, it spent a
 * system call on most packets it received. Between asks its ACK_COUNT
 * rule keeps acknowledging. */
static inline int aptus_rel_tx_ask(aptus_rel_tx_t *tx,
                                   const aptus_rel_config_t *cfg, int want)
{
    unsigned every = cfg->tx_window / 4;

    if (every > APTUS_REL_ASK_EVERY) {
        every = APTUS_REL_ASK_EVERY;
    }
    if (!want || (tx->since_ask < every)) {
        return 0;
    }
    tx->since_ask = 0;
    return 1;
}

/* Assign the next PSN to txe and append it to the window. */
void aptus_rel_tx_push(aptus_rel_tx_t *tx, aptus_rel_txe_t *txe,
                       uint64_t now_us);

/* Record that a valid packet arrived from the peer (resets the silence
 * clock). */
static inline void aptus_rel_tx_heard(aptus_rel_tx_t *tx, uint64_t now_us)
{
    tx->last_heard = aptus_rel_coarse_time(now_us);
}

/*
 * Process an acknowledgement: every PSN before 'ack' is released (release_cb
 * in PSN order), and bit i of word j of the selective map 'sack' (sack_words
 * words, 0 for none) marks (ack + 64 j + i) as held by the receiver. An RTT
 * sample is taken from the newest released packet that was sent only once
 * (Karn's rule).
 */
aptus_rel_ack_status_t
aptus_rel_tx_ack(aptus_rel_tx_t *tx, const aptus_rel_config_t *cfg,
                 aptus_psn_t ack, const uint64_t *sack, unsigned sack_words,
                 uint64_t now_us, aptus_rel_txe_cb_t release_cb, void *arg);

/* Resend holes below the highest selectively acknowledged packet that have
 * waited at least one smoothed RTT. Returns how many were resent. */
unsigned aptus_rel_tx_fast_retransmit(aptus_rel_tx_t *tx,
                                      const aptus_rel_config_t *cfg,
                                      uint64_t now_us,
                                      aptus_rel_txe_cb_t resend_cb, void *arg);

/* Periodic check: resend on timeout (backing off) -- the oldest expired
 * packet when probes are on, every expired one otherwise -- and report a
 * peer silent past the limit. Before the timeout, when the oldest
 * packet has waited two smoothed RTTs (at least probe_min_us) without an
 * acknowledgement, *probe_p is set: send the peer an acknowledgement
 * request carrying aptus_rel_tx_probe_upto() (a tail-loss probe, in the
 * spirit of RFC 8985). An unanswered probe is repeated every such period,
 * so a lost probe, reply or retransmission costs a few RTTs, not a backed-off
 * timeout; the timeout remains for a peer that does not answer at all.
 * *next_due_p gets what aptus_rel_tx_next_due would return after the call
 * (from the same pass over the window); UINT64_MAX when idle or failed. */
aptus_rel_timer_status_t
aptus_rel_tx_timer(aptus_rel_tx_t *tx, const aptus_rel_config_t *cfg,
                   uint64_t now_us, aptus_rel_txe_cb_t resend_cb, void *arg,
                   unsigned *resent_p, int *probe_p, uint64_t *next_due_p);

/* Resend the oldest outstanding packet now (a probe that must be data:
 * the peer may not know the stream yet). Returns 0 when none is. */
unsigned aptus_rel_tx_resend_oldest(aptus_rel_tx_t *tx, uint64_t now_us,
                                    aptus_rel_txe_cb_t resend_cb, void *arg);

/* What a probe or request covers: every PSN before this was sent. */
static inline aptus_psn_t aptus_rel_tx_probe_upto(const aptus_rel_tx_t *tx)
{
    return tx->next_psn;
}

/* The receiver answered a request covering PSNs before 'upto' (after the
 * acknowledgement in the same packet was processed): whatever it has not
 * got of those was lost. Resends them (except ones resent within the last
 * smoothed RTT, whose copy may still be on its way); returns how many. */
unsigned aptus_rel_tx_reply(aptus_rel_tx_t *tx, const aptus_rel_config_t *cfg,
                            aptus_psn_t upto, uint64_t now_us,
                            aptus_rel_txe_cb_t resend_cb, void *arg);

/* Wait for an ACK this long past the oldest packet before probing: two
 * smoothed RTTs (which include the receiver's ACK delay when it answers
 * with delayed ACKs), at least probe_min_us; before the first sample, the
 * repeat gap, which covers a delayed ACK. */
static inline uint64_t aptus_rel_tx_probe_after(const aptus_rel_tx_t *tx,
                                                const aptus_rel_config_t *cfg)
{
    uint64_t after = 2 * (uint64_t)tx->srtt_us;

    if ((tx->srtt_us == 0) && (after < cfg->probe_repeat_us)) {
        after = cfg->probe_repeat_us;
    }
    return (after < cfg->probe_min_us) ? cfg->probe_min_us : after;
}

/* When aptus_rel_tx_timer may next have something to do for tx (a probe
 * or a timeout), usec on the caller's clock; UINT64_MAX when nothing is
 * outstanding. Never later than the real event; the caller polls timers
 * no later than this. */
uint64_t aptus_rel_tx_next_due(const aptus_rel_tx_t *tx,
                               const aptus_rel_config_t *cfg, uint64_t now_us);

/* Current retransmission timeout including backoff, usec. */
uint32_t aptus_rel_tx_rto(const aptus_rel_tx_t *tx,
                          const aptus_rel_config_t *cfg);

/* Send every outstanding packet again, oldest first (the receiver took
 * none of them: they went before it could accept any); returns how many. */
unsigned aptus_rel_tx_resend_all(aptus_rel_tx_t *tx, uint64_t now_us,
                                 aptus_rel_txe_cb_t resend_cb, void *arg);

/* Visit every outstanding packet, oldest first. */
void aptus_rel_tx_for_each(aptus_rel_tx_t *tx, aptus_rel_txe_cb_t cb,
                           void *arg);

/* Drop every outstanding packet (peer failed or send cancelled): each one
 * is passed to release_cb; the window restarts after the last sent PSN. */
void aptus_rel_tx_purge(aptus_rel_tx_t *tx, aptus_rel_txe_cb_t release_cb,
                        void *arg);

/* ---- receive side ----------------------------------------------------- */

enum {
    APTUS_REL_RX_ACK_NOW = 1u << 0,  /* hole, duplicate, probe: acknowledge
                                        with this batch */
    APTUS_REL_RX_REPLY = 1u << 1,    /* the next explicit ACK answers a
                                        request */
    APTUS_REL_RX_ACK_SOON = 1u << 2, /* data asked for an ACK: on the next
                                       progress, unless a reply to the
                                       sender carries it first */
    APTUS_REL_RX_HOLDING = 1u << 3   /* packets are held past a hole (the
                                        map is in use) */
};

/* Which packets past a hole the receiver holds: a ring of bits indexed by
 * PSN modulo APTUS_REL_RX_WINDOW. The caller's memory, all zero while
 * nothing is held (aptus_rel_rx_map_init); passed to the calls below,
 * NULL where the caller has none, which it may only while nothing is
 * held (!aptus_rel_rx_holding). */
typedef struct aptus_rel_rx_map {
    uint64_t bits[APTUS_REL_SACK_WORDS];
    uint16_t count; /* packets held */
} aptus_rel_rx_map_t;

typedef struct aptus_rel_rx {
    aptus_psn_t expected;   /* next in-order PSN */
    uint16_t unacked;       /* accepted since the last ACK sent */
    aptus_psn_t reply_upto; /* the request the next reply answers */
    uint8_t flags;
} aptus_rel_rx_t;

typedef enum {
    APTUS_REL_RX_DELIVER,      /* the next in-order packet */
    APTUS_REL_RX_HOLD,         /* inside the window past a hole: keep it */
    APTUS_REL_RX_DUPLICATE,    /* already delivered or already held */
    APTUS_REL_RX_OUT_OF_WINDOW /* too far ahead to hold: drop, sender resends */
} aptus_rel_rx_verdict_t;

void aptus_rel_rx_init(aptus_rel_rx_t *rx);

/* Packets are held past a hole: the caller must pass its map. */
static inline int aptus_rel_rx_holding(const aptus_rel_rx_t *rx)
{
    return rx->flags & APTUS_REL_RX_HOLDING;
}

/* Make map memory ready (all zero) before its first use. */
void aptus_rel_rx_map_init(aptus_rel_rx_map_t *map);

/* Classify without changing state, so the caller can check it has room
 * (a descriptor, a reassembly buffer) before it commits. */
aptus_rel_rx_verdict_t aptus_rel_rx_classify(const aptus_rel_rx_t *rx,
                                             const aptus_rel_rx_map_t *map,
                                             aptus_psn_t psn);

/* Commit a verdict returned by aptus_rel_rx_classify for psn; HOLD needs
 * the map. */
void aptus_rel_rx_commit(aptus_rel_rx_t *rx, aptus_rel_rx_map_t *map,
                         aptus_psn_t psn, aptus_rel_rx_verdict_t verdict);

static inline unsigned aptus_rel_rx_slot(aptus_psn_t psn)
{
    return psn & (APTUS_REL_RX_WINDOW - 1);
}

/* After a delivery: if the next expected packet is held, advance past it
 * and return 1 (the caller delivers the held packet with PSN expected-1).
 * When the last one goes the map is all zero again and no longer needed. */
static inline int aptus_rel_rx_pop_held(aptus_rel_rx_t *rx,
                                        aptus_rel_rx_map_t *map)
{
    unsigned slot;

    if (!aptus_rel_rx_holding(rx)) {
        return 0;
    }
    slot = aptus_rel_rx_slot(rx->expected);
    if (!(map->bits[slot / 64] & (1ull << (slot % 64)))) {
        return 0;
    }
    map->bits[slot / 64] &= ~(1ull << (slot % 64));
    rx->expected++;
    if (--map->count == 0) {
        rx->flags &= ~APTUS_REL_RX_HOLDING;
    }
    return 1;
}

/* Forget every held packet (the caller dropped them: the stream died). */
static inline void aptus_rel_rx_drop_held(aptus_rel_rx_t *rx,
                                          aptus_rel_rx_map_t *map)
{
    if (aptus_rel_rx_holding(rx)) {
        aptus_rel_rx_map_init(map);
        rx->flags &= ~APTUS_REL_RX_HOLDING;
    }
}

/* The selective map for an ACK: writes the words needed to reach the
 * highest held packet into sack (APTUS_REL_SACK_WORDS at most) and returns
 * how many; 0 when nothing is held. */
unsigned aptus_rel_rx_sack(const aptus_rel_rx_t *rx,
                           const aptus_rel_rx_map_t *map, uint64_t *sack);

/* An explicit ACK must go with this batch. */
static inline int aptus_rel_rx_ack_due(const aptus_rel_rx_t *rx,
                                       const aptus_rel_config_t *cfg)
{
    return (rx->flags & APTUS_REL_RX_ACK_NOW) ||
           (rx->unacked >= cfg->ack_count);
}

/* An explicit ACK is wanted by the next progress call. */
static inline int aptus_rel_rx_ack_soon(const aptus_rel_rx_t *rx)
{
    return rx->flags & APTUS_REL_RX_ACK_SOON;
}

static inline int aptus_rel_rx_has_unacked(const aptus_rel_rx_t *rx)
{
    return (rx->unacked > 0) ||
           (rx->flags & (APTUS_REL_RX_ACK_NOW | APTUS_REL_RX_ACK_SOON));
}

/* The sender asked for an acknowledgement covering PSNs before upto: at
 * once for a probe (urgent), by the next progress call for data, so that a
 * reply the application sends meanwhile can carry it. */
static inline void aptus_rel_rx_request(aptus_rel_rx_t *rx, aptus_psn_t upto,
                                        int urgent)
{
    rx->reply_upto = upto;
    rx->flags |= APTUS_REL_RX_REPLY |
                 (urgent ? APTUS_REL_RX_ACK_NOW : APTUS_REL_RX_ACK_SOON);
}

/* Any packet to the peer carries the cumulative ack; call when one is sent.
 * An explicit ACK settles everything. A piggybacked one settles a request
 * it covers; a hole (the selective map) still needs an explicit ACK. */
static inline void aptus_rel_rx_acked(aptus_rel_rx_t *rx, int explicit_ack)
{
    rx->unacked = 0;
    if (explicit_ack) {
        rx->flags &= ~(APTUS_REL_RX_ACK_NOW | APTUS_REL_RX_ACK_SOON |
                       APTUS_REL_RX_REPLY);
        return;
    }
    if ((rx->flags & APTUS_REL_RX_REPLY) &&
        aptus_psn_le(rx->reply_upto, rx->expected)) {
        rx->flags &= ~(APTUS_REL_RX_REPLY | APTUS_REL_RX_ACK_SOON);
    }
    if (!aptus_rel_rx_holding(rx) && !(rx->flags & APTUS_REL_RX_REPLY)) {
        rx->flags &= ~(APTUS_REL_RX_ACK_NOW | APTUS_REL_RX_ACK_SOON);
    }
}

#ifdef __cplusplus
}
#endif

#endif
