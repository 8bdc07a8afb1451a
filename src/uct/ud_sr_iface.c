/*
 * UCX-Aptus: the ud_sr UCT interface.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_iface.h"
#include "ud_sr_ep.h"
#include "aptus_iface.h"
#include "../wire/sock/sock_dgram.h"
#include "../wire/sock/sock_netif.h"

#include <ucs/arch/atomic.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <ucs/time/time.h>

#include <string.h>
#include <sys/random.h>

#define UCT_UD_SR_CONFIG_PREFIX "UD_SR_"
#define UCT_UD_SR_MAX_AM_HDR    256

ucs_config_field_t uct_ud_sr_iface_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_ud_sr_iface_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_iface_config_table) },

    { "MTU", "2048",
      "Datagram size in bytes, UD-SR header included, as an InfiniBand UD MTU\n"
      "(512 to 4096).",
      ucs_offsetof(uct_ud_sr_iface_config_t, mtu), UCS_CONFIG_TYPE_MEMUNITS },

    { "SEG_SIZE", "32k",
      "Largest active message; messages longer than one datagram are "
      "segmented\n"
      "and reassembled. Must fit TX_WINDOW datagrams.",
      ucs_offsetof(uct_ud_sr_iface_config_t, seg_size),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "TX_WINDOW", "64",
      "Unacknowledged datagrams in flight per peer (1 to 64, the span the\n"
      "receiver holds out of order).",
      ucs_offsetof(uct_ud_sr_iface_config_t, tx_window), UCS_CONFIG_TYPE_UINT },

    { "RX_QUEUE_LEN", "4096",
      "Receive buffers in the static pool shared by all peers; the socket\n"
      "buffers as many datagrams and drops beyond that, like a UD queue pair.",
      ucs_offsetof(uct_ud_sr_iface_config_t, rx_queue_len),
      UCS_CONFIG_TYPE_UINT },

    /* Default ceiling: a held buffer costs a datagram (2 KiB at the default
     * MTU), so 256k of them bound the worst case near 550 MiB, reached only
     * by an application that keeps that many unexpected messages (UCX's tcp
     * keeps them without bound). It covers, e.g., 20,000 eager messages
     * from each of a dozen peers before a receive is posted. */
    { "RX_MAX_BUFS", "262144",
      "Most receive buffers the pool grows to, in steps of RX_QUEUE_LEN.\n"
      "UCP keeps the buffers of unexpected messages until they are received,\n"
      "so the pool grows while the application holds them. At the ceiling\n"
      "datagrams are dropped (an error is printed once and counted as\n"
      "rx_pool_exhausted) and peers retransmit until buffers are released.",
      ucs_offsetof(uct_ud_sr_iface_config_t, rx_max_bufs),
      UCS_CONFIG_TYPE_UINT },

    { "RX_MAX_POLL", "64",
      "Most messages one progress call delivers from those received in the\n"
      "async thread for handlers that run only from progress.",
      ucs_offsetof(uct_ud_sr_iface_config_t, rx_max_poll),
      UCS_CONFIG_TYPE_UINT },

    { "RX_BATCH", "32",
      "Datagrams taken from the socket per receive call (recvmmsg).",
      ucs_offsetof(uct_ud_sr_iface_config_t, rx_batch), UCS_CONFIG_TYPE_UINT },

    { "ACK_COUNT", "16",
      "Acknowledge explicitly after this many datagrams when no reply carried\n"
      "the acknowledgement.",
      ucs_offsetof(uct_ud_sr_iface_config_t, ack_count), UCS_CONFIG_TYPE_UINT },

    { "TIMER_TICK", "200us",
      "Timer granularity: longest delay of an explicit ACK, and how often\n"
      "retransmission timeouts are checked.",
      ucs_offsetof(uct_ud_sr_iface_config_t, timer_tick),
      UCS_CONFIG_TYPE_TIME },

    { "ASYNC_INTERVAL", "10ms",
      "Interval of the async timer that receives, acknowledges and "
      "retransmits\n"
      "while the application does not call progress. Shorter intervals wake a\n"
      "thread more often and cost latency on busy cores.",
      ucs_offsetof(uct_ud_sr_iface_config_t, async_interval),
      UCS_CONFIG_TYPE_TIME },

    { "RTO_MIN", "20ms",
      "Smallest retransmission timeout. Lost datagrams are normally found\n"
      "sooner, by selective ACKs and tail probes (after two round trips); the\n"
      "timeout is for a peer that answers nothing, and set well above the\n"
      "time a busy host may keep a receiver off the CPU.",
      ucs_offsetof(uct_ud_sr_iface_config_t, rto_min), UCS_CONFIG_TYPE_TIME },

    { "RTO_MAX", "500ms", "Largest retransmission timeout (after backoff).",
      ucs_offsetof(uct_ud_sr_iface_config_t, rto_max), UCS_CONFIG_TYPE_TIME },

    { "RTO_INIT", "20ms",
      "Retransmission timeout before the first round-trip measurement.",
      ucs_offsetof(uct_ud_sr_iface_config_t, rto_init), UCS_CONFIG_TYPE_TIME },

    { "TIMEOUT", "30s",
      "A peer silent this long while data to it is unacknowledged is declared\n"
      "failed; the error handler is called and its operations fail.",
      ucs_offsetof(uct_ud_sr_iface_config_t, timeout), UCS_CONFIG_TYPE_TIME },

    { "CRC", "n", "End-to-end CRC-32C of every payload, checked on receipt.",
      ucs_offsetof(uct_ud_sr_iface_config_t, crc), UCS_CONFIG_TYPE_BOOL },

    { "MAX_PEERS", "1048576",
      "Streams (remote interfaces) one interface holds. Endpoints to one\n"
      "remote interface are also bounded by the header's 16-bit stream\n"
      "number: 65535 alive at once (failed ones are reclaimed).",
      ucs_offsetof(uct_ud_sr_iface_config_t, max_peers), UCS_CONFIG_TYPE_UINT },

    { "FAULT_DROP", "0",
      "Fault injector: probability that a sent datagram is silently dropped.",
      ucs_offsetof(uct_ud_sr_iface_config_t, fault_drop),
      UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_DUP", "0",
      "Fault injector: probability that a datagram is sent twice.",
      ucs_offsetof(uct_ud_sr_iface_config_t, fault_dup),
      UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_REORDER", "0",
      "Fault injector: probability that a datagram is held back behind the "
      "next.",
      ucs_offsetof(uct_ud_sr_iface_config_t, fault_reorder),
      UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_DELAY", "0",
      "Fault injector: probability that a datagram is delayed by "
      "FAULT_DELAY_TIME.",
      ucs_offsetof(uct_ud_sr_iface_config_t, fault_delay),
      UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_DELAY_TIME", "1ms", "Fault injector: delay of a delayed datagram.",
      ucs_offsetof(uct_ud_sr_iface_config_t, fault_delay_time),
      UCS_CONFIG_TYPE_TIME },

    { "FAULT_SEED", "1", "Fault injector: seed of its random sequence.",
      ucs_offsetof(uct_ud_sr_iface_config_t, fault_seed),
      UCS_CONFIG_TYPE_ULONG },

    { "ZCOPY", "y",
      "UD-ZCopy: offer get_zcopy, so that UCP's rendezvous moves large "
      "messages\n"
      "straight from the sender's buffer into the receiver's, in tagged\n"
      "datagrams. 'n' is the paper's UD-copy configuration: large messages go\n"
      "through the copy-based active-message path.",
      ucs_offsetof(uct_ud_sr_iface_config_t, zcopy), UCS_CONFIG_TYPE_BOOL },

    { "ZCOPY_THRESH", "16k",
      "Gets smaller than this take the copy-based path (through the reliable\n"
      "stream) instead of a receive context.",
      ucs_offsetof(uct_ud_sr_iface_config_t, zcopy_thresh),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "ZCOPY_CONTEXTS", "32",
      "Receive contexts (dedicated receive queues) in the pool; when all are\n"
      "busy, gets take the copy-based path.",
      ucs_offsetof(uct_ud_sr_iface_config_t, zcopy_contexts),
      UCS_CONFIG_TYPE_UINT },

    { "ZCOPY_WINDOW", "256",
      "Datagrams a receive context holds; the owner of the data may send that\n"
      "many beyond the lowest one missing.",
      ucs_offsetof(uct_ud_sr_iface_config_t, zcopy_window),
      UCS_CONFIG_TYPE_UINT },

    { "ZCOPY_MAX", "64m", "Largest get (UCP splits larger transfers).",
      ucs_offsetof(uct_ud_sr_iface_config_t, zcopy_max),
      UCS_CONFIG_TYPE_MEMUNITS },

    { NULL }
};

