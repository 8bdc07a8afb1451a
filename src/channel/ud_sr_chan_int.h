/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel internals shared by its .c files.
 */
#ifndef APTUS_UD_SR_CHAN_INT_H_
#define APTUS_UD_SR_CHAN_INT_H_

#include "ud_sr_chan.h"

#include "base/aptus_log.h"

#include <ucs/datastruct/array.inl>
#include <ucs/debug/log.h>

/* append, reserve and grow of the ucs_arrays in ud_sr_chan.h */
UCS_ARRAY_IMPL(aptus_ud_peer_ptrs, unsigned, aptus_ud_peer_t *,
               static UCS_F_ALWAYS_INLINE)
UCS_ARRAY_IMPL(aptus_ud_comps, unsigned, aptus_ud_comp_t,
               static UCS_F_ALWAYS_INLINE)

/* Removes element idx of a set of peers: the last one takes its place.
 * Returns the peer moved there. */
static inline aptus_ud_peer_t *
aptus_ud_peer_set_remove(aptus_ud_peer_set_t *set, unsigned idx)
{
    aptus_ud_peer_t *last = *ucs_array_last(set);

    ucs_array_set_length(set, ucs_array_length(set) - 1);
    ucs_array_elem(set, idx) = last;
    return last;
}

/* A flush request waiting for a peer's window to drain up to psn. */
typedef struct aptus_ud_flush_req {
    ucs_queue_elem_t queue;
    aptus_ud_peer_t *peer;
    uct_completion_t *comp;
    aptus_psn_t psn;
} aptus_ud_flush_req_t;

/* What a pending request keeps in its priv space: the arbiter element, and
 * the flags of uct_ep_pending_add (UCT_CB_FLAG_ASYNC: may run from the async
 * context). */
typedef struct aptus_ud_pending_priv {
    uct_pending_req_priv_arb_t arb;
    unsigned flags;
} aptus_ud_pending_priv_t;

static inline aptus_ud_pending_priv_t *
aptus_ud_pending_priv(uct_pending_req_t *req)
{
    UCS_STATIC_ASSERT(sizeof(aptus_ud_pending_priv_t) <=
                      UCT_PENDING_REQ_PRIV_LEN);
    return (aptus_ud_pending_priv_t *)req->priv;
}

static inline void *aptus_ud_tx_msg_data(aptus_ud_chan_t *chan,
                                         aptus_ud_tx_msg_t *msg)
{
    return UCS_PTR_BYTE_OFFSET(msg, chan->tx_data_offset[msg->pool]);
}

static inline void *aptus_ud_rx_dgram(aptus_ud_chan_t *chan,
                                      aptus_ud_rx_desc_t *desc)
{
    return UCS_PTR_BYTE_OFFSET(desc, chan->rx_dgram_offset);
}

static inline void *aptus_ud_reasm_data(aptus_ud_chan_t *chan,
                                        aptus_ud_reasm_t *reasm)
{
    return UCS_PTR_BYTE_OFFSET(reasm, chan->reasm_data_offset);
}

/* The receive window's map of held datagrams, kept in the rare state (it
 * exists whenever something is held). */
static inline aptus_rel_rx_map_t *aptus_ud_peer_rx_map(aptus_ud_peer_t *peer)
{
    return (peer->ext != NULL) ? &peer->ext->held_map : NULL;
}

static inline int aptus_ud_peer_has_pending(const aptus_ud_peer_t *peer)
{
    return (peer->ext != NULL) &&
           !ucs_arbiter_group_is_empty(&peer->ext->pending);
}

/* Until the remote's token is known, what we send only opens the stream:
 * the remote takes none of it and it all goes again once the handshake
 * is done. So one message opens it, and the rest waits for the answer. */
static inline int aptus_ud_tx_opening(const aptus_ud_peer_t *peer)
{
    return ucs_unlikely(peer->remote_token == 0) &&
           !aptus_rel_tx_is_idle(&peer->win->tx);
}

/* The window is full at TX_WINDOW datagrams or at TX_WINDOW_BYTES of
 * payload in flight. The byte bound keeps large datagrams from parking
 * megabytes per peer in buffers and socket queues: past the caches every
 * copy goes to memory (a full window of 32 KiB datagrams is 32 MiB). One
 * message may pass the bound, so none is too large to send. */
