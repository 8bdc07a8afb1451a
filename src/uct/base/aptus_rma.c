/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: short and buffered one-sided operations over UD (aptus_rma.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_rma.h"
#include "aptus_iface.h"

#include <uct/base/uct_iface.h>
#include <uct/base/uct_iov.inl>

#include <ucs/debug/memtrack_int.h>

#include <inttypes.h>

size_t uct_aptus_rma_max_put_short(const aptus_udz_t *udz)
{
    return ucs_min(udz->ud->wire->mtu - APTUS_UD_SR_HDR_MAX_LEN -
                       APTUS_ZC_PUT_HDR,
                   uct_aptus_rma_max_bcopy(udz));
}

size_t uct_aptus_rma_max_bcopy(const aptus_udz_t *udz)
{
    /* below the threshold, where puts and gets go through the stream */
    return ucs_min(aptus_udz_put_inline_max(udz), udz->config.thresh - 1);
}

void uct_aptus_rma_query(const aptus_udz_t *udz, int zcopy,
                         uct_iface_attr_t *attr)
{
    attr->cap.flags |= UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                       UCT_IFACE_FLAG_GET_BCOPY;
    attr->cap.put.max_short = uct_aptus_rma_max_put_short(udz);
    attr->cap.put.max_bcopy = uct_aptus_rma_max_bcopy(udz);
    attr->cap.get.max_bcopy = uct_aptus_rma_max_bcopy(udz);
    if (!zcopy) {
        return;
    }
    attr->cap.flags |= UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_ZCOPY;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = udz->config.max_get;
    attr->cap.put.max_iov         = 1;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = udz->config.max_get;
    attr->cap.get.max_iov         = 1;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
}

static int uct_aptus_rma_check(const char *op, uct_rkey_t rkey,
                               uint64_t remote_addr, size_t length)
{
    if (!uct_aptus_rkey_covers((const uct_aptus_rkey_t *)rkey, remote_addr,
                               length)) {
        ucs_error("%s: [0x%" PRIx64 ", +%zu) is outside the remote key's "
                  "region",
                  op, remote_addr, length);
        return 0;
    }
    return 1;
}

static ucs_status_t uct_aptus_rma_put(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                      const char *op, const void *buffer,
                                      size_t length, uint64_t remote_addr,
                                      uct_rkey_t rkey)
{
    if (length == 0) {
        return UCS_OK; /* as in UCX: nothing to move, the rkey may be a dummy */
    }
    if (!uct_aptus_rma_check(op, rkey, remote_addr, length)) {
        return UCS_ERR_INVALID_PARAM;
    }
    udz->ud->now_us = udz->ud->clock();
    return aptus_udz_put_inline(udz, peer, buffer, length, remote_addr,
                                ((const uct_aptus_rkey_t *)rkey)->token);
}

ssize_t uct_aptus_rma_put_bcopy(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                uct_pack_callback_t pack_cb, void *arg,
                                uint64_t remote_addr, uct_rkey_t rkey)
{
    size_t max = uct_aptus_rma_max_bcopy(udz);
    ucs_status_t status;
    size_t length;
    void *buf;

    if (udz->bounce == NULL) {
        udz->bounce =
            ucs_malloc(aptus_udz_put_inline_max(udz), "aptus_rma_bounce");
        if (udz->bounce == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
    }
    buf    = udz->bounce;
    length = pack_cb(buf, arg);
    ucs_assertv(length <= max, "put_bcopy packed %zu > %zu", length, max);
    status = uct_aptus_rma_put(udz, peer, "put_bcopy", buf, length, remote_addr,
                               rkey);
    return (status == UCS_OK) ? (ssize_t)length : status;
}

ucs_status_t uct_aptus_rma_put_short(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                     const char *op, const void *buffer,
                                     unsigned length, uint64_t remote_addr,
                                     uct_rkey_t rkey)
{
    UCT_CHECK_LENGTH(length, 0, uct_aptus_rma_max_put_short(udz), "put_short");
    return uct_aptus_rma_put(udz, peer, op, buffer, length, remote_addr, rkey);
}

ucs_status_t uct_aptus_rma_get_bcopy(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                     uct_unpack_callback_t unpack_cb, void *arg,
                                     size_t length, uint64_t remote_addr,
                                     uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_aptus_bcopy_get_t *get;
    ucs_status_t status;

    UCT_CHECK_LENGTH(length, 0, uct_aptus_rma_max_bcopy(udz), "get_bcopy");
    if (length == 0) {
        return UCS_OK;
    }
    if (!uct_aptus_rma_check("get_bcopy", rkey, remote_addr, length)) {
        return UCS_ERR_INVALID_PARAM;
    }
    get = uct_aptus_bcopy_get_new(unpack_cb, arg, length, comp);
    if (get == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    udz->ud->now_us = udz->ud->clock();
    status          = aptus_udz_get(udz, peer, get->data, length, remote_addr,
                                    ((const uct_aptus_rkey_t *)rkey)->token, &get->comp);
    if (status != UCS_INPROGRESS) {
        ucs_free(get);
    }
    return status;
}

ucs_status_t uct_aptus_rma_zcopy_prepare(const char *tl_name, const char *op,
                                         const uct_iov_t *iov, size_t iovcnt,
                                         size_t max, uint64_t remote_addr,
                                         uct_rkey_t rkey, struct iovec *liov,
                                         aptus_chan_key_t *key)
{
    const uct_aptus_rkey_t *akey = (const uct_aptus_rkey_t *)rkey;
    size_t length;

    UCT_CHECK_PARAM(iovcnt == 1, "%s %s takes one iov, got %zu", tl_name, op,
                    iovcnt);
    length = uct_iov_get_length(iov);
    UCT_CHECK_LENGTH(length, 0, max, op);
    liov->iov_base = iov->buffer;
    liov->iov_len  = length;
    if (length == 0) {
        return UCS_OK;
    }
    if (!uct_aptus_rkey_covers(akey, remote_addr, length)) {
        ucs_error("%s %s: [0x%" PRIx64 ", +%zu) is outside the remote key's "
                  "region",
                  tl_name, op, remote_addr, length);
        return UCS_ERR_INVALID_PARAM;
    }
    uct_aptus_rkey_to_chan_key(akey, key);
    return UCS_OK;
}
