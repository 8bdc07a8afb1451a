/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: rc_sr endpoint operations.
 *
 * Active messages go over the endpoint's connection under credits; put and
 * get are one-sided copies into or out of the peer's registered memory,
 * complete when the call returns. They wait (UCS_ERR_NO_RESOURCE) while
 * messages sent before them are still queued, so every operation on an
 * endpoint happens in the order it was issued.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_sr_ep.h"

#include <uct/base/uct_iov.inl>

#include <inttypes.h>
#include <string.h>

static inline uct_rc_sr_iface_t *uct_rc_sr_ep_iface(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep->iface, uct_rc_sr_iface_t);
}

static inline aptus_rc_link_t *uct_rc_sr_ep_link(uct_ep_h tl_ep)
{
    return &ucs_derived_of(tl_ep, uct_rc_sr_ep_t)->link;
}

/* The endpoint's link, as the channel interface names a peer. */
static inline aptus_chan_peer_t *uct_rc_sr_ep_cpeer(uct_ep_h tl_ep)
{
    return (aptus_chan_peer_t *)uct_rc_sr_ep_link(tl_ep);
}

ucs_status_t uct_rc_sr_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    uct_rc_sr_iface_t *iface = ucs_derived_of(params->iface, uct_rc_sr_iface_t);
    const uct_rc_sr_iface_addr_t *iface_addr;
    aptus_rc_remote_t remote;
    aptus_chan_peer_t *peer;
    aptus_wire_addr_t addr;
    uct_rc_sr_ep_t *ep;
    ucs_status_t status;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    iface_addr = (const uct_rc_sr_iface_addr_t *)params->iface_addr;
    iface->wdev->addr_make(params->dev_addr, aptus_get32(iface_addr->port),
                           &addr);

    ep = ucs_calloc(1, iface->ops->ep_size, "uct_rc_sr_ep");
    if (ep == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    status = UCS_CLASS_INIT(uct_base_ep_t, &ep->super, &iface->super);
    if (status != UCS_OK) {
        goto err_free;
    }
    remote.addr    = &addr;
    remote.key     = iface_addr->key;
    remote.port    = aptus_get32(iface_addr->port);
    remote.credits = iface_addr->credits;
    remote.tag     = 0;
    status =
        aptus_chan_peer_connect(&iface->chan.super, &remote, &ep->link, &peer);
    if (status != UCS_OK) {
        goto err_cleanup;
    }
    aptus_rc_chan_link_resources(&iface->chan, &ep->link, &iface->conn_res);
    iface->conn_res.state_bytes += sizeof(*ep) - sizeof(ep->link);
    iface->eps_created++;
    *ep_p = &ep->super.super;
    return UCS_OK;

err_cleanup:
    UCS_CLASS_CLEANUP(uct_base_ep_t, &ep->super);
err_free:
    ucs_free(ep);
    return status;
}

void uct_rc_sr_ep_destroy(uct_ep_h tl_ep)
{
    uct_rc_sr_iface_t *iface = uct_rc_sr_ep_iface(tl_ep);
    uct_rc_sr_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_sr_ep_t);

    uct_rc_sr_iface_forget_ep(iface, ep);
    aptus_chan_peer_disconnect(&iface->chan.super,
                               (aptus_chan_peer_t *)&ep->link);
    UCS_CLASS_CLEANUP(uct_base_ep_t, &ep->super);
    ucs_free(ep);
}

/* The tracer wants the message in one piece; only build it when traced. */
static void uct_rc_sr_ep_trace_am_short(uct_rc_sr_iface_t *iface, uint8_t id,
                                        uint64_t header, const void *payload,
                                        unsigned length)
{
    if (ucs_log_is_enabled(UCS_LOG_LEVEL_TRACE_DATA)) {
        memcpy(iface->bounce, &header, sizeof(header));
        memcpy(UCS_PTR_BYTE_OFFSET(iface->bounce, sizeof(header)), payload,
               length);
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                           iface->bounce, sizeof(header) + length,
                           "TX: AM_SHORT");
    }
}

ucs_status_t uct_rc_sr_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length)
{
    uct_rc_sr_iface_t *iface = uct_rc_sr_ep_iface(tl_ep);
    aptus_chan_send_t send;
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    /* max_short counts the 8-byte header, as in every UCX transport */
    UCT_CHECK_LENGTH(sizeof(header) + length, 0, iface->chan.config.max_msg,
                     "am_short");
    aptus_chan_send_copy(&send, id, &header, sizeof(header), payload, length);
    status = (ucs_status_t)aptus_chan_send(&iface->chan.super,
                                           uct_rc_sr_ep_cpeer(tl_ep), &send);
    if (status == UCS_OK) {
        uct_rc_sr_ep_trace_am_short(iface, id, header, payload, length);
    }
    return status;
}

