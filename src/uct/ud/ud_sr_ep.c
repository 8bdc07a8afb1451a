/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: ud_sr endpoint operations.
 *
 * Each call takes the worker's async lock: the async timer acknowledges and
 * retransmits from another thread while the application computes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_ep.h"
#include "uct/base/aptus_rma.h"
#include <uct/base/uct_iov.inl>

#include <inttypes.h>

static inline uct_ud_sr_iface_t *uct_ud_sr_ep_iface(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep->iface, uct_ud_sr_iface_t);
}

static inline aptus_ud_peer_t *uct_ud_sr_ep_peer(uct_ep_h tl_ep)
{
    return &ucs_derived_of(tl_ep, uct_ud_sr_ep_t)->peer;
}

/* The endpoint's stream, as the channel interface names a peer. */
static inline aptus_chan_peer_t *uct_ud_sr_ep_cpeer(uct_ep_h tl_ep)
{
    return (aptus_chan_peer_t *)uct_ud_sr_ep_peer(tl_ep);
}

#define UCT_UD_SR_ENTER(_iface) UCS_ASYNC_BLOCK((_iface)->super.worker->async)
#define UCT_UD_SR_LEAVE(_iface) UCS_ASYNC_UNBLOCK((_iface)->super.worker->async)

/* Data tracing (UCX_LOG_LEVEL=data): an am_short as one buffer. */
static void uct_ud_sr_ep_trace_short(uct_ud_sr_iface_t *iface, uct_ep_h tl_ep,
                                     uint8_t id, uint64_t header,
                                     const void *payload, unsigned length)
{
    uint8_t *buf = ucs_malloc(sizeof(header) + length, "ud_sr_trace");

    if (buf == NULL) {
        return;
    }
    memcpy(buf, &header, sizeof(header));
    memcpy(buf + sizeof(header), payload, length);
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, buf,
                       sizeof(header) + length, "TX: AM_SHORT ep %p", tl_ep);
    ucs_free(buf);
}

typedef struct uct_ud_sr_trace_pack {
    uct_pack_callback_t pack_cb;
    void *arg;
    uct_ud_sr_iface_t *iface;
    uct_ep_h ep;
    uint8_t id;
} uct_ud_sr_trace_pack_t;

/* Trace an am_bcopy where its data is packed. */
static size_t uct_ud_sr_ep_trace_pack(void *dest, void *arg)
{
    uct_ud_sr_trace_pack_t *tp = arg;
    size_t length              = tp->pack_cb(dest, tp->arg);

    uct_iface_trace_am(&tp->iface->super, UCT_AM_TRACE_TYPE_SEND, tp->id, dest,
                       length, "TX: AM_BCOPY ep %p", tp->ep);
    return length;
}

ucs_status_t uct_ud_sr_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(params->iface, uct_ud_sr_iface_t);
    const uct_ud_sr_iface_addr_t *iface_addr;
    aptus_ud_remote_t remote;
    aptus_wire_addr_t addr;
    aptus_ud_peer_t *peer;
    ucs_status_t status;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    iface_addr = (const uct_ud_sr_iface_addr_t *)params->iface_addr;
    uct_ud_base_peer_addr(&iface->ud, params->dev_addr,
                          aptus_get32(iface_addr->port), &addr);

    remote.addr       = &addr;
    remote.remote_key = iface_addr->key;
    remote.mtu        = iface_addr->mtu;
    UCT_UD_SR_ENTER(iface);
    iface->ud.chan.now_us = iface->ud.chan.clock();
    status = aptus_chan_peer_connect(&iface->ud.chan.super, &remote, NULL,
                                     (aptus_chan_peer_t **)&peer);
    if (status == UCS_OK) {
        status = UCS_CLASS_INIT(
            uct_base_ep_t, &uct_ud_sr_ep_of_peer(peer)->super, &iface->super);
        if (status != UCS_OK) {
            aptus_chan_peer_disconnect(&iface->ud.chan.super,
                                       (aptus_chan_peer_t *)peer);
        }
    }
    UCT_UD_SR_LEAVE(iface);

    if (status != UCS_OK) {
        return status;
    }
    *ep_p = &uct_ud_sr_ep_of_peer(peer)->super.super;
    return UCS_OK;
}

void uct_ud_sr_ep_destroy(uct_ep_h tl_ep)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    aptus_ud_peer_t *peer    = uct_ud_sr_ep_peer(tl_ep);

    UCT_UD_SR_ENTER(iface);
    UCS_CLASS_CLEANUP(uct_base_ep_t, &uct_ud_sr_ep_of_peer(peer)->super);
    aptus_chan_peer_disconnect(&iface->ud.udz.super, (aptus_chan_peer_t *)peer);
    aptus_chan_peer_disconnect(&iface->ud.chan.super,
                               (aptus_chan_peer_t *)peer);
    /* a failed peer is freed once nothing refers to it */
    uct_ud_sr_iface_forget_failure(iface, peer);
    UCT_UD_SR_LEAVE(iface);
}

