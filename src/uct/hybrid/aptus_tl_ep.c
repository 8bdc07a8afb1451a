/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: aptus endpoint operations.
 *
 * Each message asks the send rule chain for a channel among those the peer
 * has now, goes out with the peer's next sequence number in its trailer,
 * and counts towards the peer's traffic (which may earn it a connection).
 * A refused message waits in the endpoint's pending queue, dispatched from
 * progress, whichever channel will take it then.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "uct/base/aptus_rma.h"
#include "proto/le.h"
#include "channel/chan_pending.h"

#include <uct/base/uct_iov.inl>

#include <inttypes.h>

int uct_aptus_tl_ep_init_state_slow(uct_aptus_tl_iface_t *iface,
                                    uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_active_t *act;

    /* malloc, not a pool: what an idle peer gives back must go back to
     * the process, and this runs once per spell of traffic, not per
     * message */
    act = ucs_calloc(1, sizeof(*act), "aptus_peer_active");
    if (act == NULL) {
        ucs_error("aptus/%s: no memory for the state of a peer with traffic",
                  iface->dev_name);
        return 0;
    }
    act->ep = ep;
    aptus_xorder_rx_init(&act->xrx, iface->reorder_max);
    act->xrx.next = ep->rx_next;
    aptus_alloc_peer_init(&act->alloc, uct_ud_sr_clock());
    if (ep->flags & UCT_APTUS_EP_REMOTE) {
        /* what uct_aptus_tl_ep_set_remote barred stays barred (counted
         * once, then) */
        act->alloc.slot[APTUS_ALLOC_FP].barred = 1;
    }
    ucs_arbiter_group_init(&act->pending);
    ucs_queue_head_init(&act->rc_unacked);
    ucs_queue_head_init(&act->resend);
    act->last_use_us = iface->ud.chan.now_us;
    ucs_list_add_tail(&iface->active_peers, &act->list);
    iface->num_active++;
    iface->stats.peers_activated++;
    ep->act = act;
    return 1;
}

void uct_aptus_tl_ep_free_state(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_active_t *act = ep->act;

    if (act == NULL) {
        return;
    }
    ep->rx_next = act->xrx.next;
    ucs_arbiter_group_cleanup(&act->pending);
    ucs_list_del(&act->list);
    iface->num_active--;
    ucs_free(act);
    ep->act = NULL;
}

/* Nothing of the peer's active state is in use: it may go. */
static int uct_aptus_tl_ep_quiet(uct_aptus_tl_iface_t *iface,
                                 uct_aptus_tl_ep_t *ep, uint64_t now_us)
{
    uct_aptus_tl_active_t *act = ep->act;
    int kind;

    if ((act->rc != NULL) || (act->fp_tx != NULL) || (act->fp_rx != NULL) ||
        uct_aptus_tl_ctl_owes(act) || (act->rc_rx_unacked != 0) ||
        (act->xrx.num_held != 0) || (iface->dispatching == ep) ||
        (ep->flags &
         (UCT_APTUS_EP_CTL_LIST | UCT_APTUS_EP_XACK | UCT_APTUS_EP_RESEND)) ||
        !ucs_arbiter_group_is_empty(&act->pending) ||
        !ucs_queue_is_empty(&act->rc_unacked) ||
        !ucs_queue_is_empty(&act->resend)) {
        return 0;
    }
    for (kind = 0; kind < APTUS_ALLOC_KIND_LAST; ++kind) {
        /* a slot, or a refusal's back-off still running, is remembered */
        if ((act->alloc.slot[kind].state != APTUS_ALLOC_NONE) ||
            (act->alloc.slot[kind].not_before_us > now_us)) {
            return 0;
        }
    }
    return 1;
}

unsigned uct_aptus_tl_ep_shrink_progress(uct_aptus_tl_iface_t *iface,
                                         uint64_t now_us)
{
    uct_aptus_tl_active_t *act, *tmp;
    unsigned count = 0;

    if ((int64_t)(now_us - iface->next_shrink_us) < 0) {
        return 0;
    }
    iface->next_shrink_us = now_us + iface->shrink_us / 4;
    ucs_list_for_each_safe(act, tmp, &iface->active_peers, list)
    {
        if ((now_us - act->last_use_us >= iface->shrink_us) &&
            uct_aptus_tl_ep_quiet(iface, act->ep, now_us)) {
            uct_aptus_tl_ep_free_state(iface, act->ep);
            iface->stats.peers_shrunk++;
            ++count;
        }
    }
    return count;
}