ssize_t uct_rc_sr_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                              uct_pack_callback_t pack_cb, void *arg,
                              unsigned flags)
{
    uct_rc_sr_iface_t *iface = uct_rc_sr_ep_iface(tl_ep);
    aptus_chan_send_t send;
    ssize_t ret;

    UCT_CHECK_AM_ID(id);
    aptus_chan_send_pack(&send, id, pack_cb, arg);
    ret = aptus_chan_send(&iface->chan.super, uct_rc_sr_ep_cpeer(tl_ep), &send);
    if (ret >= 0) {
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                           iface->chan.staging, ret, "TX: AM_BCOPY");
    }
    return ret;
}

static unsigned uct_rc_sr_ep_iov(const uct_iov_t *uiov, size_t iovcnt,
                                 struct iovec *iov)
{
    size_t i;

    for (i = 0; i < iovcnt; ++i) {
        iov[i].iov_base = uiov[i].buffer;
        iov[i].iov_len  = uct_iov_get_length(&uiov[i]);
    }
    return iovcnt;
}

ucs_status_t uct_rc_sr_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                   const void *header, unsigned header_length,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp)
{
    uct_rc_sr_iface_t *iface = uct_rc_sr_ep_iface(tl_ep);
    struct iovec liov[APTUS_RC_MAX_IOV];
    aptus_chan_send_t send;
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)APTUS_RC_MAX_IOV - 1,
                       "uct_rc_sr_ep_am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, UCT_RC_SR_MAX_AM_HDR, "am_zcopy header");
    UCT_CHECK_LENGTH(header_length + uct_iov_total_length(iov, iovcnt), 0,
                     iface->chan.config.max_msg, "am_zcopy");

    /* the connection has the bytes on return: no completion needed */
    aptus_chan_send_iov(&send, id, header, header_length, liov,
                        uct_rc_sr_ep_iov(iov, iovcnt, liov), NULL);
    status = (ucs_status_t)aptus_chan_send(&iface->chan.super,
                                           uct_rc_sr_ep_cpeer(tl_ep), &send);
    if (status == UCS_OK) {
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, header,
                           header_length, "TX: AM_ZCOPY");
    }
    return status;
}

/* One-sided operations are the RC-RDMA channel's, over the link: done when
 * the call returns for a peer on this host, later for one on another
 * (comp, or for a read the iface's sink when the user gave none: the flush
 * waits). A write without comp goes without one: its bytes are then the
 * wire's at once (copied if they must wait), as UCS_OK tells the user;
 * with comp, they may be sent from the user's buffer until it completes. */
static ucs_status_t uct_rc_sr_ep_rma(uct_ep_h tl_ep, const struct iovec *iov,
                                     unsigned iovcnt, uint64_t remote_addr,
                                     uct_rkey_t rkey, int is_write,
                                     uct_completion_t *comp)
{
    uct_rc_sr_iface_t *iface = uct_rc_sr_ep_iface(tl_ep);
    aptus_chan_key_t key;
    ucs_status_t status;
    unsigned i;

    for (i = 0; (i < iovcnt) && (iov[i].iov_len == 0); ++i) {
    }
    if (i == iovcnt) {
        return UCS_OK; /* as in UCX: nothing to move, the rkey may be a dummy */
    }
    uct_aptus_rkey_to_chan_key((const uct_aptus_rkey_t *)rkey, &key);
    status = is_write
                 ? aptus_chan_put(&iface->rdma.super, uct_rc_sr_ep_cpeer(tl_ep),
                                  iov, iovcnt, remote_addr, &key, comp)
                 : aptus_chan_get(&iface->rdma.super, uct_rc_sr_ep_cpeer(tl_ep),
                                  iov, iovcnt, remote_addr, &key,
                                  (comp != NULL) ? comp : &iface->sink);
    if ((status == UCS_INPROGRESS) && (comp == NULL)) {
        return UCS_OK; /* the user asked to learn it from the flush */
    }
    return status;
}

ucs_status_t uct_rc_sr_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                    unsigned length, uint64_t remote_addr,
                                    uct_rkey_t rkey)
{
    struct iovec iov = { (void *)buffer, length };

    UCT_CHECK_LENGTH(length, 0, UCT_RC_SR_PUT_MAX_SHORT, "put_short");
    return uct_rc_sr_ep_rma(tl_ep, &iov, 1, remote_addr, rkey, 1, NULL);
}

