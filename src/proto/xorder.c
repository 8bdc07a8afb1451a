/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: one order per peer across channels (see xorder.h).
 */
#include "xorder.h"

#include <stddef.h>

/* A sequence this far ahead is not a reordering but a broken peer. */
#define APTUS_XORDER_MAX_AHEAD (1u << 30)

void aptus_xorder_rx_init(aptus_xorder_rx_t *rx, uint32_t max_held)
{
    rx->next       = 0;
    rx->held       = NULL;
    rx->tail       = NULL;
    rx->num_held   = 0;
    rx->max_held   = max_held;
    rx->held_total = 0;
    rx->duplicates = 0;
    rx->refused    = 0;
}

aptus_xorder_result_t aptus_xorder_rx_arrive(aptus_xorder_rx_t *rx,
                                             aptus_xseq_t seq,
                                             aptus_xorder_entry_t *entry)
{
    aptus_xorder_entry_t **pos;

    if (seq == rx->next) {
        rx->next++;
        return APTUS_XORDER_DELIVER;
    }
    if (aptus_xseq_lt(seq, rx->next)) {
        rx->duplicates++;
        return APTUS_XORDER_DUPLICATE;
    }
    if ((uint32_t)(seq - rx->next) >= APTUS_XORDER_MAX_AHEAD) {
        rx->refused++;
        return APTUS_XORDER_REFUSED;
    }
    /* in sequence order; the usual early arrival goes last */
    if ((rx->tail != NULL) && aptus_xseq_lt(rx->tail->seq, seq)) {
        pos = &rx->tail->next;
    } else {
        for (pos = &rx->held; *pos != NULL; pos = &(*pos)->next) {
            if ((*pos)->seq == seq) {
                rx->duplicates++;
                return APTUS_XORDER_DUPLICATE;
            }
            if (aptus_xseq_lt(seq, (*pos)->seq)) {
                break;
            }
        }
    }
    if (rx->num_held >= rx->max_held) {
        rx->refused++;
        return APTUS_XORDER_REFUSED;
    }
    entry->seq  = seq;
    entry->next = *pos;
    *pos        = entry;
    if (entry->next == NULL) {
        rx->tail = entry;
    }
    rx->num_held++;
    rx->held_total++;
    return APTUS_XORDER_HELD;
}

aptus_xorder_entry_t *aptus_xorder_rx_pop(aptus_xorder_rx_t *rx)
{
    aptus_xorder_entry_t *entry = rx->held;

    if ((entry == NULL) || (entry->seq != rx->next)) {
        return NULL;
    }
    rx->held = entry->next;
    if (rx->held == NULL) {
        rx->tail = NULL;
    }
    rx->num_held--;
    rx->next++;
    entry->next = NULL;
    return entry;
}

aptus_xorder_entry_t *aptus_xorder_rx_take_all(aptus_xorder_rx_t *rx)
{
    aptus_xorder_entry_t *all = rx->held;

    rx->held     = NULL;
    rx->tail     = NULL;
    rx->num_held = 0;
    return all;
}
