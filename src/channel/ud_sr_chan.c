/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel: set-up, peers, timers, pending and flush.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_chan_int.h"
#include "chan_pending.h"
#include "../proto/random.h"

#include <inttypes.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>

#define APTUS_UD_ACTIVE_INIT 64
#define APTUS_UD_TX_BATCH    64 /* datagrams per send call, at least */
_Static_assert(APTUS_UD_SR_SACK_WORDS_MAX == APTUS_REL_SACK_WORDS,
               "an ACK carries the whole receive window");

/* Header of a datagram that is a whole message or a middle/last fragment;
 * the first of several always carries the 8-byte data extension. */
static size_t aptus_ud_hdr_overhead(const aptus_ud_chan_config_t *config)
{
    return APTUS_UD_SR_HDR_LEN + (config->crc ? APTUS_UD_SR_EXT_LEN : 0);
}

static size_t aptus_ud_first_payload(size_t mtu)
{
    return mtu - APTUS_UD_SR_HDR_LEN - APTUS_UD_SR_EXT_LEN;
}

/* Fragments a message of max_msg bytes needs. */
static unsigned aptus_ud_max_frags(const aptus_ud_chan_config_t *config,
                                   size_t mtu)
{
    size_t single = mtu - aptus_ud_hdr_overhead(config);

    if (config->max_msg <= single) {
        return 1;
    }
    return 1 + ucs_div_round_up(config->max_msg - aptus_ud_first_payload(mtu),
                                single);
}

/* The smallest datagram a peer's size may be: one that still carries the
 * largest message within the window (SEG_SIZE must fit TX_WINDOW
 * datagrams whatever the path). */