ssize_t uct_rc_sr_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                               void *arg, uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_rc_sr_iface_t *iface = uct_rc_sr_ep_iface(tl_ep);
    struct iovec iov;
    ucs_status_t status;

    status = aptus_rc_chan_rma_check(&iface->chan, uct_rc_sr_ep_link(tl_ep));
    if (status != UCS_OK) {
        return status;
    }
    iov.iov_base = iface->bounce;
    iov.iov_len  = pack_cb(iface->bounce, arg);
    status       = uct_rc_sr_ep_rma(tl_ep, &iov, 1, remote_addr, rkey, 1, NULL);
    return (status == UCS_OK) ? (ssize_t)iov.iov_len : status;
}

ucs_status_t uct_rc_sr_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                    size_t iovcnt, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp)
{
    struct iovec liov[APTUS_RC_MAX_IOV];

    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)APTUS_RC_MAX_IOV,
                       "uct_rc_sr_ep_put_zcopy");
    return uct_rc_sr_ep_rma(tl_ep, liov, uct_rc_sr_ep_iov(iov, iovcnt, liov),
                            remote_addr, rkey, 1, comp);
}

ucs_status_t uct_rc_sr_ep_get_bcopy(uct_ep_h tl_ep,
                                    uct_unpack_callback_t unpack_cb, void *arg,
                                    size_t length, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_rc_sr_iface_t *iface = uct_rc_sr_ep_iface(tl_ep);
    struct iovec iov         = { iface->bounce, length };
    uct_aptus_bcopy_get_t *get;
    aptus_chan_key_t key;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, iface->chan.config.max_msg, "get_bcopy");
    UCT_SKIP_ZERO_LENGTH(length);
    uct_aptus_rkey_to_chan_key((const uct_aptus_rkey_t *)rkey, &key);
    if (aptus_rc_rdma_key_direct(&iface->rdma, uct_rc_sr_ep_link(tl_ep),
                                 &key.mem) == UCS_OK) {
        status = uct_rc_sr_ep_rma(tl_ep, &iov, 1, remote_addr, rkey, 0, NULL);
        if (status == UCS_OK) {
            unpack_cb(arg, iface->bounce, length);
        }
        return status;
    }
    /* over a connection: the bytes land in a buffer of their own and are
     * unpacked when they are in */
    get = uct_aptus_bcopy_get_new(unpack_cb, arg, length, comp);
    if (get == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    iov.iov_base = get->data;
    status = uct_rc_sr_ep_rma(tl_ep, &iov, 1, remote_addr, rkey, 0, &get->comp);
    if (status != UCS_INPROGRESS) {
        ucs_free(get);
    }
    return status;
}

ucs_status_t uct_rc_sr_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                    size_t iovcnt, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp)
{
    struct iovec liov[APTUS_RC_MAX_IOV];

    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)APTUS_RC_MAX_IOV,
                       "uct_rc_sr_ep_get_zcopy");
    return uct_rc_sr_ep_rma(tl_ep, liov, uct_rc_sr_ep_iov(iov, iovcnt, liov),
                            remote_addr, rkey, 0, comp);
}

ucs_status_t uct_rc_sr_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                      unsigned flags)
{
    return aptus_chan_pending_add(&uct_rc_sr_ep_iface(tl_ep)->chan.super,
                                  uct_rc_sr_ep_cpeer(tl_ep), req, flags);
}

void uct_rc_sr_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                                void *arg)
{
    aptus_chan_pending_purge(&uct_rc_sr_ep_iface(tl_ep)->chan.super,
                             uct_rc_sr_ep_cpeer(tl_ep), cb, arg);
}

ucs_status_t uct_rc_sr_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                uct_completion_t *comp)
{
    return aptus_chan_flush(&uct_rc_sr_ep_iface(tl_ep)->chan.super,
                            uct_rc_sr_ep_cpeer(tl_ep), flags, comp);
}

ucs_status_t uct_rc_sr_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    /* operations of an endpoint already happen in issue order */
    return UCS_OK;
}

ucs_status_t uct_rc_sr_ep_check(uct_ep_h tl_ep, unsigned flags,
                                uct_completion_t *comp)
{
    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    return aptus_chan_check(&uct_rc_sr_ep_iface(tl_ep)->chan.super,
                            uct_rc_sr_ep_cpeer(tl_ep));
}

ucs_status_t uct_rc_sr_ep_invalidate(uct_ep_h tl_ep, unsigned flags)
{
    aptus_chan_invalidate(&uct_rc_sr_ep_iface(tl_ep)->chan.super,
                          uct_rc_sr_ep_cpeer(tl_ep));
    return UCS_OK;
}
