/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the rc_sr UCT interface.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_sr_iface.h"
#include "proto/random.h"
#include "rc_sr_ep.h"
#include "uct/base/aptus_iface.h"
#include "base/aptus_mpool.h"

#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>

#include <inttypes.h>
#include <limits.h>
#include <string.h>

#define UCT_RC_SR_CONFIG_PREFIX   "RC_SR_"
#define UCT_RC_SR_RMA_MAX_ZCOPY   (1ul << 30)
#define UCT_RC_SR_RX_MAX_BUFS_MAX 16777216

ucs_config_field_t uct_rc_sr_iface_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_rc_sr_iface_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_iface_config_table) },

    UCT_RC_PARAMS_FIELDS("", ucs_offsetof(uct_rc_sr_iface_config_t, rc), "8k",
                         "1024"),

    /* 16384 x 8 KB = 128 MB: a full credit window (32) of the largest
     * messages held from 512 peers at once. Small messages held do not
     * count against it (they are copied out, see RX_COPY_THRESH), but
     * their copies are bounded by the same memory. */
    { "RX_MAX_BUFS", "16384",
      "Most receive buffers the shared pool grows to, when the application\n"
      "holds received messages (UCP keeps unexpected ones). At the ceiling\n"
      "an error is printed once and data waits in the connections (the\n"
      "kernel's socket buffers bound it) until held messages are released.\n"
      "Small messages held are copied out and cost about RX_COPY_THRESH\n"
      "bytes each, within the same total memory (RX_QUEUE_LEN to 16777216).",
      ucs_offsetof(uct_rc_sr_iface_config_t, rx_max_bufs),
      UCS_CONFIG_TYPE_UINT },

    /* A copy of 256 bytes costs less than the receive system call; a
     * held copy costs ~300 bytes instead of a whole 8 KB buffer. */
    { "RX_COPY_THRESH", "256",
      "Active messages up to this size (UCT header included) are delivered\n"
      "from a copy of their own, so that one the application holds pins\n"
      "only its copy, not a whole receive buffer. 0 delivers all in place;\n"
      "at most SEG_SIZE.",
      ucs_offsetof(uct_rc_sr_iface_config_t, rx_copy_thresh),
      UCS_CONFIG_TYPE_MEMUNITS },

    { NULL }
};

static void uct_rc_sr_release_desc(uct_recv_desc_t *self, void *desc)
{
    uct_rc_sr_iface_t *iface =
        ucs_container_of(self, uct_rc_sr_iface_t, release_desc);

    iface->rx_held_now--;
    iface->rx_held_bytes -= iface->wire->rx_buf_size;
    aptus_conn_buf_release(
        (aptus_conn_buf_t *)((uint8_t *)desc - iface->desc_to_buf));
}

/* A copy descriptor: the release pointer, the user's headroom, the data. */
static void uct_rc_sr_release_copy_desc(uct_recv_desc_t *self, void *desc)
{
    uct_rc_sr_iface_t *iface =
        ucs_container_of(self, uct_rc_sr_iface_t, release_copy_desc);

    iface->rx_held_now--;
    iface->rx_held_bytes -= iface->rx_copy_bytes;
    ucs_mpool_put_inline(UCS_PTR_BYTE_OFFSET(
        desc, -(ptrdiff_t)(sizeof(uct_recv_desc_t *) + iface->rx_copy_pad)));
}

/* UCT finds the release callback in the pointer just before a kept
 * descriptor. With an AM alignment offset and a headroom that do not add up
 * to a multiple of 8, that pointer is unaligned: store it bytewise. */
static inline void uct_rc_sr_set_release(void *desc, uct_recv_desc_t *release)
{
    memcpy(UCS_PTR_BYTE_OFFSET(desc, -(ptrdiff_t)sizeof(release)), &release,
           sizeof(release));
}

/* Delivers a small message from a copy, aligned as the user asked. Returns
 * 0 when no copy descriptor is left (the caller delivers in place). */
