/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: aptus receive side: one order per peer across channels.
 *
 * A message in sequence goes to the user at once, in the channel's own
 * buffer. One that arrived early (its predecessor is still on the other
 * channel) is copied into a descriptor of its own and held; it goes to the
 * user, as a descriptor the user may keep, as soon as the gap is filled.
 * Early arrivals only happen around a channel change, so the copy is rare.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "proto/le.h"

/* A held message: this head, then its descriptor (UCT's release pointer,
 * the user's headroom) and data, aligned as the user asked. */
typedef struct uct_aptus_tl_held {
    aptus_xorder_entry_t entry;
    void *data;
    uint32_t length;
    uint8_t am_id;
} uct_aptus_tl_held_t;

static size_t uct_aptus_tl_held_data_offset(uct_aptus_tl_iface_t *iface,
                                            uct_aptus_tl_held_t *held)
{
    /* [head][head pointer][release pointer][headroom][data] */
    uintptr_t start =
        (uintptr_t)(held + 1) + 2 * sizeof(void *) + iface->rx_headroom;
    uintptr_t data = start;

    if (iface->am_align > 1) {
        data = ucs_align_up(start + iface->am_align_offset, iface->am_align) -
               iface->am_align_offset;
        if (data < start) {
            data += iface->am_align;
        }
    }
    return data - (uintptr_t)held;
}

static uct_aptus_tl_held_t *uct_aptus_tl_held_new(uct_aptus_tl_iface_t *iface,
                                                  uint8_t am_id,
                                                  const void *data,
                                                  size_t length)
{
    size_t max = sizeof(uct_aptus_tl_held_t) + 2 * sizeof(void *) +
                 iface->rx_headroom + iface->am_align + length;
    uct_aptus_tl_held_t *held = ucs_malloc(max, "uct_aptus_held");
    uct_recv_desc_t *release  = &iface->held_release;
    uint8_t *desc;

    if (held == NULL) {
        return NULL;
    }
    held->data =
        UCS_PTR_BYTE_OFFSET(held, uct_aptus_tl_held_data_offset(iface, held));
    held->length = length;
    held->am_id  = am_id;
    desc         = (uint8_t *)held->data - iface->rx_headroom;
    /* the release pointer, and the head it frees, just before the
     * descriptor (bytewise: the alignment may leave them unaligned) */
    memcpy(desc - sizeof(void *), &release, sizeof(void *));
    memcpy(desc - 2 * sizeof(void *), &held, sizeof(void *));
    memcpy(held->data, data, length);
    return held;
}

void uct_aptus_tl_held_release(uct_recv_desc_t *self, void *desc)
{
    uct_aptus_tl_iface_t *iface =
        ucs_container_of(self, uct_aptus_tl_iface_t, held_release);
    uct_aptus_tl_held_t *held;

    memcpy(&held, UCS_PTR_BYTE_OFFSET(desc, -(ptrdiff_t)(2 * sizeof(void *))),
           sizeof(held));
    iface->stats.rx_held_bytes -= held->length;
    ucs_free(held);
}

static void uct_aptus_tl_held_deliver(uct_aptus_tl_iface_t *iface,
                                      uct_aptus_tl_held_t *held)
{
    ucs_status_t status;

    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, held->am_id,
                       held->data, held->length, "RX: AM (held)");
    status = uct_iface_invoke_am(&iface->super, held->am_id, held->data,
                                 held->length, UCT_CB_PARAM_FLAG_DESC);
    if (status != UCS_INPROGRESS) {
        iface->stats.rx_held_bytes -= held->length;
        ucs_free(held);
    }
}