static uint64_t uct_ud_sr_clock(void)
{
    return (uint64_t)ucs_time_to_usec(ucs_get_time());
}

static uint32_t uct_ud_sr_usec(double seconds)
{
    double us = seconds * 1e6;

    return (us >= UINT32_MAX) ? UINT32_MAX : (uint32_t)us;
}

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
    uct_ud_sr_failure_t *failures;

    if (!(peer->flags & APTUS_UD_PEER_USER) ||
        (peer->flags & APTUS_UD_PEER_REPORTED)) {
        return;
    }
    /* The error handler runs from progress, in the user's thread. */
    if (iface->num_failures == iface->max_failures) {
        failures = ucs_realloc(
            iface->failures, sizeof(*failures) * (iface->max_failures * 2 + 4),
            "uct_ud_sr_failures");
        if (failures == NULL) {
            ucs_error("ud_sr: cannot queue a peer failure report");
            return;
        }
        iface->failures     = failures;
        iface->max_failures = iface->max_failures * 2 + 4;
    }
    peer->flags |= APTUS_UD_PEER_REPORTED;
    iface->failures[iface->num_failures].peer   = peer;
    iface->failures[iface->num_failures].status = status;
    iface->num_failures++;
}

void uct_ud_sr_iface_forget_failure(uct_ud_sr_iface_t *iface,
                                    aptus_ud_peer_t *peer)
{
    unsigned i;

    for (i = 0; i < iface->num_failures;) {
        if (iface->failures[i].peer == peer) {
            iface->failures[i] = iface->failures[--iface->num_failures];
        } else {
            ++i;
        }
    }
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

static int uct_ud_sr_check_region(void *arg, uint64_t token, uint64_t address,
                                  uint64_t length)
{
    return uct_aptus_md_check_region(arg, token, address, length);
}

static const aptus_ud_chan_ops_t uct_ud_sr_chan_ops = {
    .deliver     = uct_ud_sr_deliver,
    .peer_failed = uct_ud_sr_peer_failed,
};

static void uct_ud_sr_iface_report_failures(uct_ud_sr_iface_t *iface)
{
    uct_ud_sr_failure_t failure;
    ucs_status_t status;

    while (iface->num_failures > 0) {
        failure = iface->failures[--iface->num_failures];
        if (!(failure.peer->flags & APTUS_UD_PEER_USER)) {
            continue; /* the endpoint was destroyed meanwhile */
        }
        status = uct_iface_handle_ep_err(
            &iface->super.super, &uct_ud_sr_ep_of_peer(failure.peer)->super.super,
            failure.status);
        if (status != UCS_OK) {
            ucs_error("ud_sr/%s: unhandled peer failure: %s", iface->dev_name,
                      ucs_status_string(failure.status));
        }
    }
}

static unsigned uct_ud_sr_iface_progress(uct_iface_h tl_iface)
{
    uct_ud_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_ud_sr_iface_t);
    unsigned count;

    UCS_ASYNC_BLOCK(iface->super.worker->async);
    count = aptus_ud_chan_progress(&iface->chan, 0);
    count += aptus_udz_progress(&iface->udz);
    if (ucs_unlikely(iface->num_failures > 0)) {
        uct_ud_sr_iface_report_failures(iface);
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
    uint64_t now             = iface->chan.clock();

    if ((now - iface->chan.last_sync_us) < iface->async_interval_us) {
        return; /* the application is progressing: nothing to cover for */
    }
    aptus_ud_chan_progress(&iface->chan, 1);
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
    return status;
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

    if (iface->zcopy) {
        attr->cap.flags |= UCT_IFACE_FLAG_GET_ZCOPY;
        attr->cap.get.min_zcopy       = 0;
        attr->cap.get.max_zcopy       = iface->udz.config.max_get;
        attr->cap.get.max_iov         = 1;
        attr->cap.get.opt_zcopy_align = 1;
        attr->cap.get.align_mtu       = 1;
    }

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
    uct_aptus_stat_t all[]            = {
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
    };
    unsigned n = ucs_min(max, sizeof(all) / sizeof(all[0]));

    memcpy(stats, all, n * sizeof(*stats));
    return n;
}

static uint32_t uct_ud_sr_iface_key(void)
{
    uint32_t key;

    /* from the OS CSPRNG: the key is what keeps forged datagrams out */
    do {
        if (getrandom(&key, sizeof(key), 0) != sizeof(key)) {
            key = 0;
        }
    } while (key == 0);
    return key;
}

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_ud_sr_iface_t, uct_iface_t);

