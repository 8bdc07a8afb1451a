/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the aptus UCT interface (see aptus_tl.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "uct/base/aptus_rma.h"
#include "uct/base/aptus_iface.h"
#include "base/aptus_mpool.h"
#include "channel/chan_pending.h"

#include <ucs/sys/string.h>
#include <ucs/time/time.h>

#include <inttypes.h>
#include <string.h>

/* ---- failures ------------------------------------------------------------ */

void uct_aptus_tl_iface_queue_failure(uct_aptus_tl_iface_t *iface,
                                      aptus_ud_peer_t *peer,
                                      ucs_status_t status)
{
    uct_aptus_tl_ep_t *ep = uct_aptus_tl_ep_of_peer(peer);

    if (ep->flags & UCT_APTUS_EP_USER) {
        uct_ud_base_queue_failure(&iface->ud, peer, &ep->super.super, status);
    }
}

void uct_aptus_tl_iface_forget_failure(uct_aptus_tl_iface_t *iface,
                                       aptus_ud_peer_t *peer)
{
    uct_ud_base_forget_failure(&iface->ud,
                               &uct_aptus_tl_ep_of_peer(peer)->super.super);
}

/* ---- upcalls of the UD channel ----------------------------------------- */

static ucs_status_t uct_aptus_tl_ud_deliver(void *arg, aptus_ud_peer_t *peer,
                                            uint8_t am_id, void *data,
                                            size_t length, unsigned flags,
                                            int is_async)
{
    if (is_async) {
        return UCS_ERR_BUSY; /* in order with RC: only from progress */
    }
    return uct_aptus_tl_rx(arg, uct_aptus_tl_ep_of_peer(peer), am_id, data,
                           length, flags);
}

static void uct_aptus_tl_ud_peer_failed(void *arg, aptus_ud_peer_t *peer,
                                        ucs_status_t status)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep_of_peer(peer);

    aptus_udz_peer_failed(&iface->ud.udz, peer, status);
    if ((ep->act != NULL) && (ep->act->rc != NULL) && ep->act->rc->connected) {
        aptus_chan_invalidate(&iface->rc.super,
                              (aptus_chan_peer_t *)&ep->act->rc->link);
    }
    if (!(peer->flags & APTUS_UD_PEER_QUIET)) {
        uct_aptus_tl_iface_queue_failure(iface, peer, status);
    }
}

static void uct_aptus_tl_ud_peer_free(void *arg, aptus_ud_peer_t *peer)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep_of_peer(peer);

    if (ep->act == NULL) {
        return;
    }
    ucs_arbiter_group_purge(&iface->pending, &ep->act->pending,
                            aptus_pending_purge_cb,
                            &(uct_purge_cb_args_t){ NULL, NULL });
    uct_aptus_tl_rx_drop_held(iface, ep);
    uct_aptus_tl_iface_forget_failure(iface, peer);
    uct_aptus_tl_alloc_forget(iface, ep);
    uct_aptus_tl_ep_free_state(iface, ep);
}

static ucs_status_t uct_aptus_tl_ud_internal(void *arg, aptus_ud_peer_t *peer,
                                             uint8_t id, const void *data,
                                             size_t length, int is_async)
{
    uct_aptus_tl_iface_t *iface = arg;

    if (id != UCT_APTUS_CTL_MSG_ID) {
        iface->ud.chan.stats.rx_malformed++;
        return UCS_OK;
    }
    if (is_async) {
        return UCS_ERR_BUSY;
    }
    return uct_aptus_tl_ctl_recv(iface, uct_aptus_tl_ep_of_peer(peer), data,
                                 length);
}

static const aptus_ud_chan_ops_t uct_aptus_tl_ud_ops = {
    .deliver     = uct_aptus_tl_ud_deliver,
    .peer_failed = uct_aptus_tl_ud_peer_failed,
    .peer_free   = uct_aptus_tl_ud_peer_free,
};

/* ---- upcalls of the RC channel ----------------------------------------- */