size_t uct_aptus_tl_active_bytes(const uct_aptus_tl_iface_t *iface)
{
    return iface->num_active * sizeof(uct_aptus_tl_active_t);
}

/* ---- channels of a peer ------------------------------------------------ */

static int uct_aptus_tl_rc_usable(const uct_aptus_tl_ep_t *ep)
{
    return (ep->act->rc != NULL) &&
           (ep->act->alloc.slot[APTUS_ALLOC_RC].state == APTUS_ALLOC_GRANTED) &&
           (ep->rc_credits != 0) &&
           !(ep->act->rc->connected &&
             (ep->act->rc->link.flags & APTUS_RC_LINK_FAILED));
}

unsigned uct_aptus_tl_ep_allocated(uct_aptus_tl_iface_t *iface,
                                   uct_aptus_tl_ep_t *ep)
{
    unsigned allocated = APTUS_RULE_UD_CHANS;

    if (ucs_unlikely(uct_aptus_tl_rc_usable(ep))) {
        allocated |= APTUS_RULE_BIT(APTUS_RULE_RC_SR);
        if (iface->rma) {
            allocated |= APTUS_RULE_BIT(APTUS_RULE_RC_RDMA);
        }
        if (ep->flags & UCT_APTUS_EP_REMOTE) {
            /* no fast path reaches another host: its rules take the
             * connection it would ride on (uct_aptus_tl_select_but) */
            allocated |= APTUS_RULE_BIT(APTUS_RULE_RC_FP);
        }
    }
    if (ucs_unlikely((ep->act->fp_tx != NULL) && ep->act->fp_tx->waiting)) {
        uct_aptus_tl_fp_attach(iface, ep);
    }
    if (ucs_unlikely(uct_aptus_tl_fp_usable(ep))) {
        allocated |= APTUS_RULE_BIT(APTUS_RULE_RC_FP);
    }
    return allocated;
}

/* The connection is unusable: give the slot back and tell the peer. */
static void uct_aptus_tl_ep_rc_drop(uct_aptus_tl_iface_t *iface,
                                    uct_aptus_tl_ep_t *ep)
{
    aptus_alloc_release(&iface->alloc, &ep->act->alloc, APTUS_ALLOC_RC,
                        uct_ud_sr_clock());
    uct_aptus_tl_ep_rc_close(iface, ep);
    uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_DEMOTE, APTUS_ALLOC_RC);
}

aptus_rc_link_t *uct_aptus_tl_ep_rc_link(uct_aptus_tl_iface_t *iface,
                                         uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_rc_t *rc = ep->act->rc;
    aptus_rc_remote_t remote;
    aptus_chan_peer_t *cpeer;
    aptus_wire_addr_t addr;
    ucs_status_t status;

    if (!uct_aptus_tl_rc_usable(ep)) {
        if ((rc != NULL) && rc->connected &&
            (rc->link.flags & APTUS_RC_LINK_EOF)) {
            /* the peer closed it in order (it went away, or demoted it and
             * its DEMOTE is on the way): back to UD */
            uct_aptus_tl_ep_rc_drop(iface, ep);
        }
        return NULL;
    }
    if (rc->connected) {
        return &rc->link;
    }
    /* the peer's listening address: its datagram address's device, its RC
     * port (how a port sits in an address is the wire's business) */
    iface->ud.wdev->addr_with_port(&ep->peer.addr, ep->rc_port, &addr);
    remote.addr    = &addr;
    remote.key     = ep->peer.remote_key;
    remote.port    = ep->rc_port;
    remote.credits = ep->rc_credits;
    remote.tag     = ep->peer.conn_id;
    status =
        aptus_chan_peer_connect(&iface->rc.super, &remote, &rc->link, &cpeer);
    if (status != UCS_OK) {
        ucs_debug("aptus/%s: cannot connect to peer 0x%016" PRIx64 "/%u: %s",
                  iface->dev_name, ep->peer.remote_key, ep->peer.conn_id,
                  ucs_status_string(status));
        uct_aptus_tl_ep_rc_drop(iface, ep);
        return NULL;
    }
    rc->connected = 1;
    iface->stats.rc_connects++;
    return &rc->link;
}

/* The rules picked the fast path and it had no room: the next rule. */
static inline aptus_chan_type_t
uct_aptus_tl_select_after_fp(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                             size_t size)
{
    return uct_aptus_tl_select_but(iface, ep, APTUS_RULE_EAGER_CHANS, size,
                                   APTUS_RULE_BIT(APTUS_RULE_RC_FP));
}

