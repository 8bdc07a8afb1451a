/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: aptus one-sided operations: rendezvous data over RC-RDMA
 * where the peer has a connection, else over UD-ZCopy; short and buffered
 * ones in the UD stream.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "uct/base/aptus_rma.h"

#include <uct/base/uct_iov.inl>

/* A get or put of one buffer: over RC-RDMA where the rules pick it and the
 * peer has a connection that takes it, else over UD-ZCopy. */
static ucs_status_t
uct_aptus_tl_ep_rma_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                          uint64_t remote_addr, uct_rkey_t rkey,
                          uct_completion_t *comp, int is_put)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    aptus_chan_type_t chan;
    aptus_rc_link_t *link;
    aptus_chan_key_t key;
    struct iovec liov;
    ucs_status_t status;
    size_t length;

    status = uct_aptus_rma_zcopy_prepare(
        UCT_APTUS_TL_NAME, is_put ? "put_zcopy" : "get_zcopy", iov, iovcnt,
        iface->ud.udz.config.max_get, remote_addr, rkey, &liov, &key);
    if ((status != UCS_OK) || (liov.iov_len == 0)) {
        return status;
    }
    length = liov.iov_len;

    UCT_APTUS_ENTER(iface);
    if (ucs_unlikely(!uct_aptus_tl_ep_init_state(iface, ep))) {
        UCT_APTUS_LEAVE(iface);
        return UCS_ERR_NO_MEMORY;
    }
    if (ucs_unlikely(ep->flags & UCT_APTUS_EP_FENCED) &&
        uct_aptus_tl_ep_fence_holds(iface, ep)) {
        UCT_APTUS_LEAVE(iface);
        return UCS_ERR_NO_RESOURCE;
    }
    chan = uct_aptus_tl_select(iface, ep, APTUS_RULE_DATA_CHANS, length);
    if ((chan == APTUS_CHAN_RC_RDMA) &&
        ((link = uct_aptus_tl_ep_rc_link(iface, ep)) != NULL)) {
        status = (is_put ? aptus_chan_put : aptus_chan_get)(
            &iface->rdma.super, (aptus_chan_peer_t *)link, &liov, 1,
            remote_addr, &key, NULL);
        if (status == UCS_OK) {
            uct_aptus_tl_ep_sent(iface, ep, chan, length);
            UCT_APTUS_LEAVE(iface);
            return UCS_OK;
        }
        /* messages queued on the connection, or memory it cannot reach:
         * UD-ZCopy moves it (the owner serves a get, the target reads a
         * put) */
    }
    iface->ud.chan.now_us = iface->ud.chan.clock();
    status                = (is_put ? aptus_chan_put : aptus_chan_get)(
        &iface->ud.udz.super, (aptus_chan_peer_t *)&ep->peer, &liov, 1,
        remote_addr, &key, comp);
    if (!UCS_STATUS_IS_ERR(status)) {
        uct_aptus_tl_ep_sent(iface, ep, APTUS_CHAN_UD_ZCOPY, length);
    }
    UCT_APTUS_LEAVE(iface);
    return status;
}

ucs_status_t uct_aptus_tl_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_aptus_tl_ep_rma_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey,
                                     comp, 0);
}

ucs_status_t uct_aptus_tl_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_aptus_tl_ep_rma_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey,
                                     comp, 1);
}

/* Short and buffered one-sided operations go in the UD stream (UCP selects
 * a transport for ucp_put/ucp_get only when it has them). */
#define UCT_APTUS_RMA_BEGIN(_iface, _ep)                                       \
    UCT_APTUS_ENTER(_iface);                                                   \
    if (ucs_unlikely(!uct_aptus_tl_ep_init_state(_iface, _ep))) {              \
        UCT_APTUS_LEAVE(_iface);                                               \
        return UCS_ERR_NO_MEMORY;                                              \
    }                                                                          \
    if (ucs_unlikely((_ep)->flags & UCT_APTUS_EP_FENCED) &&                    \
        uct_aptus_tl_ep_fence_holds(_iface, _ep)) {                            \
        UCT_APTUS_LEAVE(_iface);                                               \
        return UCS_ERR_NO_RESOURCE;                                            \
    }

ucs_status_t uct_aptus_tl_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                       unsigned length, uint64_t remote_addr,
                                       uct_rkey_t rkey)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    ucs_status_t status;

    UCT_APTUS_RMA_BEGIN(iface, ep);
    status =
        uct_aptus_rma_put_short(&iface->ud.udz, &ep->peer, "aptus put_short",
                                buffer, length, remote_addr, rkey);
    if (status == UCS_OK) {
        uct_aptus_tl_ep_sent(iface, ep, APTUS_CHAN_UD_SR, length);
    }
    UCT_APTUS_LEAVE(iface);
    return status;
}

ssize_t uct_aptus_tl_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                  void *arg, uint64_t remote_addr,
                                  uct_rkey_t rkey)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    ssize_t ret;

    UCT_APTUS_RMA_BEGIN(iface, ep);
    ret = uct_aptus_rma_put_bcopy(&iface->ud.udz, &ep->peer, pack_cb, arg,
                                  remote_addr, rkey);
    if (ret >= 0) {
        uct_aptus_tl_ep_sent(iface, ep, APTUS_CHAN_UD_SR, ret);
    }
    UCT_APTUS_LEAVE(iface);
    return ret;
}

ucs_status_t uct_aptus_tl_ep_get_bcopy(uct_ep_h tl_ep,
                                       uct_unpack_callback_t unpack_cb,
                                       void *arg, size_t length,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp)
{
    uct_aptus_tl_iface_t *iface = uct_aptus_tl_ep_iface(tl_ep);
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep(tl_ep);
    ucs_status_t status;

    UCT_APTUS_RMA_BEGIN(iface, ep);
    status = uct_aptus_rma_get_bcopy(&iface->ud.udz, &ep->peer, unpack_cb, arg,
                                     length, remote_addr, rkey, comp);
    UCT_APTUS_LEAVE(iface);
    return status;
}