ucs_status_t uct_ud_sr_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    aptus_chan_send_t send;
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(header) + length, 0,
                     aptus_ud_chan_max_short(&iface->ud.chan), "am_short");

    aptus_chan_send_copy(&send, id, &header, sizeof(header), payload, length);

    UCT_UD_SR_ENTER(iface);
    status = (ucs_status_t)aptus_chan_send(&iface->ud.chan.super,
                                           uct_ud_sr_ep_cpeer(tl_ep), &send);
    UCT_UD_SR_LEAVE(iface);
    if (ucs_unlikely(ucs_log_is_enabled(UCS_LOG_LEVEL_TRACE_DATA)) &&
        (status == UCS_OK)) {
        uct_ud_sr_ep_trace_short(iface, tl_ep, id, header, payload, length);
    }
    return status;
}

ssize_t uct_ud_sr_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                              uct_pack_callback_t pack_cb, void *arg,
                              unsigned flags)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    uct_ud_sr_trace_pack_t trace;
    aptus_chan_send_t send;
    ssize_t ret;

    UCT_CHECK_AM_ID(id);
    aptus_chan_send_pack(&send, id, pack_cb, arg);
    if (ucs_unlikely(ucs_log_is_enabled(UCS_LOG_LEVEL_TRACE_DATA))) {
        trace.pack_cb = pack_cb;
        trace.arg     = arg;
        trace.iface   = iface;
        trace.ep      = tl_ep;
        trace.id      = id;
        send.pack.cb  = uct_ud_sr_ep_trace_pack;
        send.pack.arg = &trace;
    }

    UCT_UD_SR_ENTER(iface);
    ret = aptus_chan_send(&iface->ud.chan.super, uct_ud_sr_ep_cpeer(tl_ep),
                          &send);
    UCT_UD_SR_LEAVE(iface);
    return ret;
}

ucs_status_t uct_ud_sr_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                   const void *header, unsigned header_length,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    struct iovec liov[APTUS_UD_MAX_IOV];
    aptus_chan_send_t send;
    ucs_status_t status;
    size_t i;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)APTUS_UD_MAX_IOV,
                       "uct_ud_sr_ep_am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, iface->ud.chan.config.max_am_hdr,
                     "am_zcopy header");
    UCT_CHECK_LENGTH(header_length + uct_iov_total_length(iov, iovcnt), 0,
                     iface->ud.chan.config.max_msg, "am_zcopy");

    for (i = 0; i < iovcnt; ++i) {
        liov[i].iov_base = iov[i].buffer;
        liov[i].iov_len  = uct_iov_get_length(&iov[i]);
    }
    aptus_chan_send_iov(&send, id, header, header_length, liov, iovcnt, comp);

    UCT_UD_SR_ENTER(iface);
    status = (ucs_status_t)aptus_chan_send(&iface->ud.chan.super,
                                           uct_ud_sr_ep_cpeer(tl_ep), &send);
    UCT_UD_SR_LEAVE(iface);
    if (!UCS_STATUS_IS_ERR(status)) {
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, header,
                           header_length, "TX: AM_ZCOPY ep %p iovcnt %zu",
                           tl_ep, iovcnt);
    }
    return status;
}

/* get_zcopy and put_zcopy: one buffer, within the remote key's region,
 * over UD-ZCopy (a put is the target's get turned around). */
static ucs_status_t uct_ud_sr_ep_rma_zcopy(uct_ep_h tl_ep, const char *op,
                                           int is_put, const uct_iov_t *iov,
                                           size_t iovcnt, uint64_t remote_addr,
                                           uct_rkey_t rkey,
                                           uct_completion_t *comp)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    aptus_chan_key_t key;
    struct iovec liov;
    ucs_status_t status;

    status = uct_aptus_rma_zcopy_prepare(UCT_UD_SR_TL_NAME, op, iov, iovcnt,
                                         iface->ud.udz.config.max_get,
                                         remote_addr, rkey, &liov, &key);
    if ((status != UCS_OK) || (liov.iov_len == 0)) {
        return status;
    }
    UCT_UD_SR_ENTER(iface);
    iface->ud.chan.now_us = iface->ud.chan.clock();
    status                = (is_put ? aptus_chan_put : aptus_chan_get)(
        &iface->ud.udz.super, uct_ud_sr_ep_cpeer(tl_ep), &liov, 1, remote_addr,
        &key, comp);
    UCT_UD_SR_LEAVE(iface);
    return status;
}

ucs_status_t uct_ud_sr_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                    size_t iovcnt, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_ud_sr_ep_rma_zcopy(tl_ep, "get_zcopy", 0, iov, iovcnt,
                                  remote_addr, rkey, comp);
}

ucs_status_t uct_ud_sr_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                    size_t iovcnt, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_ud_sr_ep_rma_zcopy(tl_ep, "put_zcopy", 1, iov, iovcnt,
                                  remote_addr, rkey, comp);
}

