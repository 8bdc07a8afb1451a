/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: one order per peer across channels.
 *
 * Pure logic, free of UCX and of any wire. The aptus transport sends the
 * messages of one endpoint over several channels (UD-SR, RC-SR, the fast
 * path), each reliable and ordered by itself; a message on a fast channel
 * may overtake one still in flight on a slow one. Every message carries a
 * 32-bit sequence number of its endpoint, shared by all channels; the
 * receiver delivers in sequence order and holds what arrives early (Koop
 * et al., "MVAPICH-Aptus", IPDPS 2008, section 4.4, reorders the same way).
 * The other design, draining the old channel before switching, costs a
 * round trip at every switch; holding costs nothing while messages arrive
 * in order, which they do unless the channel changes.
 *
 * A message sent again over another channel after a channel failed (its
 * first copy may or may not have arrived) is recognised by its sequence
 * number and dropped, so nothing is lost or delivered twice.
 *
 * The caller owns the held entries (aptus_xorder_entry_t is embedded in its
 * receive descriptor) and bounds how many a peer may hold (max_held).
 */
#ifndef APTUS_XORDER_H_
#define APTUS_XORDER_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t aptus_xseq_t;

/* Serial-number comparison (RFC 1982) on 32-bit sequence numbers. */
static inline int aptus_xseq_lt(aptus_xseq_t a, aptus_xseq_t b)
{
    return (int32_t)(a - b) < 0;
}

typedef struct aptus_xorder_entry {
    struct aptus_xorder_entry *next;
    aptus_xseq_t seq;
} aptus_xorder_entry_t;

typedef struct aptus_xorder_tx {
    aptus_xseq_t next; /* sequence of the next message */
} aptus_xorder_tx_t;

typedef struct aptus_xorder_rx {
    aptus_xseq_t next;          /* the one to deliver next */
    aptus_xorder_entry_t *held; /* early arrivals, in sequence order */
    aptus_xorder_entry_t *tail; /* the last of them */
    uint32_t num_held;
    uint32_t max_held;
    uint64_t held_total; /* statistics: messages that waited */
    uint64_t duplicates;
    uint64_t refused; /* beyond max_held or too far ahead */
} aptus_xorder_rx_t;

typedef enum aptus_xorder_result {
    APTUS_XORDER_DELIVER,   /* in order: deliver it, then aptus_xorder_pop */
    APTUS_XORDER_HELD,      /* early: kept until the gap is filled */
    APTUS_XORDER_DUPLICATE, /* delivered before: drop it */
    APTUS_XORDER_REFUSED    /* no room to hold it (or absurdly far ahead):
                               the sender's channel must keep it */
} aptus_xorder_result_t;

static inline void aptus_xorder_tx_init(aptus_xorder_tx_t *tx)
{
    tx->next = 0;
}

static inline aptus_xseq_t aptus_xorder_tx_next(aptus_xorder_tx_t *tx)
{
    return tx->next++;
}

void aptus_xorder_rx_init(aptus_xorder_rx_t *rx, uint32_t max_held);

/* A message with sequence number 'seq' arrived; entry is its record when
 * it must be held. */
aptus_xorder_result_t aptus_xorder_rx_arrive(aptus_xorder_rx_t *rx,
                                             aptus_xseq_t seq,
                                             aptus_xorder_entry_t *entry);

/* After a delivery: the next held entry now in order (remove it and
 * deliver it), or NULL. */
aptus_xorder_entry_t *aptus_xorder_rx_pop(aptus_xorder_rx_t *rx);

/* Everything held, for a peer that goes away: the caller releases them. */
aptus_xorder_entry_t *aptus_xorder_rx_take_all(aptus_xorder_rx_t *rx);

#ifdef __cplusplus
}
#endif

#endif
