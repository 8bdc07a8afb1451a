/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel, receive side: validation, reliability,
 * reassembly, ordered delivery.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_chan_int.h"

#include <inttypes.h>
#include <string.h>

static inline aptus_ud_rx_desc_t *aptus_ud_rx_desc_of(aptus_ud_chan_t *chan,
                                                      void *dgram)
{
    return UCS_PTR_BYTE_OFFSET(dgram, -(ptrdiff_t)chan->rx_dgram_offset);
}

static ucs_status_t aptus_ud_rx_deliver_now(aptus_ud_chan_t *chan,
                                            aptus_ud_rx_msg_t *msg,
                                            int is_async)
{
    uct_recv_desc_t *release = &msg->release;
    ucs_status_t status;

    /* uct_iface_release_desc(data - rx_headroom) reads the pointer stored
     * right before the headroom (unaligned when the AM alignment offset
     * asks for it). */
    memcpy(
        UCS_PTR_BYTE_OFFSET(
            msg->data, -(ptrdiff_t)(chan->config.rx_headroom + sizeof(void *))),
        &release, sizeof(release));

    if (msg->am_id & APTUS_UD_AM_INTERNAL) {
        status = (chan->internal_cb == NULL)
                     ? UCS_OK
                     : chan->internal_cb(chan->internal_arg, msg->peer,
                                         msg->am_id & ~APTUS_UD_AM_INTERNAL,
                                         msg->data, msg->length, is_async);
        if (status == UCS_ERR_BUSY) {
            return status;
        }
        ucs_mpool_put_inline(msg); /* internal handlers never keep it */
        chan->stats.rx_msgs++;     /* counted as sent: one order for all */
        chan->stats.rx_bytes += msg->length;
        return UCS_OK;
    }

    status = chan->ops->deliver(chan->ops_arg, msg->peer, msg->am_id, msg->data,
                                msg->length, UCT_CB_PARAM_FLAG_DESC, is_async);
    if (status == UCS_ERR_BUSY) {
        return status;
    }
    chan->stats.rx_msgs++;
    chan->stats.rx_bytes += msg->length;
    if (status != UCS_INPROGRESS) {
        ucs_mpool_put_inline(msg); /* the user did not keep it */
    }
    return UCS_OK;
}

static void aptus_ud_rx_deliver(aptus_ud_chan_t *chan, aptus_ud_rx_msg_t *msg,
                                int is_async)
{
    /* Anything already waiting goes first: order is per peer, and the queue
     * is shared, so keep it strictly FIFO. */
    if (ucs_queue_is_empty(&chan->deferred)) {
        if (aptus_ud_rx_deliver_now(chan, msg, is_async) == UCS_OK) {
            return;
        }
    } else if ((msg->am_id & APTUS_UD_AM_INTERNAL) &&
               (aptus_ud_rx_deliver_now(chan, msg, 1) == UCS_OK)) {
        /* Behind messages that wait for the user's progress, an internal
         * message is offered as in async context: what may not wait is
         * handled now. A put must land before the stream acknowledges it
         * (the writer's flush promises that a read of this memory, by a
         * connection's one-sided read too, sees it); queued, it was
         * acknowledged and not written. The rest queues behind. */
        return;
    }
    chan->stats.rx_deferred++;
    ucs_queue_push(&chan->deferred, &msg->queue);
}

unsigned aptus_ud_rx_dispatch_deferred(aptus_ud_chan_t *chan, unsigned max)
{
    aptus_ud_rx_msg_t *msg;
    unsigned count = 0;

    /* at most max per call, like a receive queue's poll budget: the user's
     * progress call stays short, and it reports work left (count > 0) */
    while (!ucs_queue_is_empty(&chan->deferred) && (count < max)) {
        msg = ucs_queue_pull_elem_non_empty(&chan->deferred, aptus_ud_rx_msg_t,
                                            queue);
        (void)aptus_ud_rx_deliver_now(chan, msg, 0);
        ++count;
    }
    return count;
}

/* A fragment that opens a message of several needs a reassembly buffer.
 * Those are reserved when such a fragment is accepted into the window (in
 * order or held) and given back when the message completes or the stream
 * dies, so MAX_REASM bounds what peers can pin without finishing a message,
 * and a fragment over the bound is refused before the window takes it: the
 * sender retransmits it later, nothing fails. */