static inline int aptus_ud_tx_window_full(const aptus_ud_chan_t *chan,
                                          const aptus_ud_peer_t *peer)
{
    return (peer->win != NULL) &&
           (aptus_rel_tx_window_full(&peer->win->tx, &chan->config.rel) ||
            (peer->win->tx_bytes >= chan->config.tx_max_bytes) ||
            aptus_ud_tx_opening(peer));
}

/* Whether the datagram just pushed asks for an ACK: the window half full
 * in datagrams or in bytes, at most one ask in APTUS_REL_ASK_EVERY. */
static inline int aptus_ud_tx_want_ack(aptus_ud_chan_t *chan,
                                       aptus_ud_peer_t *peer)
{
    aptus_rel_tx_t *tx = &peer->win->tx;

    return aptus_rel_tx_ask(
        tx, &chan->config.rel,
        aptus_rel_tx_want_ack(tx, &chan->config.rel) ||
            (peer->win->tx_bytes * 2 >= chan->config.tx_max_bytes));
}

static inline void aptus_ud_chan_activate(aptus_ud_chan_t *chan,
                                          aptus_ud_peer_t *peer)
{
    if (peer->active_idx == UINT32_MAX) {
        /* room for every peer was reserved when it was created */
        ucs_assert(ucs_array_available_length(&chan->active) > 0);
        peer->active_idx = ucs_array_length(&chan->active);
        *ucs_array_append_fixed(aptus_ud_peer_ptrs, &chan->active) = peer;
    }
}

static inline uint64_t aptus_ud_chan_now(aptus_ud_chan_t *chan)
{
    chan->now_us = chan->clock();
    return chan->now_us;
}

/* ud_sr_chan.c */
/* the size class of mtu bytes (made if new) */
unsigned aptus_ud_chan_dg_class(aptus_ud_chan_t *chan, size_t mtu);
ucs_arbiter_cb_result_t aptus_ud_pending_drop_cb(ucs_arbiter_t *arbiter,
                                                 ucs_arbiter_group_t *group,
                                                 ucs_arbiter_elem_t *elem,
                                                 void *arg);

/* ud_sr_peer.c */
void aptus_ud_chan_deactivate(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);
/* Open the peer's send window (and activate it); UCS_ERR_NO_MEMORY. */
ucs_status_t aptus_ud_peer_win_open(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer);
/* Give an idle window back, its PSN and RTT parked in the peer. */
void aptus_ud_peer_win_close(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);
aptus_ud_peer_ext_t *aptus_ud_peer_ext_get(aptus_ud_chan_t *chan,
                                           aptus_ud_peer_t *peer);
/* A peer goes back to the pool with its owner's headroom. */
static inline void aptus_ud_peer_free(aptus_ud_chan_t *chan,
                                      aptus_ud_peer_t *peer)
{
    if (chan->ops->peer_free != NULL) {
        chan->ops->peer_free(chan->ops_arg, peer);
    }
    ucs_mpool_put(
        UCS_PTR_BYTE_OFFSET(peer, -(ptrdiff_t)chan->config.peer_headroom));
}

void aptus_ud_peer_ext_try_release(aptus_ud_chan_t *chan,
                                   aptus_ud_peer_t *peer);
aptus_ud_peer_t *aptus_ud_chan_peer_find(aptus_ud_chan_t *chan,
                                         const aptus_wire_addr_t *addr,
                                         uint64_t remote_key, uint16_t conn_id);

/* The peer of a stream, if any: the last one found, else the hash. */
static UCS_F_ALWAYS_INLINE aptus_ud_peer_t *
aptus_ud_chan_peer_lookup(aptus_ud_chan_t *chan, const aptus_wire_addr_t *addr,
                          uint64_t remote_key, uint16_t conn_id)
{
    aptus_ud_peer_t *peer = chan->last_peer;

    if (ucs_likely((peer != NULL) && (peer->remote_key == remote_key) &&
                   (peer->conn_id == conn_id) &&
                   !memcmp(peer->addr.raw, addr->raw, APTUS_WIRE_ADDR_LEN))) {
        return peer;
    }
    return aptus_ud_chan_peer_find(chan, addr, remote_key, conn_id);
}
aptus_ud_peer_t *aptus_ud_chan_peer_create(aptus_ud_chan_t *chan,
                                           const aptus_wire_addr_t *addr,
                                           uint64_t remote_key,
                                           uint16_t conn_id);
