/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the ud_sr UCT interface.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_iface.h"
#include "ud_sr_ep.h"
#include "uct/base/aptus_rma.h"
#include "uct/base/aptus_iface.h"
#include "wire/sock/sock_dgram.h"
#include "wire/sock/sock_netif.h"

#include <ucs/arch/atomic.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <ucs/time/time.h>

#include <string.h>

#define UCT_UD_SR_CONFIG_PREFIX "UD_SR_"

ucs_config_field_t uct_ud_sr_iface_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_ud_sr_iface_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_iface_config_table) },

    { "", "", NULL, ucs_offsetof(uct_ud_sr_iface_config_t, ud),
      UCS_CONFIG_TYPE_TABLE(uct_ud_sr_params_table) },

    { NULL }
};

static ucs_status_t uct_ud_sr_deliver(void *arg, aptus_ud_peer_t *peer,
                                      uint8_t am_id, void *data, size_t length,
                                      unsigned flags, int is_async)
{
    uct_ud_sr_iface_t *iface = arg;

    if (is_async && !(iface->super.am[am_id].flags & UCT_CB_FLAG_ASYNC)) {
        return UCS_ERR_BUSY; /* the channel queues it for progress */
    }
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id, data,
                       length, "RX: AM ep %p", peer);
    return uct_iface_invoke_am(&iface->super, am_id, data, length, flags);
}

void uct_ud_sr_iface_queue_failure(uct_ud_sr_iface_t *iface,
                                   aptus_ud_peer_t *peer, ucs_status_t status)
{
    char addr[48], who[64];

    if (!(peer->flags & APTUS_UD_PEER_USER) ||
        (peer->flags & APTUS_UD_PEER_REPORTED)) {
        return;
    }
    snprintf(who, sizeof(who), "%s stream %u",
             iface->wire->ops->addr_str(&peer->addr, addr, sizeof(addr)),
             peer->conn_id);
    if (uct_aptus_failures_add(&iface->failures, UCT_UD_SR_TL_NAME,
                               &uct_ud_sr_ep_of_peer(peer)->super.super, status,
                               who)) {
        peer->flags |= APTUS_UD_PEER_REPORTED;
    }
}

void uct_ud_sr_iface_forget_failure(uct_ud_sr_iface_t *iface,
                                    aptus_ud_peer_t *peer)
{
    uct_aptus_failures_forget(&iface->failures,
                              &uct_ud_sr_ep_of_peer(peer)->super.super);
}

static void uct_ud_sr_peer_failed(void *arg, aptus_ud_peer_t *peer,
                                  ucs_status_t status)
{
    uct_ud_sr_iface_t *iface = arg;

    /* transfers to or from it end (completions run from progress) */
    aptus_udz_peer_failed(&iface->udz, peer, status);
    if (!(peer->flags & APTUS_UD_PEER_QUIET)) {
        uct_ud_sr_iface_queue_failure(iface, peer, status);
    }
}

static ucs_status_t uct_ud_sr_internal(void *arg, aptus_ud_peer_t *peer,
                                       uint8_t id, const void *data,
                                       size_t length, int is_async)
{
    uct_ud_sr_iface_t *iface = arg;

    if (id != APTUS_UDZ_MSG_ID) {
        iface->chan.stats.rx_malformed++;
        return UCS_OK;
    }
    return aptus_udz_internal(&iface->udz, peer, data, length, is_async);
}

static const aptus_ud_chan_ops_t uct_ud_sr_chan_ops = {
    .deliver     = uct_ud_sr_deliver,
    .peer_failed = uct_ud_sr_peer_failed,
};

static unsigned uct_ud_sr_iface_progress(uct_iface_h tl_iface)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    unsigned count;

    UCT_APTUS_ASYNC_ENTER(&iface->async_rx, iface->super.worker->async);
    count =
        uct_aptus_ud_user_progress(&iface->chan, &iface->udz, &iface->async_rx);
    if (ucs_unlikely(iface->failures.num > 0)) {
        uct_aptus_failures_report(&iface->failures, &iface->super.super,
                                  UCT_UD_SR_TL_NAME, iface->dev_name);
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return count;
}

/* Runs in the async thread with the async lock held: keeps receiving,
 * acknowledging and retransmitting while the application computes. */