static size_t aptus_ud_min_dg(const aptus_ud_chan_config_t *config,
                              size_t wire_mtu)
{
    size_t lo = APTUS_UD_PATH_UNKNOWN, hi = wire_mtu, mid;

    if (lo >= hi) {
        return wire_mtu;
    }
    while (lo < hi) { /* fewest bytes whose fragment count fits */
        mid = lo + (hi - lo) / 2;
        if (aptus_ud_max_frags(config, mid) <= config->rel.tx_window) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

unsigned aptus_ud_chan_dg_class(aptus_ud_chan_t *chan, size_t mtu)
{
    aptus_ud_dg_class_t *c;
    unsigned i;

    mtu = ucs_min(ucs_max(mtu, chan->min_dg), chan->wire->mtu);
    for (i = 0; i < chan->num_dg_class; ++i) {
        if (chan->dg_class[i].mtu == mtu) {
            return i;
        }
    }
    if (chan->num_dg_class == APTUS_UD_DG_CLASSES) {
        return 1; /* the smallest size, always safe */
    }
    c         = &chan->dg_class[chan->num_dg_class];
    c->mtu    = (uint32_t)mtu;
    c->single = (uint32_t)(mtu - aptus_ud_hdr_overhead(&chan->config));
    c->first  = (uint32_t)aptus_ud_first_payload(mtu);
    return chan->num_dg_class++;
}

const char *aptus_ud_chan_config_check(const aptus_ud_chan_config_t *config,
                                       size_t wire_mtu)
{
    const char *bad = aptus_rel_config_check(&config->rel);
    size_t single;

    if (bad != NULL) {
        return bad;
    }
    if (wire_mtu <= APTUS_UD_SR_HDR_MAX_LEN + 64) {
        return "MTU too small for the UD-SR header";
    }
    single = wire_mtu - aptus_ud_hdr_overhead(config);
    if (config->max_msg < single) {
        return "SEG_SIZE must hold at least one datagram's payload";
    }
    if (config->max_msg > UINT32_MAX) {
        return "SEG_SIZE too large";
    }
    if (aptus_ud_max_frags(config, wire_mtu) > config->rel.tx_window) {
        return "SEG_SIZE needs more datagrams than TX_WINDOW allows";
    }
    if (config->max_am_hdr > single) {
        return "zcopy header does not fit one datagram";
    }
    if (config->rx_batch == 0) {
        return "RX_BATCH must be at least 1";
    }
    if (config->rx_pool < 2 * config->rx_batch) {
        return "RX_QUEUE_LEN must be at least twice RX_BATCH";
    }
    if (config->rx_max < config->rx_pool) {
        return "RX_MAX_BUFS must be at least RX_QUEUE_LEN";
    }
    if (config->rx_budget == 0) {
        return "RX_MAX_POLL must be at least 1";
    }
    if ((config->am_align > 1) &&
        (!ucs_is_pow2(config->am_align) ||
         (config->am_align_offset >= config->am_align))) {
        return "AM alignment must be a power of 2 above its offset";
    }
    if (config->tick_us == 0) {
        return "TIMER_TICK must be positive";
    }
    if (config->max_peers == 0) {
        return "MAX_PEERS must be at least 1";
    }
    if (config->max_reasm == 0) {
        return "RX_MAX_REASM must be at least 1";
    }
    return NULL;
}

static void aptus_ud_rx_msg_release_cb(uct_recv_desc_t *self, void *desc);

static void aptus_ud_rx_msg_init(ucs_mpool_t *mp, void *obj, void *chunk)
{
    ((aptus_ud_rx_msg_t *)obj)->release.cb = aptus_ud_rx_msg_release_cb;
}

/* Pools of received messages (datagrams, reassembled messages): each
 * keeps a pointer to its channel, for the release callback. */
static ucs_mpool_ops_t aptus_ud_rx_mpool_ops = {
    .chunk_alloc   = ucs_mpool_chunk_malloc,
    .chunk_release = ucs_mpool_chunk_free,
    .obj_init      = aptus_ud_rx_msg_init,
    .obj_cleanup   = NULL,
    .obj_str       = NULL
};

/* A user (UCP) releases a descriptor it kept: from its own thread, so the
 * pool is touched under the async lock like everything else. */
static void aptus_ud_rx_msg_release_cb(uct_recv_desc_t *self, void *desc)
{
    aptus_ud_rx_msg_t *msg = ucs_container_of(self, aptus_ud_rx_msg_t, release);
    /* ucs_mpool keeps the owning pool in the header before each element */
    ucs_mpool_t *mp       = ((ucs_mpool_elem_t *)msg - 1)->mpool;
    aptus_ud_chan_t *chan = *(aptus_ud_chan_t **)ucs_mpool_priv(mp);

    if (chan->async != NULL) {
        UCS_ASYNC_BLOCK(chan->async);
    }
    ucs_mpool_put_inline(msg);
    if (chan->async != NULL) {
        UCS_ASYNC_UNBLOCK(chan->async);
    }
}

/* Bytes to add to an element offset so that the payload placed there, in
 * an element aligned to the AM alignment, meets the user's demand. */
static size_t aptus_ud_align_pad(const aptus_ud_chan_config_t *config,
                                 size_t payload_offset)
{
    if (config->am_align <= 1) {
        return 0;
    }
    return (config->am_align -
            (payload_offset + config->am_align_offset) % config->am_align) %
           config->am_align;
}

static ucs_status_t aptus_ud_tx_batch_init(aptus_ud_tx_batch_t *batch,
                                           unsigned max)
{
    batch->count = 0;
    batch->max   = max;
    batch->tx    = ucs_calloc(max, sizeof(*batch->tx), "aptus_ud_batch_tx");
    batch->iov   = ucs_calloc(max * APTUS_DGRAM_MAX_IOV, sizeof(*batch->iov),
                              "aptus_ud_batch_iov");
    batch->hdrs =
        ucs_calloc(max, APTUS_UD_SR_ACK_MAX_LEN, "aptus_ud_batch_hdrs");
    if ((batch->tx == NULL) || (batch->iov == NULL) || (batch->hdrs == NULL)) {
        ucs_free(batch->tx);
        ucs_free(batch->iov);
        ucs_free(batch->hdrs);
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

static void aptus_ud_tx_batch_cleanup(aptus_ud_tx_batch_t *batch)
{
    ucs_free(batch->tx);
    ucs_free(batch->iov);
    ucs_free(batch->hdrs);
}

ucs_status_t aptus_ud_chan_init(aptus_ud_chan_t *chan,
                                const aptus_ud_chan_config_t *config,
                                aptus_dgram_wire_t *wire,
                                ucs_async_context_t *async,
                                const aptus_ud_chan_ops_t *ops, void *ops_arg,
                                aptus_ud_clock_t clock, uint64_t local_key)
{
    size_t mtu = wire->mtu;
    size_t small_elem, big_elem, elem;
    unsigned rx_pool, rx_max;
    aptus_ud_rx_desc_t *desc;
    unsigned max_frags, i;
    ucs_status_t status;
    const char *bad;
    size_t align;

    bad = aptus_ud_chan_config_check(config, mtu);
    if (bad != NULL) {
        ucs_error("ud_sr: invalid configuration: %s", bad);
        return UCS_ERR_INVALID_PARAM;
    }
    if (local_key == 0) {
        return UCS_ERR_IO_ERROR; /* no key could be drawn (said already) */
    }

    memset(chan, 0, sizeof(*chan));
    chan->super.ops = &aptus_ud_chan_iface_ops;
    chan->config    = *config;
    if ((config->tx_max_bytes == 0) || (config->tx_max_bytes > UINT32_MAX)) {
        /* unbounded: a window of the largest datagrams stays far below */
        chan->config.tx_max_bytes = UINT32_MAX;
    }
    chan->wire           = wire;
    chan->async          = async;
    chan->ops            = ops;
    chan->ops_arg        = ops_arg;
    chan->clock          = clock;
    chan->local_key      = local_key;
    chan->single_payload = mtu - aptus_ud_hdr_overhead(config);
    chan->first_payload  = aptus_ud_first_payload(mtu);
    chan->frag_payload   = chan->single_payload;
    /* class 0: the wire's own size; class 1: the smallest, for streams
     * whose peer named no size yet */
    chan->min_dg = aptus_ud_min_dg(config, mtu);
    aptus_ud_chan_dg_class(chan, mtu);
    if (aptus_ud_chan_dg_class(chan, APTUS_UD_PATH_UNKNOWN) == 0) {
        chan->dg_class[1]  = chan->dg_class[0];
        chan->num_dg_class = 2;
    }
    max_frags = aptus_ud_max_frags(config, chan->min_dg);

    kh_init_inplace(aptus_ud_peers, &chan->peers);
    kh_init_inplace(aptus_ud_opening, &chan->opening_per_addr);
    ucs_queue_head_init(&chan->deferred);
    ucs_queue_head_init(&chan->flush_reqs);
    ucs_arbiter_init(&chan->pending);

    status = ucs_mpool_init(&chan->peer_mp, 0,
                            config->peer_headroom + sizeof(aptus_ud_peer_t), 0,
                            UCS_SYS_CACHE_LINE_SIZE / 8, 256, UINT_MAX,
                            &aptus_mpool_plain_ops, "aptus_ud_peers");
    if (status != UCS_OK) {
        goto err;
    }

    status =
        ucs_mpool_init(&chan->ext_mp, 0, sizeof(aptus_ud_peer_ext_t), 0, 8, 64,
                       UINT_MAX, &aptus_mpool_plain_ops, "aptus_ud_peer_ext");
    if (status != UCS_OK) {
        goto err_peer_mp;
    }

    chan->tx_data_offset[APTUS_UD_TX_TINY] =
        ucs_align_up(sizeof(aptus_ud_tx_msg_t) + sizeof(aptus_ud_tx_frag_t),
                     UCS_SYS_CACHE_LINE_SIZE);
    status =
        ucs_mpool_init(&chan->tx_mp[APTUS_UD_TX_TINY], 0,
                       chan->tx_data_offset[APTUS_UD_TX_TINY] +
                           ucs_min(chan->single_payload, APTUS_UD_TINY_PAYLOAD),
                       0, UCS_SYS_CACHE_LINE_SIZE, 128, UINT_MAX,
                       &aptus_mpool_plain_ops, "aptus_ud_tx_tiny");
    if (status != UCS_OK) {
        goto err_ext_mp;
    }

    chan->tx_data_offset[APTUS_UD_TX_SMALL] =
        chan->tx_data_offset[APTUS_UD_TX_TINY];
    status = ucs_mpool_init(&chan->tx_mp[APTUS_UD_TX_SMALL], 0,
                            chan->tx_data_offset[APTUS_UD_TX_SMALL] +
                                chan->single_payload,
                            0, UCS_SYS_CACHE_LINE_SIZE, 32, UINT_MAX,
                            &aptus_mpool_plain_ops, "aptus_ud_tx_small");
    if (status != UCS_OK) {
        goto err_tx_tiny;
    }

    chan->tx_data_offset[APTUS_UD_TX_LARGE] = ucs_align_up(
        sizeof(aptus_ud_tx_msg_t) + max_frags * sizeof(aptus_ud_tx_frag_t),
        UCS_SYS_CACHE_LINE_SIZE);
    status = ucs_mpool_init(&chan->tx_mp[APTUS_UD_TX_LARGE], 0,
                            chan->tx_data_offset[APTUS_UD_TX_LARGE] +
                                config->max_msg,
                            0, UCS_SYS_CACHE_LINE_SIZE, 8, UINT_MAX,
                            &aptus_mpool_plain_ops, "aptus_ud_tx_large");
    if (status != UCS_OK) {
        goto err_tx_small;
    }

    /* Receive descriptor: [desc][uct_recv_desc_t *][headroom][datagram]. The
     * release pointer sits right before the headroom that precedes the
     * payload, wherever the header's extensions put the payload. With an AM
     * alignment, the datagram starts where a payload after the basic header
     * is aligned (the receive path moves others there).
     * The pool grows by RX_QUEUE_LEN up to RX_MAX_BUFS: UCP keeps the
     * descriptors of unexpected messages, and a fixed pool would stop all
     * reception, ACKs included, while the application holds them. */
    align                 = ucs_max(config->am_align, UCS_SYS_CACHE_LINE_SIZE);
    chan->rx_dgram_offset = ucs_align_up(
        sizeof(aptus_ud_rx_desc_t) + sizeof(void *) + config->rx_headroom, 8);
    chan->rx_dgram_offset +=
        aptus_ud_align_pad(config, chan->rx_dgram_offset + APTUS_UD_SR_HDR_LEN);
    /* Above 2 KiB of payload per datagram, messages much smaller than a
     * datagram are copied out into buffers of their size class, and every
     * pool but the 2 KiB one is bounded by the bytes the configured counts
     * of 2 KiB buffers would take. */
    small_elem =
        chan->rx_dgram_offset + APTUS_UD_SR_HDR_LEN + APTUS_UD_TINY_PAYLOAD;
    big_elem = chan->rx_dgram_offset + mtu;
    rx_pool  = config->rx_pool;
    rx_max   = config->rx_max;
    if (big_elem > small_elem) {
        chan->rx_copy[0].max = APTUS_UD_TINY_PAYLOAD;
        chan->rx_copy_num    = 1;
        if (chan->single_payload / 2 > 2 * APTUS_UD_TINY_PAYLOAD) {
            chan->rx_copy[1].max = chan->single_payload / 2;
            chan->rx_copy_num    = 2;
        }
        rx_pool = ucs_max(config->rx_pool * small_elem / big_elem,
                          2 * config->rx_batch);
        rx_max  = ucs_max(config->rx_max * small_elem / big_elem,
                          4 * config->rx_batch);
    }
    for (i = 0; i < chan->rx_copy_num; ++i) {
        elem =
            chan->rx_dgram_offset + APTUS_UD_SR_HDR_LEN + chan->rx_copy[i].max;
        status =
            ucs_mpool_init(&chan->rx_copy[i].mp, sizeof(chan), elem, 0, align,
                           ucs_max(config->rx_pool * small_elem / elem, 16),
                           ucs_max(config->rx_max * small_elem / elem, 64),
                           &aptus_ud_rx_mpool_ops,
                           (i == 0) ? "aptus_ud_rx_2k" : "aptus_ud_rx_half");
        if (status != UCS_OK) {
            chan->rx_copy_num = i;
            goto err_rx_copy_mp;
        }
        *(aptus_ud_chan_t **)ucs_mpool_priv(&chan->rx_copy[i].mp) = chan;
    }
    /* Datagrams held past holes may not take the last datagram buffers: a
     * window (1024) can exceed the ceiling, and a hole must stay receivable
     * or the held ones wait for ever. */
    chan->rx_held_max = (rx_max > 4 * config->rx_batch)
                            ? rx_max - 2 * config->rx_batch
                            : rx_max / 2;
    status =
        ucs_mpool_init(&chan->rx_mp, sizeof(chan), big_elem, 0, align, rx_pool,
                       rx_max, &aptus_ud_rx_mpool_ops, "aptus_ud_rx");
    if (status != UCS_OK) {
        goto err_rx_copy_mp;
    }
    *(aptus_ud_chan_t **)ucs_mpool_priv(&chan->rx_mp) = chan;

    chan->reasm_data_offset = ucs_align_up(
        sizeof(aptus_ud_reasm_t) + sizeof(void *) + config->rx_headroom, 8);
    chan->reasm_data_offset +=
        aptus_ud_align_pad(config, chan->reasm_data_offset);
    status =
        ucs_mpool_init(&chan->reasm_mp, sizeof(chan),
                       chan->reasm_data_offset + config->max_msg, 0, align, 4,
                       UINT_MAX, &aptus_ud_rx_mpool_ops, "aptus_ud_reasm");
    if (status != UCS_OK) {
        goto err_rx_mp;
    }
    *(aptus_ud_chan_t **)ucs_mpool_priv(&chan->reasm_mp) = chan;

    status =
        ucs_mpool_init(&chan->flush_mp, 0, sizeof(aptus_ud_flush_req_t), 0, 8,
                       32, UINT_MAX, &aptus_mpool_plain_ops, "aptus_ud_flush");
    if (status != UCS_OK) {
        goto err_reasm_mp;
    }

    /* a full batch is sent and the next one starts: this only sets how
     * many datagrams one send call may take */
    status = aptus_ud_tx_batch_init(&chan->batch,
                                    ucs_max(max_frags, APTUS_UD_TX_BATCH));
    if (status != UCS_OK) {
        goto err_flush_mp;
    }

    chan->max_active = APTUS_UD_ACTIVE_INIT;
    chan->active =
        ucs_malloc(chan->max_active * sizeof(*chan->active), "aptus_ud_active");
    chan->ack_list = ucs_malloc(config->rx_batch * sizeof(*chan->ack_list),
                                "aptus_ud_ack_list");
    chan->rx_slots = ucs_calloc(config->rx_batch, sizeof(*chan->rx_slots),
                                "aptus_ud_rx_slots");
    if ((chan->active == NULL) || (chan->ack_list == NULL) ||
        (chan->rx_slots == NULL)) {
        status = UCS_ERR_NO_MEMORY;
        goto err_arrays;
    }

    /* Post the receive batch. */
    for (i = 0; i < config->rx_batch; ++i) {
        desc = ucs_mpool_get(&chan->rx_mp);
        if (desc == NULL) {
            status = UCS_ERR_NO_MEMORY;
            goto err_posted;
        }
        chan->rx_slots[i].buf = aptus_ud_rx_dgram(chan, desc);
        chan->rx_posted++;
    }

    chan->now_us       = clock();
    chan->last_tick_us = chan->now_us;
    chan->next_due_us  = UINT64_MAX;
    chan->last_sync_us = chan->now_us;
    return UCS_OK;

err_posted:
    for (i = 0; i < chan->rx_posted; ++i) {
        ucs_mpool_put(UCS_PTR_BYTE_OFFSET(chan->rx_slots[i].buf,
                                          -(ptrdiff_t)chan->rx_dgram_offset));
    }
err_arrays:
    ucs_free(chan->active);
    ucs_free(chan->ack_list);
    ucs_free(chan->rx_slots);
    aptus_ud_tx_batch_cleanup(&chan->batch);
err_flush_mp:
    ucs_mpool_cleanup(&chan->flush_mp, 1);
err_reasm_mp:
    ucs_mpool_cleanup(&chan->reasm_mp, 1);
err_rx_mp:
    ucs_mpool_cleanup(&chan->rx_mp, 1);
err_rx_copy_mp:
    for (i = 0; i < chan->rx_copy_num; ++i) {
        ucs_mpool_cleanup(&chan->rx_copy[i].mp, 1);
    }
    ucs_mpool_cleanup(&chan->tx_mp[APTUS_UD_TX_LARGE], 1);
err_tx_small:
    ucs_mpool_cleanup(&chan->tx_mp[APTUS_UD_TX_SMALL], 1);
err_tx_tiny:
    ucs_mpool_cleanup(&chan->tx_mp[APTUS_UD_TX_TINY], 1);
err_ext_mp:
    ucs_mpool_cleanup(&chan->ext_mp, 1);
err_peer_mp:
    ucs_mpool_cleanup(&chan->peer_mp, 1);
err:
    kh_destroy_inplace(aptus_ud_opening, &chan->opening_per_addr);
    kh_destroy_inplace(aptus_ud_peers, &chan->peers);
    return status;
}

static ucs_arbiter_cb_result_t
aptus_ud_pending_drop_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                         ucs_arbiter_elem_t *elem, void *arg)
{
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

static void aptus_ud_chan_peer_free(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer)
{
    aptus_ud_tx_purge(chan, peer, UCS_ERR_CANCELED);
    aptus_ud_rx_release_peer(chan, peer);
    if (peer->ext != NULL) {
        ucs_arbiter_group_purge(&chan->pending, &peer->ext->pending,
                                aptus_ud_pending_drop_cb, NULL);
        ucs_mpool_put(peer->ext);
    }
    aptus_ud_peer_free(chan, peer);
}

void aptus_ud_chan_cleanup(aptus_ud_chan_t *chan)
{
    aptus_ud_flush_req_t *freq;
    aptus_ud_rx_msg_t *msg;
    aptus_ud_peer_t *peer;
    unsigned i;

    chan->in_async = 0;
    aptus_ud_comp_list_cleanup(&chan->async_comps);

    /* failed peers waiting to be freed are out of the lookup table */
    for (i = 0; i < chan->num_dead; ++i) {
        aptus_ud_chan_peer_free(chan, chan->dead[i]);
    }
    kh_foreach_key(&chan->peers, peer, { aptus_ud_chan_peer_free(chan, peer); })

        while (!ucs_queue_is_empty(&chan->flush_reqs))
    {
        freq = ucs_queue_pull_elem_non_empty(&chan->flush_reqs,
                                             aptus_ud_flush_req_t, queue);
        uct_invoke_completion(freq->comp, UCS_ERR_CANCELED);
        ucs_mpool_put(freq);
    }

    while (!ucs_queue_is_empty(&chan->deferred)) {
        msg = ucs_queue_pull_elem_non_empty(&chan->deferred, aptus_ud_rx_msg_t,
                                            queue);
        ucs_mpool_put(msg);
    }

    for (i = 0; i < chan->rx_posted; ++i) {
        ucs_mpool_put(UCS_PTR_BYTE_OFFSET(chan->rx_slots[i].buf,
                                          -(ptrdiff_t)chan->rx_dgram_offset));
    }

    ucs_arbiter_cleanup(&chan->pending);
    ucs_free(chan->dead);
    ucs_free(chan->active);
    ucs_free(chan->ack_list);
    ucs_free(chan->soon_list);
    ucs_free(chan->rx_slots);
    aptus_ud_tx_batch_cleanup(&chan->batch);
    /* Descriptors a user still holds are gone with the pools: UCT requires
     * them to be released before the interface closes. */
    ucs_mpool_cleanup(&chan->flush_mp, 1);
    ucs_mpool_cleanup(&chan->reasm_mp, 0);
    ucs_mpool_cleanup(&chan->rx_mp, 0);
    for (i = 0; i < chan->rx_copy_num; ++i) {
        if (chan->rx_copy[i].spare != NULL) {
            ucs_mpool_put(chan->rx_copy[i].spare);
        }
        ucs_mpool_cleanup(&chan->rx_copy[i].mp, 0);
    }
    ucs_mpool_cleanup(&chan->tx_mp[APTUS_UD_TX_LARGE], 1);
    ucs_mpool_cleanup(&chan->tx_mp[APTUS_UD_TX_SMALL], 1);
    ucs_mpool_cleanup(&chan->tx_mp[APTUS_UD_TX_TINY], 1);
    ucs_mpool_cleanup(&chan->ext_mp, 1);
    ucs_mpool_cleanup(&chan->peer_mp, 1);
    ucs_free(chan->opening);
    kh_destroy_inplace(aptus_ud_opening, &chan->opening_per_addr);
    kh_destroy_inplace(aptus_ud_peers, &chan->peers);
}

size_t aptus_ud_chan_max_short(const aptus_ud_chan_t *chan)
{
    return chan->single_payload;
}

ucs_status_t aptus_ud_chan_grow_active(aptus_ud_chan_t *chan)
{
    aptus_ud_peer_t **active;
    unsigned max = chan->max_active * 2;

    active =
        ucs_realloc(chan->active, max * sizeof(*active), "aptus_ud_active");
    if (active == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    chan->active     = active;
    chan->max_active = max;
    return UCS_OK;
}

static void aptus_ud_chan_deactivate(aptus_ud_chan_t *chan,
                                     aptus_ud_peer_t *peer)
{
    unsigned idx = peer->active_idx;

    if (idx == UINT32_MAX) {
        return;
    }
    chan->active[idx]             = chan->active[--chan->num_active];
    chan->active[idx]->active_idx = idx;
    peer->active_idx              = UINT32_MAX;
}

aptus_ud_peer_ext_t *aptus_ud_peer_ext_get(aptus_ud_chan_t *chan,
                                           aptus_ud_peer_t *peer)
{
    aptus_ud_peer_ext_t *ext = peer->ext;

    if (ext == NULL) {
        ext = ucs_mpool_get(&chan->ext_mp);
        if (ext == NULL) {
            return NULL;
        }
        ext->peer       = peer;
        ext->held       = NULL;
        ext->held_tail  = NULL;
        ext->reasm      = NULL;
        ext->path_probe = 0;
        aptus_rel_rx_map_init(&ext->held_map);
        ucs_arbiter_group_init(&ext->pending);
        peer->ext = ext;
    }
    return ext;
}

void aptus_ud_peer_ext_try_release(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_peer_ext_t *ext = peer->ext;

    if ((ext == NULL) || (ext->held != NULL) || (ext->reasm != NULL) ||
        (ext->path_probe != 0) || (peer->flags & APTUS_UD_PEER_OPENING) ||
        !ucs_arbiter_group_is_empty(&ext->pending)) {
        return;
    }
    ucs_arbiter_group_cleanup(&ext->pending);
    ucs_mpool_put(ext);
    peer->ext = NULL;
}

aptus_ud_peer_t *aptus_ud_chan_peer_lookup(aptus_ud_chan_t *chan,
                                           const aptus_wire_addr_t *addr,
                                           uint64_t remote_key,
                                           uint16_t conn_id)
{
    aptus_ud_peer_t probe;
    khiter_t iter;

    probe.addr       = *addr;
    probe.remote_key = remote_key;
    probe.conn_id    = conn_id;
    iter             = kh_get(aptus_ud_peers, &chan->peers, &probe);
    return (iter == kh_end(&chan->peers)) ? NULL : kh_key(&chan->peers, iter);
}

aptus_ud_peer_t *aptus_ud_chan_peer_create(aptus_ud_chan_t *chan,
                                           const aptus_wire_addr_t *addr,
                                           uint64_t remote_key,
                                           uint16_t conn_id)
{
    aptus_ud_peer_t *peer;
    void *elem;
    khiter_t iter;
    int ret;

    if (kh_size(&chan->peers) >= chan->config.max_peers) {
        return NULL;
    }
    /* The active set is a subset of the peers: with room for every peer,
     * activation (on any packet, any send) never has to allocate. */
    if ((kh_size(&chan->peers) >= chan->max_active) &&
        (aptus_ud_chan_grow_active(chan) != UCS_OK)) {
        return NULL;
    }

    elem = ucs_mpool_get(&chan->peer_mp);
    if (elem == NULL) {
        return NULL;
    }
    /* the owner's headroom starts zeroed too: its state of a peer it has
     * not seen yet */
    memset(elem, 0, chan->config.peer_headroom + sizeof(*peer));
    peer              = UCS_PTR_BYTE_OFFSET(elem, chan->config.peer_headroom);
    peer->addr        = *addr;
    peer->remote_key  = remote_key;
    peer->conn_id     = conn_id;
    peer->active_idx  = UINT32_MAX;
    peer->flags       = 1u << APTUS_UD_PEER_CLASS_SHIFT; /* size unknown */
    peer->local_token = aptus_ud_chan_token(chan);
    if (peer->local_token == 0) {
        ucs_mpool_put(elem);
        return NULL; /* no randomness from the OS: no incarnation */
    }
    aptus_rel_tx_init(&peer->tx, chan->now_us);
    aptus_rel_rx_init(&peer->rx);

    iter = kh_put(aptus_ud_peers, &chan->peers, peer, &ret);
    if (ret == UCS_KH_PUT_FAILED) {
        aptus_ud_peer_free(chan, peer);
        return NULL;
    }
    ucs_assert(ret != UCS_KH_PUT_KEY_PRESENT);
    (void)iter;
    chan->stats.peers_created++;
    return peer;
}

uint32_t aptus_ud_chan_token(aptus_ud_chan_t *chan)
{
    uint32_t token;

    do {
        if (chan->num_tokens == 0) {
            if (aptus_random_bytes(chan->tokens, sizeof(chan->tokens)) != 0) {
                ucs_error("ud_sr: no random token from the OS: %m");
                return 0;
            }
            chan->num_tokens = APTUS_UD_TOKEN_BATCH;
        }
        token = chan->tokens[--chan->num_tokens];
    } while (token == 0);
    return token;
}

static uint64_t aptus_ud_addr_hash(const aptus_wire_addr_t *addr)
{
    uint64_t h = 0xcbf29ce484222325ull;
    unsigned i;

    for (i = 0; i < APTUS_WIRE_ADDR_LEN; ++i) {
        h = (h ^ addr->raw[i]) * 0x100000001b3ull;
    }
    return h;
}

void aptus_ud_chan_opening_leave(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    khiter_t iter;

    ucs_assert(peer->flags & APTUS_UD_PEER_OPENING);
    chan->opening[peer->ext->opening_idx] = NULL;
    peer->flags &= ~APTUS_UD_PEER_OPENING;
    chan->num_opening--;
    iter = kh_get(aptus_ud_opening, &chan->opening_per_addr,
                  aptus_ud_addr_hash(&peer->addr));
    if ((iter != kh_end(&chan->opening_per_addr)) &&
        (--kh_val(&chan->opening_per_addr, iter) == 0)) {
        kh_del(aptus_ud_opening, &chan->opening_per_addr, iter);
    }
    aptus_ud_peer_ext_try_release(chan, peer);
}

/* Room for one more unconfirmed stream: the oldest goes when the ring is
 * full (of streams or of holes they left). */
static int aptus_ud_chan_opening_room(aptus_ud_chan_t *chan)
{
    aptus_ud_peer_t *oldest;

    if (chan->opening == NULL) {
        chan->opening = ucs_calloc(APTUS_UD_OPENING_MAX, sizeof(*chan->opening),
                                   "aptus_ud_opening");
        if (chan->opening == NULL) {
            return 0;
        }
    }
    while ((chan->opening_span > 0) &&
           ((chan->opening_span == APTUS_UD_OPENING_MAX) ||
            (chan->opening[chan->opening_head] == NULL))) {
        oldest = chan->opening[chan->opening_head];
        if (oldest != NULL) {
            /* its opener, if genuine, opens again */
            chan->stats.open_evicted++;
            oldest->flags |= APTUS_UD_PEER_QUIET;
            aptus_ud_chan_peer_fail(chan, oldest, UCS_ERR_CONNECTION_RESET);
        }
        chan->opening_head = (chan->opening_head + 1) % APTUS_UD_OPENING_MAX;
        chan->opening_span--;
    }
    return 1;
}

aptus_ud_peer_t *aptus_ud_chan_peer_open(aptus_ud_chan_t *chan,
                                         const aptus_wire_addr_t *addr,
                                         uint64_t remote_key, uint16_t conn_id,
                                         uint32_t remote_token)
{
    uint64_t hash = aptus_ud_addr_hash(addr);
    aptus_ud_peer_ext_t *ext;
    aptus_ud_peer_t *peer;
    khiter_t iter;
    unsigned slot;
    int ret;

    iter = kh_get(aptus_ud_opening, &chan->opening_per_addr, hash);
    if ((iter != kh_end(&chan->opening_per_addr)) &&
        (kh_val(&chan->opening_per_addr, iter) >= APTUS_UD_OPENING_PER_ADDR)) {
        chan->stats.open_refused++;
        return NULL;
    }
    if (!aptus_ud_chan_opening_room(chan)) {
        chan->stats.rx_peer_limit++;
        return NULL;
    }
    iter = kh_put(aptus_ud_opening, &chan->opening_per_addr, hash, &ret);
    if (ret == UCS_KH_PUT_FAILED) {
        chan->stats.rx_peer_limit++;
        return NULL;
    }
    if (ret != UCS_KH_PUT_KEY_PRESENT) {
        kh_val(&chan->opening_per_addr, iter) = 0;
    }

    peer = aptus_ud_chan_peer_create(chan, addr, remote_key, conn_id);
    ext  = (peer != NULL) ? aptus_ud_peer_ext_get(chan, peer) : NULL;
    if (ext == NULL) {
        chan->stats.rx_peer_limit++; /* MAX_PEERS, or out of memory */
        if (peer != NULL) {
            peer->flags |= APTUS_UD_PEER_QUIET;
            aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_NO_MEMORY);
        }
        if (kh_val(&chan->opening_per_addr, iter) == 0) {
            kh_del(aptus_ud_opening, &chan->opening_per_addr, iter);
        }
        return NULL;
    }

    kh_val(&chan->opening_per_addr, iter)++;
    slot = (chan->opening_head + chan->opening_span) % APTUS_UD_OPENING_MAX;
    chan->opening[slot] = peer;
    chan->opening_span++;
    chan->num_opening++;
    ext->opening_idx = slot;
    peer->flags |= APTUS_UD_PEER_OPENING;
    peer->remote_token = remote_token;
    return peer;
}

static inline int aptus_ud_chan_is_hint(const aptus_ud_chan_t *chan,
                                        const aptus_wire_addr_t *addr,
                                        uint64_t remote_key)
{
    return (chan->connect_hint.remote_key == remote_key) &&
           !memcmp(chan->connect_hint.addr.raw, addr->raw, APTUS_WIRE_ADDR_LEN);
}

void aptus_ud_chan_set_class(aptus_ud_peer_t *peer, unsigned cls)
{
    peer->flags =
        (uint16_t)((peer->flags & ((1u << APTUS_UD_PEER_CLASS_SHIFT) - 1)) |
                   (cls << APTUS_UD_PEER_CLASS_SHIFT));
}

/* Start the search for the largest datagram the path to peer carries:
 * data goes at a size every link takes while probes of the size both ends
 * take (then Ethernet's) are answered, or not. */
static void aptus_ud_chan_path_start(aptus_ud_chan_t *chan,
                                     aptus_ud_peer_t *peer, size_t want)
{
    aptus_ud_peer_ext_t *ext;
    size_t base = ucs_min(want, APTUS_UD_PATH_BASE);

    if ((chan->wire->flags & APTUS_DGRAM_WIRE_F_LOCAL) || (want <= base)) {
        aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, want));
        return;
    }
    if (aptus_ud_peer_mtu(chan, peer) >= ucs_min(want, chan->wire->mtu)) {
        return; /* known already (a second endpoint on the stream) */
    }
    ext = aptus_ud_peer_ext_get(chan, peer);
    if (ext == NULL) {
        aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, base));
        return; /* no memory to search: the safe size */
    }
    aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, base));
    ext->path_want    = (uint16_t)ucs_min(want, chan->wire->mtu);
    ext->path_probe   = ext->path_want;
    ext->path_tries   = 0;
    ext->path_due_us  = chan->now_us;
    chan->next_due_us = chan->now_us;
    aptus_ud_chan_activate(chan, peer);
}

