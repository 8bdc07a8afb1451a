/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel, completions run later, pending requests and
 * flush.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_chan_int.h"
#include "chan_pending.h"

#include <ucs/debug/memtrack_int.h>

void aptus_ud_chan_complete_flushes(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer, ucs_status_t status)
{
    aptus_ud_flush_req_t *freq;
    ucs_queue_iter_t iter;
    int remaining = 0;

    ucs_queue_for_each_safe(freq, iter, &chan->flush_reqs, queue)
    {
        if (freq->peer != peer) {
            continue;
        }
        if ((status == UCS_OK) &&
            aptus_psn_lt(aptus_ud_peer_acked_psn(peer), freq->psn)) {
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

void aptus_ud_comp_list_add(aptus_ud_comp_list_t *list, uct_completion_t *comp,
                            ucs_status_t status)
{
    if (ucs_array_append(aptus_ud_comps, &list->comps) != UCS_OK) {
        ucs_error("ud_sr: cannot defer a completion; running it now");
        uct_invoke_completion(comp, status);
        return;
    }
    ucs_array_last(&list->comps)->comp   = comp;
    ucs_array_last(&list->comps)->status = status;
}

unsigned aptus_ud_comp_list_dispatch_slow(aptus_ud_comp_list_t *list)
{
    aptus_ud_comp_t c;
    unsigned n = 0;

    /* a callback may add more, or dispatch the list itself */
    while (list->first < ucs_array_length(&list->comps)) {
        c = ucs_array_elem(&list->comps, list->first++);
        uct_invoke_completion(c.comp, c.status);
        ++n;
    }
    list->first                    = 0;
    ucs_array_length(&list->comps) = 0;
    return n;
}

void aptus_ud_comp_list_cleanup(aptus_ud_comp_list_t *list)
{
    aptus_ud_comp_list_dispatch(list);
    ucs_array_cleanup_dynamic(&list->comps);
    ucs_array_init_dynamic(&list->comps);
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
    if (!(ext->peer->flags & APTUS_UD_PEER_FAILED)) {
        if (aptus_ud_tx_window_full(chan, ext->peer)) {
            return UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
        }
        if (aptus_ud_chan_tx_all_full(chan)) {
            return UCS_ARBITER_CB_RESULT_STOP; /* all wait, scheduled */
        }
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
     * so only an empty window proves that a retry would succeed (and only
     * below the interface's bound). */
    if (!aptus_ud_peer_has_pending(peer) &&
        ((peer->flags & APTUS_UD_PEER_FAILED) ||
         (aptus_ud_peer_tx_idle(peer) && !aptus_ud_chan_tx_all_full(chan)))) {
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
    freq->psn  = aptus_ud_peer_next_psn(peer);
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
        if (!aptus_ud_peer_tx_idle(peer)) {
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
    if (aptus_ud_peer_tx_idle(peer)) {
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
    for (i = 0; i < ucs_array_length(&chan->active); ++i) {
        if (!aptus_ud_peer_tx_idle(ucs_array_elem(&chan->active, i))) {
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
    for (i = 0; i < ucs_array_length(&chan->active); ++i) {
        peer = ucs_array_elem(&chan->active, i);
        if (aptus_ud_peer_tx_idle(peer)) {
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