static void uct_ud_sr_iface_timer(int id, ucs_event_set_types_t events,
                                  void *arg)
{
    uct_ud_sr_iface_t *iface = arg;

    if (uct_aptus_async_timer_expired(&iface->timer) == 0) {
        return; /* consumed by an earlier call */
    }
    uct_aptus_ud_async_timer(&iface->chan, &iface->udz, &iface->async_rx,
                             &iface->timer);
}

/* Datagrams arrived while the user computes (armed by the timer). */
static void uct_ud_sr_iface_event(int fd, ucs_event_set_types_t events,
                                  void *arg)
{
    uct_ud_sr_iface_t *iface = arg;

    uct_aptus_ud_async_event(&iface->chan, &iface->udz, &iface->async_rx);
}

static ucs_status_t uct_ud_sr_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                          uct_completion_t *comp)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    ucs_status_t status;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    status = aptus_ud_chan_flush_all(&iface->chan, flags, comp);
    if ((status == UCS_OK) || (status == UCS_INPROGRESS)) {
        /* and every get: comp completes after both */
        if (aptus_udz_flush(&iface->udz, NULL, comp,
                            status == UCS_INPROGRESS) == UCS_INPROGRESS) {
            status = UCS_INPROGRESS;
        }
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return uct_aptus_flush_return(iface->super.worker->async, status);
}

static ucs_status_t uct_ud_sr_iface_query(uct_iface_h tl_iface,
                                          uct_iface_attr_t *attr)
{
    uct_ud_sr_iface_t *iface    = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    const aptus_ud_chan_t *chan = &iface->chan;

    uct_base_iface_query(&iface->super, attr);

    attr->cap.flags = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                      UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                      UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PENDING |
                      UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_CB_ASYNC |
                      UCT_IFACE_FLAG_EP_CHECK |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;

    attr->cap.am.max_short       = aptus_ud_chan_max_short(chan);
    attr->cap.am.max_bcopy       = chan->config.max_msg;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = chan->config.max_msg;
    attr->cap.am.max_hdr         = chan->config.max_am_hdr;
    attr->cap.am.max_iov         = APTUS_UD_MAX_IOV;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;

    /* one-sided operations: short and buffered ones in the stream, the
     * zero-copy ones by UD-ZCopy when it is on */
    uct_aptus_rma_query(&iface->udz, iface->zcopy, attr);

    attr->device_addr_len = aptus_sock_dev_addr_len(&iface->wire->addr);
    attr->iface_addr_len  = sizeof(uct_ud_sr_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;

    attr->latency             = ucs_linear_func_make(iface->latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->bandwidth;
    /* CPU cost of one datagram through the socket layer, measured on
     * loopback (contrib/bench): a system call each way. */
    attr->overhead = 3e-6;
    attr->priority = 0;
    return UCS_OK;
}

static ucs_status_t uct_ud_sr_iface_get_device_address(uct_iface_h tl_iface,
                                                       uct_device_addr_t *addr)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);

    aptus_sock_dev_addr_pack(&iface->wire->addr, addr);
    return UCS_OK;
}

static ucs_status_t uct_ud_sr_iface_get_address(uct_iface_h tl_iface,
                                                uct_iface_addr_t *addr)
{
    uct_ud_sr_iface_t *iface      = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    uct_ud_sr_iface_addr_t *uaddr = (uct_ud_sr_iface_addr_t *)addr;

    uaddr->port = aptus_sock_wire_addr_port(&iface->wire->addr);
    uaddr->key  = iface->chan.local_key;
    uaddr->mtu  = (uint16_t)iface->wire->mtu;
    return UCS_OK;
}

static int uct_ud_sr_iface_is_reachable(const uct_iface_h tl_iface,
                                        const uct_device_addr_t *dev_addr,
                                        const uct_iface_addr_t *iface_addr)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);

    return (dev_addr != NULL) &&
           aptus_sock_dev_addr_reachable(&iface->wire->addr, dev_addr);
}