void aptus_ud_chan_peer_fail(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                             ucs_status_t status);
/* A random non-zero token for a new incarnation; 0 if the OS gives none. */
uint32_t aptus_ud_chan_token(aptus_ud_chan_t *chan);
/* The remote side opens a stream (data with dest token 0): its half of the
 * handshake, counted among the unconfirmed (NULL: refused or no room,
 * counted). */
aptus_ud_peer_t *aptus_ud_chan_peer_open(aptus_ud_chan_t *chan,
                                         const aptus_wire_addr_t *addr,
                                         uint64_t remote_key, uint16_t conn_id,
                                         uint32_t remote_token);
/* The stream is confirmed or taken by an endpoint: no longer unconfirmed. */
void aptus_ud_chan_opening_leave(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);

/* ud_sr_timer.c */
void aptus_ud_chan_tick(aptus_ud_chan_t *chan);
/* a peer's size class */
void aptus_ud_chan_set_class(aptus_ud_peer_t *peer, unsigned cls);
void aptus_ud_chan_path_start(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                              size_t want);
/* A probe of size bytes was answered: the path carries it. */
void aptus_ud_chan_path_confirmed(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                  size_t size);

/* ud_sr_flush.c */
void aptus_ud_chan_tx_progressed(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);
void aptus_ud_chan_complete_flushes(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer, ucs_status_t status);
void aptus_ud_chan_dispatch_pending(aptus_ud_chan_t *chan);
/* Complete comp now in the user's thread, or from its next progress call
 * when found in async context (UCT users expect completions there). */
void aptus_ud_chan_complete(aptus_ud_chan_t *chan, uct_completion_t *comp,
                            ucs_status_t status);

/* ud_sr_tx.c */
void aptus_ud_tx_release(void *arg, aptus_rel_txe_t *txe);
void aptus_ud_tx_resend(void *arg, aptus_rel_txe_t *txe);
void aptus_ud_tx_batch_flush(aptus_ud_chan_t *chan);
/* Ask the peer for an acknowledgement of everything outstanding. */
void aptus_ud_tx_probe(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);
/* A path probe of size bytes, and the answer to one that arrived. */
void aptus_ud_tx_path_probe(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                            size_t size);
void aptus_ud_tx_path_reply(aptus_ud_chan_t *chan, const aptus_wire_addr_t *dst,
                            const aptus_ud_sr_pkt_t *probe);
void aptus_ud_tx_send_ctl(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                          uint8_t type, int ack_req);
void aptus_ud_tx_purge(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                       ucs_status_t status);
void aptus_ud_tx_take_ownership(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);

/* The peer whose window a resend/release callback works on. */
typedef struct aptus_ud_tx_ctx {
    aptus_ud_chan_t *chan;
    aptus_ud_peer_t *peer;
    ucs_status_t status;
} aptus_ud_tx_ctx_t;

/* One line per datagram at UCX_LOG_LEVEL=data: direction, the peer's
 * address and the decoded header (the packet trace). */
void aptus_ud_trace_dgram(aptus_ud_chan_t *chan, const char *dir,
                          const aptus_wire_addr_t *addr,
                          const struct iovec *iov, unsigned iovcnt);

static inline void aptus_ud_trace_tx(aptus_ud_chan_t *chan,
                                     const aptus_dgram_tx_t *tx, unsigned count)
{
    unsigned i;

    if (ucs_unlikely(aptus_log_data_enabled())) {
        for (i = 0; i < count; ++i) {
            aptus_ud_trace_dgram(chan, "tx", tx[i].dst, tx[i].iov,
                                 tx[i].iovcnt);
        }
    }
}

/* ud_sr_rx.c */
/* A receive buffer was wanted at the pool's ceiling: count, say once. */
void aptus_ud_rx_pool_exhausted(aptus_ud_chan_t *chan);
unsigned aptus_ud_rx_progress(aptus_ud_chan_t *chan, int is_async);
unsigned aptus_ud_rx_dispatch_deferred(aptus_ud_chan_t *chan, unsigned max);
void aptus_ud_rx_release_peer(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);
void aptus_ud_rx_flush_acks(aptus_ud_chan_t *chan);
void aptus_ud_rx_flush_soon_acks(aptus_ud_chan_t *chan);

#endif