static inline int aptus_ud_rx_starts_reasm(uint8_t flags)
{
    return (flags & (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) ==
           APTUS_UD_SR_F_FIRST;
}

static inline void aptus_ud_rx_reasm_unreserve(aptus_ud_chan_t *chan)
{
    ucs_assert(chan->reasm_active > 0);
    chan->reasm_active--;
}

void aptus_ud_rx_release_peer(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_peer_ext_t *ext = peer->ext;
    aptus_ud_rx_desc_t *desc;

    if (ext == NULL) {
        return;
    }
    while (ext->held != NULL) {
        desc      = ext->held;
        ext->held = desc->next;
        ucs_assert(chan->rx_held > 0);
        chan->rx_held--;
        if (aptus_ud_rx_starts_reasm(desc->flags)) {
            aptus_ud_rx_reasm_unreserve(chan);
        }
        ucs_mpool_put_inline(desc);
    }
    ext->held_tail = NULL;
    aptus_rel_rx_drop_held(&peer->rx, &ext->held_map);
    if (ext->reasm != NULL) {
        ucs_mpool_put_inline(ext->reasm);
        ext->reasm = NULL;
        aptus_ud_rx_reasm_unreserve(chan);
    }
}

/* The receive buffer puts a payload that follows the basic header where the
 * user's AM alignment wants it; one behind extensions is moved there (the
 * header is parsed and no longer needed). */
static inline void aptus_ud_rx_align(aptus_ud_chan_t *chan,
                                     aptus_ud_rx_desc_t *desc)
{
    void *aligned;

    if (ucs_likely(chan->config.am_align <= 1) ||
        ((((uintptr_t)desc->msg.data + chan->config.am_align_offset) &
          (chan->config.am_align - 1)) == 0)) {
        return;
    }
    aligned =
        UCS_PTR_BYTE_OFFSET(aptus_ud_rx_dgram(chan, desc), APTUS_UD_SR_HDR_LEN);
    memmove(aligned, desc->msg.data, desc->msg.length);
    desc->msg.data = aligned;
}

void aptus_ud_rx_pool_exhausted(aptus_ud_chan_t *chan)
{
    const char *prefix;

    chan->stats.rx_pool_exhausted++;
    if (chan->rx_pool_reported) {
        return;
    }
    chan->rx_pool_reported = 1;
    prefix =
        (chan->config.var_prefix != NULL) ? chan->config.var_prefix : "UD_SR_";
    ucs_diag("out of receive buffers: the application holds received "
             "messages up to UCX_%sRX_MAX_BUFS=%u (or memory ran out); "
             "datagrams are dropped until it releases them, and peers may "
             "time out. Raise UCX_%sRX_MAX_BUFS.",
             prefix, chan->config.rx_max, prefix);
}

/* The copy class of a message of this length, or rx_copy_num: none. */
static inline unsigned aptus_ud_rx_copy_class(const aptus_ud_chan_t *chan,
                                              size_t length)
{
    unsigned cls;

    for (cls = 0; cls < chan->rx_copy_num; ++cls) {
        if (length <= chan->rx_copy[cls].max) {
            break;
        }
    }
    return cls;
}

/* A small message in a large datagram buffer moves to a small buffer of
 * its own (where a payload after the basic header lies, so aligned as the
 * user asks), and the datagram buffer goes back at once: what the user
 * keeps costs the message's size, not the MTU. Without a small buffer it
 * stays where it is. */
static aptus_ud_rx_desc_t *aptus_ud_rx_copy_small(aptus_ud_chan_t *chan,
                                                  aptus_ud_rx_desc_t *desc,
                                                  unsigned cls)
{
    aptus_ud_rx_desc_t *small = chan->rx_copy[cls].spare;

    if (small != NULL) {
        chan->rx_copy[cls].spare = NULL;
    } else {
        small = ucs_mpool_get_inline(&chan->rx_copy[cls].mp);
    }
    if (ucs_unlikely(small == NULL)) {
        /* a held packet popped at the ceiling: it keeps its buffer */
        aptus_ud_rx_align(chan, desc);
        chan->stats.rx_kept_large++;
        return desc;
    }
    small->msg.data   = UCS_PTR_BYTE_OFFSET(aptus_ud_rx_dgram(chan, small),
                                            APTUS_UD_SR_HDR_LEN);
    small->msg.length = desc->msg.length;
    small->msg.am_id  = desc->msg.am_id;
    memcpy(small->msg.data, desc->msg.data, desc->msg.length);
    ucs_mpool_put_inline(desc);
    chan->stats.rx_copied_small++;
    return small;
}

/* A stream that breaks its own framing is dead: drop it whole. */
static void aptus_ud_rx_protocol_error(aptus_ud_chan_t *chan,
                                       aptus_ud_peer_t *peer,
                                       aptus_ud_rx_desc_t *desc,
                                       const char *what)
{
    ucs_diag("ud_sr: stream %u from key 0x%016" PRIx64 ": %s", peer->conn_id,
             peer->remote_key, what);
    chan->stats.rx_malformed++;
    ucs_mpool_put_inline(desc);
    aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_IO_ERROR);
}

