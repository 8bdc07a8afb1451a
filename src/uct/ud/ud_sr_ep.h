/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: ud_sr endpoint operations. The endpoint is the UD-SR peer.
 */
#ifndef UCT_UD_SR_EP_H_
#define UCT_UD_SR_EP_H_

#include "ud_sr_iface.h"

ucs_status_t uct_ud_sr_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
void uct_ud_sr_ep_destroy(uct_ep_h tl_ep);

ucs_status_t uct_ud_sr_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length);
ssize_t uct_ud_sr_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                              uct_pack_callback_t pack_cb, void *arg,
                              unsigned flags);
ucs_status_t uct_ud_sr_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                   const void *header, unsigned header_length,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp);

ucs_status_t uct_ud_sr_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                    size_t iovcnt, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp);

ucs_status_t uct_ud_sr_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                    size_t iovcnt, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_ud_sr_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                    unsigned length, uint64_t remote_addr,
                                    uct_rkey_t rkey);
ssize_t uct_ud_sr_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                               void *arg, uint64_t remote_addr,
                               uct_rkey_t rkey);
ucs_status_t uct_ud_sr_ep_get_bcopy(uct_ep_h tl_ep,
                                    uct_unpack_callback_t unpack_cb, void *arg,
                                    size_t length, uint64_t remote_addr,
                                    uct_rkey_t rkey, uct_completion_t *comp);

ucs_status_t uct_ud_sr_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                      unsigned flags);
void uct_ud_sr_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                                void *arg);
ucs_status_t uct_ud_sr_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                uct_completion_t *comp);
ucs_status_t uct_ud_sr_ep_fence(uct_ep_h tl_ep, unsigned flags);
ucs_status_t uct_ud_sr_ep_invalidate(uct_ep_h tl_ep, unsigned flags);

ucs_status_t uct_ud_sr_ep_check(uct_ep_h tl_ep, unsigned flags,
                                uct_completion_t *comp);

#endif
