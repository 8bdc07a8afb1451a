/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel: set-up and teardown, the progress call, the
 * channel interface (peers, timers, pending and flush have their own files).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_chan_int.h"
#include "base/aptus_numa.h"

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

/* The device writes them: on its NUMA node. */
static ucs_status_t aptus_ud_rx_chunk_alloc(ucs_mpool_t *mp, size_t *size_p,
                                            void **chunk_p)
{
    aptus_ud_chan_t *chan = *(aptus_ud_chan_t **)ucs_mpool_priv(mp);

    return aptus_numa_chunk_alloc(chan->config.numa_node, size_p, chunk_p);
}

/* Pools of received messages (datagrams, reassembled messages): each
 * keeps a pointer to its channel, for the release callback. */
static ucs_mpool_ops_t aptus_ud_rx_mpool_ops = {
    .chunk_alloc   = aptus_ud_rx_chunk_alloc,
    .chunk_release = aptus_numa_chunk_release,
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

static void aptus_ud_tx_batch_cleanup(aptus_ud_tx_batch_t *batch)
{
    ucs_free(batch->tx);
    ucs_free(batch->iov);
    ucs_free(batch->hdrs);
    ucs_free(batch->train_iov);
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
    batch->train_iov =
        ucs_calloc(APTUS_UD_TX_TRAIN_MAX * APTUS_DGRAM_MAX_IOV,
                   sizeof(*batch->train_iov), "aptus_ud_batch_train_iov");
    if ((batch->tx == NULL) || (batch->iov == NULL) || (batch->hdrs == NULL) ||
        (batch->train_iov == NULL)) {
        aptus_ud_tx_batch_cleanup(batch);
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
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
    unsigned rx_pool, rx_max, copy_chunk, copy_max;
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
    if (config->tx_all_bytes == 0) {
        chan->config.tx_all_bytes = SIZE_MAX;
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
        goto err_peer_mp;
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
    /* The copies live only while delivered, deferred or kept by the user:
     * their pools grow in steps of a few receive batches, not of the
     * receive queue (4096 x 2 KiB, all of it touched, for a process that
     * may never hold a message). */
    for (i = 0; i < chan->rx_copy_num; ++i) {
        elem =
            chan->rx_dgram_offset + APTUS_UD_SR_HDR_LEN + chan->rx_copy[i].max;
        copy_max   = ucs_max(config->rx_max * small_elem / elem, 64);
        copy_chunk = ucs_min(
            ucs_max(8 * config->rx_batch * small_elem / elem, 16), copy_max);
        status =
            ucs_mpool_init(&chan->rx_copy[i].mp, sizeof(chan), elem, 0, align,
                           copy_chunk, copy_max, &aptus_ud_rx_mpool_ops,
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

    ucs_array_init_dynamic(&chan->active);
    ucs_array_init_dynamic(&chan->soon_list);
    ucs_array_init_dynamic(&chan->dead);
    status         = ucs_array_reserve(aptus_ud_peer_ptrs, &chan->active,
                                       APTUS_UD_ACTIVE_INIT);
    chan->ack_list = ucs_malloc(config->rx_batch * sizeof(*chan->ack_list),
                                "aptus_ud_ack_list");
    chan->rx_slots = ucs_calloc(config->rx_batch, sizeof(*chan->rx_slots),
                                "aptus_ud_rx_slots");
    if ((status != UCS_OK) || (chan->ack_list == NULL) ||
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
    ucs_array_cleanup_dynamic(&chan->active);
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
err_peer_mp:
    ucs_mpool_cleanup(&chan->peer_mp, 1);
err:
    kh_destroy_inplace(aptus_ud_opening, &chan->opening_per_addr);
    kh_destroy_inplace(aptus_ud_peers, &chan->peers);
    return status;
}

ucs_arbiter_cb_result_t aptus_ud_pending_drop_cb(ucs_arbiter_t *arbiter,
                                                 ucs_arbiter_group_t *group,
                                                 ucs_arbiter_elem_t *elem,
                                                 void *arg)
{
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

static void aptus_ud_chan_peer_free(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer)
{
    aptus_ud_tx_purge(chan, peer, UCS_ERR_CANCELED);
    aptus_ud_peer_win_close(chan, peer);
    aptus_ud_rx_release_peer(chan, peer);
    if (peer->ext != NULL) {
        ucs_arbiter_group_purge(&chan->pending, &peer->ext->pending,
                                aptus_ud_pending_drop_cb, NULL);
        ucs_free(peer->ext);
        peer->ext = NULL;
        chan->num_ext--;
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
    for (i = 0; i < ucs_array_length(&chan->dead); ++i) {
        aptus_ud_chan_peer_free(chan, ucs_array_elem(&chan->dead, i));
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
    ucs_array_cleanup_dynamic(&chan->dead);
    ucs_array_cleanup_dynamic(&chan->active);
    ucs_free(chan->ack_list);
    ucs_array_cleanup_dynamic(&chan->soon_list);
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
    ucs_mpool_cleanup(&chan->peer_mp, 1);
    ucs_free(chan->opening);
    kh_destroy_inplace(aptus_ud_opening, &chan->opening_per_addr);
    kh_destroy_inplace(aptus_ud_peers, &chan->peers);
}

size_t aptus_ud_chan_max_short(const aptus_ud_chan_t *chan)
{
    return chan->single_payload;
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
    if (!ucs_array_is_empty(&chan->soon_list)) {
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
    if (ucs_unlikely(!ucs_array_is_empty(&chan->dead))) {
        aptus_ud_chan_reclaim(chan);
    }
    chan->in_async = 0;
    return count;
}

void aptus_ud_chan_buf_bytes(const aptus_ud_chan_t *chan, size_t *tx_p,
                             size_t *rx_p)
{
    unsigned i;

    *tx_p = 0;
    for (i = 0; i < APTUS_UD_TX_POOLS; ++i) {
        *tx_p += aptus_mpool_bytes(&chan->tx_mp[i]);
    }
    *rx_p =
        aptus_mpool_bytes(&chan->rx_mp) + aptus_mpool_bytes(&chan->reasm_mp);
    for (i = 0; i < chan->rx_copy_num; ++i) {
        *rx_p += aptus_mpool_bytes(&chan->rx_copy[i].mp);
    }
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
    /* what peers hold now beyond the struct: rare state, send windows */
    size_t ext = (size_t)chan->num_ext * sizeof(aptus_ud_peer_ext_t) +
                 (size_t)chan->num_win * sizeof(aptus_ud_peer_win_t);

    return elem + ((n == 0) ? 0 : ucs_div_round_up(table + ext, n));
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
