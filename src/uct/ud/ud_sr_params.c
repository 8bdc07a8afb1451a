/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR settings shared by ud_sr and aptus (ud_sr_params.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_params.h"
#include "proto/random.h"
#include "uct/base/aptus_iface.h"

#include <ucs/sys/string.h>
#include <ucs/time/time.h>

#include <math.h>
#include <string.h>

/* recvmmsg takes at most UIO_MAXIOV messages per call */
#define UCT_UD_SR_RX_BATCH_MAX     1024
#define UCT_UD_SR_RX_QUEUE_LEN_MAX 1048576
#define UCT_UD_SR_RX_MAX_BUFS_MAX  16777216

ucs_config_field_t uct_ud_sr_params_table[] = {
    { "MTU", "auto",
      "Datagram size in bytes, UD-SR header included (512 to 65024). auto:\n"
      "the device's MTU less the IP and UDP headers (never IP-fragmented on\n"
      "a link), at most what SEG_SIZE needs: on the loopback one datagram\n"
      "carries any message. Messages much smaller than a datagram are copied\n"
      "into buffers of their size class on arrival, so held messages cost\n"
      "about their size, not the MTU.",
      ucs_offsetof(uct_ud_sr_params_t, mtu), UCS_CONFIG_TYPE_MEMUNITS },

    { "SEG_SIZE", "32k",
      "Largest active message; messages longer than one datagram are "
      "segmented\n"
      "and reassembled. Must fit TX_WINDOW datagrams (512 to 64m).",
      ucs_offsetof(uct_ud_sr_params_t, seg_size), UCS_CONFIG_TYPE_MEMUNITS },

    { "TX_WINDOW", "1024",
      "Unacknowledged datagrams in flight per peer (1 to 1024, the span the\n"
      "receiver holds out of order). The window costs a peer nothing while\n"
      "it is idle: the receiver's map of held datagrams (128 bytes) exists\n"
      "only while a hole is open.",
      ucs_offsetof(uct_ud_sr_params_t, tx_window), UCS_CONFIG_TYPE_UINT },

    { "TX_WINDOW_BYTES", "4m",
      "Payload bytes in flight per peer: the window is full at TX_WINDOW\n"
      "datagrams or at this many bytes, whichever comes first (one message\n"
      "may pass it). Bounds what a stream parks in buffers and socket\n"
      "queues: a full window of large datagrams would outgrow the caches\n"
      "and slow every copy (at least 1: one message always goes). inf:\n"
      "datagrams alone bound the window.",
      ucs_offsetof(uct_ud_sr_params_t, tx_window_bytes),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "TX_MAX_BYTES", "16m",
      "Payload bytes in flight to all peers together: past it sends wait\n"
      "(pending) until acknowledgements free some (one message may pass it).\n"
      "Bounds the send buffers of a process with many peers, which per-peer\n"
      "windows alone would let grow to TX_WINDOW_BYTES per peer. inf: no\n"
      "bound.",
      ucs_offsetof(uct_ud_sr_params_t, tx_max_bytes),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "RX_QUEUE_LEN", "4096",
      "Receive buffers in the static pool shared by all peers; the socket\n"
      "buffers as many datagrams and drops beyond that, like a UD queue pair\n"
      "(twice RX_BATCH to 1048576).",
      ucs_offsetof(uct_ud_sr_params_t, rx_queue_len), UCS_CONFIG_TYPE_UINT },

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
      "rx_pool_exhausted) and peers retransmit until buffers are released\n"
      "(twice RX_BATCH to 16777216; below RX_QUEUE_LEN it caps the queue).",
      ucs_offsetof(uct_ud_sr_params_t, rx_max_bufs), UCS_CONFIG_TYPE_UINT },

    { "RX_MAX_POLL", "64",
      "Most messages one progress call delivers from those received in the\n"
      "async thread for handlers that run only from progress (1 to 1048576).",
      ucs_offsetof(uct_ud_sr_params_t, rx_max_poll), UCS_CONFIG_TYPE_UINT },

    { "RX_BATCH", "32",
      "Datagrams taken from the socket per receive call (recvmmsg; 1 to\n"
      "1024).",
      ucs_offsetof(uct_ud_sr_params_t, rx_batch), UCS_CONFIG_TYPE_UINT },

    { "ACK_COUNT", "16",
      "Acknowledge explicitly after this many datagrams when no reply carried\n"
      "the acknowledgement (1 to 1024).",
      ucs_offsetof(uct_ud_sr_params_t, ack_count), UCS_CONFIG_TYPE_UINT },

    { "TIMER_TICK", "200us",
      "Timer granularity: longest delay of an explicit ACK, and how often\n"
      "retransmission timeouts are checked (1us to 1s).",
      ucs_offsetof(uct_ud_sr_params_t, timer_tick), UCS_CONFIG_TYPE_TIME },

    { "ASYNC_INTERVAL", "10ms",
      "Interval of the async timer that receives, acknowledges and "
      "retransmits\n"
      "while the application does not call progress (100us to 10s). Shorter\n"
      "intervals wake a thread more often and cost latency on busy cores.",
      ucs_offsetof(uct_ud_sr_params_t, async_interval), UCS_CONFIG_TYPE_TIME },

    { "ASYNC_INTERVAL_MAX", "100ms",
      "While the application calls progress, the async timer's interval\n"
      "doubles at each expiration that finds it did, up to this (never\n"
      "below ASYNC_INTERVAL, at most 60s); back to ASYNC_INTERVAL once it is\n"
      "away. Every expiration wakes a thread that takes a core from a rank\n"
      "sharing it.",
      ucs_offsetof(uct_ud_sr_params_t, async_interval_max),
      UCS_CONFIG_TYPE_TIME },

    { "PROBE_MIN", "20us",
      "Earliest tail-loss probe: data unacknowledged for two smoothed round\n"
      "trips (at least this long) makes the sender ask the receiver what it\n"
      "has, so a lost datagram is resent after about one round trip more.\n"
      "Timers are checked at each progress call when a probe is due, not only\n"
      "at TIMER_TICK. Before the first round-trip sample, and for repeats of\n"
      "an unanswered probe, the wait is at least twice TIMER_TICK. 0: no\n"
      "probes (at most 10s).",
      ucs_offsetof(uct_ud_sr_params_t, probe_min), UCS_CONFIG_TYPE_TIME },

    { "RTO_MIN", "20ms",
      "Smallest retransmission timeout. Lost datagrams are normally found\n"
      "sooner, by selective ACKs and tail probes (after two round trips); the\n"
      "timeout is for a peer that answers nothing, and set well above the\n"
      "time a busy host may keep a receiver off the CPU (100us to 60s).",
      ucs_offsetof(uct_ud_sr_params_t, rto_min), UCS_CONFIG_TYPE_TIME },

    { "RTO_MAX", "500ms",
      "Largest retransmission timeout (after backoff; RTO_MIN to 1h).",
      ucs_offsetof(uct_ud_sr_params_t, rto_max), UCS_CONFIG_TYPE_TIME },

    { "RTO_INIT", "20ms",
      "Retransmission timeout before the first round-trip measurement\n"
      "(between RTO_MIN and RTO_MAX).",
      ucs_offsetof(uct_ud_sr_params_t, rto_init), UCS_CONFIG_TYPE_TIME },

    { "TIMEOUT", "30s",
      "A peer silent this long while data to it is unacknowledged is declared\n"
      "failed; the error handler is called and its operations fail (at\n"
      "least 1ms; inf: never, in effect 71 minutes). Without an error\n"
      "handler the process ends, naming the peer.",
      ucs_offsetof(uct_ud_sr_params_t, timeout), UCS_CONFIG_TYPE_TIME },

    { "CRC", "n", "End-to-end CRC-32C of every payload, checked on receipt.",
      ucs_offsetof(uct_ud_sr_params_t, crc), UCS_CONFIG_TYPE_BOOL },

    { "SOCK_BUF_FORCE", "n",
      "Size the sockets' kernel buffers for RX_QUEUE_LEN datagrams (and the\n"
      "zero-copy windows) even past net.core.rmem_max/wmem_max\n"
      "(SO_RCVBUFFORCE; needs CAP_NET_ADMIN). Off: the system's limits hold,\n"
      "and the statistics show the bytes granted (rcvbuf, sndbuf); raise the\n"
      "limits with sysctl for deep queues.",
      ucs_offsetof(uct_ud_sr_params_t, sock_buf_force), UCS_CONFIG_TYPE_BOOL },

    { "MAX_PEERS", "1048576",
      "Streams (remote interfaces) one interface holds. Endpoints to one\n"
      "remote interface are also bounded by the header's 16-bit stream\n"
      "number: 65535 alive at once (failed ones are reclaimed). 1 to\n"
      "16777216.",
      ucs_offsetof(uct_ud_sr_params_t, max_peers), UCS_CONFIG_TYPE_UINT },

    /* A message being reassembled holds a SEG_SIZE buffer: 2048 of them
     * bound what peers can pin by starting messages and never finishing
     * them near 64 MiB at the default SEG_SIZE. Each stream reassembles one
     * message at a time (and holds a few first fragments out of order), so
     * this is reached only by thousands of peers sending large messages at
     * the same instant. */
    { "RX_MAX_REASM", "2048",
      "Messages of several datagrams being reassembled at once, from all\n"
      "peers together. A first fragment beyond it is not accepted (counted as\n"
      "rx_reasm_limit) and its sender retransmits it later; nothing fails.\n"
      "Complete messages the application keeps (UCP's unexpected ones) are\n"
      "not counted here (1 to 1048576).",
      ucs_offsetof(uct_ud_sr_params_t, rx_max_reasm), UCS_CONFIG_TYPE_UINT },

    { "FAULT_DROP", "0",
      "Fault injector: probability that a sent datagram is silently dropped\n"
      "(0 to 1, as every FAULT_ probability).",
      ucs_offsetof(uct_ud_sr_params_t, fault_drop), UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_DUP", "0",
      "Fault injector: probability that a datagram is sent twice.",
      ucs_offsetof(uct_ud_sr_params_t, fault_dup), UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_REORDER", "0",
      "Fault injector: probability that a datagram is held back behind the "
      "next.",
      ucs_offsetof(uct_ud_sr_params_t, fault_reorder), UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_DELAY", "0",
      "Fault injector: probability that a datagram is delayed by "
      "FAULT_DELAY_TIME.",
      ucs_offsetof(uct_ud_sr_params_t, fault_delay), UCS_CONFIG_TYPE_DOUBLE },

    { "FAULT_DELAY_TIME", "1ms",
      "Fault injector: delay of a delayed datagram (0 to 10s).",
      ucs_offsetof(uct_ud_sr_params_t, fault_delay_time),
      UCS_CONFIG_TYPE_TIME },

    { "FAULT_SEED", "1", "Fault injector: seed of its random sequence.",
      ucs_offsetof(uct_ud_sr_params_t, fault_seed), UCS_CONFIG_TYPE_ULONG },

    { "ZCOPY", "y",
      "UD-ZCopy: offer get_zcopy, so that UCP's rendezvous moves large "
      "messages\n"
      "straight from the sender's buffer into the receiver's, in tagged\n"
      "datagrams. 'n' is the paper's UD-copy configuration: large messages go\n"
      "through the copy-based active-message path.",
      ucs_offsetof(uct_ud_sr_params_t, zcopy), UCS_CONFIG_TYPE_BOOL },

    { "ZCOPY_THRESH", "16k",
      "Gets smaller than this take the copy-based path (through the reliable\n"
      "stream) instead of a receive context. 0: every get may take one; inf:\n"
      "none does.",
      ucs_offsetof(uct_ud_sr_params_t, zcopy_thresh),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "ZCOPY_CONTEXTS", "32",
      "Receive contexts (dedicated receive queues) in the pool; when all are\n"
      "busy, gets take the copy-based path (at most 1024; 0: every get does,\n"
      "while get_zcopy is still offered).",
      ucs_offsetof(uct_ud_sr_params_t, zcopy_contexts), UCS_CONFIG_TYPE_UINT },

    { "ZCOPY_WINDOW", "256",
      "Datagrams a receive context holds; the owner of the data may send that\n"
      "many beyond the lowest one missing (4 to 4096).",
      ucs_offsetof(uct_ud_sr_params_t, zcopy_window), UCS_CONFIG_TYPE_UINT },

    /* a served transfer keeps up to 4096 send-sequence entries (64 KiB):
     * 1024 of them bound the owner's side near 64 MiB */
    { "ZCOPY_MAX_SERVED", "1024",
      "Transfers this interface serves at once as the owner of the data.\n"
      "A request beyond it is answered \"busy\" (counted as zc_serve_limit)\n"
      "and its initiator asks again a little later; nothing fails (1 to\n"
      "65536).",
      ucs_offsetof(uct_ud_sr_params_t, zcopy_max_served),
      UCS_CONFIG_TYPE_UINT },

    { "ZCOPY_MAX", "64m",
      "Largest get (UCP splits larger transfers; 4k to 1g).",
      ucs_offsetof(uct_ud_sr_params_t, zcopy_max), UCS_CONFIG_TYPE_MEMUNITS },

    { NULL }
};