static int uct_rc_sr_deliver_copy(uct_rc_sr_iface_t *iface, uint8_t am_id,
                                  const void *data, size_t length,
                                  ucs_status_t *status_p)
{
    void *obj = ucs_mpool_get_inline(&iface->rx_copy_mp);
    void *desc, *copy;

    if (ucs_unlikely(obj == NULL)) {
        iface->rx_copy_full++;
        return 0;
    }
    desc = UCS_PTR_BYTE_OFFSET(obj,
                               iface->rx_copy_pad + sizeof(uct_recv_desc_t *));
    copy = UCS_PTR_BYTE_OFFSET(desc, iface->rx_headroom);
    uct_rc_sr_set_release(desc, &iface->release_copy_desc);
    memcpy(copy, data, length);
    iface->rx_copied++;
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id, copy,
                       length, "RX: AM");
    *status_p = uct_iface_invoke_am(&iface->super, am_id, copy, length,
                                    UCT_CB_PARAM_FLAG_DESC);
    if (*status_p == UCS_INPROGRESS) {
        iface->rx_held_now++;
        iface->rx_held_bytes += iface->rx_copy_bytes;
    } else {
        ucs_mpool_put_inline(obj);
    }
    return 1;
}

ucs_status_t uct_rc_sr_deliver_user(uct_rc_sr_iface_t *iface, uint8_t am_id,
                                    void *data, size_t length,
                                    aptus_conn_buf_t *buf, int at_start)
{
    ucs_status_t status;
    void *desc;

    if ((length <= iface->rx_copy_thresh) &&
        uct_rc_sr_deliver_copy(iface, am_id, data, length, &status)) {
        return status;
    }

    /* A message that starts its buffer may be kept there, and lies aligned
     * as asked (the wire places buffers so); one behind others in the
     * buffer is the user's to copy, as UCT allows without a descriptor. */
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id, data,
                       length, "RX: AM");
    status = uct_iface_invoke_am(&iface->super, am_id, data, length,
                                 at_start ? UCT_CB_PARAM_FLAG_DESC : 0);
    if (status == UCS_INPROGRESS) {
        /* the receiver keeps the message in its buffer */
        desc = (uint8_t *)data - iface->rx_headroom;
        uct_rc_sr_set_release(desc, &iface->release_desc);
        aptus_conn_buf_hold(buf);
        iface->rx_held_now++;
        iface->rx_held_bytes += iface->wire->rx_buf_size;
    }
    return status;
}

/* rc_sr's receive path: the message as it came. */
static ucs_status_t uct_rc_sr_deliver_am(uct_rc_sr_iface_t *iface,
                                         aptus_rc_link_t *link, uint8_t am_id,
                                         void *data, size_t length,
                                         aptus_conn_buf_t *buf, int at_start)
{
    if (ucs_unlikely(am_id >= UCT_AM_ID_MAX)) {
        /* a peer that passed the greeting, yet names no handler: never
         * index the handler table with it */
        if (iface->rx_bad_am_id++ == 0) {
            ucs_error("%s/%s: dropped a message with active message id %u "
                      "from 0x%016" PRIx64 " (ids are below %u)",
                      iface->ops->tl_name, iface->dev_name, am_id,
                      link->peer_key, (unsigned)UCT_AM_ID_MAX);
        }
        return UCS_OK;
    }
    return uct_rc_sr_deliver_user(iface, am_id, data, length, buf, at_start);
}

static ucs_status_t uct_rc_sr_deliver(void *arg, aptus_rc_link_t *link,
                                      uint8_t am_id, void *data, size_t length,
                                      aptus_conn_buf_t *buf, int at_start)
{
    uct_rc_sr_iface_t *iface = arg;

    return iface->ops->deliver(iface, link, am_id, data, length, buf, at_start);
}

static void uct_rc_sr_peer_failed(void *arg, aptus_rc_link_t *link,
                                  ucs_status_t status)
{
    uct_rc_sr_iface_t *iface = arg;
    char who[128];

    if (iface->ops->link_failed != NULL) {
        iface->ops->link_failed(iface, link, status);
    }
    /* the report says timeout, as UCP expects; the log says what broke */
    snprintf(who, sizeof(who), "interface 0x%016" PRIx64 " port %u (%s)",
             link->peer_key, ntohs(link->peer_port),
             ucs_status_string(link->cause));
    uct_aptus_failures_add(
        &iface->failures, iface->ops->tl_name,
        &ucs_container_of(link, uct_rc_sr_ep_t, link)->super.super, status,
        who);
}