unsigned uct_ud_sr_iface_stats(uct_ud_sr_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max)
{
    const aptus_ud_chan_stats_t *c    = &iface->chan.stats;
    const aptus_dgram_wire_stats_t *w = &iface->wire->stats;
    const aptus_udz_stats_t *z        = &iface->udz.stats;
    int rcvbuf, sndbuf;

    aptus_sock_dgram_bufsizes(iface->wire, &rcvbuf, &sndbuf);
    {
        uct_aptus_stat_t all[] = {
            { "tx_msgs", c->tx_msgs },
            { "tx_bytes", c->tx_bytes },
            { "rx_msgs", c->rx_msgs },
            { "rx_bytes", c->rx_bytes },
            { "tx_dgrams", w->tx_dgrams },
            { "rx_dgrams", w->rx_dgrams },
            { "tx_data", c->tx_data_dgrams },
            { "tx_acks", c->tx_acks },
            { "rx_acks", c->rx_acks },
            { "retransmits", c->tx_retransmits },
            { "fast_retransmits", c->tx_fast_retransmits },
            { "probes", c->tx_probes },
            { "window_full", c->tx_window_full },
            { "rx_duplicates", c->rx_duplicates },
            { "rx_held", c->rx_held },
            { "rx_out_of_window", c->rx_out_of_window },
            { "rx_deferred", c->rx_deferred },
            { "async_wakeups", iface->timer.wakeups },
            { "async_arms", iface->async_rx.arms },
            { "async_events", iface->async_rx.events },
            { "rx_bad_key", c->rx_bad_key },
            { "rx_malformed", c->rx_malformed },
            { "rx_bad_crc", c->rx_bad_crc },
            { "rx_bad_ack", c->rx_bad_ack },
            { "rx_unknown_stream", c->rx_unknown_stream },
            { "rx_dead_stream", c->rx_dead_stream },
            { "rx_truncated", w->rx_truncated },
            { "tx_errors", w->tx_errors },
            { "resets", c->tx_resets },
            { "peers", aptus_ud_chan_num_peers(&iface->chan) },
            { "peers_failed", c->peers_failed },
            { "peers_reclaimed", c->peers_reclaimed },
            { "max_streams_per_peer", APTUS_UD_MAX_CONN },
            { "rx_pool_exhausted", c->rx_pool_exhausted },
            { "rx_peer_limit", c->rx_peer_limit },
            { "path_probes", c->path_probes },
            { "path_raised", c->path_raised },
            { "path_lost", c->path_lost },
            { "path_replies", c->path_replies },
            { "rx_opening", c->rx_opening },
            { "open_resends", c->tx_open_resends },
            { "rx_stale", c->rx_stale },
            { "rx_challenges", c->rx_challenges },
            { "open_refused", c->open_refused },
            { "open_evicted", c->open_evicted },
            { "rx_reasm_limit", c->rx_reasm_limit },
            { "rx_copied_small", c->rx_copied_small },
            { "rx_hold_limit", c->rx_hold_limit },
            { "rx_max_bufs", iface->chan.config.rx_max },
            { "pending_async", c->pending_async },
            { "peer_bytes", aptus_ud_chan_peer_bytes(&iface->chan) },
            { "pending_dispatched", c->pending_dispatched },
            { "checks", c->checks },
            { "fault_drop", w->fault_drop },
            { "fault_dup", w->fault_dup },
            { "fault_reorder", w->fault_reorder },
            { "fault_delay", w->fault_delay },
            { "zc_gets", z->zc_gets },
            { "zc_bytes", z->zc_bytes },
            { "copy_gets", z->copy_gets },
            { "copy_bytes", z->copy_bytes },
            { "zc_pool_empty", z->pool_empty },
            { "zc_dgrams_sent", z->dgrams_sent },
            { "zc_dgrams_resent", z->dgrams_resent },
            { "zc_dgrams_received", z->dgrams_received },
            { "zc_misplaced", z->misplaced },
            { "zc_duplicates", z->duplicates },
            { "zc_bad_key", z->bad_key },
            { "zc_bad_index", z->bad_index },
            { "zc_truncated", z->truncated },
            { "zc_credits", z->credits },
            { "zc_nacks", z->nacks },
            { "zc_stalls", z->stalls },
            { "zc_probes", z->probes },
            { "zc_errors", z->errors },
            { "zc_aborted", z->aborted },
            { "zc_reflect_refused", z->reflect_refused },
            { "zc_serve_limit", z->serve_limit },
            { "zc_puts", z->writes },
            { "puts_inline", z->puts_inline },
            { "put_refused", z->write_refused },
            { "zc_busy_retries", z->busy_retries },
            { "zc_async_yields", z->async_yields },
            { "zc_errors_dropped", z->errors_dropped },
            /* what the interface holds of the kernel: its socket
             * and a socket per receive context opened so far, and
             * the buffer bytes the kernel granted the first */
            { "sock_fds", 1 + z->ctxs_open },
            { "sock_rcvbuf", (uint64_t)ucs_max(rcvbuf, 0) },
            { "sock_sndbuf", (uint64_t)ucs_max(sndbuf, 0) },
            { "sock_buf_force", aptus_sock_dgram_force_bufs(iface->wire) },
        };
        unsigned n = ucs_min(max, sizeof(all) / sizeof(all[0]));

        memcpy(stats, all, n * sizeof(*stats));
        return n;
    }
}

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_ud_sr_iface_t, uct_iface_t);

