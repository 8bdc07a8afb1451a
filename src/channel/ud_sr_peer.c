/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel, peers: the active set, lookup and creation,
 * streams the remote sides open, connect, disconnect, failure, reclaim.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_chan_int.h"
#include "proto/random.h"

#include <inttypes.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>

void aptus_ud_chan_deactivate(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    unsigned idx = peer->active_idx;
    aptus_ud_peer_t *moved;

    if (idx == UINT32_MAX) {
        return;
    }
    moved             = aptus_ud_peer_set_remove(&chan->active, idx);
    moved->active_idx = idx;
    peer->active_idx  = UINT32_MAX;
    /* only active peers have a window: the tick is what closes it */
    aptus_ud_peer_win_close(chan, peer);
}

ucs_status_t aptus_ud_peer_win_open(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer)
{
    aptus_ud_peer_win_t *win;

    ucs_assert(peer->win == NULL);
    win = ucs_malloc(sizeof(*win), "aptus_ud_peer_win");
    if (win == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    aptus_rel_tx_unpark(&win->tx, &peer->parked, chan->now_us);
    win->tx_bytes = 0;
    peer->win     = win;
    chan->num_win++;
    aptus_ud_chan_activate(chan, peer);
    return UCS_OK;
}

void aptus_ud_peer_win_close(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_peer_win_t *win = peer->win;

    if (win == NULL) {
        return;
    }
    ucs_assert(aptus_rel_tx_is_idle(&win->tx));
    ucs_assert(win->tx_bytes == 0);
    aptus_rel_tx_park(&win->tx, &peer->parked);
    peer->win = NULL;
    chan->num_win--;
    ucs_free(win);
}

aptus_ud_peer_ext_t *aptus_ud_peer_ext_get(aptus_ud_chan_t *chan,
                                           aptus_ud_peer_t *peer)
{
    aptus_ud_peer_ext_t *ext = peer->ext;

    if (ext == NULL) {
        ext = ucs_malloc(sizeof(*ext), "aptus_ud_peer_ext");
        if (ext == NULL) {
            return NULL;
        }
        chan->num_ext++;
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
    ucs_free(ext);
    peer->ext = NULL;
    chan->num_ext--;
}

aptus_ud_peer_t *aptus_ud_chan_peer_find(aptus_ud_chan_t *chan,
                                         const aptus_wire_addr_t *addr,
                                         uint64_t remote_key, uint16_t conn_id)
{
    aptus_ud_peer_t probe;
    khiter_t iter;

    probe.addr       = *addr;
    probe.remote_key = remote_key;
    probe.conn_id    = conn_id;
    iter             = kh_get(aptus_ud_peers, &chan->peers, &probe);
    if (iter == kh_end(&chan->peers)) {
        return NULL;
    }
    chan->last_peer = kh_key(&chan->peers, iter);
    return chan->last_peer;
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
    if (ucs_array_reserve(aptus_ud_peer_ptrs, &chan->active,
                          kh_size(&chan->peers) + 1) != UCS_OK) {
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
    aptus_rel_tx_parked_init(&peer->parked); /* win: NULL */
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

/* A failed peer without an endpoint leaves the lookup table at once, so
 * that its stream number is free for a new stream, and waits on the
 * reclaim list until nothing refers to it any more. Datagrams of the dead
 * stream then find no peer: they are answered with a reset unless they
 * look like the start of a new stream (aptus_ud_rx_is_stream_start). */
static void aptus_ud_chan_peer_bury(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer)
{
    khiter_t iter;

    if (peer->flags & (APTUS_UD_PEER_DEAD | APTUS_UD_PEER_USER)) {
        return;
    }
    if (ucs_array_reserve(aptus_ud_peer_ptrs, &chan->dead,
                          ucs_array_length(&chan->dead) + 1) != UCS_OK) {
        return; /* stays a tombstone: still correct, only not freed */
    }
    iter = kh_get(aptus_ud_peers, &chan->peers, peer);
    ucs_assert(iter != kh_end(&chan->peers));
    kh_del(aptus_ud_peers, &chan->peers, iter);
    if (chan->last_peer == peer) {
        chan->last_peer = NULL;
    }
    peer->flags |= APTUS_UD_PEER_DEAD;
    *ucs_array_append_fixed(aptus_ud_peer_ptrs, &chan->dead) = peer;
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
        !aptus_ud_peer_tx_idle(peer)) {
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
    for (i = 0; i < ucs_array_length(&chan->dead);) {
        peer = ucs_array_elem(&chan->dead, i);
        if (aptus_ud_chan_peer_referenced(chan, peer)) {
            ++i;
            continue;
        }
        aptus_ud_peer_set_remove(&chan->dead, i);
        aptus_ud_peer_free(chan, peer);
        chan->stats.peers_reclaimed++;
        ++count;
    }
    return count;
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