static uct_aptus_tl_ep_t *uct_aptus_tl_rc_owner(uct_aptus_tl_iface_t *iface,
                                                aptus_rc_link_t *link)
{
    uct_aptus_tl_ep_t *ep;
    khiter_t iter;

    if (link->flags & APTUS_RC_LINK_USER) {
        return ucs_container_of(link, uct_aptus_tl_rc_t, link)->ep;
    }
    /* the peer's connection (or one we closed that still drains) */
    iter = kh_get(uct_aptus_rc_peers, &iface->rc_peers,
                  uct_aptus_tl_rc_map_key_of(link->peer_key, link->tag));
    if (iter == kh_end(&iface->rc_peers)) {
        return NULL;
    }
    ep = kh_value(&iface->rc_peers, iter);
    return ((ep->peer.remote_key == link->peer_key) &&
            (ep->peer.conn_id == link->tag))
               ? ep
               : NULL;
}

static ucs_status_t uct_aptus_tl_rc_deliver(void *arg, aptus_rc_link_t *link,
                                            uint8_t am_id, void *data,
                                            size_t length,
                                            aptus_conn_buf_t *buf, int at_start)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_rc_owner(iface, link);
    ucs_status_t status;

    if (ep == NULL) {
        /* a connection no peer of ours was granted: not ours to deliver */
        if (iface->stats.rx_unknown_link++ == 0) {
            ucs_warn("aptus/%s: a message on a connection from 0x%016" PRIx64
                     " for "
                     "a peer this interface never agreed a channel with "
                     "(stream %u) is dropped",
                     iface->dev_name, link->peer_key, link->tag);
        }
        return UCS_OK;
    }
    /* in place, no descriptor: UCP copies what it keeps, so a held message
     * never pins a shared receive buffer */
    status = uct_aptus_tl_rx(iface, ep, am_id, data, length, 0);
    uct_aptus_tl_rc_received(iface, ep); /* the sender may drop its copy */
    return status;
}

static void uct_aptus_tl_rc_peer_failed(void *arg, aptus_rc_link_t *link,
                                        ucs_status_t status)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep = ucs_container_of(link, uct_aptus_tl_rc_t, link)->ep;

    /* What the peer did not confirm goes again over UD; if the peer is
     * gone, UD finds out and reports it. */
    iface->stats.rc_failed++;
    ucs_debug(
        "aptus/%s: connection to peer 0x%016" PRIx64 "/%u failed: %s; %zu "
        "messages go again over UD",
        iface->dev_name, ep->peer.remote_key, ep->peer.conn_id,
        ucs_status_string(status), ucs_queue_length(&ep->act->rc_unacked));
    uct_aptus_tl_rc_fallback(iface, ep);
}

static const aptus_rc_chan_ops_t uct_aptus_tl_rc_ops = {
    .deliver     = uct_aptus_tl_rc_deliver,
    .peer_failed = uct_aptus_tl_rc_peer_failed,
};

/* ---- progress --------------------------------------------------------------
 */

static ucs_arbiter_cb_result_t
uct_aptus_tl_pending_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                        ucs_arbiter_elem_t *elem, void *arg)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep =
        ucs_container_of(group, uct_aptus_tl_active_t, pending)->ep;
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    ucs_status_t status;

    iface->dispatching = ep;
    status             = req->func(req);
    iface->dispatching = NULL;
    if (status == UCS_OK) {
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    }
    if (status == UCS_INPROGRESS) {
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP; /* partly sent: again */
    }
    return UCS_ARBITER_CB_RESULT_RESCHED_GROUP; /* still no room */
}

/* Whether this progress call polls the RC connections (an epoll_wait
 * system call on the sock wire): always while this process holds or has
 * promised a connection slot, or has connections; with none, a peer has no
 * grant to connect with, and one call in 64 picks up a stray one. */
static inline int uct_aptus_tl_rc_poll_due(uct_aptus_tl_iface_t *iface)
{
    if ((iface->alloc.used[APTUS_ALLOC_RC] > 0) ||
        (iface->rc.num_user_links + iface->rc.num_accepted_links > 0) ||
        (++iface->rc_idle_tick >= 64)) {
        iface->rc_idle_tick = 0;
        return 1;
    }
    return 0;
}