/* ---- eager messages ---------------------------------------------------- */

typedef struct uct_aptus_tl_pack {
    uct_pack_callback_t cb;
    void *arg;
    const uct_aptus_tl_ep_t *ep;
} uct_aptus_tl_pack_t;

static size_t uct_aptus_tl_pack_bcopy(void *dest, void *arg)
{
    uct_aptus_tl_pack_t *p = arg;
    size_t length          = p->cb(dest, p->arg);

    uct_aptus_tl_trailer_pack(UCS_PTR_BYTE_OFFSET(dest, length), p->ep);
    return length + UCT_APTUS_TRAILER_LEN;
}

typedef struct uct_aptus_tl_short {
    uint64_t header;
    const void *payload;
    unsigned length;
    const uct_aptus_tl_ep_t *ep;
} uct_aptus_tl_short_t;

static size_t uct_aptus_tl_pack_short(void *dest, void *arg)
{
    uct_aptus_tl_short_t *s = arg;

    memcpy(dest, &s->header, sizeof(s->header));
    if (s->length > 0) { /* the payload may be NULL then */
        memcpy(UCS_PTR_BYTE_OFFSET(dest, sizeof(s->header)), s->payload,
               s->length);
    }
    uct_aptus_tl_trailer_pack(
        UCS_PTR_BYTE_OFFSET(dest, sizeof(s->header) + s->length), s->ep);
    return sizeof(s->header) + s->length + UCT_APTUS_TRAILER_LEN;
}

/* A send may go now: nothing waits before it (or it is the one waiting). */
/* A fence is in force until the writes over UD before it are in place at
 * the peer (those over RC are in place when they return). */
int uct_aptus_tl_ep_fence_holds(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep)
{
    if (aptus_chan_flush(&iface->ud.udz.super, (aptus_chan_peer_t *)&ep->peer,
                         0, NULL) != UCS_OK) {
        return 1;
    }
    ep->flags &= ~UCT_APTUS_EP_FENCED;
    return 0;
}

/* UCS_OK, UCS_ERR_NO_RESOURCE (wait), UCS_ERR_NO_MEMORY (no room for the
 * state of a peer with traffic). */
static inline ucs_status_t uct_aptus_tl_ep_may_send(uct_aptus_tl_iface_t *iface,
                                                    uct_aptus_tl_ep_t *ep)
{
    if (ucs_unlikely(!uct_aptus_tl_ep_init_state(iface, ep))) {
        return UCS_ERR_NO_MEMORY;
    }
    if (ucs_unlikely(ep->flags & UCT_APTUS_EP_FENCED) &&
        uct_aptus_tl_ep_fence_holds(iface, ep)) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* messages of a broken connection go again first */
    return (ucs_queue_is_empty(&ep->act->resend) &&
            (ucs_arbiter_group_is_empty(&ep->act->pending) ||
             (iface->dispatching == ep)))
               ? UCS_OK
               : UCS_ERR_NO_RESOURCE;
}

/* The channel's answer to a send: account an accepted one, remember
 * where a refused one waited. */
static inline void uct_aptus_tl_ep_result(uct_aptus_tl_iface_t *iface,
                                          uct_aptus_tl_ep_t *ep,
                                          aptus_chan_type_t chan, ssize_t ret,
                                          size_t size)
{
    if (ucs_likely((ret >= 0) || (ret == UCS_INPROGRESS))) {
        ep->xtx.next++;
        if (ucs_unlikely(ep->act->rc_rx_unacked > 0)) {
            /* its trailer confirmed them: no XACK of their own */
            ep->act->rc_rx_unacked = 0;
            iface->stats.xacks_spared++;
        }
        uct_aptus_tl_ep_sent(iface, ep, chan, size);
    } else if (ret == UCS_ERR_NO_RESOURCE) {
        ep->blocked = (chan == APTUS_CHAN_RC_SR) ? UCT_APTUS_BLOCKED_RC
                                                 : UCT_APTUS_BLOCKED_UD;
    }
}