static uct_iface_ops_t uct_ud_sr_iface_tl_ops = {
    .ep_am_short              = uct_ud_sr_ep_am_short,
    .ep_am_short_iov          = uct_base_ep_am_short_iov,
    .ep_am_bcopy              = uct_ud_sr_ep_am_bcopy,
    .ep_am_zcopy              = uct_ud_sr_ep_am_zcopy,
    .ep_get_zcopy             = uct_ud_sr_ep_get_zcopy,
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
    .ep_query = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate       = uct_ud_sr_ep_invalidate,
};

static void uct_ud_sr_chan_config(const uct_ud_sr_iface_config_t *config,
                                  size_t rx_headroom,
                                  aptus_ud_chan_config_t *chan_config)
{
    memset(chan_config, 0, sizeof(*chan_config));
    chan_config->rel.tx_window       = ucs_min(config->tx_window, UINT16_MAX);
    chan_config->rel.ack_count       = ucs_min(config->ack_count, UINT16_MAX);
    chan_config->rel.rto_min_us      = uct_ud_sr_usec(config->rto_min);
    chan_config->rel.rto_max_us      = uct_ud_sr_usec(config->rto_max);
    chan_config->rel.rto_init_us     = uct_ud_sr_usec(config->rto_init);
    chan_config->rel.peer_timeout_us = uct_ud_sr_usec(config->timeout);
    chan_config->max_msg             = config->seg_size;
    chan_config->max_am_hdr          = UCT_UD_SR_MAX_AM_HDR;
    chan_config->rx_pool             = config->rx_queue_len;
    chan_config->rx_max              = config->rx_max_bufs;
    chan_config->rx_budget           = config->rx_max_poll;
    chan_config->rx_headroom         = rx_headroom;
    chan_config->rx_batch            = config->rx_batch;
    chan_config->tick_us             = uct_ud_sr_usec(config->timer_tick);
    /* probe no earlier than a delayed ACK could have come */
    chan_config->rel.probe_min_us = 2 * chan_config->tick_us;
    chan_config->crc              = config->crc;
    chan_config->max_peers        = config->max_peers;
    chan_config->peer_headroom    = ucs_offsetof(uct_ud_sr_ep_t, peer);
}

