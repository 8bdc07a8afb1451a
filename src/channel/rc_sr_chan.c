/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-SR channel (see rc_sr_chan.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_sr_chan.h"
#include "chan_pending.h"
#include "../proto/le.h"

#include <inttypes.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/time/time.h>

#include <string.h>

typedef struct aptus_rc_flush {
    ucs_queue_elem_t queue;
    uct_completion_t *comp;
} aptus_rc_flush_t;

static size_t aptus_rc_link_backlog(const aptus_rc_link_t *link)
{
    return (link->conn == NULL) ? 0
                                : link->conn->wire->ops->backlog(link->conn);
}

/* Reads carried over the connection, not complete yet. */
static unsigned aptus_rc_link_reads(const aptus_rc_link_t *link)
{
    return ((link->conn == NULL) ||
            (link->conn->wire->ops->reads_outstanding == NULL))
               ? 0
               : link->conn->wire->ops->reads_outstanding(link->conn);
}

static int aptus_rc_link_idle(const aptus_rc_link_t *link)
{
    return (aptus_rc_link_backlog(link) == 0) &&
           ucs_arbiter_group_is_empty((ucs_arbiter_group_t *)&link->pending) &&
           ucs_queue_is_empty((ucs_queue_head_t *)&link->flushes);
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

static void aptus_rc_link_init(aptus_rc_link_t *link, unsigned flags,
                               uint32_t tx_credits, uint32_t grant)
{
    memset(link, 0, sizeof(*link));
    link->flags    = flags;
    link->tx_limit = tx_credits;
    aptus_rc_credits_init(&link->fc, tx_credits, grant);
    ucs_arbiter_group_init(&link->pending);
    ucs_queue_head_init(&link->flushes);
}

static void aptus_rc_link_complete_flushes(aptus_rc_link_t *link,
                                           ucs_status_t status)
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

static void aptus_rc_link_report(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    if (link->flags & APTUS_RC_LINK_REPORTED) {
        return;
    }
    link->flags |= APTUS_RC_LINK_REPORTED;
    chan->ops->peer_failed(chan->arg, link, link->error);
}

static void aptus_rc_link_failed(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                 ucs_status_t status);

static void aptus_rc_accepted_free(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    aptus_rc_link_t *user;

    ucs_debug("rc_sr: link %p flags 0x%x to 0x%016" PRIx64 " closed", link,
              link->flags, link->peer_key);
    if (link->flags & APTUS_RC_LINK_CLAIMED) {
        /* The connection a switch was moving to is gone. The SWITCH went
         * out on the old one, after which the peer takes nothing there: no
         * connection is left to the peer. */
        ucs_list_for_each(user, &chan->links, list)
        {
            if (user->switch_to == link) {
                user->switch_to = NULL;
                user->flags &= ~APTUS_RC_LINK_SWITCHING;
                aptus_rc_link_failed(chan, user, UCS_ERR_CONNECTION_RESET);
                break;
            }
        }
    }
    if (link->switch_to != NULL) {
        /* an orphan that was moving: the peer's connection stays an
         * accepted one of its own */
        link->switch_to->flags &= ~APTUS_RC_LINK_CLAIMED;
    }
    if (!(link->flags & (APTUS_RC_LINK_USER | APTUS_RC_LINK_GREETED))) {
        chan->num_half_open--;
    }
    link->conn->wire->ops->conn_close(link->conn);
    ucs_list_del(&link->list);
    chan->num_accepted_links--;
    ucs_arbiter_group_cleanup(&link->pending);
    ucs_free(link);
}

/* Close connections accepted and never greeted: the oldest (first in the
 * list) while there are more than max, and every one older than the
 * greeting timeout. */
static void aptus_rc_chan_drop_half_open(aptus_rc_chan_t *chan, unsigned max,
                                         ucs_time_t now)
{
    ucs_time_t timeout = ucs_time_from_msec(APTUS_RC_GREETING_TIMEOUT_MS);
    aptus_rc_link_t *link, *tmp;

    ucs_list_for_each_safe(link, tmp, &chan->links, list)
    {
        if (chan->num_half_open == 0) {
            break;
        }
        if (link->flags & (APTUS_RC_LINK_USER | APTUS_RC_LINK_GREETED)) {
            continue;
        }
        if ((chan->num_half_open <= max) &&
            (now - link->accepted_at < timeout)) {
            break; /* the rest came later */
        }
        chan->stats.half_open_dropped++;
        aptus_rc_accepted_free(chan, link);
    }
}

/* The link's connection is gone. A peer that closed an idle connection in
 * order is told to the owner when it next uses the link; anything else at
 * once. */
static void aptus_rc_link_failed(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                 ucs_status_t status)
{
    /* a keepalive check in flight wants an answer, even for a clean close */
    int clean = (status == UCS_ERR_NOT_CONNECTED) && aptus_rc_link_idle(link) &&
                !(link->flags & APTUS_RC_LINK_CHECKED);

    if (!(link->flags & APTUS_RC_LINK_USER)) {
        aptus_rc_accepted_free(chan, link);
        return;
    }
    if (link->flags & APTUS_RC_LINK_FAILED) {
        return;
    }
    if ((link->flags & APTUS_RC_LINK_SWITCHING) &&
        (status == UCS_ERR_NOT_CONNECTED) && (link->conn != NULL)) {
        /* the peer closed the connection given up, after the SWITCH */
        link->conn->wire->ops->conn_close(link->conn);
        link->conn = NULL;
        return;
    }
    chan->stats.links_failed++;
    link->flags |= APTUS_RC_LINK_FAILED;
    if (link->switch_to != NULL) {
        /* the accepted connection stays the peer's, as any accepted one */
        link->switch_to->flags &= ~APTUS_RC_LINK_CLAIMED;
        link->switch_to = NULL;
        link->flags &= ~APTUS_RC_LINK_SWITCHING;
    }
    /* Whatever broke the connection (reset, close, refusal, a malformed
     * stream), the owner sees the peer as failed: UCP expects
     * UCS_ERR_ENDPOINT_TIMEOUT from the error handler and from the sends
     * after it, as UCX's tcp reports. */
    ucs_debug("rc_sr: link %p to 0x%016" PRIx64 " failed: %s", link,
              link->peer_key, ucs_status_string(status));
    link->error = UCS_ERR_ENDPOINT_TIMEOUT;
    if (clean) {
        link->flags |= APTUS_RC_LINK_EOF;
    }
    if (link->conn != NULL) {
        link->conn->wire->ops->conn_close(link->conn);
        link->conn = NULL;
    }
    aptus_rc_link_complete_flushes(link, link->error);
    if (!clean) {
        aptus_rc_link_report(chan, link);
    }
}

/* A control message (no credit), with an optional body. Credits it could
 * not carry stay owed. */
static ucs_status_t aptus_rc_link_send_msg(aptus_rc_link_t *link, unsigned kind,
                                           const void *body, size_t length)
{
    uint8_t hdr[APTUS_RC_HDR_LEN];
    struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)body, length } };
    uint16_t credits    = aptus_rc_credits_piggyback(&link->fc);
    ucs_status_t status;

    aptus_rc_hdr_pack(hdr, kind, 0, credits);
    status = link->conn->wire->ops->send(link->conn, iov, (length > 0) + 1);
    if (status != UCS_OK) {
        link->fc.owed += credits;
    }
    return status;
}