ucs_status_t aptus_ud_chan_peer_connect(aptus_ud_chan_t *chan,
                                        const aptus_wire_addr_t *addr,
                                        uint64_t remote_key, size_t remote_mtu,
                                        aptus_ud_peer_t **peer_p)
{
    aptus_ud_peer_t *peer = NULL;
    unsigned conn_id;

    /* Both sides pick the lowest free stream, so two endpoints created
     * towards each other meet on stream 0 and share its state. Streams
     * below the hint of the last remote interface connected to are taken,
     * so many endpoints to one interface cost no quadratic search. */
    conn_id = 0;
    if (aptus_ud_chan_is_hint(chan, addr, remote_key)) {
        conn_id = chan->connect_hint.conn_id;
    } else {
        chan->connect_hint.addr       = *addr;
        chan->connect_hint.remote_key = remote_key;
    }
    for (; conn_id < APTUS_UD_MAX_CONN; ++conn_id) {
        peer = aptus_ud_chan_peer_lookup(chan, addr, remote_key, conn_id);
        if (peer == NULL) {
            peer = aptus_ud_chan_peer_create(chan, addr, remote_key, conn_id);
            if (peer == NULL) {
                return UCS_ERR_NO_MEMORY;
            }
            break;
        }
        if (!(peer->flags & (APTUS_UD_PEER_USER | APTUS_UD_PEER_FAILED))) {
            break; /* learned from the peer's traffic: adopt it */
        }
    }
    chan->connect_hint.conn_id = conn_id;
    if (conn_id == APTUS_UD_MAX_CONN) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    peer->flags = (peer->flags | APTUS_UD_PEER_USER) & ~APTUS_UD_PEER_USER_GONE;
    if (peer->flags & APTUS_UD_PEER_OPENING) {
        aptus_ud_chan_opening_leave(chan, peer); /* the user holds it now */
    }
    aptus_ud_chan_path_start(chan, peer, ucs_min(remote_mtu, chan->wire->mtu));
    *peer_p = peer;
    return UCS_OK;
}