static uct_iface_ops_t uct_ud_sr_iface_tl_ops = {
    .ep_am_short              = uct_ud_sr_ep_am_short,
    .ep_am_short_iov          = uct_base_ep_am_short_iov,
    .ep_am_bcopy              = uct_ud_sr_ep_am_bcopy,
    .ep_am_zcopy              = uct_ud_sr_ep_am_zcopy,
    .ep_get_zcopy             = uct_ud_sr_ep_get_zcopy,
    .ep_put_zcopy             = uct_ud_sr_ep_put_zcopy,
    .ep_put_short             = uct_ud_sr_ep_put_short,
    .ep_put_bcopy             = uct_ud_sr_ep_put_bcopy,
    .ep_get_bcopy             = uct_ud_sr_ep_get_bcopy,
    .ep_pending_add           = uct_ud_sr_ep_pending_add,
    .ep_pending_purge         = uct_ud_sr_ep_pending_purge,
    .ep_flush                 = uct_ud_sr_ep_flush,
    .ep_fence                 = uct_ud_sr_ep_fence,
    .ep_check                 = uct_ud_sr_ep_check,
    .ep_create                = uct_ud_sr_ep_create,
    .ep_destroy               = uct_ud_sr_ep_destroy,
    .iface_flush              = uct_ud_sr_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_ud_sr_iface_progress,
    .iface_event_fd_get       = ucs_empty_function_return_unsupported,
    .iface_event_arm          = ucs_empty_function_return_unsupported,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_ud_sr_iface_t),
    .iface_query              = uct_ud_sr_iface_query,
    .iface_get_device_address = uct_ud_sr_iface_get_device_address,
    .iface_get_address        = uct_ud_sr_iface_get_address,
    .iface_is_reachable       = uct_ud_sr_iface_is_reachable,
};

static uct_iface_internal_ops_t uct_ud_sr_iface_internal_ops = {
    .iface_estimate_perf = uct_base_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query      = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate = uct_ud_sr_ep_invalidate,
};