static UCS_CLASS_INIT_FUNC(uct_ud_sr_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_ud_sr_iface_config_t *config =
        ucs_derived_of(tl_config, uct_ud_sr_iface_config_t);
    aptus_sock_dgram_config_t wire_config;
    aptus_ud_chan_config_t chan_config;
    aptus_udz_config_t udz_config;
    ucs_async_context_t *async;
    const char *bad;
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
    self->failures     = NULL;
    self->num_failures = 0;
    self->max_failures = 0;
    self->timer_id     = -1;
    async              = self->super.worker->async;

    uct_ud_sr_chan_config(
        config, UCT_IFACE_PARAM_VALUE(params, rx_headroom, RX_HEADROOM, 0),
        &chan_config);
    status = uct_aptus_iface_am_alignment("ud_sr", params,
                                          &chan_config.am_align,
                                          &chan_config.am_align_offset);
    if (status != UCS_OK) {
        return status;
    }
    /* Refuse a bad setting up front, naming the variable. */
    if ((config->mtu < APTUS_SOCK_DGRAM_MTU_MIN) ||
        (config->mtu > APTUS_SOCK_DGRAM_MTU_MAX)) {
        ucs_error("ud_sr: invalid configuration: UCX_" UCT_UD_SR_CONFIG_PREFIX
                  "MTU=%zu is out of range [%d, %d]",
                  config->mtu, APTUS_SOCK_DGRAM_MTU_MIN,
                  APTUS_SOCK_DGRAM_MTU_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    udz_config.thresh   = config->zcopy_thresh;
    udz_config.contexts = config->zcopy ? config->zcopy_contexts : 0;
    udz_config.window   = config->zcopy_window;
    udz_config.batch    = config->rx_batch;
    udz_config.max_get  = config->zcopy_max;
    bad                 = aptus_ud_chan_config_check(&chan_config, config->mtu);
    if (bad == NULL) {
        bad = aptus_udz_config_check(&udz_config);
    }
    if (bad != NULL) {
        ucs_error("ud_sr: invalid configuration: UCX_" UCT_UD_SR_CONFIG_PREFIX
                  "%s",
                  bad);
        return UCS_ERR_INVALID_PARAM;
    }

    memset(&wire_config, 0, sizeof(wire_config));
    wire_config.mtu            = config->mtu;
    wire_config.rx_queue_len   = config->rx_queue_len;
    wire_config.tx_queue_len   = config->tx_window * 4;
    wire_config.fault.drop     = config->fault_drop;
    wire_config.fault.dup      = config->fault_dup;
    wire_config.fault.reorder  = config->fault_reorder;
    wire_config.fault.delay    = config->fault_delay;
    wire_config.fault.delay_us = uct_ud_sr_usec(config->fault_delay_time);
    wire_config.fault.seed     = config->fault_seed;
    bad                        = aptus_fault_config_check(&wire_config.fault);
    if (bad != NULL) {
        ucs_error("ud_sr: invalid configuration: UCX_" UCT_UD_SR_CONFIG_PREFIX
                  "%s must be a probability in [0, 1]",
                  bad);
        return UCS_ERR_INVALID_PARAM;
    }

    status = aptus_sock_dgram_open(self->dev_name, &wire_config, &self->wire);
    if (status != UCS_OK) {
        return status;
    }

    status = aptus_ud_chan_init(&self->chan, &chan_config, self->wire, async,
                                &uct_ud_sr_chan_ops, self, uct_ud_sr_clock,
                                uct_ud_sr_iface_key());
    if (status != UCS_OK) {
        goto err_wire;
    }

    /* peers may ask this interface for data even when it does not use
     * zero copy itself, so the channel is always there */
    status = aptus_udz_init(&self->udz, &self->chan, &udz_config,
                            uct_ud_sr_check_region,
                            ucs_derived_of(md, uct_aptus_md_t));
    if (status != UCS_OK) {
        goto err_chan;
    }
    self->zcopy = config->zcopy;
    aptus_ud_chan_set_internal(&self->chan, uct_ud_sr_internal, self);

    aptus_sock_netif_caps(self->dev_name, &self->latency, &self->bandwidth);
    self->async_interval_us = uct_ud_sr_usec(config->async_interval);
    status                  = ucs_async_add_timer(
                         async->mode, ucs_time_from_sec(config->async_interval),
                         uct_ud_sr_iface_timer, self, async, &self->timer_id);
    if (status != UCS_OK) {
        ucs_error("ud_sr: cannot start the async timer: %s",
                  ucs_status_string(status));
        goto err_udz;
    }

    ucs_debug("ud_sr/%s: key 0x%08x mtu %zu seg %zu window %u rx %u",
              self->dev_name, self->chan.local_key, config->mtu,
              config->seg_size, config->tx_window, config->rx_queue_len);
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

    ucs_async_remove_handler(self->timer_id, 1);

    UCS_ASYNC_BLOCK(self->super.worker->async);
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    n = uct_ud_sr_iface_stats(self, stats, 96);
    uct_aptus_stats_print(md->stats, UCT_UD_SR_TL_NAME, self->dev_name, stats,
                          n);
    aptus_udz_cleanup(&self->udz);
    aptus_ud_chan_cleanup(&self->chan);
    self->wire->ops->close(self->wire);
    ucs_free(self->failures);
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
    if (uct_aptus_md_is_one_sided(md)) {
        *devices_p     = NULL; /* ud_sr lives on the "aptus" domain */
        *num_devices_p = 0;
        return UCS_OK;
    }
    return aptus_sock_query_devices(devices_p, num_devices_p);
}

UCT_TL_DEFINE_ENTRY(&uct_aptus_component, ud_sr, uct_ud_sr_query_devices,
                    uct_ud_sr_iface_t, UCT_UD_SR_CONFIG_PREFIX,
                    uct_ud_sr_iface_config_table, uct_ud_sr_iface_config_t);