/* Handle the next in-order packet: deliver it, or add it to the message
 * being reassembled. Returns 0 if the stream failed. */
static int aptus_ud_rx_inorder(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                               aptus_ud_rx_desc_t *desc, int is_async)
{
    uint8_t flags = desc->flags & (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST);
    aptus_ud_peer_ext_t *ext;
    aptus_ud_reasm_t *reasm;
    unsigned cls;

    if (flags == (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) {
        if (ucs_unlikely(desc->flags & APTUS_UD_SR_F_NOP)) {
            ucs_mpool_put_inline(
                desc); /* an endpoint check: nothing for the user */
            if ((peer->flags &
                 (APTUS_UD_PEER_USER | APTUS_UD_PEER_USER_GONE)) ==
                APTUS_UD_PEER_USER_GONE) {
                /* The endpoint it checks was destroyed here: the check
                 * fails, as over UCX's tcp once the socket is closed (UCP's
                 * keepalive relies on it). */
                aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_RESET, 0);
                aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_CONNECTION_RESET);
                return 0;
            }
            return 1;
        }
        cls = aptus_ud_rx_copy_class(chan, desc->msg.length);
        if (cls < chan->rx_copy_num) {
            desc = aptus_ud_rx_copy_small(chan, desc, cls);
        } else {
            aptus_ud_rx_align(chan, desc);
        }
        desc->msg.peer = peer;
        aptus_ud_rx_deliver(chan, &desc->msg, is_async);
        return 1;
    }

    ext = aptus_ud_peer_ext_get(chan, peer);
    if (ext == NULL) {
        aptus_ud_rx_protocol_error(chan, peer, desc, "out of memory");
        return 0;
    }

    if (flags == APTUS_UD_SR_F_FIRST) {
        /* reserved when the window took it: the buffer's from here on */
        if (ext->reasm != NULL) {
            aptus_ud_rx_reasm_unreserve(chan);
            aptus_ud_rx_protocol_error(chan, peer, desc,
                                       "new message inside a message");
            return 0;
        }
        reasm = ucs_mpool_get_inline(&chan->reasm_mp);
        if (reasm == NULL) {
            aptus_ud_rx_reasm_unreserve(chan);
            aptus_ud_rx_protocol_error(chan, peer, desc,
                                       "no reassembly buffer");
            return 0;
        }
        reasm->msg.peer   = peer;
        reasm->msg.data   = aptus_ud_reasm_data(chan, reasm);
        reasm->msg.length = desc->msg_len;
        reasm->msg.am_id  = desc->msg.am_id;
        reasm->offset     = 0;
        ext->reasm        = reasm;
    } else {
        reasm = ext->reasm;
        if (reasm == NULL) {
            aptus_ud_rx_protocol_error(chan, peer, desc,
                                       "fragment without a first fragment");
            return 0;
        }
        if (reasm->msg.am_id != desc->msg.am_id) {
            aptus_ud_rx_protocol_error(chan, peer, desc,
                                       "fragment of another message");
            return 0;
        }
    }

    if (reasm->offset + desc->msg.length > reasm->msg.length) {
        aptus_ud_rx_protocol_error(chan, peer, desc,
                                   "fragments longer than the message");
        return 0;
    }
    memcpy(UCS_PTR_BYTE_OFFSET(reasm->msg.data, reasm->offset), desc->msg.data,
           desc->msg.length);
    reasm->offset += desc->msg.length;

    if (flags & APTUS_UD_SR_F_LAST) {
        if (reasm->offset != reasm->msg.length) {
            aptus_ud_rx_protocol_error(chan, peer, desc,
                                       "message shorter than announced");
            return 0;
        }
        ext->reasm = NULL;
        aptus_ud_rx_reasm_unreserve(chan);
        aptus_ud_rx_deliver(chan, &reasm->msg, is_async);
    }
    ucs_mpool_put_inline(desc);
    return 1;
}

static int aptus_ud_rx_hold(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                            aptus_ud_rx_desc_t *desc)
{
    aptus_ud_peer_ext_t *ext = aptus_ud_peer_ext_get(chan, peer);
    aptus_ud_rx_desc_t **pos;

    if (ext == NULL) {
        return 0;
    }
    chan->rx_held++;
    /* keep the held list in PSN order: packets past a hole mostly arrive
     * in order, so they go at the tail; a repaired hole between them
     * walks the list (at most a window) */
    desc->next = NULL;
    if (ext->held == NULL) {
        ext->held = ext->held_tail = desc;
        return 1;
    }
    if (aptus_psn_lt(ext->held_tail->psn, desc->psn)) {
        ext->held_tail->next = desc;
        ext->held_tail       = desc;
        return 1;
    }
    for (pos = &ext->held;
         (*pos != NULL) && aptus_psn_lt((*pos)->psn, desc->psn);
         pos = &(*pos)->next) {
    }
    desc->next = *pos;
    *pos       = desc;
    return 1;
}