ucs_status_t uct_aptus_tl_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                      uint64_t header, const void *payload,
                                      unsigned length)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    size_t size                 = sizeof(header) + length;
    uct_aptus_tl_short_t s;
    uint8_t trailer[UCT_APTUS_TRAILER_LEN];
    struct iovec iov[2];
    aptus_chan_send_t send;
    aptus_chan_type_t chan;
    aptus_rc_link_t *link;
    ssize_t ret;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(size, 0, iface->max_short, "am_short");

    UCT_APTUS_ENTER(iface);
    ret = uct_aptus_tl_ep_may_send(iface, ep);
    if (ucs_unlikely(ret != UCS_OK)) {
        UCT_APTUS_LEAVE(iface);
        return ret;
    }
    chan =
        ucs_likely(uct_aptus_tl_ep_allocated(iface, ep) == APTUS_RULE_UD_CHANS)
            ? APTUS_CHAN_UD_SR
            : uct_aptus_tl_select(iface, ep, APTUS_RULE_EAGER_CHANS, size);
    if (chan == APTUS_CHAN_RC_FP) {
        uct_aptus_tl_trailer_pack(trailer, ep);
        iov[0].iov_base = (void *)payload;
        iov[0].iov_len  = length;
        iov[1].iov_base = trailer;
        iov[1].iov_len  = sizeof(trailer);
        ret = uct_aptus_tl_fp_send(iface, ep, id, &header, sizeof(header), iov,
                                   2);
        if (ret == UCS_OK) {
            goto out;
        }
        chan = uct_aptus_tl_select_after_fp(iface, ep, size);
    }
    if ((chan == APTUS_CHAN_RC_SR) &&
        ((link = uct_aptus_tl_ep_rc_link(iface, ep)) != NULL)) {
        uct_aptus_tl_trailer_pack(trailer, ep);
        iov[0].iov_base = (void *)payload;
        iov[0].iov_len  = length;
        iov[1].iov_base = trailer;
        iov[1].iov_len  = sizeof(trailer);
        aptus_chan_send_iov(&send, id, &header, sizeof(header), iov, 2, NULL);
        ret =
            aptus_chan_send(&iface->rc.super, (aptus_chan_peer_t *)link, &send);
        if (ret == UCS_OK) {
            uct_aptus_tl_rc_keep(iface, ep, &send, ep->xtx.next);
        }
    } else {
        chan      = APTUS_CHAN_UD_SR;
        s.header  = header;
        s.payload = payload;
        s.length  = length;
        s.ep      = ep;
        aptus_chan_send_pack(&send, id, uct_aptus_tl_pack_short, &s);
        send.pack.length = size + UCT_APTUS_TRAILER_LEN; /* exactly */
        ret              = aptus_chan_send(&iface->ud.chan.super,
                                           (aptus_chan_peer_t *)&ep->peer, &send);
        if (ret > 0) {
            ret = UCS_OK;
        }
    }
out:
    uct_aptus_tl_ep_result(iface, ep, chan, ret, size);
    UCT_APTUS_LEAVE(iface);
    if (ret == UCS_OK) {
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, payload,
                           length, "TX: AM_SHORT ep %p %s", tl_ep,
                           aptus_chan_names[chan]);
    }
    return (ucs_status_t)ret;
}

typedef struct uct_aptus_tl_bcopy {
    const void *data;
    size_t length;
} uct_aptus_tl_bcopy_t;

static size_t uct_aptus_tl_pack_copy(void *dest, void *arg)
{
    uct_aptus_tl_bcopy_t *c = arg;

    memcpy(dest, c->data, c->length);
    return c->length;
}

ssize_t uct_aptus_tl_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                 uct_pack_callback_t pack_cb, void *arg,
                                 unsigned flags)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    aptus_chan_type_t chan      = APTUS_CHAN_UD_SR;
    uct_aptus_tl_pack_t p;
    uct_aptus_tl_bcopy_t c;
    aptus_chan_send_t send;
    aptus_rc_link_t *link;
    size_t length;
    ssize_t ret;

    UCT_CHECK_AM_ID(id);
    UCT_APTUS_ENTER(iface);
    ret = uct_aptus_tl_ep_may_send(iface, ep);
    if (ucs_unlikely(ret != UCS_OK)) {
        UCT_APTUS_LEAVE(iface);
        return ret;
    }
    p.cb  = pack_cb;
    p.arg = arg;
    p.ep  = ep;
    if (ucs_likely(uct_aptus_tl_ep_allocated(iface, ep) ==
                   APTUS_RULE_UD_CHANS)) {
        /* only UD to choose from: pack straight into the datagram */
        aptus_chan_send_pack(&send, id, uct_aptus_tl_pack_bcopy, &p);
        ret = aptus_chan_send(&iface->ud.chan.super,
                              (aptus_chan_peer_t *)&ep->peer, &send);
    } else {
        /* the size chooses the channel: pack first */
        length = uct_aptus_tl_pack_bcopy(iface->bounce, &p);
        chan   = uct_aptus_tl_select(iface, ep, APTUS_RULE_EAGER_CHANS,
                                     length - UCT_APTUS_TRAILER_LEN);
        if (chan == APTUS_CHAN_RC_FP) {
            struct iovec fiov = { iface->bounce, length };
            if (uct_aptus_tl_fp_send(iface, ep, id, NULL, 0, &fiov, 1) ==
                UCS_OK) {
                ret = length;
                goto out;
            }
            chan = uct_aptus_tl_select_after_fp(iface, ep,
                                                length - UCT_APTUS_TRAILER_LEN);
        }
        if ((chan == APTUS_CHAN_RC_SR) &&
            ((link = uct_aptus_tl_ep_rc_link(iface, ep)) != NULL)) {
            aptus_chan_send_copy(&send, id, NULL, 0, iface->bounce, length);
            ret = aptus_chan_send(&iface->rc.super, (aptus_chan_peer_t *)link,
                                  &send);
            if (ret == UCS_OK) {
                uct_aptus_tl_rc_keep(iface, ep, &send, ep->xtx.next);
                ret = length;
            }
        } else {
            chan     = APTUS_CHAN_UD_SR;
            c.data   = iface->bounce;
            c.length = length;
            aptus_chan_send_pack(&send, id, uct_aptus_tl_pack_copy, &c);
            ret = aptus_chan_send(&iface->ud.chan.super,
                                  (aptus_chan_peer_t *)&ep->peer, &send);
        }
    }
