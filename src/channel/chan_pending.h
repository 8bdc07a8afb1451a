/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: what the channels' pending queues share. Requests wait in a
 * ucs_arbiter group per peer, held in the request's priv space
 * (uct_pending_req_priv_arb_elem); purging hands each to the user's purge
 * callback (UCX's uct_purge_cb_args_t as the argument).
 */
#ifndef APTUS_CHAN_PENDING_H_
#define APTUS_CHAN_PENDING_H_

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/arbiter.h>

static inline ucs_arbiter_cb_result_t
aptus_pending_purge_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                       ucs_arbiter_elem_t *elem, void *arg)
{
    uct_purge_cb_args_t *args = arg;
    uct_pending_req_t *req    = ucs_container_of(elem, uct_pending_req_t, priv);

    if (args->cb != NULL) {
        args->cb(req, args->arg);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

/* What the arbiter does after a pending request ran: sent, it leaves the
 * queue; partly sent (UCS_INPROGRESS), the next group goes first; no room,
 * the peer's queue waits until the channel schedules it again (credits,
 * a window, a backlog that drained). dispatched counts the ones sent. */
static inline ucs_arbiter_cb_result_t aptus_pending_result(ucs_status_t status,
                                                           uint64_t *dispatched)
{
    if (status == UCS_OK) {
        ++*dispatched;
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    } else if (status == UCS_INPROGRESS) {
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP;
    }
    return UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
}

#endif