ucs_status_t uct_ud_sr_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                    unsigned length, uint64_t remote_addr,
                                    uct_rkey_t rkey)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    ucs_status_t status;

    UCT_UD_SR_ENTER(iface);
    status = uct_aptus_rma_put_short(&iface->ud.udz, uct_ud_sr_ep_peer(tl_ep),
                                     "ud_sr put_short", buffer, length,
                                     remote_addr, rkey);
    UCT_UD_SR_LEAVE(iface);
    return status;
}

ssize_t uct_ud_sr_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                               void *arg, uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    ssize_t ret;

    UCT_UD_SR_ENTER(iface);
    ret = uct_aptus_rma_put_bcopy(&iface->ud.udz, uct_ud_sr_ep_peer(tl_ep),
                                  pack_cb, arg, remote_addr, rkey);
    UCT_UD_SR_LEAVE(iface);
    return ret;
}

ucs_status_t uct_ud_sr_ep_get_bcopy(uct_ep_h tl_ep,
                                    uct_unpack_callback_t unpack_cb, void *arg,
                                    size_t length, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    ucs_status_t status;

    UCT_UD_SR_ENTER(iface);
    status = uct_aptus_rma_get_bcopy(&iface->ud.udz, uct_ud_sr_ep_peer(tl_ep),
                                     unpack_cb, arg, length, remote_addr, rkey,
                                     comp);
    UCT_UD_SR_LEAVE(iface);
    return status;
}

ucs_status_t uct_ud_sr_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                      unsigned flags)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    ucs_status_t status;

    UCT_UD_SR_ENTER(iface);
    status = aptus_chan_pending_add(&iface->ud.chan.super,
                                    uct_ud_sr_ep_cpeer(tl_ep), req, flags);
    UCT_UD_SR_LEAVE(iface);
    return status;
}

void uct_ud_sr_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                                void *arg)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);

    UCT_UD_SR_ENTER(iface);
    aptus_chan_pending_purge(&iface->ud.chan.super, uct_ud_sr_ep_cpeer(tl_ep),
                             cb, arg);
    UCT_UD_SR_LEAVE(iface);
}

ucs_status_t uct_ud_sr_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                uct_completion_t *comp)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    ucs_status_t status;

    UCT_UD_SR_ENTER(iface);
    status = aptus_chan_flush(&iface->ud.chan.super, uct_ud_sr_ep_cpeer(tl_ep),
                              flags, comp);
    if (((status == UCS_OK) || (status == UCS_INPROGRESS)) &&
        !(flags & UCT_FLUSH_FLAG_CANCEL)) {
        /* gets too: comp completes after both */
        if (aptus_chan_flush(&iface->ud.udz.super, uct_ud_sr_ep_cpeer(tl_ep),
                             flags | ((status == UCS_INPROGRESS)
                                          ? APTUS_CHAN_FLUSH_F_SHARED_COMP
                                          : 0),
                             comp) == UCS_INPROGRESS) {
            status = UCS_INPROGRESS;
        }
    } else if ((flags & UCT_FLUSH_FLAG_CANCEL) && (status == UCS_OK)) {
        /* the stream is cancelled: so are its gets */
        aptus_chan_peer_disconnect(&iface->ud.udz.super,
                                   uct_ud_sr_ep_cpeer(tl_ep));
    }
    UCT_UD_SR_LEAVE(iface);
    return uct_aptus_flush_return(iface->super.worker->async, status);
}

ucs_status_t uct_ud_sr_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    /* Every operation on a stream is delivered in order: nothing issued
     * later can overtake what was issued before. */
    return UCS_OK;
}

ucs_status_t uct_ud_sr_ep_check(uct_ep_h tl_ep, unsigned flags,
                                uct_completion_t *comp)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);
    aptus_ud_peer_t *peer    = uct_ud_sr_ep_peer(tl_ep);
    ucs_status_t status;

    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    UCT_UD_SR_ENTER(iface);
    if (aptus_ud_peer_is_failed(peer)) {
        /* A check of a dead stream ends in the error handler, also when the
         * failure was not reported yet: the stream was cancelled by a flush,
         * or the report is still queued (then this adds nothing). */
        uct_ud_sr_iface_queue_failure(iface, peer, UCS_ERR_CONNECTION_RESET);
        status = UCS_OK;
    } else {
        status =
            aptus_chan_check(&iface->ud.chan.super, (aptus_chan_peer_t *)peer);
    }
    UCT_UD_SR_LEAVE(iface);
    return status;
}

ucs_status_t uct_ud_sr_ep_invalidate(uct_ep_h tl_ep, unsigned flags)
{
    uct_ud_sr_iface_t *iface = uct_ud_sr_ep_iface(tl_ep);

    UCT_UD_SR_ENTER(iface);
    aptus_chan_invalidate(&iface->ud.chan.super, uct_ud_sr_ep_cpeer(tl_ep));
    UCT_UD_SR_LEAVE(iface);
    return UCS_OK;
}