out:
    if (ret >= 0) {
        ret -= UCT_APTUS_TRAILER_LEN;
    }
    uct_aptus_tl_ep_result(iface, ep, chan, ret, (ret >= 0) ? ret : 0);
    UCT_APTUS_LEAVE(iface);
    return ret;
}


static void uct_aptus_tl_zcomp_done(uct_completion_t *self)
{
    uct_aptus_tl_zcomp_t *zc =
        ucs_container_of(self, uct_aptus_tl_zcomp_t, comp);

    if (zc->user != NULL) {
        uct_invoke_completion(zc->user, self->status);
    }
    ucs_mpool_put_inline(zc);
}

ucs_status_t uct_aptus_tl_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                      const void *header,
                                      unsigned header_length,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      unsigned flags, uct_completion_t *comp)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    struct iovec liov[APTUS_UD_MAX_IOV];
    uint8_t trailer[UCT_APTUS_TRAILER_LEN];
    uct_aptus_tl_zcomp_t *zc;
    aptus_chan_send_t send;
    aptus_chan_type_t chan;
    aptus_rc_link_t *link;
    size_t i, size;
    ssize_t ret;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)(APTUS_UD_MAX_IOV - 1),
                       "uct_aptus_ep_am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, iface->ud.chan.config.max_am_hdr,
                     "am_zcopy header");
    size = header_length + uct_iov_total_length(iov, iovcnt);
    UCT_CHECK_LENGTH(size, 0,
                     iface->ud.chan.config.max_msg - UCT_APTUS_TRAILER_LEN,
                     "am_zcopy");
    for (i = 0; i < iovcnt; ++i) {
        liov[i].iov_base = iov[i].buffer;
        liov[i].iov_len  = uct_iov_get_length(&iov[i]);
    }

    UCT_APTUS_ENTER(iface);
    ret = uct_aptus_tl_ep_may_send(iface, ep);
    if (ucs_unlikely(ret != UCS_OK)) {
        UCT_APTUS_LEAVE(iface);
        return ret;
    }
    chan = uct_aptus_tl_select(iface, ep, APTUS_RULE_EAGER_CHANS, size);
    if (chan == APTUS_CHAN_RC_FP) {
        /* in the peer's block when the call returns */
        uct_aptus_tl_trailer_pack(trailer, ep);
        liov[iovcnt].iov_base = trailer;
        liov[iovcnt].iov_len  = sizeof(trailer);
        ret = uct_aptus_tl_fp_send(iface, ep, id, header, header_length, liov,
                                   iovcnt + 1);
        if (ret == UCS_OK) {
            goto out;
        }
        chan = uct_aptus_tl_select_after_fp(iface, ep, size);
    }
    if ((chan == APTUS_CHAN_RC_SR) &&
        ((link = uct_aptus_tl_ep_rc_link(iface, ep)) != NULL)) {
        /* the connection has the bytes when the call returns */
        uct_aptus_tl_trailer_pack(trailer, ep);
        liov[iovcnt].iov_base = trailer;
        liov[iovcnt].iov_len  = sizeof(trailer);
        aptus_chan_send_iov(&send, id, header, header_length, liov, iovcnt + 1,
                            NULL);
        ret =
            aptus_chan_send(&iface->rc.super, (aptus_chan_peer_t *)link, &send);
        if (ret == UCS_OK) {
            uct_aptus_tl_rc_keep(iface, ep, &send, ep->xtx.next);
        }
    } else {
        chan = APTUS_CHAN_UD_SR;
        zc   = ucs_mpool_get_inline(&iface->zcomp_mp);
        if (zc == NULL) {
            UCT_APTUS_LEAVE(iface);
            return UCS_ERR_NO_MEMORY;
        }
        zc->comp.func   = uct_aptus_tl_zcomp_done;
        zc->comp.count  = 1;
        zc->comp.status = UCS_OK;
        zc->user        = comp;
        uct_aptus_tl_trailer_pack(zc->trailer, ep);
        liov[iovcnt].iov_base = zc->trailer;
        liov[iovcnt].iov_len  = sizeof(zc->trailer);
        aptus_chan_send_iov(&send, id, header, header_length, liov, iovcnt + 1,
                            &zc->comp);
        ret = aptus_chan_send(&iface->ud.chan.super,
                              (aptus_chan_peer_t *)&ep->peer, &send);
        if (ret != UCS_INPROGRESS) {
            ucs_mpool_put_inline(zc);
        }
    }