/* A stream of the hint's interface may be free again (its endpoint went). */
static void aptus_ud_chan_hint_lower(aptus_ud_chan_t *chan,
                                     const aptus_ud_peer_t *peer)
{
    if ((peer->conn_id < chan->connect_hint.conn_id) &&
        aptus_ud_chan_is_hint(chan, &peer->addr, peer->remote_key)) {
        chan->connect_hint.conn_id = peer->conn_id;
    }
}

static void aptus_ud_chan_complete_flushes(aptus_ud_chan_t *chan,
                                           aptus_ud_peer_t *peer,
                                           ucs_status_t status);

/* A failed peer without an endpoint leaves the lookup table at once, so
 * that its stream number is free for a new stream, and waits on the
 * reclaim list until nothing refers to it any more. Datagrams of the dead
 * stream then find no peer: they are answered with a reset unless they
 * look like the start of a new stream (aptus_ud_rx_is_stream_start). */
static void aptus_ud_chan_peer_bury(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer)
{
    aptus_ud_peer_t **dead;
    khiter_t iter;
    unsigned max;

    if (peer->flags & (APTUS_UD_PEER_DEAD | APTUS_UD_PEER_USER)) {
        return;
    }
    if (chan->num_dead == chan->max_dead) {
        max  = chan->max_dead * 2 + 16;
        dead = ucs_realloc(chan->dead, max * sizeof(*dead), "aptus_ud_dead");
        if (dead == NULL) {
            return; /* stays a tombstone: still correct, only not freed */
        }
        chan->dead     = dead;
        chan->max_dead = max;
    }
    iter = kh_get(aptus_ud_peers, &chan->peers, peer);
    ucs_assert(iter != kh_end(&chan->peers));
    kh_del(aptus_ud_peers, &chan->peers, iter);
    peer->flags |= APTUS_UD_PEER_DEAD;
    chan->dead[chan->num_dead++] = peer;
}