static inline void aptus_ud_rx_want_ack(aptus_ud_chan_t *chan,
                                        aptus_ud_peer_t *peer)
{
    if (!(peer->flags & APTUS_UD_PEER_IN_ACK) &&
        (aptus_rel_rx_ack_due(&peer->rx, &chan->config.rel) ||
         aptus_rel_rx_ack_soon(&peer->rx))) {
        peer->flags |= APTUS_UD_PEER_IN_ACK;
        chan->ack_list[chan->num_ack++] = peer;
    }
}

static void aptus_ud_rx_ack_later(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    if (peer->flags & APTUS_UD_PEER_IN_SOON) {
        return;
    }
    if (ucs_array_append(aptus_ud_peer_ptrs, &chan->soon_list) != UCS_OK) {
        /* cannot defer: acknowledge now */
        aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_ACK, 0);
        return;
    }
    peer->flags |= APTUS_UD_PEER_IN_SOON;
    *ucs_array_last(&chan->soon_list) = peer;
}

void aptus_ud_rx_flush_acks(aptus_ud_chan_t *chan)
{
    aptus_ud_peer_t *peer;
    unsigned i;

    for (i = 0; i < chan->num_ack; ++i) {
        peer = chan->ack_list[i];
        peer->flags &= ~APTUS_UD_PEER_IN_ACK;
        if (peer->flags & APTUS_UD_PEER_FAILED) {
            continue;
        }
        if (aptus_rel_rx_ack_due(&peer->rx, &chan->config.rel)) {
            aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_ACK, 0);
        } else if (aptus_rel_rx_ack_soon(&peer->rx)) {
            aptus_ud_rx_ack_later(chan, peer);
        }
    }
    chan->num_ack = 0;
}

void aptus_ud_rx_flush_soon_acks(aptus_ud_chan_t *chan)
{
    aptus_ud_peer_t *peer;
    unsigned i;

    for (i = 0; i < ucs_array_length(&chan->soon_list); ++i) {
        peer = ucs_array_elem(&chan->soon_list, i);
        peer->flags &= ~APTUS_UD_PEER_IN_SOON;
        /* not settled by a reply meanwhile: acknowledge explicitly */
        if (!(peer->flags & APTUS_UD_PEER_FAILED) &&
            aptus_rel_rx_ack_soon(&peer->rx)) {
            aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_ACK, 0);
        }
    }
    ucs_array_length(&chan->soon_list) = 0;
    aptus_ud_tx_batch_flush(chan);
}