static UCS_CLASS_INIT_FUNC(uct_ud_sr_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_ud_sr_iface_config_t *config =
        ucs_derived_of(tl_config, uct_ud_sr_iface_config_t);
    uct_ud_sr_setup_t setup;
    ucs_async_context_t *async;
    ucs_status_t status;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("ud_sr: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_ud_sr_iface_tl_ops,
                              &uct_ud_sr_iface_internal_ops, md, worker, params,
                              tl_config UCS_STATS_ARG(NULL)
                                  UCS_STATS_ARG(UCT_UD_SR_TL_NAME));

    ucs_strncpy_zero(self->dev_name, params->mode.device.dev_name,
                     sizeof(self->dev_name));
    uct_aptus_failures_init(&self->failures);
    self->timer.fd = -1;
    async          = self->super.worker->async;
    status         = uct_aptus_iface_async_check(UCT_UD_SR_TL_NAME, async);
    if (status != UCS_OK) {
        return status;
    }

    if (!uct_aptus_iface_config_check(
            UCT_UD_SR_TL_NAME, UCT_UD_SR_CONFIG_PREFIX, &config->super)) {
        return UCS_ERR_INVALID_PARAM;
    }
    status = uct_ud_sr_params_setup(&config->ud, UCT_UD_SR_TL_NAME,
                                    UCT_UD_SR_CONFIG_PREFIX, params,
                                    ucs_offsetof(uct_ud_sr_ep_t, peer), &setup);
    if (status != UCS_OK) {
        return status;
    }

    status = aptus_sock_dgram_open(self->dev_name, &setup.wire, &self->wire);
    if (status != UCS_OK) {
        return status;
    }

    status = aptus_ud_chan_init(&self->chan, &setup.chan, self->wire, async,
                                &uct_ud_sr_chan_ops, self, uct_ud_sr_clock,
                                uct_ud_sr_random_key());
    if (status != UCS_OK) {
        goto err_wire;
    }

    /* peers may ask this interface for data even when it does not use
     * zero copy itself, so the channel is always there */
    status = aptus_udz_init(&self->udz, &self->chan, &setup.udz,
                            uct_aptus_md_check_region_cb,
                            ucs_derived_of(md, uct_aptus_md_t));
    if (status != UCS_OK) {
        goto err_chan;
    }
    self->zcopy = config->ud.zcopy;
    aptus_ud_chan_set_internal(&self->chan, uct_ud_sr_internal, self);
    self->udz.stop_async = &self->async_rx.user_waiting;

    /* the bandwidth of copies, not UD-ZCopy's: under contention (halo3d,
     * 4 ranks on 2 cores) its gets stall on lost datagrams for a timer's
     * period each, and eager messages are faster (aptus, whose rendezvous
     * goes over RC-RDMA to its busy peers, claims the get's) */
    aptus_sock_netif_caps(self->dev_name, &self->latency, &self->bandwidth);
    status = uct_aptus_async_timer_start(
        &self->timer, async, setup.async_interval_us, setup.async_max_us,
        uct_ud_sr_iface_timer, self);
    if (status != UCS_OK) {
        ucs_error("ud_sr: cannot start the async timer: %s",
                  ucs_status_string(status));
        goto err_udz;
    }

    uct_aptus_async_rx_init(&self->async_rx, UCT_UD_SR_TL_NAME, async,
                            self->wire->ops->event_fd(self->wire),
                            uct_ud_sr_iface_event, self);

    ucs_debug("ud_sr/%s: key 0x%016" PRIx64 " mtu %zu seg %zu window %u rx %u",
              self->dev_name, self->chan.local_key, self->wire->mtu,
              config->ud.seg_size, config->ud.tx_window,
              config->ud.rx_queue_len);
    return UCS_OK;

err_udz:
    aptus_udz_cleanup(&self->udz);
err_chan:
    aptus_ud_chan_cleanup(&self->chan);
err_wire:
    self->wire->ops->close(self->wire);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_ud_sr_iface_t)
{
    uct_aptus_md_t *md = ucs_derived_of(self->super.md, uct_aptus_md_t);
    uct_aptus_stat_t stats[96];
    unsigned n;

    uct_aptus_async_timer_stop(&self->timer);
    uct_aptus_async_rx_cleanup(&self->async_rx);

    UCS_ASYNC_BLOCK(self->super.worker->async);
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    n = uct_ud_sr_iface_stats(self, stats, 96);
    uct_aptus_stats_print(md->stats, UCT_UD_SR_TL_NAME, self->dev_name, stats,
                          n);
    aptus_udz_cleanup(&self->udz);
    aptus_ud_chan_cleanup(&self->chan);
    self->wire->ops->close(self->wire);
    uct_aptus_failures_cleanup(&self->failures);
    UCS_ASYNC_UNBLOCK(self->super.worker->async);
}

UCS_CLASS_DEFINE(uct_ud_sr_iface_t, uct_base_iface_t);

static UCS_CLASS_DEFINE_NEW_FUNC(uct_ud_sr_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t *,
                                 const uct_iface_config_t *);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_ud_sr_iface_t, uct_iface_t);

static ucs_status_t
uct_ud_sr_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                        unsigned *num_devices_p)
{
    return uct_aptus_iface_query_devices(md, 0, devices_p, num_devices_p);
}

UCT_TL_DEFINE_ENTRY(&uct_aptus_component, ud_sr, uct_ud_sr_query_devices,
                    uct_ud_sr_iface_t, UCT_UD_SR_CONFIG_PREFIX,
                    uct_ud_sr_iface_config_table, uct_ud_sr_iface_config_t);