uint64_t uct_ud_sr_clock(void)
{
    /* called on every progress call and send: an integer multiplication
     * by a factor read once (microseconds per tick, 32.32 fixed point),
     * not a division nor conversions to and from double each time */
    static uint64_t usec_per_tick_fx = 0;

    if (ucs_unlikely(usec_per_tick_fx == 0)) {
        usec_per_tick_fx = (uint64_t)(UCS_USEC_PER_SEC * 4294967296.0 /
                                      ucs_get_cpu_clocks_per_sec());
    }
    return (uint64_t)(((unsigned __int128)ucs_get_time() * usec_per_tick_fx) >>
                      32);
}

uint32_t uct_ud_sr_usec(double seconds)
{
    double us = seconds * 1e6;

    return (us >= UINT32_MAX) ? UINT32_MAX : (uint32_t)us;
}

uint64_t uct_ud_sr_random_key(void)
{
    /* the key is what keeps forged datagrams out: the OS CSPRNG, and no
     * weaker fallback (0: the caller fails the open) */
    uint64_t key = aptus_random64();

    if (key == 0) {
        ucs_error("ud_sr: the OS gives no randomness for the interface key "
                  "(getrandom: %m)");
    }
    return key;
}

static void uct_ud_sr_params_chan(const uct_ud_sr_params_t *config,
                                  size_t rx_headroom, size_t peer_headroom,
                                  aptus_ud_chan_config_t *chan_config)
{
    memset(chan_config, 0, sizeof(*chan_config));
    chan_config->rel.tx_window = ucs_min(config->tx_window, UINT16_MAX);
    chan_config->rel.ack_count = ucs_min(config->ack_count, UINT16_MAX);
    chan_config->tx_max_bytes  = (config->tx_window_bytes == UCS_MEMUNITS_INF)
                                     ? 0
                                     : config->tx_window_bytes;
    chan_config->tx_all_bytes =
        (config->tx_max_bytes == UCS_MEMUNITS_INF) ? 0 : config->tx_max_bytes;
    chan_config->rel.rto_min_us      = uct_ud_sr_usec(config->rto_min);
    chan_config->rel.rto_max_us      = uct_ud_sr_usec(config->rto_max);
    chan_config->rel.rto_init_us     = uct_ud_sr_usec(config->rto_init);
    chan_config->rel.peer_timeout_us = uct_ud_sr_usec(config->timeout);
    chan_config->max_msg             = config->seg_size;
    chan_config->max_am_hdr          = UCT_UD_SR_MAX_AM_HDR;
    /* a ceiling below the queue length caps the queue (as UCX's own
     * transports take RX_MAX_BUFS) rather than failing the open */
    chan_config->rx_pool   = ucs_min(config->rx_queue_len, config->rx_max_bufs);
    chan_config->rx_max    = config->rx_max_bufs;
    chan_config->rx_budget = config->rx_max_poll;
    chan_config->rx_headroom = rx_headroom;
    chan_config->rx_batch    = config->rx_batch;
    chan_config->tick_us     = uct_ud_sr_usec(config->timer_tick);
    /* a probe goes two smoothed RTTs after the oldest unacknowledged
     * datagram, at least PROBE_MIN; an unanswered one is repeated no
     * sooner than a delayed ACK could have come */
    chan_config->rel.probe_min_us    = uct_ud_sr_usec(config->probe_min);
    chan_config->rel.probe_repeat_us = 2 * chan_config->tick_us;
    chan_config->crc                 = config->crc;
    chan_config->max_peers           = config->max_peers;
    chan_config->max_reasm           = config->rx_max_reasm;
    chan_config->peer_headroom       = peer_headroom;
    chan_config->numa_node           = -1; /* the interface knows its device */
}