static void aptus_ud_rx_data(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                             const aptus_ud_sr_pkt_t *pkt,
                             aptus_ud_rx_desc_t *desc, int is_async,
                             int *consumed_p)
{
    aptus_rel_rx_verdict_t verdict;
    aptus_ud_rx_desc_t *held;
    unsigned cls;

    chan->stats.rx_data_dgrams++;
    if (pkt->flags & APTUS_UD_SR_F_ACK_REQ) {
        aptus_rel_rx_request(&peer->rx, (aptus_psn_t)(pkt->psn + 1), 0);
    }

    verdict =
        aptus_rel_rx_classify(&peer->rx, aptus_ud_peer_rx_map(peer), pkt->psn);
    if (ucs_unlikely((verdict == APTUS_REL_RX_HOLD) &&
                     (chan->rx_held >= chan->rx_held_max))) {
        chan->stats.rx_hold_limit++; /* as if lost: resent after the hole */
        return;
    }
    if ((verdict == APTUS_REL_RX_DELIVER) || (verdict == APTUS_REL_RX_HOLD)) {
        if ((verdict == APTUS_REL_RX_DELIVER) && (chan->rx_copy_num != 0) &&
            ((pkt->flags & (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) ==
             (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) &&
            ((cls = aptus_ud_rx_copy_class(chan, pkt->payload_len)) <
             chan->rx_copy_num) &&
            (chan->rx_copy[cls].spare == NULL)) {
            /* the buffer the message will move to: at the ceiling it is
             * not taken, as if lost, and the sender retransmits it */
            chan->rx_copy[cls].spare =
                ucs_mpool_get_inline(&chan->rx_copy[cls].mp);
            if (chan->rx_copy[cls].spare == NULL) {
                aptus_ud_rx_pool_exhausted(chan);
                return;
            }
        }
        if (aptus_ud_rx_starts_reasm(pkt->flags)) {
            if (chan->reasm_active >= chan->config.max_reasm) {
                /* not taken: as if lost, the sender retransmits it */
                chan->stats.rx_reasm_limit++;
                return;
            }
            chan->reasm_active++;
        }
        desc->msg.data   = (void *)pkt->payload;
        desc->msg.length = pkt->payload_len;
        desc->msg.am_id =
            pkt->am_id |
            ((pkt->flags & APTUS_UD_SR_F_INTERNAL) ? APTUS_UD_AM_INTERNAL : 0);
        desc->msg_len = pkt->msg_len;
        desc->psn     = pkt->psn;
        desc->flags   = pkt->flags;
    }

    switch (verdict) {
    case APTUS_REL_RX_DUPLICATE:
        chan->stats.rx_duplicates++;
        break;
    case APTUS_REL_RX_OUT_OF_WINDOW:
        chan->stats.rx_out_of_window++;
        break;
    case APTUS_REL_RX_HOLD:
        if (!aptus_ud_rx_hold(chan, peer, desc)) {
            if (aptus_ud_rx_starts_reasm(desc->flags)) {
                aptus_ud_rx_reasm_unreserve(chan);
            }
            return; /* no memory to hold it: as if lost */
        }
        chan->stats.rx_held++;
        *consumed_p = 1;
        break;
    case APTUS_REL_RX_DELIVER:
        *consumed_p = 1;
        aptus_rel_rx_commit(&peer->rx, NULL, pkt->psn, verdict);
        if (!aptus_ud_rx_inorder(chan, peer, desc, is_async)) {
            return;
        }
        while (aptus_rel_rx_pop_held(&peer->rx, aptus_ud_peer_rx_map(peer))) {
            held            = peer->ext->held;
            peer->ext->held = held->next;
            chan->rx_held--;
            if (held->next == NULL) {
                peer->ext->held_tail = NULL;
            }
            ucs_assert(held->psn == (aptus_psn_t)(peer->rx.expected - 1));
            if (!aptus_ud_rx_inorder(chan, peer, held, is_async)) {
                return;
            }
        }
        aptus_ud_chan_activate(chan, peer);
        aptus_ud_rx_want_ack(chan, peer);
        return;
    }

    aptus_rel_rx_commit(&peer->rx, aptus_ud_peer_rx_map(peer), pkt->psn,
                        verdict);
    aptus_ud_chan_activate(chan, peer);
    aptus_ud_rx_want_ack(chan, peer);
}

/* Whether a datagram for a stream that is dead here deserves a RESET: data,
 * or a request for an acknowledgement; never an ACK or a RESET (no
 * ping-pong between two sides that both lost the stream). */
static inline int aptus_ud_rx_wants_reset(const aptus_ud_sr_pkt_t *pkt)
{
    return (pkt->type == APTUS_UD_SR_TYPE_DATA) ||
           (pkt->flags & APTUS_UD_SR_F_ACK_REQ);
}

/* Tell the sender of a datagram of an incarnation we do not have (a stream
 * that died here and was reclaimed, or an earlier one) that it is dead, as
 * a tombstone would, without keeping one. The tokens go back swapped: the
 * answer reaches only the incarnation that sent. */
static void aptus_ud_rx_reset_unknown(aptus_ud_chan_t *chan,
                                      const aptus_wire_addr_t *src,
                                      const aptus_ud_sr_pkt_t *pkt)
{
    aptus_ud_peer_t ghost;

    if (!aptus_ud_rx_wants_reset(pkt)) {
        return;
    }
    memset(&ghost, 0, sizeof(ghost));
    ghost.addr         = *src;
    ghost.remote_key   = pkt->src_key;
    ghost.conn_id      = pkt->conn_id;
    ghost.local_token  = pkt->dest_token;
    ghost.remote_token = pkt->src_token;
    aptus_ud_tx_send_ctl(chan, &ghost, APTUS_UD_SR_TYPE_RESET, 0);
    aptus_ud_tx_batch_flush(chan); /* the batch points at ghost.addr */
}

/* Data that asks for the handshake is answered with both tokens (an ACK
 * with REPLY: "resend what you sent before this"), never delivered. */
static void aptus_ud_rx_handshake(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                  const aptus_ud_sr_pkt_t *pkt)
{
    chan->stats.rx_opening++;
    aptus_rel_rx_request(&peer->rx, (aptus_psn_t)(pkt->psn + 1), 1);
    aptus_ud_chan_activate(chan, peer);
    aptus_ud_rx_want_ack(chan, peer);
}

/* A datagram whose tokens are not the stream's: the handshake, a stale or
 * replayed datagram, or the remote side's new incarnation. Returns 1 if it
 * belongs to the stream after all (the remote's token just learned). */
static int aptus_ud_rx_incarnation(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                   const aptus_wire_addr_t *src,
                                   const aptus_ud_sr_pkt_t *pkt)
{
    if ((pkt->dest_token == 0) && (pkt->type == APTUS_UD_SR_TYPE_RESET)) {
        /* the opener gave up before it had our token (its endpoint
         * cancelled): only the opening it named goes */
        if (!(peer->flags & APTUS_UD_PEER_HEARD) &&
            (pkt->src_token == peer->remote_token)) {
            aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_CONNECTION_RESET);
        } else {
            chan->stats.rx_stale++;
        }
        return 0;
    }
    if (pkt->dest_token == 0) { /* data opening a stream */
        if (!(peer->flags & APTUS_UD_PEER_HEARD)) {
            /* both sides opening at once, or the remote's opening
             * again: the latest token wins until one is confirmed */
            peer->remote_token = pkt->src_token;
            aptus_ud_rx_handshake(chan, peer, pkt);
        } else if (pkt->src_token == peer->remote_token) {
            chan->stats.rx_stale++; /* a late copy of the opening */
        } else {
            /* a replay, or the remote side lost its half and opens anew:
             * a probe of the confirmed incarnation tells, since a remote
             * that no longer has it answers with a reset */
            chan->stats.rx_challenges++;
            aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_ACK, 1);
        }
        return 0;
    }
    if (pkt->dest_token != peer->local_token) {
        /* an earlier incarnation of ours: stale, replayed or forged */
        chan->stats.rx_stale++;
        aptus_ud_rx_reset_unknown(chan, src, pkt);
        return 0;
    }
    /* the sender knows this incarnation of ours */
    if (peer->flags & APTUS_UD_PEER_HEARD) {
        chan->stats.rx_stale++; /* but not the remote's: not its sender */
        return 0;
    }
    if (pkt->type == APTUS_UD_SR_TYPE_RESET) {
        if (peer->remote_token == 0) {
            /* the answer to our opening: the remote's half of the stream
             * is dead (a tombstone), so is ours */
            aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_CONNECTION_RESET);
        } else {
            chan->stats.rx_stale++;
        }
        return 0;
    }
    peer->remote_token = pkt->src_token;
    return 1;
}