void aptus_ud_chan_peer_disconnect(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_chan_hint_lower(chan, peer);
    /* Completions found in async context come first: they were reported
     * before the flushes that cover them, and nothing of this endpoint may
     * run after it is gone. */
    aptus_ud_comp_list_dispatch(&chan->async_comps);
    peer->flags = (peer->flags & ~APTUS_UD_PEER_USER) | APTUS_UD_PEER_USER_GONE;
    if (peer->ext != NULL) {
        ucs_arbiter_group_purge(&chan->pending, &peer->ext->pending,
                                aptus_ud_pending_drop_cb, NULL);
        aptus_ud_peer_ext_try_release(chan, peer);
    }
    /* Data already accepted keeps flowing; zero-copy data is copied so the
     * user's buffers are free once the endpoint is gone. */
    aptus_ud_tx_take_ownership(chan, peer);
    /* Its flushes cannot complete for it any more: cancelled, as UCX's
     * transports do on endpoint destroy. */
    if (peer->flags & APTUS_UD_PEER_FLUSH) {
        aptus_ud_chan_complete_flushes(chan, peer, UCS_ERR_CANCELED);
    }
    if (peer->flags & APTUS_UD_PEER_FAILED) {
        aptus_ud_chan_peer_bury(chan, peer);
    }
}