ucs_status_t uct_aptus_tl_rx(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                             uint8_t am_id, void *data, size_t length,
                             unsigned flags)
{
    aptus_xorder_result_t result;
    aptus_xorder_entry_t *entry;
    uct_aptus_tl_held_t *held;
    ucs_status_t status;
    aptus_xseq_t seq, ack;

    if (ucs_unlikely(length < UCT_APTUS_TRAILER_LEN)) {
        iface->stats.rx_malformed++;
        return UCS_OK;
    }
    length -= UCT_APTUS_TRAILER_LEN;
    seq = aptus_get32(UCS_PTR_BYTE_OFFSET(data, length));
    if (ucs_unlikely(!uct_aptus_tl_ep_init_state(iface, ep))) {
        return UCS_OK; /* out of memory, said so: dropped */
    }
    if (!ucs_queue_is_empty(&ep->act->rc_unacked)) {
        /* the peer's receive point confirms what we sent over RC: an
         * earlier one (a late or resent message) confirms less, no harm */
        ack = aptus_get32(UCS_PTR_BYTE_OFFSET(data, length + 4));
        if (aptus_xseq_lt(ucs_queue_head_elem_non_empty(
                              &ep->act->rc_unacked, uct_aptus_tl_copy_t, queue)
                              ->seq,
                          ack)) {
            uct_aptus_tl_xack_recv(iface, ep, ack);
        }
    }

    if (ucs_likely(seq == ep->act->xrx.next)) {
        aptus_xorder_rx_arrive(&ep->act->xrx, seq, NULL);
        iface->stats.rx_in_order++;
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id, data,
                           length, "RX: AM ep %p seq %u", ep, seq);
        status = uct_iface_invoke_am(&iface->super, am_id, data, length, flags);
        /* and whatever waited for it */
        while (ucs_unlikely(ep->act->xrx.held != NULL) &&
               ((entry = aptus_xorder_rx_pop(&ep->act->xrx)) != NULL)) {
            uct_aptus_tl_held_deliver(
                iface, ucs_container_of(entry, uct_aptus_tl_held_t, entry));
        }
        return status;
    }

    if (aptus_xseq_lt(seq, ep->act->xrx.next)) {
        aptus_xorder_rx_arrive(&ep->act->xrx, seq, NULL);
        iface->stats.rx_duplicates++;
        return UCS_OK;
    }

    held = uct_aptus_tl_held_new(iface, am_id, data, length);
    if (held == NULL) {
        result = APTUS_XORDER_REFUSED;
    } else {
        result = aptus_xorder_rx_arrive(&ep->act->xrx, seq, &held->entry);
    }
    switch (result) {
    case APTUS_XORDER_HELD:
        iface->stats.rx_held++;
        iface->stats.rx_held_bytes += length;
        iface->stats.max_held =
            ucs_max(iface->stats.max_held, ep->act->xrx.num_held);
        return UCS_OK;
    case APTUS_XORDER_DUPLICATE:
        iface->stats.rx_duplicates++;
        ucs_free(held);
        return UCS_OK;
    default:
        /* Nowhere to keep it: going on would lose or reorder a message.
         * The peer fails, as for any loss the channels cannot repair. */
        ucs_free(held);
        iface->stats.rx_reorder_full++;
        ucs_error("aptus/%s: %u messages from a peer wait for an earlier "
                  "one (UCX_" UCT_APTUS_TL_CONFIG_PREFIX
                  "REORDER_MAX=%u); the peer is failed",
                  iface->dev_name, ep->act->xrx.num_held,
                  ep->act->xrx.max_held);
        aptus_chan_invalidate(&iface->ud.chan.super,
                              (aptus_chan_peer_t *)&ep->peer);
        return UCS_OK;
    }
}

void uct_aptus_tl_rx_drop_held(uct_aptus_tl_iface_t *iface,
                               uct_aptus_tl_ep_t *ep)
{
    aptus_xorder_entry_t *entry = aptus_xorder_rx_take_all(&ep->act->xrx);
    uct_aptus_tl_held_t *held;

    while (entry != NULL) {
        held  = ucs_container_of(entry, uct_aptus_tl_held_t, entry);
        entry = entry->next;
        iface->stats.rx_held_bytes -= held->length;
        ucs_free(held);
    }
}