/* The first datagram with both tokens right. */
static int aptus_ud_rx_confirm(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                               const aptus_ud_sr_pkt_t *pkt, int opener)
{
    aptus_ud_tx_ctx_t ctx;

    if (pkt->type == APTUS_UD_SR_TYPE_RESET) {
        /* the remote has no incarnation with the token we took from an
         * opening (a replayed one): forget it, the genuine opener opens
         * again and data from here asks for the handshake */
        peer->remote_token = 0;
        chan->stats.rx_stale++;
        return 0;
    }
    peer->flags |= APTUS_UD_PEER_HEARD;
    if (peer->flags & APTUS_UD_PEER_OPENING) {
        aptus_ud_chan_opening_leave(chan, peer);
    }
    if (opener && (peer->win != NULL)) {
        /* what went before the remote's token was known asked for the
         * handshake and was not taken: it goes again, now */
        ctx.chan   = chan;
        ctx.peer   = peer;
        ctx.status = UCS_OK;
        chan->stats.tx_open_resends += aptus_rel_tx_resend_all(
            &peer->win->tx, chan->now_us, aptus_ud_tx_resend, &ctx);
    }
    return 1;
}

/* A path probe is answered whatever the stream's state (it changes none,
 * and the answer is smaller than the probe); an answer raises the size of
 * the stream that asked. */
static void aptus_ud_rx_path(aptus_ud_chan_t *chan,
                             const aptus_wire_addr_t *src,
                             const aptus_ud_sr_pkt_t *pkt)
{
    aptus_ud_peer_t *peer;

    if (!(pkt->flags & APTUS_UD_SR_F_REPLY)) {
        chan->stats.path_replies++;
        aptus_ud_tx_path_reply(chan, src, pkt);
        return;
    }
    peer = aptus_ud_chan_peer_lookup(chan, src, pkt->src_key, pkt->conn_id);
    if ((peer != NULL) && (pkt->dest_token == peer->local_token)) {
        aptus_ud_chan_path_confirmed(chan, peer, pkt->psn);
    }
}

