/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-SR channel (see rc_sr_chan.h): set-up and teardown,
 * connect and disconnect, send, pending, flush, the channel interface (the
 * wire's events are in rc_sr_link.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_sr_chan_int.h"
#include "chan_pending.h"

#include <inttypes.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/time/time.h>

#include <string.h>

size_t aptus_rc_link_backlog(const aptus_rc_link_t *link)
{
    return (link->conn == NULL) ? 0
                                : link->conn->wire->ops->backlog(link->conn);
}

/* Reads carried over the connection, not complete yet. */
unsigned aptus_rc_link_reads(const aptus_rc_link_t *link)
{
    return ((link->conn == NULL) ||
            (link->conn->wire->ops->reads_outstanding == NULL))
               ? 0
               : link->conn->wire->ops->reads_outstanding(link->conn);
}

/* Requests wait on the link ahead of the caller. The request being
 * dispatched heads its group until its callback returns: what queues behind
 * it was issued later, so its sends and flushes do not wait for those. */
static int aptus_rc_link_waiting(const aptus_rc_chan_t *chan,
                                 const aptus_rc_link_t *link)
{
    return (chan->dispatching != link) &&
           !ucs_arbiter_group_is_empty((ucs_arbiter_group_t *)&link->pending);
}

void aptus_rc_link_init(aptus_rc_link_t *link, unsigned flags,
                        uint32_t tx_credits, uint32_t grant)
{
    memset(link, 0, sizeof(*link));
    link->flags    = flags;
    link->tx_limit = tx_credits;
    aptus_rc_credits_init(&link->fc, tx_credits, grant);
    ucs_arbiter_group_init(&link->pending);
    ucs_queue_head_init(&link->flushes);
}

void aptus_rc_link_complete_flushes(aptus_rc_link_t *link, ucs_status_t status)
{
    aptus_rc_flush_t *flush;

    while (!ucs_queue_is_empty(&link->flushes)) {
        flush = ucs_queue_pull_elem_non_empty(&link->flushes, aptus_rc_flush_t,
                                              queue);
        if (flush->comp != NULL) {
            uct_invoke_completion(flush->comp, status);
        }
        ucs_free(flush);
    }
}

void aptus_rc_link_report(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    if (link->flags & APTUS_RC_LINK_REPORTED) {
        return;
    }
    link->flags |= APTUS_RC_LINK_REPORTED;
    chan->ops->peer_failed(chan->arg, link, link->error);
}

ucs_status_t aptus_rc_chan_init(aptus_rc_chan_t *chan, aptus_conn_wire_t *wire,
                                const aptus_rc_chan_config_t *config,
                                uint64_t local_key,
                                const aptus_rc_chan_ops_t *ops, void *arg)
{
    memset(chan, 0, sizeof(*chan));
    chan->staging = ucs_malloc(config->max_msg, "aptus_rc_staging");
    if (chan->staging == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    chan->super.ops = &aptus_rc_chan_iface_ops;
    chan->wire      = wire;
    chan->config    = *config;
    chan->local_key = local_key;
    chan->ops       = ops;
    chan->arg       = arg;
    ucs_arbiter_init(&chan->pending);
    ucs_list_head_init(&chan->links);
    return UCS_OK;
}

void aptus_rc_chan_cleanup(aptus_rc_chan_t *chan)
{
    aptus_rc_link_t *link;

    /* merges in progress end here: no link fails another as it goes */
    ucs_list_for_each(link, &chan->links, list)
    {
        link->flags &= ~(APTUS_RC_LINK_SWITCHING | APTUS_RC_LINK_CLAIMED);
        link->switch_to = NULL;
    }
    /* each step removes the first link (and may append an orphan) */
    while (!ucs_list_is_empty(&chan->links)) {
        link = ucs_list_head(&chan->links, aptus_rc_link_t, list);
        if (link->flags & APTUS_RC_LINK_USER) {
            ucs_warn("rc_sr: link %p of an owner still connected at interface "
                     "close",
                     link);
            link->flags |= APTUS_RC_LINK_PEER_GONE; /* just close it */
            aptus_rc_chan_disconnect(chan, link);
        } else {
            aptus_rc_accepted_free(chan, link);
        }
    }
    ucs_arbiter_cleanup(&chan->pending);
    ucs_free(chan->staging);
}

/* Take a connection the peer opened to us, if one is free. */
static int aptus_rc_chan_share(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                               uint64_t key, uint32_t port, uint16_t tag)
{
    aptus_rc_link_t *acc;
    uint32_t reserved;

    ucs_list_for_each(acc, &chan->links, list)
    {
        /* an orphan said BYE: the peer may close it any time */
        if (((acc->flags & (APTUS_RC_LINK_USER | APTUS_RC_LINK_GREETED |
                            APTUS_RC_LINK_FAILED | APTUS_RC_LINK_CLAIMED |
                            APTUS_RC_LINK_ORPHAN)) != APTUS_RC_LINK_GREETED) ||
            (acc->peer_key != key) || (acc->peer_port != port) ||
            (acc->tag != tag)) {
            continue;
        }
        /* the endpoint's link takes over the accepted one's state */
        reserved       = link->reserved;
        *link          = *acc;
        link->reserved = reserved;
        ucs_arbiter_group_init(&link->pending);
        ucs_queue_head_init(&link->flushes);
        link->flags |= APTUS_RC_LINK_USER;
        link->conn->user = link;
        ucs_list_replace(&acc->list, &link->list);
        ucs_arbiter_group_cleanup(&acc->pending);
        ucs_free(acc);
        chan->num_accepted_links--;
        chan->num_user_links++;
        chan->stats.shared++;
        ucs_debug("rc_sr: link %p takes accepted link %p to 0x%016" PRIx64 "",
                  link, acc, key);
        return 1;
    }
    return 0;
}

ucs_status_t aptus_rc_chan_connect(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                   const aptus_wire_addr_t *addr, uint64_t key,
                                   uint32_t port, uint32_t credits,
                                   uint16_t tag)
{
    uint8_t msg[APTUS_RC_HDR_LEN + APTUS_RC_HELLO_LEN];
    struct iovec iov = { msg, sizeof(msg) };
    aptus_rc_hello_t hello;
    ucs_status_t status;

    if (credits == 0) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (aptus_rc_chan_share(chan, link, key, port, tag)) {
        return UCS_OK;
    }
    aptus_rc_link_init(link, APTUS_RC_LINK_USER | APTUS_RC_LINK_INITIATED,
                       credits, chan->config.credits);
    link->peer_key  = key;
    link->peer_port = port;
    link->tag       = tag;
    link->conn_id   = ++chan->next_conn_id;
    status = chan->wire->ops->connect(chan->wire, addr, link, &link->conn);
    if (status != UCS_OK) {
        return status;
    }

    hello.key      = key;
    hello.src_key  = chan->local_key;
    hello.credits  = chan->config.credits;
    hello.version  = APTUS_RC_VERSION;
    hello.src_port = chan->config.local_port;
    hello.tag      = tag;
    hello.conn_id  = link->conn_id;
    aptus_rc_hdr_pack(msg, APTUS_RC_KIND_HELLO, 0, 0);
    aptus_rc_hello_pack(msg + APTUS_RC_HDR_LEN, &hello);
    status = chan->wire->ops->send(link->conn, &iov, 1);
    if (status != UCS_OK) {
        chan->wire->ops->conn_close(link->conn);
        return status;
    }
    ucs_list_add_tail(&chan->links, &link->list);
    chan->num_user_links++;
    return UCS_OK;
}

void aptus_rc_chan_disconnect(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    aptus_rc_link_t *orphan;

    ucs_debug("rc_sr: link %p flags 0x%x conn %p backlog %zu: its owner "
              "goes",
              link, link->flags, link->conn, aptus_rc_link_backlog(link));
    aptus_rc_link_complete_flushes(link, UCS_ERR_CANCELED);
    if (!ucs_arbiter_group_is_empty(&link->pending)) {
        ucs_warn("rc_sr: link %p closed by its owner with pending requests",
                 link);
        aptus_rc_chan_pending_purge(chan, link, NULL, NULL);
    }
    ucs_arbiter_group_cleanup(&link->pending);
    ucs_list_del(&link->list);
    chan->num_user_links--;
    if (link->conn == NULL) {
        return;
    }

    /* Messages the endpoint sent are the connection's: like UCX's tcp, a
     * destroyed endpoint still delivers them. The connection lingers as an
     * orphan link until its backlog has gone out, and, unless the peer is
     * done already, says BYE and keeps receiving until the peer's BYE (its
     * endpoint may share the connection). */
    orphan = NULL;
    if (!(link->flags & APTUS_RC_LINK_FAILED) &&
        (!(link->flags & APTUS_RC_LINK_PEER_GONE) ||
         (aptus_rc_link_backlog(link) > 0))) {
        orphan = ucs_malloc(sizeof(*orphan), "aptus_rc_orphan_link");
        if (orphan == NULL) {
            ucs_error("rc_sr: no memory to flush link %p at close", link);
        }
    }
    if (orphan == NULL) {
        link->conn->wire->ops->conn_close(link->conn);
        link->conn = NULL;
        return;
    }
    *orphan = *link;
    ucs_arbiter_group_init(&orphan->pending);
    ucs_queue_head_init(&orphan->flushes);
    orphan->flags = (orphan->flags & ~APTUS_RC_LINK_USER) |
                    APTUS_RC_LINK_GREETED | APTUS_RC_LINK_ORPHAN;
    orphan->am_queued  = 0;
    orphan->conn->user = orphan;
    ucs_list_add_tail(&chan->links, &orphan->list);
    chan->num_accepted_links++;
    link->conn = NULL;
    if (!(orphan->flags & APTUS_RC_LINK_PEER_GONE)) {
        orphan->flags |= APTUS_RC_LINK_BYE_OWED;
    }
    aptus_rc_chan_orphan_drained(chan, orphan);
}

/* A send on a failed link reports the failure (if it waited for a use). */
static ucs_status_t aptus_rc_link_error(aptus_rc_chan_t *chan,
                                        aptus_rc_link_t *link)
{
    aptus_rc_link_report(chan, link);
    return link->error;
}

static ucs_status_t
aptus_rc_chan_send_am_flags(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                            uint8_t am_id, const struct iovec *iov,
                            unsigned iovcnt, unsigned flags);

ucs_status_t aptus_rc_chan_send_am(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                   uint8_t am_id, const struct iovec *iov,
                                   unsigned iovcnt)
{
    return aptus_rc_chan_send_am_flags(chan, link, am_id, iov, iovcnt, 0);
}

static ucs_status_t aptus_rc_chan_send_am_flags(aptus_rc_chan_t *chan,
                                                aptus_rc_link_t *link,
                                                uint8_t am_id,
                                                const struct iovec *iov,
                                                unsigned iovcnt, unsigned flags)
{
    struct iovec msg_iov[APTUS_RC_MAX_IOV + 1];
    uint8_t hdr[APTUS_RC_HDR_LEN];
    ucs_status_t status;
    uint16_t credits;
    size_t length = 0;
    unsigned i;

    if (ucs_unlikely(link->flags & APTUS_RC_LINK_FAILED)) {
        return aptus_rc_link_error(chan, link);
    }
    if ((!(flags & APTUS_CHAN_SEND_F_INTERNAL) &&
         aptus_rc_link_waiting(chan, link)) ||
        (link->flags & APTUS_RC_LINK_SWITCHING)) {
        return UCS_ERR_NO_RESOURCE; /* behind those already waiting */
    }
    if (ucs_unlikely(link->fc.tx <= link->reserved) &&
        !(flags & APTUS_CHAN_SEND_F_INTERNAL)) {
        chan->stats.no_credits++;
        return UCS_ERR_NO_RESOURCE;
    }
    if (!aptus_rc_credits_take(&link->fc)) {
        chan->stats.no_credits++;
        return UCS_ERR_NO_RESOURCE;
    }

    credits = aptus_rc_credits_piggyback(&link->fc);
    aptus_rc_hdr_pack(hdr, APTUS_RC_KIND_AM, am_id, credits);
    msg_iov[0].iov_base = hdr;
    msg_iov[0].iov_len  = sizeof(hdr);
    for (i = 0; i < iovcnt; ++i) {
        msg_iov[i + 1] = iov[i];
        length += iov[i].iov_len;
    }
    status = link->conn->wire->ops->send(link->conn, msg_iov, iovcnt + 1);
    if (ucs_likely(status == UCS_OK)) {
        chan->stats.tx_msgs++;
        chan->stats.tx_bytes += length;
        if (aptus_rc_link_backlog(link) > 0) {
            link->am_queued = 1;
        }
        return UCS_OK;
    }
    link->fc.tx++;
    link->fc.owed += credits;
    if (status == UCS_ERR_NO_RESOURCE) {
        chan->stats.backlog_full++;
        return status;
    }
    aptus_rc_link_failed(chan, link, status);
    return aptus_rc_link_error(chan, link);
}

ssize_t aptus_rc_chan_send(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                           const aptus_chan_send_t *send)
{
    struct iovec iov[APTUS_RC_MAX_IOV];
    ucs_status_t status;
    unsigned i, n = 0;
    size_t length;

    switch (send->kind) {
    case APTUS_CHAN_SEND_PACK:
        /* packing is not free: only when the message can go */
        if (!(link->flags & APTUS_RC_LINK_FAILED) &&
            (link->fc.tx <= link->reserved)) {
            chan->stats.no_credits++;
            return UCS_ERR_NO_RESOURCE;
        }
        length = send->pack.cb(chan->staging, send->pack.arg);
        ucs_assertv(length <= chan->config.max_msg, "packed %zu > max %zu",
                    length, chan->config.max_msg);
        iov[0].iov_base = chan->staging;
        iov[0].iov_len  = length;
        status = aptus_rc_chan_send_am_flags(chan, link, send->am_id, iov, 1,
                                             send->flags);
        return (status == UCS_OK) ? (ssize_t)length : status;
    case APTUS_CHAN_SEND_COPY:
    case APTUS_CHAN_SEND_IOV:
        length = send->hdr_len;
        if (send->hdr_len > 0) {
            iov[n].iov_base = (void *)send->hdr;
            iov[n].iov_len  = send->hdr_len;
            ++n;
        }
        if (send->kind == APTUS_CHAN_SEND_COPY) {
            iov[n].iov_base = (void *)send->copy.buffer;
            iov[n].iov_len  = send->copy.length;
            length += send->copy.length;
            ++n;
        } else {
            if (send->iov.iovcnt > APTUS_RC_MAX_IOV - n) {
                return UCS_ERR_INVALID_PARAM;
            }
            /* one pass: gather and count */
            for (i = 0; i < send->iov.iovcnt; ++i) {
                length += send->iov.iov[i].iov_len;
                iov[n++] = send->iov.iov[i];
            }
        }
        if (length > chan->config.max_msg) {
            return UCS_ERR_INVALID_PARAM;
        }
        /* the connection (or its backlog) has the bytes when this returns:
         * an IOV message's completion is not needed */
        return aptus_rc_chan_send_am_flags(chan, link, send->am_id, iov, n,
                                           send->flags);
    }
    return UCS_ERR_INVALID_PARAM;
}

ucs_status_t aptus_rc_chan_rma_check(aptus_rc_chan_t *chan,
                                     aptus_rc_link_t *link)
{
    if (ucs_unlikely(link->flags & APTUS_RC_LINK_FAILED)) {
        return aptus_rc_link_error(chan, link);
    }
    if (aptus_rc_link_waiting(chan, link) || link->am_queued ||
        (link->flags & APTUS_RC_LINK_SWITCHING)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

static ucs_arbiter_cb_result_t
aptus_rc_pending_dispatch_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                             ucs_arbiter_elem_t *elem, void *arg)
{
    aptus_rc_chan_t *chan  = arg;
    aptus_rc_link_t *link  = ucs_container_of(group, aptus_rc_link_t, pending);
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    ucs_status_t status;

    if (link->flags & APTUS_RC_LINK_FAILED) {
        return UCS_ARBITER_CB_RESULT_DESCHED_GROUP;
    }
    chan->dispatching = link;
    status            = req->func(req);
    chan->dispatching = NULL;
    /* no room: rescheduled when credits come back or the backlog drains */
    return aptus_pending_result(status, &chan->stats.pending_dispatched);
}

ucs_status_t aptus_rc_chan_pending_add(aptus_rc_chan_t *chan,
                                       aptus_rc_link_t *link,
                                       uct_pending_req_t *req)
{
    if (ucs_arbiter_group_is_empty(&link->pending) &&
        ((link->flags & APTUS_RC_LINK_FAILED) ||
         ((link->fc.tx > link->reserved) &&
          (aptus_rc_link_backlog(link) == 0) &&
          !(link->flags & APTUS_RC_LINK_SWITCHING)))) {
        return UCS_ERR_BUSY; /* a retry would go through (or fail) now */
    }
    uct_pending_req_arb_group_push(&link->pending, req);
    if ((aptus_rc_link_backlog(link) == 0) &&
        !(link->flags & APTUS_RC_LINK_SWITCHING)) {
        aptus_rc_link_schedule(chan, link);
    }
    return UCS_OK;
}


void aptus_rc_chan_pending_purge(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                 uct_pending_purge_callback_t cb, void *arg)
{
    uct_purge_cb_args_t args = { cb, arg };

    ucs_arbiter_group_purge(&chan->pending, &link->pending,
                            aptus_pending_purge_cb, &args);
}

ucs_status_t aptus_rc_chan_flush(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                 unsigned flags, uct_completion_t *comp)
{
    aptus_rc_flush_t *flush;

    if ((flags & UCT_FLUSH_FLAG_CANCEL) && (chan->dispatching != link)) {
        /* unsent bytes stay in order in the backlog; nothing is in flight
         * that a cancel could stop short of closing the connection (the
         * group being dispatched is not purged under its dispatcher) */
        aptus_rc_chan_pending_purge(chan, link, NULL, NULL);
    }
    /* a flush from a pending callback covers what was issued before it */
    if (aptus_rc_link_waiting(chan, link) ||
        (link->flags & APTUS_RC_LINK_SWITCHING)) {
        return UCS_ERR_NO_RESOURCE;
    }
    if ((link->flags & (APTUS_RC_LINK_FAILED | APTUS_RC_LINK_EOF)) ==
        APTUS_RC_LINK_FAILED) {
        return link->error; /* broken, not closed in order */
    }
    if ((aptus_rc_link_backlog(link) == 0) &&
        (aptus_rc_link_reads(link) == 0)) {
        /* everything is in the connection (puts complete at once, gets at
         * once on this host and when their bytes are in, over the
         * connection); a connection the peer closed in order has nothing
         * left to flush */
        return UCS_OK;
    }
    flush = ucs_malloc(sizeof(*flush), "aptus_rc_flush");
    if (flush == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    flush->comp = comp;
    ucs_queue_push(&link->flushes, &flush->queue);
    return UCS_INPROGRESS;
}

ucs_status_t aptus_rc_chan_flush_all(aptus_rc_chan_t *chan)
{
    aptus_rc_link_t *link;

    ucs_list_for_each(link, &chan->links, list)
    {
        if ((link->flags & APTUS_RC_LINK_USER) &&
            ((aptus_rc_link_backlog(link) > 0) ||
             (aptus_rc_link_reads(link) > 0) ||
             aptus_rc_link_waiting(chan, link))) {
            return UCS_INPROGRESS;
        }
    }
    return UCS_OK;
}

void aptus_rc_chan_invalidate(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    aptus_rc_link_failed(chan, link, UCS_ERR_CANCELED);
}

ucs_status_t aptus_rc_chan_check(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    chan->stats.checks++;
    link->flags |= APTUS_RC_LINK_CHECKED;
    if (link->flags & APTUS_RC_LINK_FAILED) {
        aptus_rc_link_report(chan, link);
        return UCS_OK;
    }
    if (link->flags & APTUS_RC_LINK_PEER_GONE) {
        /* The peer's endpoint said BYE: to UCP's keepalive the peer is
         * gone, as it is over UCX's tcp when the peer closes its socket. */
        aptus_rc_link_failed(chan, link, UCS_ERR_ENDPOINT_TIMEOUT);
        return UCS_OK;
    }
    if (link->conn == NULL) {
        return UCS_OK; /* between two connections of a switch */
    }
    aptus_rc_link_send_ctl(chan, link, APTUS_RC_KIND_NOP);
    return UCS_OK;
}

unsigned aptus_rc_chan_progress(aptus_rc_chan_t *chan)
{
    unsigned count = chan->wire->ops->progress(chan->wire);
    ucs_time_t now;

    if (ucs_unlikely(chan->num_half_open > 0)) {
        now = ucs_get_time();
        if (now >= chan->next_greet_check) {
            aptus_rc_chan_drop_half_open(chan, APTUS_RC_MAX_HALF_OPEN, now);
            chan->next_greet_check = now + ucs_time_from_msec(100);
        }
    }

    if (!ucs_arbiter_is_empty(&chan->pending)) {
        ucs_arbiter_dispatch(&chan->pending, 1, aptus_rc_pending_dispatch_cb,
                             chan);
    }
    return count;
}

void aptus_rc_chan_link_resources(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                  aptus_rc_conn_resources_t *res)
{
    memset(res, 0, sizeof(*res));
    res->state_bytes = sizeof(*link);
    if (link->conn != NULL) {
        link->conn->wire->ops->conn_resources(link->conn, &res->state_bytes,
                                              &res->kernel_bytes, &res->fds);
        res->state_bytes += sizeof(*link);
    }
    /* receive buffers this connection may occupy in the peer's pool */
    res->descriptors = chan->config.credits;
    res->descriptor_bytes =
        (size_t)chan->config.credits * chan->wire->rx_buf_size;
}

/* The channel interface (chan.h): RC-SR sends eager messages. */

static ssize_t aptus_rc_iface_send(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                                   const aptus_chan_send_t *send)
{
    return aptus_rc_chan_send(ucs_derived_of(chan, aptus_rc_chan_t),
                              (aptus_rc_link_t *)peer, send);
}

static ucs_status_t aptus_rc_iface_flush(aptus_chan_t *chan,
                                         aptus_chan_peer_t *peer,
                                         unsigned flags, uct_completion_t *comp)
{
    return aptus_rc_chan_flush(ucs_derived_of(chan, aptus_rc_chan_t),
                               (aptus_rc_link_t *)peer, flags, comp);
}

static ucs_status_t aptus_rc_iface_pending_add(aptus_chan_t *chan,
                                               aptus_chan_peer_t *peer,
                                               uct_pending_req_t *req,
                                               unsigned flags)
{
    return aptus_rc_chan_pending_add(ucs_derived_of(chan, aptus_rc_chan_t),
                                     (aptus_rc_link_t *)peer, req);
}

static void aptus_rc_iface_pending_purge(aptus_chan_t *chan,
                                         aptus_chan_peer_t *peer,
                                         uct_pending_purge_callback_t cb,
                                         void *arg)
{
    aptus_rc_chan_pending_purge(ucs_derived_of(chan, aptus_rc_chan_t),
                                (aptus_rc_link_t *)peer, cb, arg);
}

static ucs_status_t aptus_rc_iface_check(aptus_chan_t *chan,
                                         aptus_chan_peer_t *peer)
{
    return aptus_rc_chan_check(ucs_derived_of(chan, aptus_rc_chan_t),
                               (aptus_rc_link_t *)peer);
}

static void aptus_rc_iface_invalidate(aptus_chan_t *chan,
                                      aptus_chan_peer_t *peer)
{
    aptus_rc_chan_invalidate(ucs_derived_of(chan, aptus_rc_chan_t),
                             (aptus_rc_link_t *)peer);
}

static unsigned aptus_rc_iface_progress(aptus_chan_t *chan, int is_async)
{
    return aptus_rc_chan_progress(ucs_derived_of(chan, aptus_rc_chan_t));
}

static ucs_status_t aptus_rc_iface_peer_connect(aptus_chan_t *chan,
                                                const void *remote,
                                                void *storage,
                                                aptus_chan_peer_t **peer_p)
{
    const aptus_rc_remote_t *r = remote;
    ucs_status_t status;

    status =
        aptus_rc_chan_connect(ucs_derived_of(chan, aptus_rc_chan_t), storage,
                              r->addr, r->key, r->port, r->credits, r->tag);
    if (status == UCS_OK) {
        *peer_p = storage;
    }
    return status;
}

static void aptus_rc_iface_peer_disconnect(aptus_chan_t *chan,
                                           aptus_chan_peer_t *peer)
{
    aptus_rc_chan_disconnect(ucs_derived_of(chan, aptus_rc_chan_t),
                             (aptus_rc_link_t *)peer);
}

const aptus_chan_ops_t aptus_rc_chan_iface_ops = {
    .type            = APTUS_CHAN_RC_SR,
    .peer_size       = sizeof(aptus_rc_link_t),
    .peer_connect    = aptus_rc_iface_peer_connect,
    .peer_disconnect = aptus_rc_iface_peer_disconnect,
    .send            = aptus_rc_iface_send,
    .put             = NULL,
    .get             = NULL,
    .flush           = aptus_rc_iface_flush,
    .pending_add     = aptus_rc_iface_pending_add,
    .pending_purge   = aptus_rc_iface_pending_purge,
    .check           = aptus_rc_iface_check,
    .invalidate      = aptus_rc_iface_invalidate,
    .progress        = aptus_rc_iface_progress,
};
