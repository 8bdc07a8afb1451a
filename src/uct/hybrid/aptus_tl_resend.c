/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: aptus messages survive a broken RC connection.
 *
 * The sender keeps a copy of every active message it sends over RC until
 * the receiver confirms that every message before a sequence number is
 * in: the trailer of any message back carries it; with nothing going back,
 * an XACK over the UD stream does (after 16 messages over RC, or 10 ms
 * after the first unconfirmed one: a confirmation frees memory, it holds
 * up nothing). When the connection breaks while the peer
 * lives, the copies go again over UD, in order, before anything new; the
 * receiver drops those it had already by their sequence numbers. So a
 * failed connection costs a resend, not a message, and none arrives twice.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "proto/le.h"

#include <string.h>

#define UCT_APTUS_XACK_COUNT 16 /* RC messages per XACK */
#define UCT_APTUS_XACK_MS    10 /* longest wait of the first one */

/* The clock of the last progress call or UD send: confirmations wait
 * milliseconds, and a read of the clock per call would cost more. */
static uint32_t uct_aptus_tl_now_ms(const uct_aptus_tl_iface_t *iface)
{
    return (uint32_t)(iface->ud.chan.now_us / 1000);
}

void uct_aptus_tl_rc_keep(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                          const aptus_chan_send_t *send, uint32_t seq)
{
    size_t length = aptus_chan_send_length(send);
    uct_aptus_tl_copy_t *copy;
    uint8_t *p;
    unsigned i;

    /* the connection took it: it holds no more than an element does */
    ucs_assertv(length <= iface->rc.config.max_msg, "length %zu", length);
    copy = ucs_mpool_get_inline(&iface->keep_mp);
    if (copy == NULL) {
        /* without it a broken connection would lose the message: the
         * peer fails then, as before copies were kept */
        ucs_warn("aptus/%s: no memory to keep a message for a resend",
                 iface->dev_name);
        return;
    }
    copy->seq    = seq;
    copy->length = length;
    copy->am_id  = send->am_id;
    p            = copy->data;
    if (send->hdr_len > 0) {
        memcpy(p, send->hdr, send->hdr_len);
        p += send->hdr_len;
    }
    if (send->kind == APTUS_CHAN_SEND_COPY) {
        memcpy(p, send->copy.buffer, send->copy.length);
    } else {
        for (i = 0; i < send->iov.iovcnt; ++i) {
            memcpy(p, send->iov.iov[i].iov_base, send->iov.iov[i].iov_len);
            p += send->iov.iov[i].iov_len;
        }
    }
    ucs_queue_push(&ep->act->rc_unacked, &copy->queue);
    iface->stats.kept_now++;
    iface->stats.kept_bytes += length;
}

static void uct_aptus_tl_copy_free(uct_aptus_tl_iface_t *iface,
                                   uct_aptus_tl_copy_t *copy)
{
    iface->stats.kept_now--;
    iface->stats.kept_bytes -= copy->length;
    ucs_mpool_put_inline(copy);
}

void uct_aptus_tl_xack_recv(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                            uint32_t next)
{
    uct_aptus_tl_copy_t *copy;

    while (!ucs_queue_is_empty(&ep->act->rc_unacked)) {
        copy = ucs_queue_head_elem_non_empty(&ep->act->rc_unacked,
                                             uct_aptus_tl_copy_t, queue);
        if (!aptus_xseq_lt(copy->seq, next)) {
            break;
        }
        ucs_queue_pull_non_empty(&ep->act->rc_unacked);
        uct_aptus_tl_copy_free(iface, copy);
    }
}

static ssize_t uct_aptus_tl_xack_try(uct_aptus_tl_iface_t *iface,
                                     uct_aptus_tl_ep_t *ep)
{
    uint8_t msg[UCT_APTUS_CTL_LEN] = { UCT_APTUS_CTL_XACK };
    ssize_t ret;

    aptus_put32(msg + 4, ep->act->xrx.next);
    ret = aptus_ud_chan_send_internal(&iface->ud.chan, &ep->peer,
                                      UCT_APTUS_CTL_MSG_ID, msg, sizeof(msg),
                                      NULL, 0);
    if (ret != UCS_ERR_NO_RESOURCE) {
        /* sent, or the stream failed (and with it the need) */
        ep->act->rc_rx_unacked = 0;
        iface->stats.xacks_sent += (ret >= 0);
    }
    return ret;
}

void uct_aptus_tl_rc_received(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep)
{
    if (ucs_unlikely(ep->act == NULL)) {
        return; /* its message was dropped for want of memory */
    }
    if (ep->act->rc_rx_unacked++ == 0) {
        ep->act->rc_rx_since_ms = uct_aptus_tl_now_ms(iface);
        if (!(ep->flags & UCT_APTUS_EP_XACK) &&
            uct_aptus_tl_ep_list_add(&iface->xack_list, ep)) {
            ep->flags |= UCT_APTUS_EP_XACK;
        }
    }
    if (ep->act->rc_rx_unacked >= UCT_APTUS_XACK_COUNT) {
        uct_aptus_tl_xack_try(iface, ep);
    }
}