/* A control message whose loss to a full backlog does no harm (it is
 * sent again later, or was only a check); a broken connection fails the
 * link. */
static void aptus_rc_link_send_ctl(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                   unsigned kind)
{
    ucs_status_t status = aptus_rc_link_send_msg(link, kind, NULL, 0);

    if (status == UCS_OK) {
        if (kind == APTUS_RC_KIND_CREDIT) {
            chan->stats.tx_credits++;
        }
    } else if (status != UCS_ERR_NO_RESOURCE) {
        aptus_rc_link_failed(chan, link, status);
    }
}

static void aptus_rc_link_schedule(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    if (!ucs_arbiter_group_is_empty(&link->pending) && (link->fc.tx > 0)) {
        ucs_arbiter_group_schedule(&chan->pending, &link->pending);
    }
}

static void aptus_rc_chan_accepted(void *arg, aptus_conn_t *conn)
{
    aptus_rc_chan_t *chan = arg;
    aptus_rc_link_t *link;

    link = ucs_malloc(sizeof(*link), "aptus_rc_accepted_link");
    if (link == NULL) {
        ucs_error("rc_sr: no memory for an accepted connection");
        conn->wire->ops->conn_close(conn);
        return;
    }
    /* no credits to send until the peer's HELLO grants some */
    aptus_rc_link_init(link, 0, 0, chan->config.credits);
    link->conn        = conn;
    link->accepted_at = ucs_get_time();
    conn->user        = link;
    ucs_list_add_tail(&chan->links, &link->list);
    chan->num_accepted_links++;
    if (++chan->num_half_open > APTUS_RC_MAX_HALF_OPEN) {
        aptus_rc_chan_drop_half_open(chan, APTUS_RC_MAX_HALF_OPEN,
                                     link->accepted_at);
    }
}