void uct_rc_sr_iface_forget_ep(uct_rc_sr_iface_t *iface, uct_rc_sr_ep_t *ep)
{
    uct_aptus_failures_forget(&iface->failures, &ep->super.super);
}

static const aptus_rc_chan_ops_t uct_rc_sr_chan_ops = {
    .deliver     = uct_rc_sr_deliver,
    .peer_failed = uct_rc_sr_peer_failed,
};

/* The pool reached its ceiling: reading waits for held messages to be
 * released. Said once at diag level naming the knob, as ud_sr does: an
 * application may hold messages on purpose (UCX's own transports are
 * silent here), and the statistics count it. */
static void uct_rc_sr_iface_pool_full(uct_rc_sr_iface_t *iface)
{
    iface->rx_pool_empty_seen = iface->wire->stats.rx_pool_empty;
    if (iface->rx_pool_full_reported) {
        return;
    }
    iface->rx_pool_full_reported = 1;
    ucs_diag("rc_sr/%s: the receive pool reached UCX_" UCT_RC_SR_CONFIG_PREFIX
             "RX_MAX_BUFS=%u buffers of %zu bytes while the application "
             "holds %" PRIu64 " received messages; incoming data waits in "
             "the connections until some are released",
             iface->dev_name, iface->rx_max_bufs, iface->wire->rx_buf_size,
             iface->rx_held_now);
}

unsigned uct_rc_sr_iface_progress(uct_iface_h tl_iface)
{
    uct_rc_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_rc_sr_iface_t);
    const uct_rc_sr_iface_ops_t *ops = iface->ops;
    unsigned count;

    count = 0;
    if ((ops->wire_due == NULL) || ops->wire_due(iface)) {
        count = aptus_chan_progress(&iface->chan.super, 0);
    }
    if (ops->poll != NULL) {
        count += ops->poll(iface);
    }
    if (ucs_unlikely(uct_aptus_failures_pending(&iface->failures))) {
        uct_aptus_failures_report(&iface->failures, &iface->super.super,
                                  ops->tl_name, iface->dev_name);
    }
    if (ucs_unlikely(iface->wire->stats.rx_pool_empty !=
                     iface->rx_pool_empty_seen)) {
        uct_rc_sr_iface_pool_full(iface);
    }
    return count;
}

ucs_status_t uct_rc_sr_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                   uct_completion_t *comp)
{
    uct_rc_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_rc_sr_iface_t);

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    return aptus_rc_chan_flush_all(&iface->chan);
}

ucs_status_t uct_rc_sr_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_rc_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_rc_sr_iface_t);
    size_t max_msg           = iface->chan.config.max_msg;

    uct_base_iface_query(&iface->super, attr);

    attr->cap.flags = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                      UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                      UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PENDING |
                      UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_EP_CHECK |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;

    attr->cap.am.max_short       = max_msg; /* the 8-byte header included */
    attr->cap.am.max_bcopy       = max_msg;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = max_msg;
    attr->cap.am.max_hdr         = UCT_RC_SR_MAX_AM_HDR;
    attr->cap.am.max_iov         = APTUS_RC_MAX_IOV - 1; /* + the header */
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;

    if (iface->rma) {
        attr->cap.flags |= UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY |
                           UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_BCOPY |
                           UCT_IFACE_FLAG_GET_ZCOPY;
        attr->cap.put.max_short       = UCT_RC_SR_PUT_MAX_SHORT;
        attr->cap.put.max_bcopy       = max_msg;
        attr->cap.put.min_zcopy       = 0;
        attr->cap.put.max_zcopy       = UCT_RC_SR_RMA_MAX_ZCOPY;
        attr->cap.put.max_iov         = APTUS_RC_MAX_IOV;
        attr->cap.put.opt_zcopy_align = 1;
        attr->cap.put.align_mtu       = 1;
        attr->cap.get.max_bcopy       = max_msg;
        attr->cap.get.min_zcopy       = 0;
        attr->cap.get.max_zcopy       = UCT_RC_SR_RMA_MAX_ZCOPY;
        attr->cap.get.max_iov         = APTUS_RC_MAX_IOV;
        attr->cap.get.opt_zcopy_align = 1;
        attr->cap.get.align_mtu       = 1;
    }

    attr->device_addr_len = iface->wdev->dev_addr_len(&iface->wire->addr);
    attr->iface_addr_len  = sizeof(uct_rc_sr_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;

    attr->latency             = ucs_linear_func_make(iface->latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->bandwidth;
    /* a system call per message, as with UCX's tcp */
    attr->overhead = 2e-6;
    attr->priority = 0;
    return UCS_OK;
}

ucs_status_t uct_rc_sr_iface_get_device_address(uct_iface_h tl_iface,
                                                uct_device_addr_t *addr)
{
    uct_rc_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_rc_sr_iface_t);

    iface->wdev->dev_addr_pack(&iface->wire->addr, addr);
    return UCS_OK;
}