static size_t uct_aptus_tl_pack_kept(void *dest, void *arg)
{
    uct_aptus_tl_copy_t *copy = arg;

    memcpy(dest, copy->data, copy->length);
    return copy->length;
}

static int uct_aptus_tl_resend_one(uct_aptus_tl_iface_t *iface,
                                   uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_copy_t *copy = ucs_queue_head_elem_non_empty(
        &ep->act->resend, uct_aptus_tl_copy_t, queue);
    aptus_chan_send_t send;
    ssize_t ret;

    /* the whole message, its trailer (its sequence number) included */
    aptus_chan_send_pack(&send, copy->am_id, uct_aptus_tl_pack_kept, copy);
    ret = aptus_chan_send(&iface->ud.chan.super, (aptus_chan_peer_t *)&ep->peer,
                          &send);
    if (ret == UCS_ERR_NO_RESOURCE) {
        return 0;
    }
    ucs_queue_pull_non_empty(&ep->act->resend);
    if (ret >= 0) {
        iface->stats.resent++;
        uct_aptus_tl_ep_sent(iface, ep, APTUS_CHAN_UD_SR, copy->length);
    }
    uct_aptus_tl_copy_free(iface, copy);
    return 1;
}

static void uct_aptus_tl_resend_drain(uct_aptus_tl_iface_t *iface,
                                      uct_aptus_tl_ep_t *ep)
{
    while (!ucs_queue_is_empty(&ep->act->resend) &&
           uct_aptus_tl_resend_one(iface, ep)) {
    }
}

void uct_aptus_tl_rc_fallback(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep)
{
    iface->stats.rc_fallbacks++;
    /* what the peer did not confirm goes again, before anything new */
    ucs_queue_splice(&ep->act->resend, &ep->act->rc_unacked);
    aptus_alloc_release(&iface->alloc, &ep->act->alloc, APTUS_ALLOC_RC,
                        uct_ud_sr_clock());
    uct_aptus_tl_ep_rc_close(iface, ep);
    uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_DEMOTE, APTUS_ALLOC_RC);
    uct_aptus_tl_resend_drain(iface, ep);
    if (!ucs_queue_is_empty(&ep->act->resend) &&
        !(ep->flags & UCT_APTUS_EP_RESEND) &&
        uct_aptus_tl_ep_list_add(&iface->resend_list, ep)) {
        ep->flags |= UCT_APTUS_EP_RESEND;
    }
}

unsigned uct_aptus_tl_resend_progress(uct_aptus_tl_iface_t *iface)
{
    uint32_t now_ms = 0;
    uct_aptus_tl_ep_t *ep;
    unsigned i, count = 0;

    for (i = 0; i < ucs_array_length(&iface->resend_list);) {
        ep = ucs_array_elem(&iface->resend_list, i);
        uct_aptus_tl_resend_drain(iface, ep);
        if (ucs_queue_is_empty(&ep->act->resend)) {
            ep->flags &= ~UCT_APTUS_EP_RESEND;
            uct_aptus_tl_ep_list_remove(&iface->resend_list, i);
            ++count;
        } else {
            ++i;
        }
    }
    if (!ucs_array_is_empty(&iface->xack_list)) {
        now_ms = uct_aptus_tl_now_ms(iface);
    }
    for (i = 0; i < ucs_array_length(&iface->xack_list);) {
        ep = ucs_array_elem(&iface->xack_list, i);
        if ((ep->act->rc_rx_unacked > 0) &&
            ((now_ms - ep->act->rc_rx_since_ms) >= UCT_APTUS_XACK_MS)) {
            uct_aptus_tl_xack_try(iface, ep);
            ++count;
        }
        if (ep->act->rc_rx_unacked == 0) {
            ep->flags &= ~UCT_APTUS_EP_XACK;
            uct_aptus_tl_ep_list_remove(&iface->xack_list, i);
        } else {
            ++i;
        }
    }
    return count;
}

void uct_aptus_tl_resend_forget(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_copy_t *copy;

    ucs_queue_splice(&ep->act->resend, &ep->act->rc_unacked);
    while (!ucs_queue_is_empty(&ep->act->resend)) {
        copy = ucs_queue_pull_elem_non_empty(&ep->act->resend,
                                             uct_aptus_tl_copy_t, queue);
        uct_aptus_tl_copy_free(iface, copy);
    }
    if (ep->flags & UCT_APTUS_EP_RESEND) {
        uct_aptus_tl_ep_list_del(&iface->resend_list, ep);
        ep->flags &= ~UCT_APTUS_EP_RESEND;
    }
    if (ep->flags & UCT_APTUS_EP_XACK) {
        uct_aptus_tl_ep_list_del(&iface->xack_list, ep);
        ep->flags &= ~UCT_APTUS_EP_XACK;
    }
}