/* Returns 1 if the datagram's descriptor was kept. */
static int aptus_ud_rx_handle(aptus_ud_chan_t *chan, aptus_ud_rx_desc_t *desc,
                              size_t length, const aptus_wire_addr_t *src,
                              int is_async)
{
    aptus_ud_sr_parse_status_t pstatus;
    aptus_rel_ack_status_t astatus;
    aptus_ud_tx_ctx_t ctx;
    aptus_ud_sr_pkt_t pkt;
    aptus_ud_peer_win_t *win;
    aptus_ud_peer_t *peer;
    aptus_psn_t acked;
    int consumed = 0;
    int opener;

    if (ucs_unlikely(aptus_log_data_enabled())) {
        struct iovec iov = { aptus_ud_rx_dgram(chan, desc), length };
        aptus_ud_trace_dgram(chan, "rx", src, &iov, 1);
    }
    pstatus = aptus_ud_sr_parse(aptus_ud_rx_dgram(chan, desc), length,
                                chan->config.crc, &pkt);
    if (ucs_unlikely(pstatus != APTUS_UD_SR_PARSE_OK)) {
        if (pstatus == APTUS_UD_SR_PARSE_BAD_CRC) {
            chan->stats.rx_bad_crc++;
        } else {
            chan->stats.rx_malformed++;
        }
        return 0;
    }
    if (ucs_unlikely(pkt.dest_key != chan->local_key)) {
        chan->stats.rx_bad_key++; /* stray, stale or forged */
        return 0;
    }
    if (ucs_unlikely((pkt.type == APTUS_UD_SR_TYPE_ACK) &&
                     (pkt.flags & APTUS_UD_SR_F_PATH))) {
        aptus_ud_rx_path(chan, src, &pkt);
        return 0;
    }
    if (ucs_unlikely((pkt.type == APTUS_UD_SR_TYPE_DATA) &&
                     (pkt.flags & APTUS_UD_SR_F_FIRST) &&
                     !(pkt.flags & APTUS_UD_SR_F_LAST) &&
                     (pkt.msg_len > chan->config.max_msg))) {
        chan->stats.rx_malformed++;
        return 0;
    }

    peer = aptus_ud_chan_peer_lookup(chan, src, pkt.src_key, pkt.conn_id);
    if (ucs_unlikely(peer == NULL)) {
        if (pkt.dest_token != 0) {
            /* an incarnation that died here and was reclaimed (or never
             * was): it is dead for the sender too */
            if (aptus_ud_rx_wants_reset(&pkt)) {
                chan->stats.rx_dead_stream++;
                aptus_ud_rx_reset_unknown(chan, src, &pkt);
            } else {
                chan->stats.rx_unknown_stream++;
            }
            return 0;
        }
        if (pkt.type == APTUS_UD_SR_TYPE_RESET) {
            chan->stats.rx_unknown_stream++; /* an opening we never had */
            return 0;
        }
        /* data asking for the handshake: a stream the remote side opens */
        peer = aptus_ud_chan_peer_open(chan, src, pkt.src_key, pkt.conn_id,
                                       pkt.src_token);
        if (peer != NULL) {
            aptus_ud_rx_handshake(chan, peer, &pkt);
        }
        return 0;
    }

    if (ucs_unlikely(peer->flags & APTUS_UD_PEER_FAILED)) {
        chan->stats.rx_dead_stream++;
        if (aptus_ud_rx_wants_reset(&pkt) && (pkt.src_token != 0)) {
            /* the tombstone answers whichever incarnation asks */
            peer->remote_token = pkt.src_token;
            aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_RESET, 0);
        }
        return 0;
    }

    opener = (peer->remote_token == 0);
    if (ucs_unlikely((pkt.dest_token != peer->local_token) ||
                     (pkt.src_token != peer->remote_token)) &&
        !aptus_ud_rx_incarnation(chan, peer, src, &pkt)) {
        return 0;
    }
    if (ucs_unlikely(!(peer->flags & APTUS_UD_PEER_HEARD)) &&
        !aptus_ud_rx_confirm(chan, peer, &pkt, opener)) {
        return 0;
    }

    ctx.chan   = chan;
    ctx.peer   = peer;
    ctx.status = UCS_OK;
    win        = peer->win;
    if (ucs_likely(win != NULL)) {
        acked   = win->tx.acked_psn;
        astatus = aptus_rel_tx_ack(&win->tx, &chan->config.rel, pkt.ack,
                                   pkt.sack, pkt.sack_words, chan->now_us,
                                   aptus_ud_tx_release, &ctx);
        if (ucs_unlikely(astatus != APTUS_REL_ACK_OK)) {
            chan->stats.rx_bad_ack++;
            return 0;
        }
        aptus_rel_tx_heard(&win->tx, chan->now_us);
        if (acked != win->tx.acked_psn) {
            aptus_ud_chan_tx_progressed(chan, peer);
        }
        if (ucs_unlikely(win->tx.sacked)) {
            chan->stats.tx_fast_retransmits += aptus_rel_tx_fast_retransmit(
                &win->tx, &chan->config.rel, chan->now_us, aptus_ud_tx_resend,
                &ctx);
        }
    } else if (ucs_unlikely(aptus_psn_lt(peer->parked.next_psn, pkt.ack))) {
        /* nothing in flight: an ack can only name what was sent */
        chan->stats.rx_bad_ack++;
        return 0;
    }

    switch (pkt.type) {
    case APTUS_UD_SR_TYPE_ACK:
        chan->stats.rx_acks++;
        if (pkt.flags & APTUS_UD_SR_F_ACK_REQ) {
            aptus_rel_rx_request(&peer->rx, pkt.psn, 1);
            aptus_ud_rx_want_ack(chan, peer);
        }
        if ((pkt.flags & APTUS_UD_SR_F_REPLY) && (peer->win != NULL)) {
            /* everything the request covered that it does not have is lost */
            chan->stats.tx_fast_retransmits +=
                aptus_rel_tx_reply(&peer->win->tx, &chan->config.rel, pkt.psn,
                                   chan->now_us, aptus_ud_tx_resend, &ctx);
        }
        break;
    case APTUS_UD_SR_TYPE_RESET:
        aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_CONNECTION_RESET);
        break;
    default:
        aptus_ud_rx_data(chan, peer, &pkt, desc, is_async, &consumed);
        break;
    }
    return consumed;
}