static int aptus_ud_chan_peer_referenced(aptus_ud_chan_t *chan,
                                         aptus_ud_peer_t *peer)
{
    aptus_ud_rx_msg_t *msg;

    if ((peer->flags & (APTUS_UD_PEER_USER | APTUS_UD_PEER_IN_ACK |
                        APTUS_UD_PEER_IN_SOON | APTUS_UD_PEER_FLUSH)) ||
        (peer->ext != NULL) || (peer->active_idx != UINT32_MAX) ||
        !aptus_rel_tx_is_idle(&peer->tx)) {
        return 1;
    }
    /* messages received before it failed still name it (rare: only while
     * sync-only handlers wait for the user's progress) */
    ucs_queue_for_each(msg, &chan->deferred, queue)
    {
        if (msg->peer == peer) {
            return 1;
        }
    }
    return 0;
}

unsigned aptus_ud_chan_reclaim(aptus_ud_chan_t *chan)
{
    aptus_ud_peer_t *peer;
    unsigned i, count = 0;

    /* datagrams waiting in the batch point at their peer's address */
    aptus_ud_tx_batch_flush(chan);
    for (i = 0; i < chan->num_dead;) {
        peer = chan->dead[i];
        if (aptus_ud_chan_peer_referenced(chan, peer)) {
            ++i;
            continue;
        }
        chan->dead[i] = chan->dead[--chan->num_dead];
        aptus_ud_peer_free(chan, peer);
        chan->stats.peers_reclaimed++;
        ++count;
    }
    return count;
}

static void aptus_ud_chan_complete_flushes(aptus_ud_chan_t *chan,
                                           aptus_ud_peer_t *peer,
                                           ucs_status_t status)
{
    aptus_ud_flush_req_t *freq;
    ucs_queue_iter_t iter;
    int remaining = 0;

    ucs_queue_for_each_safe(freq, iter, &chan->flush_reqs, queue)
    {
        if (freq->peer != peer) {
            continue;
        }
        if ((status == UCS_OK) && aptus_psn_lt(peer->tx.acked_psn, freq->psn)) {
            remaining = 1;
            continue;
        }
        ucs_queue_del_iter(&chan->flush_reqs, iter);
        aptus_ud_chan_complete(chan, freq->comp, status);
        ucs_mpool_put(freq);
    }
    if (!remaining) {
        peer->flags &= ~APTUS_UD_PEER_FLUSH;
    }
}

void aptus_ud_chan_tx_progressed(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    if (peer->flags & APTUS_UD_PEER_FLUSH) {
        aptus_ud_chan_complete_flushes(chan, peer, UCS_OK);
    }
    if (aptus_ud_peer_has_pending(peer) &&
        !aptus_ud_tx_window_full(chan, peer)) {
        ucs_arbiter_group_schedule(&chan->pending, &peer->ext->pending);
    }
}

void aptus_ud_chan_peer_fail(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                             ucs_status_t status)
{
    if (peer->flags & APTUS_UD_PEER_FAILED) {
        return;
    }

    ucs_debug("ud_sr: stream %u to key 0x%016" PRIx64 " failed: %s",
              peer->conn_id, peer->remote_key, ucs_status_string(status));
    peer->flags |= APTUS_UD_PEER_FAILED;
    chan->stats.peers_failed++;
    if (peer->flags & APTUS_UD_PEER_OPENING) {
        aptus_ud_chan_opening_leave(chan, peer);
    }
    aptus_ud_tx_purge(chan, peer, status);
    aptus_ud_chan_complete_flushes(chan, peer, status);
    aptus_ud_rx_release_peer(chan, peer);
    aptus_ud_chan_deactivate(chan, peer);
    if (peer->ext != NULL) {
        peer->ext->path_probe = 0;
        /* pending requests are the user's to purge; let them run (and fail) */
        if (!ucs_arbiter_group_is_empty(&peer->ext->pending)) {
            ucs_arbiter_group_schedule(&chan->pending, &peer->ext->pending);
        }
        aptus_ud_peer_ext_try_release(chan, peer);
    }
    if (chan->ops->peer_failed != NULL) {
        chan->ops->peer_failed(chan->ops_arg, peer, status);
    }
    aptus_ud_chan_peer_bury(chan, peer);
}

void aptus_ud_chan_peer_invalidate(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_ENDPOINT_TIMEOUT);
}

/* A probe is due, or the size being probed is given up. */
static void aptus_ud_chan_path_timer(aptus_ud_chan_t *chan,
                                     aptus_ud_peer_t *peer)
{
    aptus_ud_peer_ext_t *ext = peer->ext;
    char buf[64];

    if (chan->now_us < ext->path_due_us) {
        goto out;
    }
    if (ext->path_tries < APTUS_UD_PATH_TRIES) {
        aptus_ud_tx_path_probe(chan, peer, ext->path_probe);
        ext->path_due_us = chan->now_us + ((uint64_t)APTUS_UD_PATH_PROBE_US
                                           << ext->path_tries);
        ext->path_tries++;
        chan->stats.path_probes++;
        goto out;
    }

    /* every probe of this size lost while the stream lives: the path drops
     * it (a switch or a hop with a smaller MTU than both ends) */
    chan->stats.path_lost++;
    ucs_diag("ud_sr: %s drops datagrams of %u bytes (both ends take %u); "
             "using %zu",
             chan->wire->ops->addr_str(&peer->addr, buf, sizeof(buf)),
             ext->path_probe, ext->path_want,
             (ext->path_probe > APTUS_UD_PATH_ETHERNET) &&
                     (aptus_ud_peer_mtu(chan, peer) < APTUS_UD_PATH_ETHERNET)
                 ? (size_t)APTUS_UD_PATH_ETHERNET
                 : aptus_ud_peer_mtu(chan, peer));
    if ((ext->path_probe > APTUS_UD_PATH_ETHERNET) &&
        (aptus_ud_peer_mtu(chan, peer) < APTUS_UD_PATH_ETHERNET)) {
        ext->path_probe  = APTUS_UD_PATH_ETHERNET; /* jumbo frames lost */
        ext->path_tries  = 0;
        ext->path_due_us = chan->now_us;
    } else {
        ext->path_probe = 0;
        return;
    }

out:
    if (ext->path_due_us < chan->next_due_us) {
        chan->next_due_us = ext->path_due_us;
    }
}

void aptus_ud_chan_path_confirmed(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                  size_t size)
{
    aptus_ud_peer_ext_t *ext = peer->ext;

    if ((ext == NULL) || (ext->path_probe == 0) || (size != ext->path_probe)) {
        return; /* stale, duplicated, or not asked for */
    }
    aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, size));
    ext->path_probe = 0;
    chan->stats.path_raised++;
    aptus_ud_peer_ext_try_release(chan, peer);
}