out:
    uct_aptus_tl_ep_result(iface, ep, chan, ret, size);
    UCT_APTUS_LEAVE(iface);
    if (!UCS_STATUS_IS_ERR(ret)) {
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, header,
                           header_length, "TX: AM_ZCOPY ep %p %s", tl_ep,
                           aptus_chan_names[chan]);
    }
    return (ucs_status_t)ret;
}

/* ---- pending, flush, failure ------------------------------------------- */

ucs_status_t uct_aptus_tl_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                         unsigned flags)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    aptus_rc_link_t *link;
    int room;

    UCT_APTUS_ENTER(iface);
    if (ucs_unlikely(!uct_aptus_tl_ep_init_state(iface, ep))) {
        UCT_APTUS_LEAVE(iface);
        return UCS_ERR_NO_MEMORY;
    }
    if (ucs_arbiter_group_is_empty(&ep->act->pending)) {
        /* where the last send was refused decides whether a retry would
         * go through now */
        if (ep->blocked == UCT_APTUS_BLOCKED_FLUSH) {
            room = 0; /* a refused flush never has room: it waits */
        } else if ((ep->flags & UCT_APTUS_EP_FENCED) &&
                   uct_aptus_tl_ep_fence_holds(iface, ep)) {
            room = 0;
        } else if ((ep->blocked == UCT_APTUS_BLOCKED_RC) &&
                   (ep->act->rc != NULL) && ep->act->rc->connected) {
            link = &ep->act->rc->link;
            room = (link->flags & APTUS_RC_LINK_FAILED) ||
                   ((link->fc.tx > 0) && !link->am_queued &&
                    !(link->flags & APTUS_RC_LINK_SWITCHING));
        } else {
            /* a message of several datagrams may not fit a window that
             * has some room: only an empty one takes any message */
            room = aptus_ud_peer_is_failed(&ep->peer) ||
                   (aptus_ud_peer_tx_idle(&ep->peer) &&
                    !aptus_ud_chan_tx_all_full(&iface->ud.chan));
        }
        if (room) {
            UCT_APTUS_LEAVE(iface);
            return UCS_ERR_BUSY;
        }
    }
    uct_pending_req_arb_group_push(&ep->act->pending, req);
    ucs_arbiter_group_schedule(&iface->pending, &ep->act->pending);
    UCT_APTUS_LEAVE(iface);
    return UCS_OK;
}

void uct_aptus_tl_ep_pending_purge(uct_ep_h tl_ep,
                                   uct_pending_purge_callback_t cb, void *arg)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    uct_purge_cb_args_t args    = { cb, arg };

    UCT_APTUS_ENTER(iface);
    if (ep->act != NULL) {
        ucs_arbiter_group_purge(&iface->pending, &ep->act->pending,
                                aptus_pending_purge_cb, &args);
    }
    UCT_APTUS_LEAVE(iface);
}

static ucs_status_t uct_aptus_tl_ep_do_flush(uct_ep_h tl_ep, unsigned flags,
                                             uct_completion_t *comp);

ucs_status_t uct_aptus_tl_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp)
{
    return uct_aptus_flush_return(
        uct_aptus_tl_ep_iface(tl_ep)->super.worker->async,
        uct_aptus_tl_ep_do_flush(tl_ep, flags, comp));
}