ucs_status_t uct_rc_sr_iface_get_address(uct_iface_h tl_iface,
                                         uct_iface_addr_t *addr)
{
    uct_rc_sr_iface_t *iface      = ucs_derived_of(tl_iface, uct_rc_sr_iface_t);
    uct_rc_sr_iface_addr_t *raddr = (uct_rc_sr_iface_addr_t *)addr;

    aptus_put32(raddr->port, iface->wdev->addr_port(&iface->wire->addr));
    raddr->key     = iface->chan.local_key;
    raddr->credits = (uint16_t)iface->chan.config.credits;
    return UCS_OK;
}

int uct_rc_sr_iface_is_reachable(const uct_iface_h tl_iface,
                                 const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr)
{
    uct_rc_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_rc_sr_iface_t);

    return (dev_addr != NULL) &&
           iface->wdev->dev_addr_reachable(&iface->wire->addr, dev_addr);
}

unsigned uct_rc_sr_iface_stats(uct_rc_sr_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max)
{
    const aptus_rc_chan_stats_t *c     = &iface->chan.stats;
    const aptus_rc_rdma_stats_t *d     = &iface->rdma.stats;
    const aptus_conn_wire_stats_t *w   = &iface->wire->stats;
    const aptus_rc_conn_resources_t *r = &iface->conn_res;
    uct_aptus_stat_t all[]             = {
                    { "tx_msgs", c->tx_msgs },
                    { "tx_bytes", c->tx_bytes },
                    { "rx_msgs", c->rx_msgs },
                    { "rx_bytes", c->rx_bytes },
                    { "rx_held", c->rx_held },
                    { "puts", d->puts },
                    { "put_bytes", d->put_bytes },
                    { "gets", d->gets },
                    { "get_bytes", d->get_bytes },
                    { "rma_refused", d->refused },
                    { "conn_puts", d->conn_puts },
                    { "conn_gets", d->conn_gets },
                    { "rma_ordered", d->ordered },
                    { "conn_served", w->conn_served },
                    { "conn_served_bytes", w->conn_served_bytes },
                    { "rx_placed_bytes", w->rx_placed_bytes },
                    { "conn_refused", w->conn_refused },
                    { "pid_proven", w->pid_proven },
                    { "pid_unproven", w->pid_unproven },
                    { "pid_refused", w->pid_refused },
                    { "half_open_dropped", c->half_open_dropped },
                    { "accept_paused", w->accept_paused },
                    { "tx_credit_msgs", c->tx_credits },
                    { "rx_credit_msgs", c->rx_credits },
                    { "no_credits", c->no_credits },
                    { "backlog_full", c->backlog_full },
                    { "pending_dispatched", c->pending_dispatched },
                    { "rx_malformed", c->rx_malformed },
                    { "rx_bad_hello", c->rx_bad_hello },
                    { "links_failed", c->links_failed },
                    { "checks", c->checks },
                    { "shared_conns", c->shared },
                    { "switched", c->switched },
                    { "stale_switch_acks", c->stale_switch_acks },
                    { "switch_acks_owed", c->switch_acks_owed },
                    { "switches_ended_by_bye", c->switches_ended_by_bye },
                    { "conns_open", iface->wire->num_conns },
                    { "connects", w->connects },
                    { "accepts", w->accepts },
                    { "tx_frames", w->tx_frames },
                    { "tx_queued", w->tx_queued },
                    { "tx_copied_bytes", w->tx_copied_bytes },
                    { "rx_frames", w->rx_frames },
                    { "rx_syscalls", w->rx_syscalls },
                    { "rx_pool_empty", w->rx_pool_empty },
                    { "rx_pool_in_use", w->rx_pool_in_use },
                    { "rx_pool_peak", w->rx_pool_peak },
                    { "rx_copied", iface->rx_copied },
                    { "rx_copy_full", iface->rx_copy_full },
                    { "rx_held_now", iface->rx_held_now },
                    { "rx_held_bytes", iface->rx_held_bytes },
                    { "rx_copy_desc_bytes", iface->rx_copy_bytes },
                    { "wire_failures", w->failures },
                    { "peer_closes", w->peer_closes },
                    { "eps_created", iface->eps_created },
                    { "conn_state_bytes", r->state_bytes },
                    { "conn_kernel_bytes", r->kernel_bytes },
                    { "conn_fds", r->fds },
                    { "conn_descriptors", r->descriptors },
                    { "conn_descriptor_bytes", r->descriptor_bytes },
                    { "rx_buf_bytes", iface->wire->rx_buf_size },
                    { "rx_pool_buffers", iface->rx_queue_len },
                    { "rx_pool_max", iface->rx_max_bufs },
                    { "rx_bad_am_id", iface->rx_bad_am_id },
    };
    unsigned n = ucs_min(max, sizeof(all) / sizeof(all[0]));

    memcpy(stats, all, n * sizeof(*stats));
    return n;
}