/* Times are refused outside their range before they become microseconds:
 * a negative one would wrap, a zero tick or interval would spin, a huge
 * one would stop the timers. Counts and sizes: 0 where it means nothing,
 * and beyond what memory or the protocol can hold (-1 reads as the
 * largest value, and ended in "Out of memory" naming nothing). */
static int uct_ud_sr_params_check_ranges(const uct_ud_sr_params_t *config,
                                         const char *tl_name,
                                         const char *prefix)
{
    const uct_aptus_time_range_t times[] = {
        { "TIMER_TICK", config->timer_tick, 1e-6, 1.0 },
        { "ASYNC_INTERVAL", config->async_interval, 100e-6, 10.0 },
        { "ASYNC_INTERVAL_MAX", config->async_interval_max, 100e-6, 60.0 },
        { "PROBE_MIN", config->probe_min, 0.0, 10.0 },
        { "RTO_MIN", config->rto_min, 100e-6, 60.0 },
        { "RTO_MAX", config->rto_max, config->rto_min, 3600.0 },
        { "RTO_INIT", config->rto_init, 100e-6, 3600.0 },
        { "TIMEOUT", config->timeout, 1e-3, INFINITY },
        { "FAULT_DELAY_TIME", config->fault_delay_time, 0.0, 10.0 },
    };
    /* the receive pool takes RX_BATCH datagrams at a time, twice over */
    const uint64_t min_bufs          = 2 * (uint64_t)config->rx_batch;
    const uct_aptus_range_t counts[] = {
        { "SEG_SIZE", uct_aptus_bytes(config->seg_size), 512, 64 * UCS_MBYTE },
        { "TX_WINDOW", uct_aptus_uint(config->tx_window), 1,
          APTUS_REL_TX_WINDOW_MAX },
        { "TX_WINDOW_BYTES", uct_aptus_bytes(config->tx_window_bytes), 1,
          UINT64_MAX },
        { "TX_MAX_BYTES", uct_aptus_bytes(config->tx_max_bytes), 1,
          UINT64_MAX },
        { "RX_BATCH", uct_aptus_uint(config->rx_batch), 1,
          UCT_UD_SR_RX_BATCH_MAX },
        { "RX_QUEUE_LEN", uct_aptus_uint(config->rx_queue_len), min_bufs,
          UCT_UD_SR_RX_QUEUE_LEN_MAX },
        { "RX_MAX_BUFS", uct_aptus_uint(config->rx_max_bufs), min_bufs,
          UCT_UD_SR_RX_MAX_BUFS_MAX },
        { "RX_MAX_POLL", uct_aptus_uint(config->rx_max_poll), 1, 1048576 },
        { "ACK_COUNT", uct_aptus_uint(config->ack_count), 1,
          APTUS_REL_TX_WINDOW_MAX },
        { "MAX_PEERS", uct_aptus_uint(config->max_peers), 1, 16777216 },
        { "RX_MAX_REASM", uct_aptus_uint(config->rx_max_reasm), 1, 1048576 },
        { "ZCOPY_CONTEXTS", uct_aptus_uint(config->zcopy_contexts), 0, 1024 },
        { "ZCOPY_WINDOW", uct_aptus_uint(config->zcopy_window), 4, 4096 },
        { "ZCOPY_MAX_SERVED", uct_aptus_uint(config->zcopy_max_served), 1,
          65536 },
        { "ZCOPY_MAX", uct_aptus_bytes(config->zcopy_max), 4 * UCS_KBYTE,
          UCS_GBYTE },
    };

    return uct_aptus_time_ranges_check(tl_name, prefix, times,
                                       ucs_static_array_size(times)) &&
           uct_aptus_ranges_check(tl_name, prefix, counts,
                                  ucs_static_array_size(counts));
}