static ucs_status_t uct_aptus_tl_ep_do_flush(uct_ep_h tl_ep, unsigned flags,
                                             uct_completion_t *comp)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    ucs_status_t status         = UCS_OK, st;

    UCT_APTUS_ENTER(iface);
    /* an idle peer has nothing of its own in flight: its flush is the
     * stream's, and does not make it active */
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        if (ep->act != NULL) {
            ucs_arbiter_group_purge(&iface->pending, &ep->act->pending,
                                    aptus_pending_purge_cb,
                                    &(uct_purge_cb_args_t){ NULL, NULL });
        }
    } else if (((ep->act != NULL) &&
                (uct_aptus_tl_ep_may_send(iface, ep) != UCS_OK)) ||
               ((ep->act == NULL) && (ep->flags & UCT_APTUS_EP_FENCED) &&
                uct_aptus_tl_ep_fence_holds(iface, ep))) {
        ep->blocked = UCT_APTUS_BLOCKED_FLUSH;
        UCT_APTUS_LEAVE(iface);
        return UCS_ERR_NO_RESOURCE; /* after what waits */
    }

    /* The connection first: only it may ask to come back later (while it
     * merges with the peer's). The others then share comp. */
    if ((ep->act != NULL) && (ep->act->rc != NULL) && ep->act->rc->connected) {
        status = aptus_chan_flush(&iface->rc.super,
                                  (aptus_chan_peer_t *)&ep->act->rc->link,
                                  flags, comp);
        if (status == UCS_ERR_NO_RESOURCE) {
            /* the connection is switching or has sends waiting: the
             * caller's pending request must be taken, or it retries at
             * once, without progress, for ever */
            ep->blocked = UCT_APTUS_BLOCKED_FLUSH;
            UCT_APTUS_LEAVE(iface);
            return status;
        }
        if ((status != UCS_INPROGRESS) && UCS_STATUS_IS_ERR(status) &&
            !(ep->act->rc->link.flags & APTUS_RC_LINK_EOF)) {
            UCT_APTUS_LEAVE(iface);
            return status;
        }
        if (status != UCS_INPROGRESS) {
            status = UCS_OK; /* a connection closed in order has nothing */
        }
    }
    st = aptus_chan_flush(&iface->ud.chan.super, (aptus_chan_peer_t *)&ep->peer,
                          flags, comp);
    if (st == UCS_INPROGRESS) {
        if ((status == UCS_INPROGRESS) && (comp != NULL)) {
            comp->count++; /* two will complete it */
        }
        status = UCS_INPROGRESS;
    } else if (UCS_STATUS_IS_ERR(st)) {
        if ((status == UCS_INPROGRESS) && (comp != NULL)) {
            /* the connection's part completes it later: report the error
             * through it */
            uct_completion_update_status(comp, st);
        } else {
            status = st;
        }
    }
    if (!UCS_STATUS_IS_ERR(status) && !(flags & UCT_FLUSH_FLAG_CANCEL)) {
        if (aptus_chan_flush(&iface->ud.udz.super,
                             (aptus_chan_peer_t *)&ep->peer,
                             flags | ((status == UCS_INPROGRESS)
                                          ? APTUS_CHAN_FLUSH_F_SHARED_COMP
                                          : 0),
                             comp) == UCS_INPROGRESS) {
            status = UCS_INPROGRESS;
        }
    } else if ((flags & UCT_FLUSH_FLAG_CANCEL) && (status == UCS_OK)) {
        aptus_chan_peer_disconnect(&iface->ud.udz.super,
                                   (aptus_chan_peer_t *)&ep->peer);
    }
    UCT_APTUS_LEAVE(iface);
    return status;
}

ucs_status_t uct_aptus_tl_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);

    /* Active messages are delivered in sequence whatever their channel;
     * a get over the connection waits for the messages queued before it,
     * one over UD is served by the owner after them. A write over UD lands
     * when the target has read it: what follows waits for that. */
    UCT_APTUS_ENTER(iface);
    if (aptus_chan_flush(&iface->ud.udz.super, (aptus_chan_peer_t *)&ep->peer,
                         0, NULL) != UCS_OK) {
        ep->flags |= UCT_APTUS_EP_FENCED;
    }
    UCT_APTUS_LEAVE(iface);
    return UCS_OK;
}