/* The key a peer's HELLO must name: from the OS CSPRNG (DESIGN.md), so a
 * stray or forged connection cannot guess it from the time or the pid. */
static ucs_status_t uct_rc_sr_iface_key(uint64_t *key_p)
{
    uint64_t key = aptus_random64(); /* the OS CSPRNG, no fallback */

    if (key == 0) {
        ucs_error("rc_sr: the OS gives no randomness for the interface key "
                  "(getrandom: %m)");
        return UCS_ERR_IO_ERROR;
    }
    *key_p = key;
    return UCS_OK;
}

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_rc_sr_iface_t, uct_iface_t);

static uct_iface_ops_t uct_rc_sr_iface_tl_ops = {
    .ep_am_short              = uct_rc_sr_ep_am_short,
    .ep_am_short_iov          = uct_base_ep_am_short_iov,
    .ep_am_bcopy              = uct_rc_sr_ep_am_bcopy,
    .ep_am_zcopy              = uct_rc_sr_ep_am_zcopy,
    .ep_put_short             = uct_rc_sr_ep_put_short,
    .ep_put_bcopy             = uct_rc_sr_ep_put_bcopy,
    .ep_put_zcopy             = uct_rc_sr_ep_put_zcopy,
    .ep_get_bcopy             = uct_rc_sr_ep_get_bcopy,
    .ep_get_zcopy             = uct_rc_sr_ep_get_zcopy,
    .ep_pending_add           = uct_rc_sr_ep_pending_add,
    .ep_pending_purge         = uct_rc_sr_ep_pending_purge,
    .ep_flush                 = uct_rc_sr_ep_flush,
    .ep_fence                 = uct_rc_sr_ep_fence,
    .ep_check                 = uct_rc_sr_ep_check,
    .ep_create                = uct_rc_sr_ep_create,
    .ep_destroy               = uct_rc_sr_ep_destroy,
    .iface_flush              = uct_rc_sr_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_rc_sr_iface_progress,
    .iface_event_fd_get       = ucs_empty_function_return_unsupported,
    .iface_event_arm          = ucs_empty_function_return_unsupported,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_rc_sr_iface_t),
    .iface_query              = uct_rc_sr_iface_query,
    .iface_get_device_address = uct_rc_sr_iface_get_device_address,
    .iface_get_address        = uct_rc_sr_iface_get_address,
    .iface_is_reachable       = uct_rc_sr_iface_is_reachable,
};

