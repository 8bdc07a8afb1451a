/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the short and buffered one-sided operations (put_short,
 * put_bcopy, get_bcopy) of the transports that reach every peer over UD
 * (ud_sr, aptus), on the UD-ZCopy channel: a small put travels in the
 * reliable stream and is written where the rkey says before the stream
 * acknowledges it; a buffered get reads into a bounce buffer and unpacks
 * it at completion. UCP 1.13 selects a transport for ucp_put/ucp_get
 * (its RMA lanes) only when it offers these.
 */
#ifndef UCT_APTUS_RMA_H_
#define UCT_APTUS_RMA_H_

#include "aptus_md.h"
#include "channel/ud_zcopy.h"

#include <uct/api/uct.h>

/* Largest put_short: one datagram; largest put_bcopy and get_bcopy: what
 * the stream carries below the zero-copy threshold. */
size_t uct_aptus_rma_max_put_short(const aptus_udz_t *udz);
size_t uct_aptus_rma_max_bcopy(const aptus_udz_t *udz);

/* Fill the put and get capabilities (short, bcopy; zcopy when zcopy). */
void uct_aptus_rma_query(const aptus_udz_t *udz, int zcopy,
                         uct_iface_attr_t *attr);

/* Put length bytes (at most uct_aptus_rma_max_put_short) of buffer at
 * remote_addr: UCS_OK once the stream took them, UCS_ERR_NO_RESOURCE when
 * its window is full. */
ucs_status_t uct_aptus_rma_put_short(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                     const char *op, const void *buffer,
                                     unsigned length, uint64_t remote_addr,
                                     uct_rkey_t rkey);

/* put_bcopy: what pack_cb packs (at most uct_aptus_rma_max_bcopy);
 * returns the length put, or an error. */
ssize_t uct_aptus_rma_put_bcopy(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                uct_pack_callback_t pack_cb, void *arg,
                                uint64_t remote_addr, uct_rkey_t rkey);

/* The checks of a get_zcopy or put_zcopy of one buffer (tl_name and op
 * name it in messages): one iov, at most max bytes, inside the remote
 * key's region. Fills the channel's iovec and key; UCS_OK with
 * liov->iov_len 0: nothing to move (the rkey may be a dummy, as in UCX). */
ucs_status_t uct_aptus_rma_zcopy_prepare(const char *tl_name, const char *op,
                                         const uct_iov_t *iov, size_t iovcnt,
                                         size_t max, uint64_t remote_addr,
                                         uct_rkey_t rkey, struct iovec *liov,
                                         aptus_chan_key_t *key);

/* Read length bytes (at most uct_aptus_rma_max_bcopy) at remote_addr and
 * hand them to unpack_cb; comp (may be NULL) is completed after that.
 * UCS_INPROGRESS, or an error. */
ucs_status_t uct_aptus_rma_get_bcopy(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                     uct_unpack_callback_t unpack_cb, void *arg,
                                     size_t length, uint64_t remote_addr,
                                     uct_rkey_t rkey, uct_completion_t *comp);

#endif
