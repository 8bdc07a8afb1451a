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
    if (peer->flags & APTUS_UD_PEER_USER) {
        uct_ud_base_queue_failure(
            &iface->ud, peer, &uct_ud_sr_ep_of_peer(peer)->super.super, status);
    }
}

void uct_ud_sr_iface_forget_failure(uct_ud_sr_iface_t *iface,
                                    aptus_ud_peer_t *peer)
{
    uct_ud_base_forget_failure(&iface->ud,
                               &uct_ud_sr_ep_of_peer(peer)->super.super);
}

static void uct_ud_sr_peer_failed(void *arg, aptus_ud_peer_t *peer,
                                  ucs_status_t status)
{
    uct_ud_sr_iface_t *iface = arg;

    /* transfers to or from it end (completions run from progress) */
    aptus_udz_peer_failed(&iface->ud.udz, peer, status);
    if (!(peer->flags & APTUS_UD_PEER_QUIET)) {
        uct_ud_sr_iface_queue_failure(iface, peer, status);
    }
}

static const aptus_ud_chan_ops_t uct_ud_sr_chan_ops = {
    .deliver     = uct_ud_sr_deliver,
    .peer_failed = uct_ud_sr_peer_failed,
};

static unsigned uct_ud_sr_iface_progress(uct_iface_h tl_iface)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    unsigned count;

    UCT_APTUS_ASYNC_ENTER(&iface->ud.async_rx, iface->super.worker->async);
    count = uct_ud_base_progress(&iface->ud);
    uct_ud_base_report_failures(&iface->ud);
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return count;
}

static ucs_status_t uct_ud_sr_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                          uct_completion_t *comp)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    ucs_status_t status;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    status = aptus_ud_chan_flush_all(&iface->ud.chan, flags, comp);
    if ((status == UCS_OK) || (status == UCS_INPROGRESS)) {
        /* and every get: comp completes after both */
        if (aptus_udz_flush(&iface->ud.udz, NULL, comp,
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
    const aptus_ud_chan_t *chan = &iface->ud.chan;

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
    uct_aptus_rma_query(&iface->ud.udz, iface->zcopy, attr);

    attr->device_addr_len = uct_ud_base_dev_addr_len(&iface->ud);
    attr->iface_addr_len  = sizeof(uct_ud_sr_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;

    attr->latency             = ucs_linear_func_make(iface->ud.latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->ud.bandwidth;
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

    uct_ud_base_dev_addr_pack(&iface->ud, addr);
    return UCS_OK;
}

static ucs_status_t uct_ud_sr_iface_get_address(uct_iface_h tl_iface,
                                                uct_iface_addr_t *addr)
{
    uct_ud_sr_iface_t *iface      = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    uct_ud_sr_iface_addr_t *uaddr = (uct_ud_sr_iface_addr_t *)addr;

    aptus_put32(uaddr->port, uct_ud_base_port(&iface->ud));
    uaddr->key = iface->ud.chan.local_key;
    uaddr->mtu = (uint16_t)iface->ud.wire->mtu;
    return UCS_OK;
}

static int uct_ud_sr_iface_is_reachable(const uct_iface_h tl_iface,
                                        const uct_device_addr_t *dev_addr,
                                        const uct_iface_addr_t *iface_addr)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);

    return uct_ud_base_is_reachable(&iface->ud, dev_addr);
}

unsigned uct_ud_sr_iface_stats(uct_ud_sr_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max)
{
    return uct_ud_base_stats(&iface->ud, UCT_UD_BASE_STATS_ALONE, stats, max);
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
    status = uct_aptus_iface_async_check(UCT_UD_SR_TL_NAME,
                                         self->super.worker->async);
    if (status != UCS_OK) {
        return status;
    }

    if (!uct_aptus_iface_config_check(
            UCT_UD_SR_TL_NAME, UCT_UD_SR_CONFIG_PREFIX, &config->super)) {
        return UCS_ERR_INVALID_PARAM;
    }
    status = uct_ud_sr_params_setup(&config->ud, UCT_UD_SR_TL_NAME,
                                    UCT_UD_SR_CONFIG_PREFIX,
                                    uct_aptus_md_wire(md), params,
                                    ucs_offsetof(uct_ud_sr_ep_t, peer), &setup);
    if (status != UCS_OK) {
        return status;
    }

    /* the bandwidth of copies, not UD-ZCopy's: under contention (halo3d,
     * 4 ranks on 2 cores) its gets stall on lost datagrams for a timer's
     * period each, and eager messages are faster (aptus, whose rendezvous
     * goes over RC-RDMA to its busy peers, claims the get's) */
    status =
        uct_ud_base_init(&self->ud, &self->super, UCT_UD_SR_TL_NAME,
                         self->dev_name, &setup, &uct_ud_sr_chan_ops, self);
    if (status != UCS_OK) {
        return status;
    }
    self->zcopy = config->ud.zcopy;

    status = uct_ud_base_start(&self->ud, &setup);
    if (status != UCS_OK) {
        uct_ud_base_cleanup(&self->ud);
        return status;
    }

    ucs_debug("ud_sr/%s: key 0x%016" PRIx64 " mtu %zu seg %zu window %u rx %u",
              self->dev_name, self->ud.chan.local_key, self->ud.wire->mtu,
              config->ud.seg_size, config->ud.tx_window,
              config->ud.rx_queue_len);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_ud_sr_iface_t)
{
    uct_aptus_md_t *md = ucs_derived_of(self->super.md, uct_aptus_md_t);
    uct_aptus_stat_t stats[128];
    unsigned n;

    uct_ud_base_stop(&self->ud);

    UCS_ASYNC_BLOCK(self->super.worker->async);
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    n = uct_ud_sr_iface_stats(self, stats, ucs_static_array_size(stats));
    uct_aptus_stats_print(md->stats, UCT_UD_SR_TL_NAME, self->dev_name, stats,
                          n);
    uct_ud_base_cleanup(&self->ud);
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
    return uct_aptus_iface_query_devices(md, 0, 0, devices_p, num_devices_p);
}

UCT_TL_DEFINE_ENTRY(&uct_aptus_component, ud_sr, uct_ud_sr_query_devices,
                    uct_ud_sr_iface_t, UCT_UD_SR_CONFIG_PREFIX,
                    uct_ud_sr_iface_config_table, uct_ud_sr_iface_config_t);