/* rc_sr is the plain flavour: nothing of its own beyond the base. */
static uct_rc_sr_iface_ops_t uct_rc_sr_iface_ops = {
    .tl_ops        = &uct_rc_sr_iface_tl_ops,
    .tl_name       = UCT_RC_SR_TL_NAME,
    .config_prefix = UCT_RC_SR_CONFIG_PREFIX,
    .ep_size       = sizeof(uct_rc_sr_ep_t),
    .deliver       = uct_rc_sr_deliver_am,
    .link_failed   = NULL,
    .wire_due      = NULL,
    .poll          = NULL,
    .print_stats   = 1,
};

static uct_iface_internal_ops_t uct_rc_sr_iface_internal_ops = {
    .iface_estimate_perf = uct_base_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query      = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate = uct_rc_sr_ep_invalidate,
};

/* Copy descriptors of small messages: [pad][release pointer][user's
 * headroom][data], the data aligned as asked; bounded by the pool's
 * memory. */
static ucs_status_t uct_rc_sr_iface_copy_mpool_init(uct_rc_sr_iface_t *iface)
{
    /* padding in front keeps the element (and ucs_mpool's header before
     * it) 8-byte aligned whatever the headroom and the offset add up to */
    size_t pad          = -(iface->rx_headroom + iface->am_align_offset) & 7;
    size_t head         = pad + sizeof(uct_recv_desc_t *) + iface->rx_headroom;
    size_t alignment    = ucs_max(iface->am_alignment, sizeof(uint64_t));
    size_t elem_size    = head + ucs_max(iface->rx_copy_thresh, 1);
    size_t align_offset = (head + iface->am_align_offset) & (alignment - 1);
    size_t max_elems;

    iface->rx_copy_pad = pad;
    elem_size = ucs_max(elem_size, align_offset); /* as ucs_mpool requires */
    /* the stride ucs_mpool gives an element, header included */
    iface->rx_copy_bytes =
        ucs_align_up_pow2(sizeof(ucs_mpool_elem_t) + elem_size, alignment);
    max_elems = (size_t)iface->rx_max_bufs * iface->wire->rx_buf_size /
                iface->rx_copy_bytes;
    max_elems = ucs_max(ucs_min(max_elems, UINT_MAX), 256);
    return ucs_mpool_init(&iface->rx_copy_mp, 0, elem_size, align_offset,
                          alignment, 256, max_elems, &aptus_mpool_plain_ops,
                          "uct_rc_sr_rx_copy");
}

static void uct_rc_sr_iface_sink_done(uct_completion_t *self)
{
    self->count = INT_MAX; /* never runs out */
}

/* Refuse a bad setting up front, naming the variable as the user typed
 * it: a flavour takes these settings under its own prefix. */