void aptus_ud_chan_tick(aptus_ud_chan_t *chan)
{
    const aptus_rel_config_t *cfg = &chan->config.rel;
    aptus_rel_timer_status_t tstatus;
    aptus_ud_tx_ctx_t ctx;
    aptus_ud_peer_t *peer;
    unsigned i, resent;
    uint64_t due;
    int probe;

    chan->last_tick_us = chan->now_us;
    chan->next_due_us  = UINT64_MAX;
    ctx.chan           = chan;
    ctx.status         = UCS_OK;

    for (i = 0; i < chan->num_active;) {
        peer = chan->active[i];
        if (ucs_unlikely(peer->flags & APTUS_UD_PEER_FAILED)) {
            aptus_ud_chan_deactivate(chan, peer);
            continue;
        }

        /* Delayed ACK: whatever was not piggybacked by now goes alone. */
        if (aptus_rel_rx_has_unacked(&peer->rx)) {
            aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_ACK, 0);
        }

        if (!aptus_rel_tx_is_idle(&peer->tx)) {
            ctx.peer = peer;
            if (peer->tx.sacked) {
                chan->stats.tx_fast_retransmits += aptus_rel_tx_fast_retransmit(
                    &peer->tx, cfg, chan->now_us, aptus_ud_tx_resend, &ctx);
            }
            /* one pass over the window: resends, probe, next due time */
            tstatus = aptus_rel_tx_timer(&peer->tx, cfg, chan->now_us,
                                         aptus_ud_tx_resend, &ctx, &resent,
                                         &probe, &due);
            if (due < chan->next_due_us) {
                chan->next_due_us = due;
            }
            chan->stats.tx_retransmits += resent;
            if (probe) {
                aptus_ud_tx_probe(chan, peer);
                chan->stats.tx_probes++;
            }
            if (tstatus == APTUS_REL_TIMER_FAILED) {
                /* what a user needs to tell a dead peer from a stream the
                 * two sides no longer agree on */
                ucs_diag("ud_sr: stream %u to key 0x%016" PRIx64 " timed "
                         "out: sent up to psn %u, acknowledged %u, receiving "
                         "psn %u; interface totals: bad acks %" PRIu64
                         ", out of window %" PRIu64 ", duplicates %" PRIu64,
                         peer->conn_id, peer->remote_key, peer->tx.next_psn,
                         peer->tx.acked_psn, peer->rx.expected,
                         chan->stats.rx_bad_ack, chan->stats.rx_out_of_window,
                         chan->stats.rx_duplicates);
                aptus_ud_tx_batch_flush(chan);
                aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_ENDPOINT_TIMEOUT);
                /* Should the peer be alive after all (a long partition),
                 * its side of the stream dies too: a later endpoint may
                 * reuse the stream number once this one is reclaimed. */
                aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_RESET, 0);
                continue; /* removed from the active set: same index again */
            }
        }

        if (ucs_unlikely((peer->ext != NULL) && peer->ext->path_probe)) {
            aptus_ud_chan_path_timer(chan, peer);
        }

        if (aptus_rel_tx_is_idle(&peer->tx) &&
            !aptus_rel_rx_has_unacked(&peer->rx) &&
            ((peer->ext == NULL) ||
             ((peer->ext->held == NULL) && (peer->ext->path_probe == 0)))) {
            aptus_ud_chan_deactivate(chan, peer);
            aptus_ud_peer_ext_try_release(chan, peer);
            continue;
        }
        ++i;
    }
    aptus_ud_tx_batch_flush(chan);
}

void aptus_ud_comp_list_add(aptus_ud_comp_list_t *list, uct_completion_t *comp,
                            ucs_status_t status)
{
    aptus_ud_comp_t *comps;
    unsigned max;

    if (list->num == list->max) {
        max   = list->max * 2 + 16;
        comps = ucs_realloc(list->comps, max * sizeof(*comps),
                            "aptus_ud_comp_list");
        if (comps == NULL) {
            ucs_error("ud_sr: cannot defer a completion; running it now");
            uct_invoke_completion(comp, status);
            return;
        }
        list->comps = comps;
        list->max   = max;
    }
    list->comps[list->num].comp   = comp;
    list->comps[list->num].status = status;
    list->num++;
}

unsigned aptus_ud_comp_list_dispatch_slow(aptus_ud_comp_list_t *list)
{
    aptus_ud_comp_t c;
    unsigned n = 0;

    /* a callback may add more, or dispatch the list itself */
    while (list->first < list->num) {
        c = list->comps[list->first++];
        uct_invoke_completion(c.comp, c.status);
        ++n;
    }
    list->first = 0;
    list->num   = 0;
    return n;
}

void aptus_ud_comp_list_cleanup(aptus_ud_comp_list_t *list)
{
    aptus_ud_comp_list_dispatch(list);
    ucs_free(list->comps);
    list->comps = NULL;
    list->max   = 0;
}

void aptus_ud_chan_complete(aptus_ud_chan_t *chan, uct_completion_t *comp,
                            ucs_status_t status)
{
    if (chan->in_async) {
        aptus_ud_comp_list_add(&chan->async_comps, comp, status);
    } else {
        uct_invoke_completion(comp, status);
    }
}

unsigned aptus_ud_chan_progress(aptus_ud_chan_t *chan, int is_async)
{
    unsigned count = 0;

    aptus_ud_chan_now(chan);
    chan->in_async = is_async;
    if (!is_async) {
        chan->last_sync_us = chan->now_us;
        count += aptus_ud_comp_list_dispatch(&chan->async_comps);
        if (!ucs_queue_is_empty(&chan->deferred)) {
            count +=
                aptus_ud_rx_dispatch_deferred(chan, chan->config.rx_budget);
        }
    }
    if (chan->num_soon > 0) {
        aptus_ud_rx_flush_soon_acks(chan);
    }

    count += aptus_ud_rx_progress(chan, is_async);
    chan->wire->ops->progress(chan->wire, chan->now_us);

    if (((chan->now_us - chan->last_tick_us) >= chan->config.tick_us) ||
        (chan->now_us >= chan->next_due_us)) {
        aptus_ud_chan_tick(chan);
    }

    /* In async context only the requests added with UCT_CB_FLAG_ASYNC run
     * (UCP's wireup proxies); the others wait for the user's progress. */
    if (!ucs_arbiter_is_empty(&chan->pending)) {
        aptus_ud_chan_dispatch_pending(chan);
    }
    if (ucs_unlikely(chan->num_dead > 0)) {
        aptus_ud_chan_reclaim(chan);
    }
    chan->in_async = 0;
    return count;
}

static ucs_arbiter_cb_result_t
aptus_ud_pending_dispatch_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                             ucs_arbiter_elem_t *elem, void *arg)
{
    aptus_ud_chan_t *chan = arg;
    aptus_ud_peer_ext_t *ext =
        ucs_container_of(group, aptus_ud_peer_ext_t, pending);
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    ucs_status_t status;

    if (chan->in_async &&
        !(aptus_ud_pending_priv(req)->flags & UCT_CB_FLAG_ASYNC)) {
        /* stays scheduled for the user's progress; order within the
         * endpoint is kept, so later async requests wait behind it */
        return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
    }
    if (!(ext->peer->flags & APTUS_UD_PEER_FAILED) &&
        aptus_ud_tx_window_full(chan, ext->peer)) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
    }

    chan->in_pending = 1;
    status           = req->func(req);
    chan->in_pending = 0;

    if (status == UCS_OK) {
        chan->stats.pending_async += chan->in_async;
    }
    return aptus_pending_result(status, &chan->stats.pending_dispatched);
}

void aptus_ud_chan_dispatch_pending(aptus_ud_chan_t *chan)
{
    ucs_arbiter_dispatch(&chan->pending, 1, aptus_ud_pending_dispatch_cb, chan);
}