/* Top the posted buffers up from the pool. The pool grows up to RX_MAX_BUFS;
 * at the ceiling fewer are posted and the kernel drops datagrams, as a UD QP
 * without receive buffers would, and senders retransmit once the application
 * releases descriptors. It is counted (rx_pool_exhausted) and said once at
 * diag level naming the setting to raise: an application may hold buffers
 * on purpose (UCX's own transports are silent here), and peers time out
 * only if it lasts, which the timeout error reports. */
static void aptus_ud_rx_refill(aptus_ud_chan_t *chan)
{
    aptus_ud_rx_desc_t *desc;

    while (chan->rx_posted < chan->config.rx_batch) {
        desc = ucs_mpool_get_inline(&chan->rx_mp);
        if (ucs_unlikely(desc == NULL)) {
            aptus_ud_rx_pool_exhausted(chan);
            return;
        }
        chan->rx_slots[chan->rx_posted++].buf = aptus_ud_rx_dgram(chan, desc);
    }
}

unsigned aptus_ud_rx_progress(aptus_ud_chan_t *chan, int is_async)
{
    aptus_dgram_rx_t *slots = chan->rx_slots;
    aptus_ud_rx_desc_t *desc;
    unsigned i, n, posted;

    if (chan->rx_skip_poll) {
        chan->rx_skip_poll = 0;
        return 0;
    }
    if (ucs_unlikely(chan->rx_posted < chan->config.rx_batch)) {
        aptus_ud_rx_refill(chan);
        if (chan->rx_posted == 0) {
            chan->stats.rx_no_buffer++;
            return 0;
        }
    }

    n = chan->wire->ops->recv(chan->wire, slots, chan->rx_posted);
    for (i = 0; i < n; ++i) {
        desc = aptus_ud_rx_desc_of(chan, slots[i].buf);
        if (aptus_ud_rx_handle(chan, desc, slots[i].length, &slots[i].src,
                               is_async)) {
            slots[i].buf = NULL;
        }
    }

    if (n > 0) {
        /* The buffers kept are among the first n: put fresh ones in their
         * place, which leaves the rest of the posted slots untouched. */
        for (i = 0; i < n; ++i) {
            if (slots[i].buf == NULL) {
                desc = ucs_mpool_get_inline(&chan->rx_mp);
                if (ucs_unlikely(desc == NULL)) {
                    break;
                }
                slots[i].buf = aptus_ud_rx_dgram(chan, desc);
            }
        }
        if (ucs_unlikely(i < n)) {
            /* the pool ran dry: fill the holes with the last posted
             * buffers (only slots the wire filled change, wire.h) and post
             * fewer; the next call tops up what the pool gives back */
            posted = chan->rx_posted;
            for (i = 0; (i < n) && (i < posted); ++i) {
                while ((slots[i].buf == NULL) && (posted > i + 1)) {
                    slots[i].buf = slots[--posted].buf;
                }
                if (slots[i].buf == NULL) {
                    posted = i;
                    break;
                }
            }
            chan->rx_posted = posted;
            aptus_ud_rx_refill(chan);
        }
        aptus_ud_rx_flush_acks(chan);
        aptus_ud_tx_batch_flush(chan);
    }
    return n;
}