static ucs_status_t
uct_rc_sr_iface_check_config(const uct_rc_sr_iface_ops_t *ops,
                             const aptus_wire_dev_ops_t *wdev,
                             const uct_rc_sr_iface_config_t *config)
{
    const char *tl_name              = ops->tl_name;
    const char *prefix               = ops->config_prefix;
    const uct_aptus_range_t ranges[] = {
        { "RX_MAX_BUFS", uct_aptus_uint(config->rx_max_bufs),
          config->rc.rx_queue_len, UCT_RC_SR_RX_MAX_BUFS_MAX },
        { "RX_COPY_THRESH", uct_aptus_bytes(config->rx_copy_thresh), 0,
          config->rc.seg_size },
    };

    if (!uct_aptus_iface_config_check(tl_name, prefix, &config->super) ||
        (uct_rc_params_check(&config->rc, tl_name, prefix, 0,
                             wdev->conn_max_msg) != UCS_OK) ||
        !uct_aptus_ranges_check(tl_name, prefix, ranges,
                                ucs_static_array_size(ranges))) {
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

UCS_CLASS_INIT_FUNC(uct_rc_sr_iface_t, uct_rc_sr_iface_ops_t *ops, uct_md_h md,
                    uct_worker_h worker, const uct_iface_params_t *params,
                    const uct_iface_config_t *tl_config)
{
    const uct_rc_sr_iface_config_t *config =
        ucs_derived_of(tl_config, uct_rc_sr_iface_config_t);
    aptus_conn_wire_config_t wire_config;
    aptus_rc_chan_config_t chan_config;
    size_t wire_headroom;
    uint64_t key;
    ucs_status_t status;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("rc_sr: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, ops->tl_ops,
                              &uct_rc_sr_iface_internal_ops, md, worker, params,
                              tl_config UCS_STATS_ARG(NULL)
                                  UCS_STATS_ARG(UCT_RC_SR_TL_NAME));

    self->ops  = ops;
    self->wdev = uct_aptus_md_wire(md);
    status     = uct_rc_sr_iface_check_config(ops, self->wdev, config);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_aptus_iface_am_alignment("rc_sr", params, &self->am_alignment,
                                          &self->am_align_offset);
    if (status != UCS_OK) {
        return status;
    }

    ucs_strncpy_zero(self->dev_name, params->mode.device.dev_name,
                     sizeof(self->dev_name));
    self->rma            = config->rc.rma;
    self->rx_queue_len   = config->rc.rx_queue_len;
    self->rx_max_bufs    = config->rx_max_bufs;
    self->rx_copy_thresh = config->rx_copy_thresh;
    self->rx_headroom =
        UCT_IFACE_PARAM_VALUE(params, rx_headroom, RX_HEADROOM, 0);
    uct_aptus_failures_init(&self->failures);
    self->eps_created  = 0;
    self->rx_bad_am_id = 0;
    memset(&self->conn_res, 0, sizeof(self->conn_res));
    self->release_desc.cb       = uct_rc_sr_release_desc;
    self->release_copy_desc.cb  = uct_rc_sr_release_copy_desc;
    self->rx_copied             = 0;
    self->rx_copy_full          = 0;
    self->rx_held_now           = 0;
    self->rx_held_bytes         = 0;
    self->rx_pool_empty_seen    = 0;
    self->rx_pool_full_reported = 0;

    /* A held message's descriptor is rx_headroom bytes before its data,
     * with UCT's release pointer just before that: the wire reserves both
     * in front of each receive area. */
    wire_headroom =
        ucs_align_up(self->rx_headroom + sizeof(uct_recv_desc_t *), 8);
    self->desc_to_buf = sizeof(aptus_conn_buf_t) + wire_headroom +
                        self->wdev->conn_rx_hdr_len + APTUS_RC_HDR_LEN -
                        self->rx_headroom;

    self->sink.func   = uct_rc_sr_iface_sink_done;
    self->sink.count  = INT_MAX;
    self->sink.status = UCS_OK;
    self->bounce      = ucs_malloc(config->rc.seg_size, "uct_rc_sr_bounce");
    if (self->bounce == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    memset(&wire_config, 0, sizeof(wire_config));
    wire_config.max_frame      = APTUS_RC_HDR_LEN + config->rc.seg_size;
    wire_config.rx_headroom    = wire_headroom;
    wire_config.rx_buffers     = config->rc.rx_queue_len;
    wire_config.rx_max_buffers = config->rx_max_bufs;
    wire_config.rx_alignment   = self->am_alignment;
    wire_config.rx_align_offset =
        self->wdev->conn_rx_hdr_len + APTUS_RC_HDR_LEN + self->am_align_offset;
    wire_config.max_backlog = config->rc.tx_backlog;
    wire_config.handlers    = &aptus_rc_chan_wire_handlers;
    wire_config.arg         = &self->chan;
    /* peers on other hosts reach registered memory over the connection */
    wire_config.mem_check = uct_aptus_md_check_region_cb;
    wire_config.mem_arg   = ucs_derived_of(md, uct_aptus_md_t);
    wire_config.numa_node = uct_aptus_md_numa_node(md, self->dev_name);
    status = self->wdev->conn_open(self->dev_name, &wire_config, &self->wire);
    if (status != UCS_OK) {
        goto err_bounce;
    }

    status = uct_rc_sr_iface_copy_mpool_init(self);
    if (status != UCS_OK) {
        goto err_wire;
    }

    status = uct_rc_sr_iface_key(&key);
    if (status != UCS_OK) {
        goto err_copy_mpool;
    }

    chan_config.credits    = config->rc.credits;
    chan_config.max_msg    = config->rc.seg_size;
    chan_config.local_port = self->wdev->addr_port(&self->wire->addr);
    status = aptus_rc_chan_init(&self->chan, self->wire, &chan_config, key,
                                &uct_rc_sr_chan_ops, self);
    if (status != UCS_OK) {
        goto err_copy_mpool;
    }
    status = aptus_rc_rdma_chan_init(&self->rdma, &self->chan, 1);
    if (status != UCS_OK) {
        aptus_rc_chan_cleanup(&self->chan);
        goto err_copy_mpool;
    }

    self->wdev->caps(self->dev_name, &self->latency, &self->bandwidth);
    if (self->rma && self->wdev->is_local(self->dev_name)) {
        /* Large messages move by one-sided copy between the processes,
         * which only peers on this host can do. Only the loopback device
         * says so: on a network device the peers may be on other hosts,
         * where the data goes over TCP at the link's speed, and a copy's
         * bandwidth there would make UCP prefer rc_sr over tcp for them */
        self->bandwidth = ucs_max(self->bandwidth, 6000.0 * UCS_MBYTE);
    }

    ucs_debug("rc_sr/%s: key 0x%016" PRIx64 " seg %zu credits %u rx %u rma %d",
              self->dev_name, self->chan.local_key, config->rc.seg_size,
              config->rc.credits, config->rc.rx_queue_len, self->rma);
    return UCS_OK;

err_copy_mpool:
    ucs_mpool_cleanup(&self->rx_copy_mp, 1);
err_wire:
    self->wire->ops->close(self->wire);
err_bounce:
    ucs_free(self->bounce);
    return status;
}

UCS_CLASS_CLEANUP_FUNC(uct_rc_sr_iface_t)
{
    uct_aptus_md_t *md = ucs_derived_of(self->super.md, uct_aptus_md_t);
    uct_aptus_stat_t stats[64];
    unsigned n;

    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    if (self->ops->print_stats) {
        n = uct_rc_sr_iface_stats(self, stats, 64);
        uct_aptus_stats_print(md->stats, self->ops->tl_name, self->dev_name,
                              stats, n);
    }
    aptus_rc_chan_cleanup(&self->chan);
    self->wire->ops->close(self->wire); /* what is in flight is cancelled */
    aptus_rc_rdma_chan_cleanup(&self->rdma);
    ucs_mpool_cleanup(&self->rx_copy_mp, 1);
    uct_aptus_failures_cleanup(&self->failures);
    ucs_free(self->bounce);
}

UCS_CLASS_DEFINE(uct_rc_sr_iface_t, uct_base_iface_t);

/* UCT opens rc_sr with its own table (the name UCT_TL_DEFINE_ENTRY calls). */
static ucs_status_t UCS_CLASS_NEW_FUNC_NAME(uct_rc_sr_iface_t)(
    uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
    const uct_iface_config_t *tl_config, uct_iface_h *iface_p)
{
    ucs_status_t status;

    status = UCS_CLASS_NEW(uct_rc_sr_iface_t, iface_p, &uct_rc_sr_iface_ops, md,
                           worker, params, tl_config);
    ucs_class_check_new_func_result(status, *iface_p);
    return status;
}
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_rc_sr_iface_t, uct_iface_t);

static ucs_status_t
uct_rc_sr_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                        unsigned *num_devices_p)
{
    return uct_aptus_iface_query_devices(md, 1, 1, devices_p, num_devices_p);
}

UCT_TL_DEFINE_ENTRY(&uct_aptus_component, rc_sr, uct_rc_sr_query_devices,
                    uct_rc_sr_iface_t, UCT_RC_SR_CONFIG_PREFIX,
                    uct_rc_sr_iface_config_table, uct_rc_sr_iface_config_t);