static void aptus_rc_chan_bad_msg(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
{
    chan->stats.rx_malformed++;
    aptus_rc_link_failed(chan, link, UCS_ERR_IO_ERROR);
}

/* An accepted connection was greeted. If an endpoint of ours connected to
 * the same interface at the same time, one of the two connections goes:
 * the side with the larger (key, port) moves to the other's. */
static void aptus_rc_chan_pair(aptus_rc_chan_t *chan, aptus_rc_link_t *acc)
{
    aptus_rc_link_t *user;
    uint8_t body[APTUS_RC_SWITCH_LEN];

    if ((chan->local_key < acc->peer_key) ||
        ((chan->local_key == acc->peer_key) &&
         (chan->config.local_port <= acc->peer_port))) {
        return; /* ours stays: the peer moves, if it has an endpoint */
    }
    ucs_list_for_each(user, &chan->links, list)
    {
        if (((user->flags & (APTUS_RC_LINK_USER | APTUS_RC_LINK_INITIATED |
                             APTUS_RC_LINK_SWITCHING | APTUS_RC_LINK_FAILED)) !=
             (APTUS_RC_LINK_USER | APTUS_RC_LINK_INITIATED)) ||
            (user->peer_key != acc->peer_key) ||
            (user->peer_port != acc->peer_port) || (user->tag != acc->tag)) {
            continue;
        }
        /* the last message on our connection; we send again once the peer
         * has seen it, on the connection it opened */
        aptus_put32(body, acc->conn_id);
        if (aptus_rc_link_send_msg(user, APTUS_RC_KIND_SWITCH, body,
                                   sizeof(body)) != UCS_OK) {
            return; /* keep both connections */
        }
        ucs_debug("rc_sr: link %p to 0x%016" PRIx64
                  " moves to accepted link %p",
                  user, user->peer_key, acc);
        user->flags |= APTUS_RC_LINK_SWITCHING;
        user->switch_to = acc;
        acc->flags |= APTUS_RC_LINK_CLAIMED;
        return;
    }
}

/* Tell the peer its switch to our connection may complete. Never lost to
 * a full backlog (one-sided operations carried over the connection can
 * fill it): the peer's endpoint waits for it, and its flush with it. */
static void aptus_rc_link_switch_ack(aptus_rc_chan_t *chan,
                                     aptus_rc_link_t *link)
{
    ucs_status_t status;

    status = aptus_rc_link_send_msg(link, APTUS_RC_KIND_SWITCH_ACK, NULL, 0);
    if (status == UCS_OK) {
        link->flags &= ~APTUS_RC_LINK_ACK_OWED;
    } else if (status == UCS_ERR_NO_RESOURCE) {
        link->flags |= APTUS_RC_LINK_ACK_OWED; /* sent when it drains */
        chan->stats.switch_acks_owed++;
    } else {
        aptus_rc_link_failed(chan, link, status);
    }
}

/* The peer gave up its connection (on link) for ours named conn_id. */
static void aptus_rc_chan_switch(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                 uint32_t conn_id)
{
    aptus_rc_link_t *ours;

    ucs_debug("rc_sr: link %p: peer 0x%016" PRIx64 " moves to connection %u",
              link, link->peer_key, conn_id);
    ucs_list_for_each(ours, &chan->links, list)
    {
        if ((ours->flags & APTUS_RC_LINK_INITIATED) && (ours->conn != NULL) &&
            !(ours->flags & APTUS_RC_LINK_FAILED) &&
            (ours->conn_id == conn_id)) {
            aptus_rc_link_switch_ack(chan, ours);
            break;
        }
    }
    /* everything the peer sent on its connection has been delivered */
    if (link->flags & APTUS_RC_LINK_USER) {
        aptus_rc_link_failed(chan, link, UCS_ERR_NOT_CONNECTED);
    } else {
        aptus_rc_accepted_free(chan, link);
    }
}

static void aptus_rc_chan_orphan_drained(aptus_rc_chan_t *chan,
                                         aptus_rc_link_t *link);

/* Our switch completes: the endpoint's link takes the accepted one. */
static void aptus_rc_chan_switched(aptus_rc_chan_t *chan, aptus_rc_link_t *acc)
{
    aptus_rc_link_t *user;

    ucs_list_for_each(user, &chan->links, list)
    {
        if (user->switch_to != acc) {
            continue;
        }
        ucs_debug("rc_sr: link %p to 0x%016" PRIx64 " took accepted link %p",
                  user, user->peer_key, acc);
        if (user->conn != NULL) {
            user->conn->wire->ops->conn_close(user->conn);
        }
        user->conn       = acc->conn;
        user->conn->user = user;
        user->fc         = acc->fc;
        user->tx_limit   = acc->tx_limit;
        user->conn_id    = acc->conn_id;
        user->am_queued  = 0;
        user->switch_to  = NULL;
        user->flags &= ~(APTUS_RC_LINK_SWITCHING | APTUS_RC_LINK_INITIATED);
        user->flags |= acc->flags & APTUS_RC_LINK_PEER_GONE;
        ucs_list_del(&acc->list);
        ucs_arbiter_group_cleanup(&acc->pending);
        ucs_free(acc);
        chan->num_accepted_links--;
        chan->stats.switched++;
        if (user->flags & APTUS_RC_LINK_ORPHAN) {
            /* its endpoint went during the switch: the BYE said on the old
             * connection came after the SWITCH, so the peer never read it */
            user->flags |= APTUS_RC_LINK_BYE_OWED;
            aptus_rc_chan_orphan_drained(chan, user);
        } else {
            aptus_rc_link_schedule(chan, user);
        }
        return;
    }
    chan->stats.rx_malformed++; /* not ours to switch to: ignore it */
}

static void aptus_rc_chan_recv(void *arg, aptus_conn_t *conn, void *data,
                               size_t length, aptus_conn_buf_t *buf,
                               int at_start)
{
    aptus_rc_chan_t *chan = arg;
    aptus_rc_link_t *link = conn->user;
    aptus_rc_hello_t hello;
    aptus_rc_msg_t msg;

    if (aptus_rc_msg_parse(data, length, &msg) != 0) {
        aptus_rc_chan_bad_msg(chan, link);
        return;
    }

    if (!(link->flags & (APTUS_RC_LINK_USER | APTUS_RC_LINK_GREETED))) {
        /* the first message must name this interface */
        if ((aptus_rc_hello_parse(&msg, &hello) != 0) ||
            (hello.key != chan->local_key)) {
            chan->stats.rx_bad_hello++;
            aptus_rc_link_failed(chan, link, UCS_ERR_REJECTED);
            return;
        }
        link->flags |= APTUS_RC_LINK_GREETED;
        chan->num_half_open--;
        link->tx_limit  = hello.credits;
        link->fc.tx     = hello.credits;
        link->peer_key  = hello.src_key;
        link->peer_port = hello.src_port;
        link->conn_id   = hello.conn_id;
        link->tag       = hello.tag;
        aptus_rc_chan_pair(chan, link);
        return;
    }

    if ((msg.kind == APTUS_RC_KIND_HELLO) ||
        !aptus_rc_credits_returned(&link->fc, msg.credits, link->tx_limit)) {
        aptus_rc_chan_bad_msg(chan, link);
        return;
    }
    if (msg.credits > 0) {
        aptus_rc_link_schedule(chan, link);
    }

    switch (msg.kind) {
    case APTUS_RC_KIND_AM:
        chan->stats.rx_msgs++;
        chan->stats.rx_bytes += msg.body_length;
        if (chan->ops->deliver(chan->arg, link, msg.am_id, (void *)msg.body,
                               msg.body_length, buf,
                               at_start) == UCS_INPROGRESS) {
            chan->stats.rx_held++;
        }
        /* The callback may have moved the connection to another link (an
         * endpoint created there takes it, the old link is freed) or
         * closed it: go on with whoever owns it now. */
        link = conn->user;
        if (link == NULL) {
            return;
        }
        /* The message left the receive path, held or not: its credit goes
         * back now, so a held descriptor never pins flow control. */
        aptus_rc_credits_consumed(&link->fc);
        if (aptus_rc_credits_need_explicit(&link->fc) &&
            !(link->flags & APTUS_RC_LINK_FAILED)) {
            aptus_rc_link_send_ctl(chan, link, APTUS_RC_KIND_CREDIT);
        }
        break;
    case APTUS_RC_KIND_CREDIT:
        chan->stats.rx_credits++;
        break;
    case APTUS_RC_KIND_SWITCH:
        aptus_rc_chan_switch(chan, link, aptus_get32(msg.body));
        break;
    case APTUS_RC_KIND_SWITCH_ACK:
        if (link->flags & APTUS_RC_LINK_CLAIMED) {
            aptus_rc_chan_switched(chan, link);
        } else {
            /* for a merge given up since (our link failed meanwhile) */
            chan->stats.stale_switch_acks++;
        }
        break;
    case APTUS_RC_KIND_BYE:
        ucs_debug("rc_sr: link %p flags 0x%x: BYE from 0x%016" PRIx64 "", link,
                  link->flags, link->peer_key);
        if ((link->flags & (APTUS_RC_LINK_USER | APTUS_RC_LINK_CLAIMED)) ||
            (aptus_rc_link_backlog(link) > 0)) {
            /* ours closes it (a switch in progress moves ours onto it), or
             * the backlog does once it went out */
            link->flags |= APTUS_RC_LINK_PEER_GONE;
        } else {
            aptus_rc_accepted_free(chan, link); /* both sides are done */
        }
        break;
    default: /* NOP */
        break;
    }
}

static void aptus_rc_chan_imm(void *arg, aptus_conn_t *conn, uint32_t imm)
{
    /* RC-SR itself does not write with immediates; a peer that does is not
     * speaking this protocol */
    aptus_rc_chan_bad_msg(arg, conn->user);
}

/* An orphan's backlog went out: say the BYE it owes, and close once the
 * peer is done too. */
static void aptus_rc_chan_orphan_drained(aptus_rc_chan_t *chan,
                                         aptus_rc_link_t *link)
{
    ucs_status_t status;

    if (link->flags & APTUS_RC_LINK_BYE_OWED) {
        status = aptus_rc_link_send_msg(link, APTUS_RC_KIND_BYE, NULL, 0);
        if (status == UCS_OK) {
            link->flags &= ~APTUS_RC_LINK_BYE_OWED;
        } else if (status != UCS_ERR_NO_RESOURCE) {
            aptus_rc_accepted_free(chan, link);
            return;
        }
    }
    if ((link->flags & APTUS_RC_LINK_PEER_GONE) &&
        (aptus_rc_link_backlog(link) == 0)) {
        aptus_rc_accepted_free(chan, link);
    }
}

static void aptus_rc_chan_writable(void *arg, aptus_conn_t *conn)
{
    aptus_rc_chan_t *chan = arg;
    aptus_rc_link_t *link = conn->user;

    if (aptus_rc_credits_need_explicit(&link->fc)) {
        aptus_rc_link_send_ctl(chan, link, APTUS_RC_KIND_CREDIT);
        link = conn->user; /* an accepted link is freed when it fails */
        if ((link == NULL) || (link->flags & APTUS_RC_LINK_FAILED)) {
            return;
        }
    }
    if (link->flags & APTUS_RC_LINK_ACK_OWED) {
        aptus_rc_link_switch_ack(chan, link);
        link = conn->user;
        if ((link == NULL) || (link->flags & APTUS_RC_LINK_FAILED)) {
            return;
        }
    }
    if (link->flags & APTUS_RC_LINK_ORPHAN) {
        aptus_rc_chan_orphan_drained(chan, link);
        return;
    }
    if (aptus_rc_link_backlog(link) > 0) {
        return;
    }
    link->am_queued = 0;
    if (aptus_rc_link_reads(link) > 0) {
        aptus_rc_link_schedule(chan, link);
        return; /* flushes wait for the reads too */
    }
    aptus_rc_link_complete_flushes(link, UCS_OK);
    aptus_rc_link_schedule(chan, link);
}

static void aptus_rc_chan_conn_failed(void *arg, aptus_conn_t *conn,
                                      ucs_status_t status)
{
    aptus_rc_link_failed(arg, conn->user, status);
}

const aptus_conn_handlers_t aptus_rc_chan_wire_handlers = {
    .accepted = aptus_rc_chan_accepted,
    .recv     = aptus_rc_chan_recv,
    .imm      = aptus_rc_chan_imm,
    .writable = aptus_rc_chan_writable,
    .failed   = aptus_rc_chan_conn_failed,
};

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
                               uint64_t key, uint16_t port, uint16_t tag)
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
                                   uint16_t port, uint32_t credits,
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