ucs_status_t uct_ud_sr_params_setup(const uct_ud_sr_params_t *config,
                                    const char *tl_name, const char *prefix,
                                    const aptus_wire_dev_ops_t *wdev,
                                    const uct_iface_params_t *params,
                                    size_t peer_headroom,
                                    uct_ud_sr_setup_t *setup)
{
    const char *dev_name = params->mode.device.dev_name;
    const char *bad;
    ucs_status_t status;
    size_t mtu;

    if (!uct_ud_sr_params_check_ranges(config, tl_name, prefix)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uct_ud_sr_params_chan(
        config, UCT_IFACE_PARAM_VALUE(params, rx_headroom, RX_HEADROOM, 0),
        peer_headroom, &setup->chan);
    setup->chan.var_prefix = prefix;
    status                 = uct_aptus_iface_am_alignment(
                        tl_name, params, &setup->chan.am_align, &setup->chan.am_align_offset);
    if (status != UCS_OK) {
        return status;
    }
    /* Refuse a bad setting up front, naming the variable. */
    mtu = config->mtu;
    if (mtu == UCS_MEMUNITS_AUTO) {
        mtu = wdev->dgram_mtu_auto(dev_name);
        /* a datagram above the largest message would only waste memory */
        mtu = ucs_max(ucs_min(mtu, config->seg_size + APTUS_UD_SR_HDR_LEN),
                      wdev->dgram_mtu_min);
    } else if ((mtu < wdev->dgram_mtu_min) || (mtu > wdev->dgram_mtu_max)) {
        ucs_error("%s: invalid configuration: UCX_%sMTU=%zu is out of range "
                  "[%zu, %zu]",
                  tl_name, prefix, mtu, wdev->dgram_mtu_min,
                  wdev->dgram_mtu_max);
        return UCS_ERR_INVALID_PARAM;
    }
    setup->udz.thresh     = config->zcopy_thresh;
    setup->udz.contexts   = config->zcopy ? config->zcopy_contexts : 0;
    setup->udz.window     = config->zcopy_window;
    setup->udz.batch      = config->rx_batch;
    setup->udz.max_get    = config->zcopy_max;
    setup->udz.max_served = config->zcopy_max_served;
    bad                   = aptus_ud_chan_config_check(&setup->chan, mtu);
    if (bad == NULL) {
        bad = aptus_udz_config_check(&setup->udz);
    }
    if (bad != NULL) {
        ucs_error("%s: invalid configuration: UCX_%s%s", tl_name, prefix, bad);
        return UCS_ERR_INVALID_PARAM;
    }

    memset(&setup->wire, 0, sizeof(setup->wire));
    setup->wire.mtu            = mtu;
    setup->wire.rx_queue_len   = config->rx_queue_len;
    setup->wire.tx_queue_len   = config->tx_window * 4;
    setup->wire.force_bufs     = config->sock_buf_force;
    setup->wire.numa_node      = -1; /* the interface knows its device */
    setup->wire.fault.drop     = config->fault_drop;
    setup->wire.fault.dup      = config->fault_dup;
    setup->wire.fault.reorder  = config->fault_reorder;
    setup->wire.fault.delay    = config->fault_delay;
    setup->wire.fault.delay_us = uct_ud_sr_usec(config->fault_delay_time);
    setup->wire.fault.seed     = config->fault_seed;
    bad                        = aptus_fault_config_check(&setup->wire.fault);
    if (bad != NULL) {
        ucs_error("%s: invalid configuration: UCX_%s%s must be a probability "
                  "in [0, 1]",
                  tl_name, prefix, bad);
        return UCS_ERR_INVALID_PARAM;
    }
    setup->async_interval_us = uct_ud_sr_usec(config->async_interval);
    setup->async_max_us      = ucs_max(setup->async_interval_us,
                                       uct_ud_sr_usec(config->async_interval_max));
    return UCS_OK;
}
