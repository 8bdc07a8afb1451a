/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD half of a transport (see ud_base.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_base.h"

#include <ucs/sys/math.h>

#include <stdio.h>
#include <string.h>

#define UCT_UD_BASE_ASYNC_DRAIN_MAX 256 /* batches per wake-up */

/* ---- statistics ------------------------------------------------------- */

/* A counter of a statistics struct, under the name a transport made of UD
 * alone prints, and the one a transport with UD as a part prints (NULL:
 * that one leaves it out). */
typedef struct uct_ud_base_stat_def {
    const char *name;
    const char *part_name;
    size_t offset;
} uct_ud_base_stat_def_t;

#define UCT_UD_CHAN_STAT(_name, _part_name, _field)                            \
    {                                                                          \
        _name, _part_name, ucs_offsetof(aptus_ud_chan_stats_t, _field)         \
    }
#define UCT_UD_WIRE_STAT(_name, _field)                                        \
    {                                                                          \
        _name, NULL, ucs_offsetof(aptus_dgram_wire_stats_t, _field)            \
    }
#define UCT_UD_UDZ_STAT(_name, _part_name, _field)                             \
    {                                                                          \
        _name, _part_name, ucs_offsetof(aptus_udz_stats_t, _field)             \
    }

static const uct_ud_base_stat_def_t uct_ud_base_chan_stats[] = {
    UCT_UD_CHAN_STAT("tx_msgs", NULL, tx_msgs),
    UCT_UD_CHAN_STAT("tx_bytes", NULL, tx_bytes),
    UCT_UD_CHAN_STAT("rx_msgs", NULL, rx_msgs),
    UCT_UD_CHAN_STAT("rx_bytes", NULL, rx_bytes),
    UCT_UD_CHAN_STAT("tx_data", "ud_tx_data", tx_data_dgrams),
    UCT_UD_CHAN_STAT("tx_trains", "ud_tx_trains", tx_trains),
    UCT_UD_CHAN_STAT("tx_train_dgrams", "ud_tx_train_dgrams", tx_train_dgrams),
    UCT_UD_CHAN_STAT("tx_acks", "ud_tx_acks", tx_acks),
    UCT_UD_CHAN_STAT("rx_acks", NULL, rx_acks),
    UCT_UD_CHAN_STAT("retransmits", "ud_retransmits", tx_retransmits),
    UCT_UD_CHAN_STAT("fast_retransmits", NULL, tx_fast_retransmits),
    UCT_UD_CHAN_STAT("probes", "ud_probes", tx_probes),
    UCT_UD_CHAN_STAT("window_full", NULL, tx_window_full),
    UCT_UD_CHAN_STAT("tx_all_full", "ud_tx_all_full", tx_all_full),
    UCT_UD_CHAN_STAT("rx_duplicates", NULL, rx_duplicates),
    UCT_UD_CHAN_STAT("rx_held", NULL, rx_held),
    UCT_UD_CHAN_STAT("rx_out_of_window", NULL, rx_out_of_window),
    UCT_UD_CHAN_STAT("rx_deferred", "ud_rx_deferred", rx_deferred),
    UCT_UD_CHAN_STAT("rx_bad_key", "ud_rx_bad_key", rx_bad_key),
    UCT_UD_CHAN_STAT("rx_malformed", NULL, rx_malformed),
    UCT_UD_CHAN_STAT("rx_bad_crc", NULL, rx_bad_crc),
    UCT_UD_CHAN_STAT("rx_bad_ack", NULL, rx_bad_ack),
    UCT_UD_CHAN_STAT("rx_unknown_stream", NULL, rx_unknown_stream),
    UCT_UD_CHAN_STAT("rx_dead_stream", NULL, rx_dead_stream),
    UCT_UD_CHAN_STAT("resets", NULL, tx_resets),
    UCT_UD_CHAN_STAT("peers_failed", NULL, peers_failed),
    UCT_UD_CHAN_STAT("peers_reclaimed", NULL, peers_reclaimed),
    UCT_UD_CHAN_STAT("rx_pool_exhausted", NULL, rx_pool_exhausted),
    UCT_UD_CHAN_STAT("rx_peer_limit", "ud_rx_peer_limit", rx_peer_limit),
    UCT_UD_CHAN_STAT("path_probes", "ud_path_probes", path_probes),
    UCT_UD_CHAN_STAT("path_raised", "ud_path_raised", path_raised),
    UCT_UD_CHAN_STAT("path_lost", "ud_path_lost", path_lost),
    UCT_UD_CHAN_STAT("path_replies", NULL, path_replies),
    UCT_UD_CHAN_STAT("rx_opening", "ud_rx_opening", rx_opening),
    UCT_UD_CHAN_STAT("open_resends", "ud_open_resends", tx_open_resends),
    UCT_UD_CHAN_STAT("rx_stale", "ud_rx_stale", rx_stale),
    UCT_UD_CHAN_STAT("rx_challenges", "ud_rx_challenges", rx_challenges),
    UCT_UD_CHAN_STAT("open_refused", "ud_open_refused", open_refused),
    UCT_UD_CHAN_STAT("open_evicted", "ud_open_evicted", open_evicted),
    UCT_UD_CHAN_STAT("rx_reasm_limit", "ud_rx_reasm_limit", rx_reasm_limit),
    UCT_UD_CHAN_STAT("rx_copied_small", "ud_rx_copied_small", rx_copied_small),
    UCT_UD_CHAN_STAT("rx_kept_large", "ud_rx_kept_large", rx_kept_large),
    UCT_UD_CHAN_STAT("rx_hold_limit", "ud_rx_hold_limit", rx_hold_limit),
    UCT_UD_CHAN_STAT("pending_async", NULL, pending_async),
    UCT_UD_CHAN_STAT("pending_dispatched", NULL, pending_dispatched),
    UCT_UD_CHAN_STAT("checks", NULL, checks),
};

static const uct_ud_base_stat_def_t uct_ud_base_wire_stats[] = {
    UCT_UD_WIRE_STAT("tx_dgrams", tx_dgrams),
    UCT_UD_WIRE_STAT("rx_dgrams", rx_dgrams),
    UCT_UD_WIRE_STAT("rx_truncated", rx_truncated),
    UCT_UD_WIRE_STAT("rx_trains", rx_trains),
    UCT_UD_WIRE_STAT("rx_trains_copied", rx_trains_copied),
    UCT_UD_WIRE_STAT("tx_errors", tx_errors),
    UCT_UD_WIRE_STAT("fault_drop", fault_drop),
    UCT_UD_WIRE_STAT("fault_dup", fault_dup),
    UCT_UD_WIRE_STAT("fault_reorder", fault_reorder),
    UCT_UD_WIRE_STAT("fault_delay", fault_delay),
};

static const uct_ud_base_stat_def_t uct_ud_base_udz_stats[] = {
    UCT_UD_UDZ_STAT("zc_gets", "zc_gets", zc_gets),
    UCT_UD_UDZ_STAT("zc_bytes", NULL, zc_bytes),
    UCT_UD_UDZ_STAT("copy_gets", "copy_gets", copy_gets),
    UCT_UD_UDZ_STAT("copy_bytes", NULL, copy_bytes),
    UCT_UD_UDZ_STAT("zc_pool_empty", NULL, pool_empty),
    UCT_UD_UDZ_STAT("zc_dgrams_sent", NULL, dgrams_sent),
    UCT_UD_UDZ_STAT("zc_dgrams_resent", NULL, dgrams_resent),
    UCT_UD_UDZ_STAT("zc_dgrams_received", NULL, dgrams_received),
    UCT_UD_UDZ_STAT("zc_misplaced", NULL, misplaced),
    UCT_UD_UDZ_STAT("zc_duplicates", NULL, duplicates),
    UCT_UD_UDZ_STAT("zc_bad_key", NULL, bad_key),
    UCT_UD_UDZ_STAT("zc_bad_index", NULL, bad_index),
    UCT_UD_UDZ_STAT("zc_truncated", NULL, truncated),
    UCT_UD_UDZ_STAT("zc_credits", NULL, credits),
    UCT_UD_UDZ_STAT("zc_nacks", NULL, nacks),
    UCT_UD_UDZ_STAT("zc_stalls", NULL, stalls),
    UCT_UD_UDZ_STAT("zc_probes", NULL, probes),
    UCT_UD_UDZ_STAT("zc_errors", NULL, errors),
    UCT_UD_UDZ_STAT("zc_aborted", NULL, aborted),
    UCT_UD_UDZ_STAT("zc_reflect_refused", "zc_reflect_refused",
                    reflect_refused),
    UCT_UD_UDZ_STAT("zc_serve_limit", "zc_serve_limit", serve_limit),
    UCT_UD_UDZ_STAT("zc_puts", "zc_puts", writes),
    UCT_UD_UDZ_STAT("puts_inline", "puts_inline", puts_inline),
    UCT_UD_UDZ_STAT("put_refused", "put_refused", write_refused),
    UCT_UD_UDZ_STAT("zc_busy_retries", "zc_busy_retries", busy_retries),
    UCT_UD_UDZ_STAT("zc_async_yields", "zc_async_yields", async_yields),
    UCT_UD_UDZ_STAT("zc_errors_dropped", NULL, errors_dropped),
};

static unsigned uct_ud_base_stats_add(const uct_ud_base_stat_def_t *defs,
                                      unsigned num_defs, const void *counters,
                                      uct_ud_base_stats_style_t style,
                                      uct_aptus_stat_t *stats, unsigned max)
{
    unsigned i, n = 0;
    const char *name;

    for (i = 0; (i < num_defs) && (n < max); ++i) {
        name = (style == UCT_UD_BASE_STATS_ALONE) ? defs[i].name
                                                  : defs[i].part_name;
        if (name != NULL) {
            stats[n].name  = name;
            stats[n].value = *(const uint64_t *)UCS_PTR_BYTE_OFFSET(
                counters, defs[i].offset);
            ++n;
        }
    }
    return n;
}

unsigned uct_ud_base_stats(uct_ud_base_t *ud, uct_ud_base_stats_style_t style,
                           uct_aptus_stat_t *stats, unsigned max)
{
    const int alone = (style == UCT_UD_BASE_STATS_ALONE);
    size_t tx_buf_bytes, rx_buf_bytes;

    aptus_ud_chan_buf_bytes(&ud->chan, &tx_buf_bytes, &rx_buf_bytes);
    const uct_aptus_stat_t more[] = {
        { "peers", aptus_ud_chan_num_peers(&ud->chan) },
        { "peer_bytes", aptus_ud_chan_peer_bytes(&ud->chan) },
        { "tx_buf_bytes", tx_buf_bytes },
        { "rx_buf_bytes", rx_buf_bytes },
        { "tx_inflight_bytes", ud->chan.tx_msg_bytes },
        { "async_wakeups", ud->timer.wakeups },
        { "async_arms", ud->async_rx.arms },
        { "async_events", ud->async_rx.events },
        /* what a transport of UD alone is sized by */
        { "max_streams_per_peer", APTUS_UD_MAX_CONN },
        { "rx_max_bufs", ud->chan.config.rx_max },
    };
    unsigned n, num_more;

    n        = uct_ud_base_stats_add(uct_ud_base_chan_stats,
                                     ucs_static_array_size(uct_ud_base_chan_stats),
                                     &ud->chan.stats, style, stats, max);
    num_more = ucs_min(max - n, ucs_static_array_size(more) - (alone ? 0 : 2));
    memcpy(stats + n, more, num_more * sizeof(*stats));
    n += num_more;
    n += uct_ud_base_stats_add(uct_ud_base_wire_stats,
                               ucs_static_array_size(uct_ud_base_wire_stats),
                               &ud->wire->stats, style, stats + n, max - n);
    n += uct_ud_base_stats_add(uct_ud_base_udz_stats,
                               ucs_static_array_size(uct_ud_base_udz_stats),
                               &ud->udz.stats, style, stats + n, max - n);
    if (ud->wire->ops->stats != NULL) {
        n += ud->wire->ops->stats(ud->wire, stats + n, max - n);
    }
    return n;
}

/* ---- the async thread ------------------------------------------------- */

/* Receive until the socket is empty (a bounded number of batches): the
 * event is edge-triggered, and a batch left behind would wait for the next
 * arrival, or overflow the socket while the user computes. */
static void uct_ud_base_async_drain(uct_ud_base_t *ud)
{
    unsigned i;

    for (i = 0; i < UCT_UD_BASE_ASYNC_DRAIN_MAX; ++i) {
        if (ud->async_rx.user_waiting ||
            (aptus_chan_progress(&ud->chan.super, 1) == 0)) {
            break;
        }
    }
}

/* Runs in the async thread with the async lock held: keeps receiving,
 * acknowledging and retransmitting while the application computes. */
static void uct_ud_base_timer(int id, ucs_event_set_types_t events, void *arg)
{
    uct_ud_base_t *ud = arg;

    if (uct_aptus_async_timer_expired(&ud->timer) == 0) {
        return; /* consumed by an earlier call */
    }
    if ((ud->chan.clock() - ud->chan.last_sync_us) < ud->timer.base_us) {
        /* the application is progressing: nothing to cover for */
        uct_aptus_async_timer_backoff(&ud->timer);
        return;
    }
    uct_aptus_async_timer_reset(&ud->timer);
    uct_ud_base_async_drain(ud);
    /* a peer's rendezvous over UD-ZCopy needs this side as owner */
    aptus_udz_progress_owner(&ud->udz);
    /* away for a period: from now on, datagrams wake the async thread */
    uct_aptus_async_rx_arm(&ud->async_rx, 1);
}

/* Datagrams arrived while the user computes (armed by the timer). */
static void uct_ud_base_event(int fd, ucs_event_set_types_t events, void *arg)
{
    uct_ud_base_t *ud = arg;

    if (!ud->async_rx.armed) {
        return; /* a wake-up from before the user came back */
    }
    ud->async_rx.events++;
    uct_ud_base_async_drain(ud);
    aptus_udz_progress_owner(&ud->udz);
}

unsigned uct_ud_base_progress(uct_ud_base_t *ud)
{
    uint64_t prev_us = ud->chan.last_sync_us;
    unsigned count;

    count = aptus_chan_progress(&ud->chan.super, 0);
    uct_aptus_async_rx_progress(
        &ud->async_rx, prev_us, ud->chan.last_sync_us,
        aptus_udz_serving(&ud->udz, ud->chan.last_sync_us));
    /* the common call: no zero-copy transfer, and no call for it */
    if (!aptus_udz_idle(&ud->udz)) {
        count += aptus_chan_progress(&ud->udz.super, 0);
    }
    return count;
}

/* ---- life ------------------------------------------------------------- */

static ucs_status_t uct_ud_base_internal(void *arg, aptus_ud_peer_t *peer,
                                         uint8_t id, const void *data,
                                         size_t length, int is_async)
{
    uct_ud_base_t *ud = arg;

    if (id == APTUS_UDZ_MSG_ID) {
        return aptus_udz_internal(&ud->udz, peer, data, length, is_async);
    }
    if (ud->internal == NULL) {
        ud->chan.stats.rx_malformed++;
        return UCS_OK;
    }
    return ud->internal(ud->internal_arg, peer, id, data, length, is_async);
}

ucs_status_t uct_ud_base_init(uct_ud_base_t *ud, uct_base_iface_t *iface,
                              const char *tl_name, const char *dev_name,
                              const uct_ud_sr_setup_t *setup,
                              const aptus_ud_chan_ops_t *ops, void *arg)
{
    aptus_dgram_wire_config_t wire_config;
    aptus_ud_chan_config_t chan_config;
    ucs_status_t status;

    ud->iface        = iface;
    ud->tl_name      = tl_name;
    ud->dev_name     = dev_name;
    ud->wdev         = uct_aptus_md_wire(iface->md);
    ud->timer.fd     = -1;
    ud->async_rx.fd  = -1;
    ud->internal     = NULL;
    ud->internal_arg = NULL;
    uct_aptus_failures_init(&ud->failures);

    wire_config           = setup->wire;
    wire_config.numa_node = uct_aptus_md_numa_node(iface->md, dev_name);
    status = ud->wdev->dgram_open(dev_name, &wire_config, &ud->wire);
    if (status != UCS_OK) {
        return status;
    }
    chan_config           = setup->chan;
    chan_config.numa_node = wire_config.numa_node;
    status = aptus_ud_chan_init(&ud->chan, &chan_config, ud->wire,
                                iface->worker->async, ops, arg, uct_ud_sr_clock,
                                uct_ud_sr_random_key());
    if (status != UCS_OK) {
        goto err_wire;
    }
    /* peers may ask this interface for data even when it does not use
     * zero copy itself, so the channel is always there */
    status = aptus_udz_init(&ud->udz, &ud->chan, &setup->udz,
                            uct_aptus_md_check_region_cb,
                            ucs_derived_of(iface->md, uct_aptus_md_t));
    if (status != UCS_OK) {
        goto err_chan;
    }
    aptus_ud_chan_set_internal(&ud->chan, uct_ud_base_internal, ud);
    ud->udz.stop_async = &ud->async_rx.user_waiting;
    ud->wdev->caps(dev_name, &ud->latency, &ud->bandwidth);
    return UCS_OK;

err_chan:
    aptus_ud_chan_cleanup(&ud->chan);
err_wire:
    ud->wire->ops->close(ud->wire);
    uct_aptus_failures_cleanup(&ud->failures);
    return status;
}

void uct_ud_base_set_internal(uct_ud_base_t *ud, aptus_ud_internal_cb_t cb,
                              void *arg)
{
    ud->internal     = cb;
    ud->internal_arg = arg;
}

ucs_status_t uct_ud_base_start(uct_ud_base_t *ud,
                               const uct_ud_sr_setup_t *setup)
{
    ucs_async_context_t *async = ud->iface->worker->async;
    ucs_status_t status;

    status =
        uct_aptus_async_timer_start(&ud->timer, async, setup->async_interval_us,
                                    setup->async_max_us, uct_ud_base_timer, ud);
    if (status != UCS_OK) {
        ucs_error("%s: cannot start the async timer: %s", ud->tl_name,
                  ucs_status_string(status));
        return status;
    }
    uct_aptus_async_rx_init(&ud->async_rx, ud->tl_name, async,
                            ud->wire->ops->event_fd(ud->wire),
                            uct_ud_base_event, ud);
    return UCS_OK;
}

void uct_ud_base_stop(uct_ud_base_t *ud)
{
    uct_aptus_async_timer_stop(&ud->timer);
    uct_aptus_async_rx_cleanup(&ud->async_rx);
}

void uct_ud_base_cleanup(uct_ud_base_t *ud)
{
    aptus_udz_cleanup(&ud->udz);
    aptus_ud_chan_cleanup(&ud->chan);
    ud->wire->ops->close(ud->wire);
    uct_aptus_failures_cleanup(&ud->failures);
}

/* ---- failures and addresses ------------------------------------------- */

void uct_ud_base_queue_failure(uct_ud_base_t *ud, aptus_ud_peer_t *peer,
                               uct_ep_h ep, ucs_status_t status)
{
    char addr[48], who[64];

    if (peer->flags & APTUS_UD_PEER_REPORTED) {
        return;
    }
    snprintf(who, sizeof(who), "%s stream %u",
             ud->wire->ops->addr_str(&peer->addr, addr, sizeof(addr)),
             peer->conn_id);
    if (uct_aptus_failures_add(&ud->failures, ud->tl_name, ep, status, who)) {
        peer->flags |= APTUS_UD_PEER_REPORTED;
    }
}

void uct_ud_base_forget_failure(uct_ud_base_t *ud, uct_ep_h ep)
{
    uct_aptus_failures_forget(&ud->failures, ep);
}

size_t uct_ud_base_dev_addr_len(const uct_ud_base_t *ud)
{
    return ud->wdev->dev_addr_len(&ud->wire->addr);
}

void uct_ud_base_dev_addr_pack(const uct_ud_base_t *ud, uct_device_addr_t *addr)
{
    ud->wdev->dev_addr_pack(&ud->wire->addr, addr);
}

int uct_ud_base_is_reachable(const uct_ud_base_t *ud,
                             const uct_device_addr_t *dev_addr)
{
    return (dev_addr != NULL) &&
           ud->wdev->dev_addr_reachable(&ud->wire->addr, dev_addr);
}

uint32_t uct_ud_base_port(const uct_ud_base_t *ud)
{
    return ud->wdev->addr_port(&ud->wire->addr);
}

void uct_ud_base_peer_addr(const uct_ud_base_t *ud,
                           const uct_device_addr_t *dev_addr, uint32_t port,
                           aptus_wire_addr_t *addr)
{
    ud->wdev->addr_make(dev_addr, port, addr);
}