static unsigned uct_aptus_tl_iface_progress(uct_iface_h tl_iface)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    unsigned count;

    UCT_APTUS_ASYNC_ENTER(&iface->ud.async_rx, iface->super.worker->async);
    count = 0;
    if (uct_aptus_tl_rc_poll_due(iface)) {
        /* one epoll_wait covers the connections and, when watched, the
         * datagram socket: UD's read is skipped when it has nothing, so a
         * rank whose traffic goes over RC makes one system call per idle
         * progress instead of two */
        iface->ud_ready = 0;
        count += aptus_chan_progress(&iface->rc.super, 0);
        if (iface->ud_watched && !iface->ud_ready) {
            iface->ud.chan.rx_skip_poll = 1;
            iface->stats.ud_polls_shared++;
        }
    }
    count += uct_ud_base_progress(&iface->ud);
    count += uct_aptus_tl_fp_progress(iface);
    if (ucs_unlikely(!ucs_array_is_empty(&iface->resend_list) ||
                     !ucs_array_is_empty(&iface->xack_list))) {
        count += uct_aptus_tl_resend_progress(iface);
    }
    if (!ucs_arbiter_is_empty(&iface->pending)) {
        ucs_arbiter_dispatch(&iface->pending, 1, uct_aptus_tl_pending_cb,
                             iface);
    }
    if (!ucs_array_is_empty(&iface->ctl_list)) {
        count += uct_aptus_tl_ctl_progress(iface);
    }
    if (ucs_unlikely((int64_t)(iface->ud.chan.now_us - iface->next_check_us) >=
                     0)) {
        /* demotions and unanswered requests: a few times per hold period */
        count += uct_aptus_tl_alloc_progress(iface, iface->ud.chan.now_us);
    }
    if (ucs_unlikely((int64_t)(iface->ud.chan.now_us - iface->next_shrink_us) >=
                     0)) {
        /* due a few times per TIMEOUT: the call only then */
        count += uct_aptus_tl_ep_shrink_progress(iface, iface->ud.chan.now_us);
    }
    uct_ud_base_report_failures(&iface->ud);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return count;
}

static ucs_status_t uct_aptus_tl_iface_flush(uct_iface_h tl_iface,
                                             unsigned flags,
                                             uct_completion_t *comp)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    ucs_status_t status;

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED; /* as UCX's transports */
    }
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    status = aptus_rc_chan_flush_all(&iface->rc);
    if (status == UCS_OK) {
        status = aptus_ud_chan_flush_all(&iface->ud.chan, flags, NULL);
    }
    if ((status == UCS_OK) &&
        (aptus_udz_flush(&iface->ud.udz, NULL, NULL, 0) == UCS_INPROGRESS)) {
        status = UCS_INPROGRESS;
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return uct_aptus_flush_return(iface->super.worker->async, status);
}

/* ---- attributes and addresses ----------------------------------------- */

