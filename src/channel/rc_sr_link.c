/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: RC-SR channel, the wire's events: connections accepted,
 * greeted and paired, switches to one connection per pair, receive,
 * room to send again, failures.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_sr_chan_int.h"
#include "proto/le.h"

#include <inttypes.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/time/time.h>

#include <string.h>

static int aptus_rc_link_idle(const aptus_rc_link_t *link)
{
    return (aptus_rc_link_backlog(link) == 0) &&
           ucs_arbiter_group_is_empty((ucs_arbiter_group_t *)&link->pending) &&
           ucs_queue_is_empty((ucs_queue_head_t *)&link->flushes);
}

void aptus_rc_accepted_free(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
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
void aptus_rc_chan_drop_half_open(aptus_rc_chan_t *chan, unsigned max,
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
void aptus_rc_link_failed(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                          ucs_status_t status)
{
    /* A close in order, or a reset after the peer's BYE (its process
     * closed the socket with our last credits unread), of a link with
     * nothing outstanding is told when the link is next used; a keepalive
     * check in flight wants an answer, even for a clean close. */
    int clean = ((status == UCS_ERR_NOT_CONNECTED) ||
                 ((status == UCS_ERR_CONNECTION_RESET) &&
                  (link->flags & APTUS_RC_LINK_PEER_GONE))) &&
                aptus_rc_link_idle(link) &&
                !(link->flags & APTUS_RC_LINK_CHECKED);

    if (!(link->flags & APTUS_RC_LINK_USER)) {
        if (status != UCS_ERR_NOT_CONNECTED) {
            ucs_diag("rc_sr: accepted link %p flags 0x%x from 0x%016" PRIx64
                     " closed: %s",
                     link, link->flags, link->peer_key,
                     ucs_status_string(status));
        }
        aptus_rc_accepted_free(chan, link);
        return;
    }
    if (link->flags & APTUS_RC_LINK_FAILED) {
        return;
    }
    if ((link->flags & APTUS_RC_LINK_SWITCHING) &&
        ((status == UCS_ERR_NOT_CONNECTED) ||
         (status == UCS_ERR_CONNECTION_RESET)) &&
        (link->conn != NULL)) {
        /* The peer closed the connection given up, after the SWITCH: in
         * order, or with a reset when the wire's own frames (a late
         * identity answer) reached it after the SWITCH. Nothing of ours is
         * lost (no read was outstanding when the SWITCH went); the move
         * completes on the other connection, or fails with it if the
         * peer is gone. */
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
    ucs_log((clean || (status == UCS_ERR_CANCELED)) ? UCS_LOG_LEVEL_DEBUG
                                                    : UCS_LOG_LEVEL_DIAG,
            "rc_sr: link %p flags 0x%x to 0x%016" PRIx64 " failed: %s", link,
            link->flags, link->peer_key, ucs_status_string(status));
    link->error = UCS_ERR_ENDPOINT_TIMEOUT;
    link->cause = status;
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
void aptus_rc_link_send_ctl(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                            unsigned kind)
{
    ucs_status_t status;

    if (link->flags & APTUS_RC_LINK_SWITCHING) {
        /* The SWITCH was the last message on this connection: the peer
         * closes it once read, so anything after it would reach a closed
         * socket, whose reset fails this link before its move completes.
         * Credits owed here go with the connection. */
        return;
    }
    status = aptus_rc_link_send_msg(link, kind, NULL, 0);
    if (status == UCS_OK) {
        if (kind == APTUS_RC_KIND_CREDIT) {
            chan->stats.tx_credits++;
        }
    } else if (status != UCS_ERR_NO_RESOURCE) {
        aptus_rc_link_failed(chan, link, status);
    }
}

void aptus_rc_link_schedule(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
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
        if (aptus_rc_link_reads(user) > 0) {
            /* the peer closes our connection on reading the SWITCH, and
             * with it the answers it still owes us: keep both */
            return;
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

void aptus_rc_chan_orphan_drained(aptus_rc_chan_t *chan, aptus_rc_link_t *link);

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
        if (link->flags & APTUS_RC_LINK_CLAIMED) {
            /* The peer's endpoint went before it answered our SWITCH, and
             * it may never answer: a process stops progressing once its
             * endpoints are closed (an MPI rank blocks in the launcher's
             * barrier of MPI_Finalize). Nothing more comes from that
             * endpoint and nothing we send has a reader, so the move
             * completes now; waiting for SWITCH_ACK held our endpoint's
             * flush, and with it MPI_Finalize, for good. */
            link->flags |= APTUS_RC_LINK_PEER_GONE;
            chan->stats.switches_ended_by_bye++;
            aptus_rc_chan_switched(chan, link);
            break;
        }
        if ((link->flags & APTUS_RC_LINK_USER) ||
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
void aptus_rc_chan_orphan_drained(aptus_rc_chan_t *chan, aptus_rc_link_t *link)
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