ucs_status_t aptus_ud_chan_pending_add(aptus_ud_chan_t *chan,
                                       aptus_ud_peer_t *peer,
                                       uct_pending_req_t *req, unsigned flags)
{
    aptus_ud_peer_ext_t *ext;

    /* A message of several datagrams may not fit a window that is not full,
     * so only an empty window proves that a retry would succeed. */
    if (!aptus_ud_peer_has_pending(peer) &&
        ((peer->flags & APTUS_UD_PEER_FAILED) ||
         aptus_rel_tx_is_idle(&peer->tx))) {
        return UCS_ERR_BUSY;
    }

    ext = aptus_ud_peer_ext_get(chan, peer);
    if (ext == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    uct_pending_req_arb_group_push(&ext->pending, req);
    aptus_ud_pending_priv(req)->flags = flags;
    if (!aptus_ud_tx_window_full(chan, peer)) {
        ucs_arbiter_group_schedule(&chan->pending, &ext->pending);
    }
    aptus_ud_chan_activate(chan, peer);
    return UCS_OK;
}


void aptus_ud_chan_pending_purge(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                 uct_pending_purge_callback_t cb, void *arg)
{
    uct_purge_cb_args_t args = { cb, arg };

    if (peer->ext == NULL) {
        return;
    }
    ucs_arbiter_group_purge(&chan->pending, &peer->ext->pending,
                            aptus_pending_purge_cb, &args);
    aptus_ud_peer_ext_try_release(chan, peer);
}

static ucs_status_t aptus_ud_chan_flush_peer(aptus_ud_chan_t *chan,
                                             aptus_ud_peer_t *peer,
                                             uct_completion_t *comp)
{
    aptus_ud_flush_req_t *freq;

    freq = ucs_mpool_get(&chan->flush_mp);
    if (freq == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    freq->peer = peer;
    freq->comp = comp;
    freq->psn  = peer->tx.next_psn;
    peer->flags |= APTUS_UD_PEER_FLUSH;
    ucs_queue_push(&chan->flush_reqs, &freq->queue);

    /* Someone waits: ask the peer for its acknowledgement now rather than
     * after its delayed-ACK timer. */
    aptus_ud_tx_probe(chan, peer);
    aptus_ud_tx_batch_flush(chan);
    return UCS_INPROGRESS;
}

ucs_status_t aptus_ud_chan_flush(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                 unsigned flags, uct_completion_t *comp)
{
    /* completed operations are reported before the flush that covers them */
    aptus_ud_comp_list_dispatch(&chan->async_comps);
    if (peer->flags & APTUS_UD_PEER_FAILED) {
        return (flags & UCT_FLUSH_FLAG_CANCEL) ? UCS_OK
                                               : UCS_ERR_ENDPOINT_TIMEOUT;
    }

    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        /* Abandon what is in flight: the stream cannot continue with holes,
         * so it dies here and a new endpoint gets a fresh stream. */
        if (!aptus_rel_tx_is_idle(&peer->tx)) {
            peer->flags |= APTUS_UD_PEER_QUIET; /* the user knows */
            aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_CANCELED);
            aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_RESET, 0);
            aptus_ud_tx_batch_flush(chan);
        }
        return UCS_OK;
    }

    if (aptus_ud_peer_has_pending(peer) && !chan->in_pending) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (aptus_rel_tx_is_idle(&peer->tx)) {
        return UCS_OK;
    }
    if (comp == NULL) {
        return UCS_INPROGRESS;
    }
    return aptus_ud_chan_flush_peer(chan, peer, comp);
}

ucs_status_t aptus_ud_chan_flush_all(aptus_ud_chan_t *chan, unsigned flags,
                                     uct_completion_t *comp)
{
    aptus_ud_peer_t *peer;
    unsigned i, busy = 0;
    ucs_status_t status;

    aptus_ud_comp_list_dispatch(&chan->async_comps);
    for (i = 0; i < chan->num_active; ++i) {
        if (!aptus_rel_tx_is_idle(&chan->active[i]->tx)) {
            ++busy;
        }
    }
    if (busy == 0) {
        return UCS_OK;
    }
    if (comp == NULL) {
        return UCS_INPROGRESS;
    }

    /* One request per busy peer, all on the caller's completion. */
    for (i = 0; i < chan->num_active; ++i) {
        peer = chan->active[i];
        if (aptus_rel_tx_is_idle(&peer->tx)) {
            continue;
        }
        comp->count++;
        status = aptus_ud_chan_flush_peer(chan, peer, comp);
        if (status != UCS_INPROGRESS) {
            comp->count--;
            return status;
        }
    }
    /* The caller's own count unit completes with the last peer. */
    uct_invoke_completion(comp, UCS_OK);
    return UCS_INPROGRESS;
}

size_t aptus_ud_chan_peer_bytes(const aptus_ud_chan_t *chan)
{
    size_t n       = kh_size(&chan->peers);
    size_t buckets = kh_n_buckets(&chan->peers);
    size_t table   = buckets * sizeof(aptus_ud_peer_t *) +
                   ((buckets < 16) ? 1 : (buckets >> 4)) * sizeof(khint32_t);
    size_t elem =
        ucs_align_up(sizeof(ucs_mpool_elem_t) + chan->config.peer_headroom +
                         sizeof(aptus_ud_peer_t),
                     UCS_SYS_CACHE_LINE_SIZE / 8);

    return elem + ((n == 0) ? 0 : ucs_div_round_up(table, n));
}

/* The channel interface (chan.h): UD-SR sends eager messages. */

static ucs_status_t aptus_ud_iface_peer_connect(aptus_chan_t *chan,
                                                const void *remote,
                                                void *storage,
                                                aptus_chan_peer_t **peer_p)
{
    const aptus_ud_remote_t *r = remote;

    return aptus_ud_chan_peer_connect(ucs_derived_of(chan, aptus_ud_chan_t),
                                      r->addr, r->remote_key, r->mtu,
                                      (aptus_ud_peer_t **)peer_p);
}

static void aptus_ud_iface_peer_disconnect(aptus_chan_t *chan,
                                           aptus_chan_peer_t *peer)
{
    aptus_ud_chan_peer_disconnect(ucs_derived_of(chan, aptus_ud_chan_t),
                                  (aptus_ud_peer_t *)peer);
}

static ssize_t aptus_ud_iface_send(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                                   const aptus_chan_send_t *send)
{
    return aptus_ud_chan_send(ucs_derived_of(chan, aptus_ud_chan_t),
                              (aptus_ud_peer_t *)peer, send);
}

static ucs_status_t aptus_ud_iface_flush(aptus_chan_t *chan,
                                         aptus_chan_peer_t *peer,
                                         unsigned flags, uct_completion_t *comp)
{
    return aptus_ud_chan_flush(ucs_derived_of(chan, aptus_ud_chan_t),
                               (aptus_ud_peer_t *)peer, flags, comp);
}

static ucs_status_t aptus_ud_iface_pending_add(aptus_chan_t *chan,
                                               aptus_chan_peer_t *peer,
                                               uct_pending_req_t *req,
                                               unsigned flags)
{
    return aptus_ud_chan_pending_add(ucs_derived_of(chan, aptus_ud_chan_t),
                                     (aptus_ud_peer_t *)peer, req, flags);
}

static void aptus_ud_iface_pending_purge(aptus_chan_t *chan,
                                         aptus_chan_peer_t *peer,
                                         uct_pending_purge_callback_t cb,
                                         void *arg)
{
    aptus_ud_chan_pending_purge(ucs_derived_of(chan, aptus_ud_chan_t),
                                (aptus_ud_peer_t *)peer, cb, arg);
}

static ucs_status_t aptus_ud_iface_check(aptus_chan_t *chan,
                                         aptus_chan_peer_t *peer)
{
    return aptus_ud_chan_check(ucs_derived_of(chan, aptus_ud_chan_t),
                               (aptus_ud_peer_t *)peer);
}

static void aptus_ud_iface_invalidate(aptus_chan_t *chan,
                                      aptus_chan_peer_t *peer)
{
    aptus_ud_chan_peer_invalidate(ucs_derived_of(chan, aptus_ud_chan_t),
                                  (aptus_ud_peer_t *)peer);
}

static unsigned aptus_ud_iface_progress(aptus_chan_t *chan, int is_async)
{
    return aptus_ud_chan_progress(ucs_derived_of(chan, aptus_ud_chan_t),
                                  is_async);
}

const aptus_chan_ops_t aptus_ud_chan_iface_ops = {
    .type            = APTUS_CHAN_UD_SR,
    .peer_size       = 0, /* streams are the channel's */
    .peer_connect    = aptus_ud_iface_peer_connect,
    .peer_disconnect = aptus_ud_iface_peer_disconnect,
    .send            = aptus_ud_iface_send,
    .put             = NULL,
    .get             = NULL,
    .flush           = aptus_ud_iface_flush,
    .pending_add     = aptus_ud_iface_pending_add,
    .pending_purge   = aptus_ud_iface_pending_purge,
    .check           = aptus_ud_iface_check,
    .invalidate      = aptus_ud_iface_invalidate,
    .progress        = aptus_ud_iface_progress,
};