static ucs_status_t uct_aptus_tl_iface_query(uct_iface_h tl_iface,
                                             uct_iface_attr_t *attr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    size_t max_msg = iface->ud.chan.config.max_msg - UCT_APTUS_TRAILER_LEN;

    uct_base_iface_query(&iface->super, attr);

    attr->cap.flags = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                      UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                      UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PENDING |
                      UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_EP_CHECK |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;

    attr->cap.am.max_short       = iface->max_short;
    attr->cap.am.max_bcopy       = max_msg;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = max_msg;
    attr->cap.am.max_hdr         = iface->ud.chan.config.max_am_hdr;
    attr->cap.am.max_iov         = APTUS_UD_MAX_IOV - 1; /* + the trailer */
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;

    /* one-sided: short and buffered in the UD stream; zero-copy over
     * RC-RDMA where a connection reaches, else UD-ZCopy */
    uct_aptus_rma_query(&iface->ud.udz, 1, attr);

    attr->device_addr_len = uct_ud_base_dev_addr_len(&iface->ud);
    attr->iface_addr_len  = sizeof(uct_aptus_tl_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;

    attr->latency             = ucs_linear_func_make(iface->ud.latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->bandwidth;
    attr->overhead            = 3e-6;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t
uct_aptus_tl_iface_get_device_address(uct_iface_h tl_iface,
                                      uct_device_addr_t *addr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);

    uct_ud_base_dev_addr_pack(&iface->ud, addr);
    return UCS_OK;
}

static ucs_status_t uct_aptus_tl_iface_get_address(uct_iface_h tl_iface,
                                                   uct_iface_addr_t *addr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    uct_aptus_tl_iface_addr_t *aaddr = (uct_aptus_tl_iface_addr_t *)addr;

    aptus_put32(aaddr->ud_port, uct_ud_base_port(&iface->ud));
    aptus_put32(aaddr->rc_port, iface->rc.config.local_port);
    aaddr->key        = iface->ud.chan.local_key;
    aaddr->rc_credits = iface->rc.config.credits;
    aaddr->ud_mtu     = (uint16_t)iface->ud.wire->mtu;
    aaddr->host_id    = iface->conn->host_id;
    return UCS_OK;
}

static int uct_aptus_tl_iface_is_reachable(const uct_iface_h tl_iface,
                                           const uct_device_addr_t *dev_addr,
                                           const uct_iface_addr_t *iface_addr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);

    return uct_ud_base_is_reachable(&iface->ud, dev_addr);
}

/* ---- life -------------------------------------------------------------- */

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_aptus_tl_iface_t, uct_iface_t);

static uct_iface_ops_t uct_aptus_tl_iface_tl_ops = {
    .ep_am_short            = uct_aptus_tl_ep_am_short,
    .ep_am_short_iov        = uct_base_ep_am_short_iov,
    .ep_am_bcopy            = uct_aptus_tl_ep_am_bcopy,
    .ep_am_zcopy            = uct_aptus_tl_ep_am_zcopy,
    .ep_put_zcopy           = uct_aptus_tl_ep_put_zcopy,
    .ep_put_short           = uct_aptus_tl_ep_put_short,
    .ep_put_bcopy           = uct_aptus_tl_ep_put_bcopy,
    .ep_get_bcopy           = uct_aptus_tl_ep_get_bcopy,
    .ep_get_zcopy           = uct_aptus_tl_ep_get_zcopy,
    .ep_pending_add         = uct_aptus_tl_ep_pending_add,
    .ep_pending_purge       = uct_aptus_tl_ep_pending_purge,
    .ep_flush               = uct_aptus_tl_ep_flush,
    .ep_fence               = uct_aptus_tl_ep_fence,
    .ep_check               = uct_aptus_tl_ep_check,
    .ep_create              = uct_aptus_tl_ep_create,
    .ep_destroy             = uct_aptus_tl_ep_destroy,
    .iface_flush            = uct_aptus_tl_iface_flush,
    .iface_fence            = uct_base_iface_fence,
    .iface_progress_enable  = uct_base_iface_progress_enable,
    .iface_progress_disable = uct_base_iface_progress_disable,
    .iface_progress         = uct_aptus_tl_iface_progress,
    .iface_event_fd_get     = ucs_empty_function_return_unsupported,
    .iface_event_arm        = ucs_empty_function_return_unsupported,
    .iface_close            = UCS_CLASS_DELETE_FUNC_NAME(uct_aptus_tl_iface_t),
    .iface_query            = uct_aptus_tl_iface_query,
    .iface_get_device_address = uct_aptus_tl_iface_get_device_address,
    .iface_get_address        = uct_aptus_tl_iface_get_address,
    .iface_is_reachable       = uct_aptus_tl_iface_is_reachable,
};

static ucs_status_t uct_aptus_tl_iface_estimate_perf(uct_iface_h tl_iface,
                                                     uct_perf_attr_t *perf_attr)
{
    return uct_aptus_iface_estimate_perf(
        tl_iface, perf_attr,
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t)->ud.bandwidth);
}