ucs_status_t uct_aptus_tl_ep_check(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    ucs_status_t status;

    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    UCT_APTUS_ENTER(iface);
    if (aptus_ud_peer_is_failed(&ep->peer)) {
        uct_aptus_tl_iface_queue_failure(iface, &ep->peer,
                                         UCS_ERR_CONNECTION_RESET);
        status = UCS_OK;
    } else {
        /* UD carries everything the peer's health depends on */
        status = aptus_chan_check(&iface->ud.chan.super,
                                  (aptus_chan_peer_t *)&ep->peer);
    }
    UCT_APTUS_LEAVE(iface);
    return status;
}

ucs_status_t uct_aptus_tl_ep_invalidate(uct_ep_h tl_ep, unsigned flags)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);

    UCT_APTUS_ENTER(iface);
    if ((ep->act != NULL) && (ep->act->rc != NULL) && ep->act->rc->connected) {
        aptus_chan_invalidate(&iface->rc.super,
                              (aptus_chan_peer_t *)&ep->act->rc->link);
    }
    aptus_chan_invalidate(&iface->ud.chan.super,
                          (aptus_chan_peer_t *)&ep->peer);
    UCT_APTUS_LEAVE(iface);
    return UCS_OK;
}

/* ---- life ---------------------------------------------------------------- */

ucs_status_t uct_aptus_tl_ep_create(const uct_ep_params_t *params,
                                    uct_ep_h *ep_p)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(params->iface, uct_aptus_tl_iface_t);
    const uct_aptus_tl_iface_addr_t *iface_addr;
    aptus_ud_remote_t remote;
    aptus_wire_addr_t addr;
    aptus_ud_peer_t *peer;
    uct_aptus_tl_ep_t *ep = NULL;
    ucs_status_t status;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    iface_addr = (const uct_aptus_tl_iface_addr_t *)params->iface_addr;
    uct_ud_base_peer_addr(&iface->ud, params->dev_addr,
                          aptus_get32(iface_addr->ud_port), &addr);

    UCT_APTUS_ENTER(iface);
    iface->ud.chan.now_us = iface->ud.chan.clock();
    remote.addr           = &addr;
    remote.remote_key     = iface_addr->key;
    remote.mtu            = iface_addr->ud_mtu;
    status = aptus_chan_peer_connect(&iface->ud.chan.super, &remote, NULL,
                                     (aptus_chan_peer_t **)&peer);
    if (status == UCS_OK) {
        ep     = uct_aptus_tl_ep_of_peer(peer);
        status = UCS_CLASS_INIT(uct_base_ep_t, &ep->super, &iface->super);
        if (status != UCS_OK) {
            aptus_chan_peer_disconnect(&iface->ud.chan.super,
                                       (aptus_chan_peer_t *)peer);
        } else {
            /* no active state until the peer has traffic */
            ep->flags |= UCT_APTUS_EP_USER;
            ep->rc_port    = aptus_get32(iface_addr->rc_port);
            ep->rc_credits = iface_addr->rc_credits;
            if (iface_addr->host_id != iface->conn->host_id) {
                /* the fast path writes into the peer's memory: not to
                 * another host (RC-RDMA goes over the connection there) */
                uct_aptus_tl_ep_set_remote(iface, ep);
            }
        }
    }
    UCT_APTUS_LEAVE(iface);

    if (status != UCS_OK) {
        return status;
    }
    *ep_p = &ep->super.super;
    return UCS_OK;
}

void uct_aptus_tl_ep_destroy(uct_ep_h tl_ep)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);

    UCT_APTUS_ENTER(iface);
    UCS_CLASS_CLEANUP(uct_base_ep_t, &ep->super);
    if ((ep->act != NULL) && !ucs_arbiter_group_is_empty(&ep->act->pending)) {
        ucs_warn("aptus: endpoint %p destroyed with pending requests", ep);
        ucs_arbiter_group_purge(&iface->pending, &ep->act->pending,
                                aptus_pending_purge_cb,
                                &(uct_purge_cb_args_t){ NULL, NULL });
    }
    ep->flags &= ~UCT_APTUS_EP_USER;
    aptus_chan_peer_disconnect(&iface->ud.udz.super,
                               (aptus_chan_peer_t *)&ep->peer);
    /* the stream, and its connection if any, stay the peer's: what was
     * sent is still delivered, and the peer may still talk to us */
    aptus_chan_peer_disconnect(&iface->ud.chan.super,
                               (aptus_chan_peer_t *)&ep->peer);
    uct_aptus_tl_iface_forget_failure(iface, &ep->peer);
    UCT_APTUS_LEAVE(iface);
}