static uct_iface_internal_ops_t uct_aptus_tl_iface_internal_ops = {
    .iface_estimate_perf = uct_aptus_tl_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query      = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate = uct_aptus_tl_ep_invalidate,
};

static ucs_status_t
uct_aptus_tl_iface_rc_init(uct_aptus_tl_iface_t *iface,
                           const uct_aptus_tl_iface_config_t *config)
{
    aptus_conn_wire_config_t wire_config;
    aptus_rc_chan_config_t chan_config;
    ucs_status_t status;

    /* messages are delivered in place and never held there */
    memset(&wire_config, 0, sizeof(wire_config));
    /* RC_SEG_SIZE of the user's bytes, and the trailer */
    wire_config.max_frame =
        APTUS_RC_HDR_LEN + config->rc.seg_size + UCT_APTUS_TRAILER_LEN;
    wire_config.rx_headroom     = 0;
    wire_config.rx_buffers      = config->rc.rx_queue_len;
    wire_config.rx_max_buffers  = config->rc.rx_queue_len;
    wire_config.rx_alignment    = iface->am_align;
    wire_config.rx_align_offset = iface->ud.wdev->conn_rx_hdr_len +
                                  APTUS_RC_HDR_LEN + iface->am_align_offset;
    wire_config.max_backlog = config->rc.tx_backlog;
    wire_config.handlers    = &aptus_rc_chan_wire_handlers;
    wire_config.arg         = &iface->rc;
    wire_config.numa_node   = iface->ud.chan.config.numa_node;
    status =
        iface->ud.wdev->conn_open(iface->dev_name, &wire_config, &iface->conn);
    if (status != UCS_OK) {
        return status;
    }

    chan_config.credits    = config->rc.credits;
    chan_config.max_msg    = config->rc.seg_size + UCT_APTUS_TRAILER_LEN;
    chan_config.local_port = iface->ud.wdev->addr_port(&iface->conn->addr);
    /* one key names the interface on both channels */
    status = aptus_rc_chan_init(&iface->rc, iface->conn, &chan_config,
                                iface->ud.chan.local_key, &uct_aptus_tl_rc_ops,
                                iface);
    if (status != UCS_OK) {
        iface->conn->ops->close(iface->conn);
        return status;
    }
    /* a peer on another host gets its one-sided operations over UD-ZCopy:
     * the data and the messages that announce it may take different
     * channels here, so nothing may complete before the data is in place */
    status = aptus_rc_rdma_chan_init(&iface->rdma, &iface->rc, 0);
    if (status != UCS_OK) {
        aptus_rc_chan_cleanup(&iface->rc);
        iface->conn->ops->close(iface->conn);
        return status;
    }
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_aptus_tl_iface_t, uct_md_h md,
                           uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_aptus_tl_iface_config_t *config =
        ucs_derived_of(tl_config, uct_aptus_tl_iface_config_t);
    uct_ud_sr_setup_t setup;
    ucs_async_context_t *async;
    ucs_status_t status;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("aptus: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(
        uct_base_iface_t, &uct_aptus_tl_iface_tl_ops,
        &uct_aptus_tl_iface_internal_ops, md, worker, params,
        tl_config UCS_STATS_ARG(NULL) UCS_STATS_ARG(UCT_APTUS_TL_NAME));

    ucs_strncpy_zero(self->dev_name, params->mode.device.dev_name,
                     sizeof(self->dev_name));
    ucs_array_init_dynamic(&self->ctl_list);
    ucs_array_init_dynamic(&self->xack_list);
    ucs_array_init_dynamic(&self->resend_list);
    ucs_array_init_dynamic(&self->rc_list);
    ucs_list_head_init(&self->active_peers);
    self->num_active     = 0;
    self->next_shrink_us = 0;
    self->next_check_us  = 0;
    self->dispatching    = NULL;
    self->rma            = config->rc.rma;
    self->reorder_max    = config->reorder_max;
    self->rx_headroom =
        UCT_IFACE_PARAM_VALUE(params, rx_headroom, RX_HEADROOM, 0);
    self->held_release.cb = uct_aptus_tl_held_release;
    memset(&self->stats, 0, sizeof(self->stats));
    async  = self->super.worker->async;
    status = uct_aptus_iface_async_check(UCT_APTUS_TL_NAME, async);
    if (status != UCS_OK) {
        return status;
    }

    if (!uct_aptus_md_conn_keys(md)) {
        /* its rendezvous over RC reads the domain's keys by RDMA */
        ucs_error("%s: the %s wire's connections cannot use this memory "
                  "domain's keys (verbs: one HCA with active ports per host)",
                  UCT_APTUS_TL_NAME, uct_aptus_md_wire(md)->name);
        return UCS_ERR_UNSUPPORTED;
    }

    /* Every setting is checked before anything opens. */
    status = uct_aptus_tl_iface_check_config(uct_aptus_md_wire(md), config);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_ud_sr_params_setup(
        &config->ud, UCT_APTUS_TL_NAME, UCT_APTUS_TL_CONFIG_PREFIX,
        uct_aptus_md_wire(md), params, ucs_offsetof(uct_aptus_tl_ep_t, peer),
        &setup);
    if (status != UCS_OK) {
        return status;
    }
    /* a peer idle for half the UD timeout, with nothing in flight, gives
     * its active state back: within one TIMEOUT of its last message */
    self->shrink_us       = ucs_max(setup.chan.rel.peer_timeout_us / 2, 1000);
    self->am_align        = setup.chan.am_align;
    self->am_align_offset = setup.chan.am_align_offset;
    status                = uct_aptus_tl_iface_rules(self, config);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_aptus_tl_iface_alloc_init(self, config);
    if (status != UCS_OK) {
        return status;
    }
    memset(&self->fpc, 0, sizeof(self->fpc)); /* cleanup-safe until init */
    self->rc_idle_tick = 0;

    self->bounce =
        ucs_malloc(ucs_max(setup.chan.max_msg,
                           config->rc.seg_size + UCT_APTUS_TRAILER_LEN),
                   "uct_aptus_bounce");
    if (self->bounce == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    kh_init_inplace(uct_aptus_rc_peers, &self->rc_peers);
    ucs_arbiter_init(&self->pending);

    status = ucs_mpool_init(&self->zcomp_mp, 0, sizeof(uct_aptus_tl_zcomp_t), 0,
                            8, 128, UINT_MAX, &aptus_mpool_plain_ops,
                            "aptus_zcopy_comps");
    if (status != UCS_OK) {
        goto err_bounce;
    }
    status = ucs_mpool_init(&self->keep_mp, 0,
                            sizeof(uct_aptus_tl_copy_t) + config->rc.seg_size +
                                UCT_APTUS_TRAILER_LEN,
                            0, 8, 16, UINT_MAX, &aptus_mpool_plain_ops,
                            "aptus_rc_copies");
    if (status != UCS_OK) {
        goto err_zcomp;
    }

    status =
        uct_ud_base_init(&self->ud, &self->super, UCT_APTUS_TL_NAME,
                         self->dev_name, &setup, &uct_aptus_tl_ud_ops, self);
    if (status != UCS_OK) {
        goto err_mpool;
    }
    uct_ud_base_set_internal(&self->ud, uct_aptus_tl_ud_internal, self);
    /* one datagram, trailer included (RC would take more) */
    self->max_short =
        aptus_ud_chan_max_short(&self->ud.chan) - UCT_APTUS_TRAILER_LEN;

    status = uct_aptus_tl_iface_rc_init(self, config);
    if (status != UCS_OK) {
        goto err_ud;
    }
    status = uct_aptus_tl_fp_init(self, config);
    if (status != UCS_OK) {
        goto err_rc;
    }

    /* the rendezvous' get is zero copy (RC-RDMA, or UD-ZCopy, the slower) */
    self->bandwidth =
        self->ud.wdev->zcopy_bw(self->dev_name, self->ud.bandwidth);
    status = uct_ud_base_start(&self->ud, &setup);
    if (status != UCS_OK) {
        goto err_fp;
    }
    self->ud_watched =
        (self->conn->ops->watch_fd != NULL) &&
        (self->ud.wire->ops->event_fd(self->ud.wire) >= 0) &&
        (self->conn->ops->watch_fd(self->conn,
                                   self->ud.wire->ops->event_fd(self->ud.wire),
                                   &self->ud_ready) == UCS_OK);

    ucs_debug("aptus/%s: key 0x%016" PRIx64 " max_rc %u rules %s",
              self->dev_name, self->ud.chan.local_key, config->max_rc,
              config->send_rules);
    return UCS_OK;

err_fp:
    uct_aptus_tl_fp_cleanup(self);
err_rc:
    aptus_rc_chan_cleanup(&self->rc);
    aptus_fp_chan_revoke(&self->fpc); /* its registrations are the wire's */
    self->conn->ops->close(self->conn);
    aptus_rc_rdma_chan_cleanup(&self->rdma);
err_ud:
    uct_ud_base_cleanup(&self->ud);
err_mpool:
    ucs_mpool_cleanup(&self->keep_mp, 0);
err_zcomp:
    ucs_mpool_cleanup(&self->zcomp_mp, 0);
err_bounce:
    ucs_arbiter_cleanup(&self->pending);
    kh_destroy_inplace(uct_aptus_rc_peers, &self->rc_peers);
    ucs_free(self->bounce);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_aptus_tl_iface_t)
{
    uct_aptus_md_t *md = ucs_derived_of(self->super.md, uct_aptus_md_t);
    uct_aptus_stat_t stats[192];
    unsigned n;

    uct_ud_base_stop(&self->ud);

    UCS_ASYNC_BLOCK(self->super.worker->async);
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    n = uct_aptus_tl_iface_stats(self, stats, ucs_static_array_size(stats));
    uct_aptus_stats_print(md->stats, UCT_APTUS_TL_NAME, self->dev_name, stats,
                          n);
    uct_aptus_tl_iface_print_sizes(self, md->stats);
    uct_aptus_tl_iface_print_peers(self, md->stats);
    /* the streams first: their peers give their connections back to the
     * RC channel, which then closes them all */
    uct_ud_base_cleanup(&self->ud);
    aptus_rc_chan_cleanup(&self->rc);
    aptus_fp_chan_revoke(&self->fpc); /* its registrations are the wire's */
    self->conn->ops->close(self->conn);
    aptus_rc_rdma_chan_cleanup(&self->rdma);
    uct_aptus_tl_fp_cleanup(self); /* a late write from a peer now fails */
    ucs_mpool_cleanup(&self->keep_mp, 1);
    ucs_mpool_cleanup(&self->zcomp_mp, 1);
    ucs_arbiter_cleanup(&self->pending);
    kh_destroy_inplace(uct_aptus_rc_peers, &self->rc_peers);
    ucs_array_cleanup_dynamic(&self->ctl_list);
    ucs_array_cleanup_dynamic(&self->xack_list);
    ucs_array_cleanup_dynamic(&self->resend_list);
    ucs_array_cleanup_dynamic(&self->rc_list);
    ucs_free(self->bounce);
    UCS_ASYNC_UNBLOCK(self->super.worker->async);
}

UCS_CLASS_DEFINE(uct_aptus_tl_iface_t, uct_base_iface_t);

static UCS_CLASS_DEFINE_NEW_FUNC(uct_aptus_tl_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t *,
                                 const uct_iface_config_t *);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_aptus_tl_iface_t, uct_iface_t);

static ucs_status_t
uct_aptus_tl_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                           unsigned *num_devices_p)
{
    return uct_aptus_iface_query_devices(md, 0, 1, devices_p, num_devices_p);
}

UCT_TL_DEFINE_ENTRY(&uct_aptus_component, aptus, uct_aptus_tl_query_devices,
                    uct_aptus_tl_iface_t, UCT_APTUS_TL_CONFIG_PREFIX,
                    uct_aptus_tl_iface_config_table,
                    uct_aptus_tl_iface_config_t);
