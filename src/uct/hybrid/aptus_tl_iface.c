/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the aptus UCT interface (see aptus_tl.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "uct/base/aptus_rma.h"
#include "wire/sock/sock_dgram.h"
#include "uct/base/aptus_iface.h"
#include "base/aptus_mpool.h"
#include "channel/chan_pending.h"
#include "wire/sock/sock_conn.h"
#include "wire/sock/sock_netif.h"

#include <ucs/sys/string.h>
#include <ucs/time/time.h>

#include <inttypes.h>
#include <string.h>

/* The rule chain of the paper (Koop et al., IPDPS 2008, section 4.2). */
#define UCT_APTUS_DEFAULT_RULES                                                \
    "{<=2048 rc_fp},{<=2008 ud_sr},{<=8192 rc_sr},{<=8192 ud_sr},"             \
    "{any rc_rdma},{any ud_zcopy}"

ucs_config_field_t uct_aptus_tl_iface_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_aptus_tl_iface_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_iface_config_table) },

    /* the UD channels: the same settings as ud_sr, under APTUS_ */
    { "", "", NULL, ucs_offsetof(uct_aptus_tl_iface_config_t, ud),
      UCS_CONFIG_TYPE_TABLE(uct_ud_sr_params_table) },

    { "SEND_RULES", UCT_APTUS_DEFAULT_RULES,
      "The send rule chain: for each message, the first rule whose conditions\n"
      "hold and whose channel the peer already has sends it. Rules are\n"
      "{<conditions> <channel>}, separated by commas; conditions are 'any' or\n"
      "comparisons joined by '&': <=N, <N, >=N, >N, ==N on the message size\n"
      "(k and m suffixes), or 'peers' then a comparison on the number of "
      "peers\n"
      "the process talks to. Channels: rc_fp, rc_sr, ud_sr (active messages),\n"
      "rc_rdma, ud_zcopy (rendezvous data). The last rule must name a UD\n"
      "channel, and the rules naming UD channels together must hold every\n"
      "message size (end the chain with {any ud_sr} or {any ud_zcopy}).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, send_rules),
      UCS_CONFIG_TYPE_STRING },

    { "MAX_RC", "16",
      "Most RC connections (RC-SR + RC-RDMA) one process holds at once; both\n"
      "sides reserve a slot before a connection is used, so the cap holds\n"
      "even when two processes ask each other at the same time. 0: UD only\n"
      "(at most 65536).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, max_rc), UCS_CONFIG_TYPE_UINT },

    { "MAX_FP", "8",
      "Most fast-path (RC-FP) channels one process holds (at most MAX_RC): a\n"
      "block of FP_BLOCK_SIZE bytes of its memory per channel, mapped at\n"
      "interface open, that one peer writes messages into and this process\n"
      "polls. Both sides reserve a slot before a channel is used (0 to 4096;\n"
      "0: none).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, max_fp), UCS_CONFIG_TYPE_UINT },

    { "FP_MSGS", "64",
      "Messages small enough for an rc_fp rule, sent to a peer that holds RC\n"
      "within ALLOC_WINDOW, that earn it a fast-path channel (0: none ever;\n"
      "so too when no rule names rc_fp; at most 1048576).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, fp_msgs),
      UCS_CONFIG_TYPE_UINT },

    { "FP_BLOCK_SIZE", "32k",
      "Bytes of one fast-path block (a Veloblock ring: messages of any\n"
      "length packed from its end, byte credits; 64 to 1g).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, fp_block_size),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "ALLOC_WINDOW", "1s",
      "Traffic window of the earning rule: a peer earns an RC connection when\n"
      "one window holds RC_MSGS messages or RC_BYTES bytes sent to it that\n"
      "the rule chain would send over RC or its fast path (those it keeps on\n"
      "UD anyway do not count). 1ms to 1h.",
      ucs_offsetof(uct_aptus_tl_iface_config_t, alloc_window),
      UCS_CONFIG_TYPE_TIME },

    { "RC_MSGS", "64",
      "Messages to one peer within ALLOC_WINDOW that earn it a connection\n"
      "(0: messages do not count; at most 1048576).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_msgs),
      UCS_CONFIG_TYPE_UINT },

    { "RC_BYTES", "1m",
      "Bytes to one peer within ALLOC_WINDOW that earn it a connection\n"
      "(0: bytes do not count; at most 1g). RC_MSGS and RC_BYTES may not both\n"
      "be 0.",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_bytes),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "REQUEST_TIMEOUT", "1s",
      "A request for a connection left unanswered this long gives its slot\n"
      "back (1ms to 1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, request_timeout),
      UCS_CONFIG_TYPE_TIME },

    { "BACKOFF", "1s",
      "After a refusal, the peer is not asked again for this long (0 to 1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, backoff),
      UCS_CONFIG_TYPE_TIME },

    { "IDLE", "2s",
      "A connection unused this long is demoted (its slot goes to a peer that\n"
      "earns it); 0: never (at most 1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, idle), UCS_CONFIG_TYPE_TIME },

    { "HOLD", "1s",
      "Shortest life of a connection, and the wait before a demoted peer may\n"
      "ask again: the hysteresis that keeps channels from flapping (0 to\n"
      "1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, hold), UCS_CONFIG_TYPE_TIME },

    { "REORDER_MAX", "65536",
      "Messages of one peer held while an earlier one is still on its way\n"
      "over another channel. Beyond it the peer is failed (order could not be\n"
      "kept). 1 to 16777216.",
      ucs_offsetof(uct_aptus_tl_iface_config_t, reorder_max),
      UCS_CONFIG_TYPE_UINT },

    { "RC_SEG_SIZE", "32k",
      "Largest active message over an RC connection, UCT header included;\n"
      "larger ones go over UD. The connections' receive buffers, a pool\n"
      "shared by all of them that grows with use up to RC_RX_QUEUE_LEN, are\n"
      "this large (272 bytes to just under 16m).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_seg_size),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "RC_CREDITS", "32",
      "Messages in flight on one connection before the receiver returns\n"
      "credits (1 to 65535).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_credits),
      UCS_CONFIG_TYPE_UINT },

    { "RC_RX_QUEUE_LEN", "256",
      "Receive buffers of the pool shared by all connections (1 to 1048576).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_rx_queue_len),
      UCS_CONFIG_TYPE_UINT },

    { "RC_TX_BACKLOG", "256k",
      "Bytes a connection may queue when the network does not take them at\n"
      "once (4k to 1g).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_tx_backlog),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "RC_RMA", "y",
      "Move rendezvous data over RC-RDMA (one-sided, peers on the same host)\n"
      "where the peer has a connection; otherwise UD-ZCopy.",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_rma), UCS_CONFIG_TYPE_BOOL },

    { NULL }
};

/* ---- failures ------------------------------------------------------------ */

void uct_aptus_tl_iface_queue_failure(uct_aptus_tl_iface_t *iface,
                                      aptus_ud_peer_t *peer,
                                      ucs_status_t status)
{
    uct_aptus_tl_ep_t *ep = uct_aptus_tl_ep_of_peer(peer);
    char addr[48], who[64];

    if (!(ep->flags & UCT_APTUS_EP_USER) ||
        (peer->flags & APTUS_UD_PEER_REPORTED)) {
        return;
    }
    snprintf(who, sizeof(who), "%s stream %u",
             iface->dgram->ops->addr_str(&peer->addr, addr, sizeof(addr)),
             peer->conn_id);
    if (uct_aptus_failures_add(&iface->failures, UCT_APTUS_TL_NAME,
                               &ep->super.super, status, who)) {
        peer->flags |= APTUS_UD_PEER_REPORTED;
    }
}

void uct_aptus_tl_iface_forget_failure(uct_aptus_tl_iface_t *iface,
                                       aptus_ud_peer_t *peer)
{
    uct_aptus_failures_forget(&iface->failures,
                              &uct_aptus_tl_ep_of_peer(peer)->super.super);
}

/* ---- upcalls of the UD channel ----------------------------------------- */

static ucs_status_t uct_aptus_tl_ud_deliver(void *arg, aptus_ud_peer_t *peer,
                                            uint8_t am_id, void *data,
                                            size_t length, unsigned flags,
                                            int is_async)
{
    if (is_async) {
        return UCS_ERR_BUSY; /* in order with RC: only from progress */
    }
    return uct_aptus_tl_rx(arg, uct_aptus_tl_ep_of_peer(peer), am_id, data,
                           length, flags);
}

static void uct_aptus_tl_ud_peer_failed(void *arg, aptus_ud_peer_t *peer,
                                        ucs_status_t status)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep_of_peer(peer);

    aptus_udz_peer_failed(&iface->udz, peer, status);
    if ((ep->rc != NULL) && ep->rc->connected) {
        aptus_chan_invalidate(&iface->rc.super,
                              (aptus_chan_peer_t *)&ep->rc->link);
    }
    if (!(peer->flags & APTUS_UD_PEER_QUIET)) {
        uct_aptus_tl_iface_queue_failure(iface, peer, status);
    }
}

static void uct_aptus_tl_ud_peer_free(void *arg, aptus_ud_peer_t *peer)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_ep_of_peer(peer);

    if (!(ep->flags & UCT_APTUS_EP_INITED)) {
        return;
    }
    ucs_arbiter_group_purge(&iface->pending, &ep->pending,
                            aptus_pending_purge_cb,
                            &(uct_purge_cb_args_t){ NULL, NULL });
    uct_aptus_tl_rx_drop_held(iface, ep);
    uct_aptus_tl_iface_forget_failure(iface, peer);
    uct_aptus_tl_alloc_forget(iface, ep);
}

static ucs_status_t uct_aptus_tl_ud_internal(void *arg, aptus_ud_peer_t *peer,
                                             uint8_t id, const void *data,
                                             size_t length, int is_async)
{
    uct_aptus_tl_iface_t *iface = arg;

    if (id == APTUS_UDZ_MSG_ID) {
        return aptus_udz_internal(&iface->udz, peer, data, length, is_async);
    }
    if (id != UCT_APTUS_CTL_MSG_ID) {
        iface->ud.stats.rx_malformed++;
        return UCS_OK;
    }
    if (is_async) {
        return UCS_ERR_BUSY;
    }
    return uct_aptus_tl_ctl_recv(iface, uct_aptus_tl_ep_of_peer(peer), data,
                                 length);
}

static const aptus_ud_chan_ops_t uct_aptus_tl_ud_ops = {
    .deliver     = uct_aptus_tl_ud_deliver,
    .peer_failed = uct_aptus_tl_ud_peer_failed,
    .peer_free   = uct_aptus_tl_ud_peer_free,
};

/* ---- upcalls of the RC channel ----------------------------------------- */

static uct_aptus_tl_ep_t *uct_aptus_tl_rc_owner(uct_aptus_tl_iface_t *iface,
                                                aptus_rc_link_t *link)
{
    uct_aptus_tl_ep_t *ep;
    khiter_t iter;

    if (link->flags & APTUS_RC_LINK_USER) {
        return ucs_container_of(link, uct_aptus_tl_rc_t, link)->ep;
    }
    /* the peer's connection (or one we closed that still drains) */
    iter = kh_get(uct_aptus_rc_peers, &iface->rc_peers,
                  uct_aptus_tl_rc_map_key_of(link->peer_key, link->tag));
    if (iter == kh_end(&iface->rc_peers)) {
        return NULL;
    }
    ep = kh_value(&iface->rc_peers, iter);
    return ((ep->peer.remote_key == link->peer_key) &&
            (ep->peer.conn_id == link->tag))
               ? ep
               : NULL;
}

static ucs_status_t uct_aptus_tl_rc_deliver(void *arg, aptus_rc_link_t *link,
                                            uint8_t am_id, void *data,
                                            size_t length,
                                            aptus_conn_buf_t *buf, int at_start)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep       = uct_aptus_tl_rc_owner(iface, link);
    ucs_status_t status;

    if (ep == NULL) {
        /* a connection no peer of ours was granted: not ours to deliver */
        if (iface->stats.rx_unknown_link++ == 0) {
            ucs_warn("aptus/%s: a message on a connection from 0x%016" PRIx64
                     " for "
                     "a peer this interface never agreed a channel with "
                     "(stream %u) is dropped",
                     iface->dev_name, link->peer_key, link->tag);
        }
        return UCS_OK;
    }
    /* in place, no descriptor: UCP copies what it keeps, so a held message
     * never pins a shared receive buffer */
    status = uct_aptus_tl_rx(iface, ep, am_id, data, length, 0);
    uct_aptus_tl_rc_received(iface, ep); /* the sender may drop its copy */
    return status;
}

static void uct_aptus_tl_rc_peer_failed(void *arg, aptus_rc_link_t *link,
                                        ucs_status_t status)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep = ucs_container_of(link, uct_aptus_tl_rc_t, link)->ep;

    /* What the peer did not confirm goes again over UD; if the peer is
     * gone, UD finds out and reports it. */
    iface->stats.rc_failed++;
    ucs_debug("aptus/%s: connection to peer 0x%016" PRIx64
              "/%u failed: %s; %zu "
              "messages go again over UD",
              iface->dev_name, ep->peer.remote_key, ep->peer.conn_id,
              ucs_status_string(status), ucs_queue_length(&ep->rc_unacked));
    uct_aptus_tl_rc_fallback(iface, ep);
}

static const aptus_rc_chan_ops_t uct_aptus_tl_rc_ops = {
    .deliver     = uct_aptus_tl_rc_deliver,
    .peer_failed = uct_aptus_tl_rc_peer_failed,
};

/* ---- progress --------------------------------------------------------------
 */

static ucs_arbiter_cb_result_t
uct_aptus_tl_pending_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                        ucs_arbiter_elem_t *elem, void *arg)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep = ucs_container_of(group, uct_aptus_tl_ep_t, pending);
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    ucs_status_t status;

    iface->dispatching = ep;
    status             = req->func(req);
    iface->dispatching = NULL;
    if (status == UCS_OK) {
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    }
    if (status == UCS_INPROGRESS) {
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP; /* partly sent: again */
    }
    return UCS_ARBITER_CB_RESULT_RESCHED_GROUP; /* still no room */
}

/* Whether this progress call polls the RC connections (an epoll_wait
 * system call on the sock wire): always while this process holds or has
 * promised a connection slot, or has connections; with none, a peer has no
 * grant to connect with, and one call in 64 picks up a stray one. */
static inline int uct_aptus_tl_rc_poll_due(uct_aptus_tl_iface_t *iface)
{
    if ((iface->alloc.used[APTUS_ALLOC_RC] > 0) ||
        (iface->rc.num_user_links + iface->rc.num_accepted_links > 0) ||
        (++iface->rc_idle_tick >= 64)) {
        iface->rc_idle_tick = 0;
        return 1;
    }
    return 0;
}

static unsigned uct_aptus_tl_iface_progress(uct_iface_h tl_iface)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    unsigned count;

    UCT_APTUS_ASYNC_ENTER(&iface->async_rx, iface->super.worker->async);
    count = 0;
    if (uct_aptus_tl_rc_poll_due(iface)) {
        /* one epoll_wait covers the connections and, when watched, the
         * datagram socket: UD's read is skipped when it has nothing, so a
         * rank whose traffic goes over RC makes one system call per idle
         * progress instead of two */
        iface->ud_ready = 0;
        count += aptus_chan_progress(&iface->rc.super, 0);
        if (iface->ud_watched && !iface->ud_ready) {
            iface->ud.rx_skip_poll = 1;
            iface->stats.ud_polls_shared++;
        }
    }
    count +=
        uct_aptus_ud_user_progress(&iface->ud, &iface->udz, &iface->async_rx);
    count += uct_aptus_tl_fp_progress(iface);
    if (ucs_unlikely((iface->num_resend > 0) || (iface->num_xack > 0))) {
        count += uct_aptus_tl_resend_progress(iface);
    }
    if (!ucs_arbiter_is_empty(&iface->pending)) {
        ucs_arbiter_dispatch(&iface->pending, 1, uct_aptus_tl_pending_cb,
                             iface);
    }
    count += uct_aptus_tl_alloc_progress(iface, iface->ud.now_us);
    if (ucs_unlikely(iface->failures.num > 0)) {
        uct_aptus_failures_report(&iface->failures, &iface->super.super,
                                  UCT_APTUS_TL_NAME, iface->dev_name);
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return count;
}

/* Runs in the async thread with the async lock held: acknowledges and
 * retransmits over UD while the application computes. Messages wait for
 * the application's progress, where both channels deliver in order. */
static void uct_aptus_tl_iface_timer(int id, ucs_event_set_types_t events,
                                     void *arg)
{
    uct_aptus_tl_iface_t *iface = arg;

    if (uct_aptus_async_timer_expired(&iface->timer) == 0) {
        return; /* consumed by an earlier call */
    }
    uct_aptus_ud_async_timer(&iface->ud, &iface->udz, &iface->async_rx,
                             &iface->timer);
}

/* Datagrams arrived while the user computes (armed by the timer). */
static void uct_aptus_tl_iface_event(int fd, ucs_event_set_types_t events,
                                     void *arg)
{
    uct_aptus_tl_iface_t *iface = arg;

    uct_aptus_ud_async_event(&iface->ud, &iface->udz, &iface->async_rx);
}

static ucs_status_t uct_aptus_tl_iface_flush(uct_iface_h tl_iface,
                                             unsigned flags,
                                             uct_completion_t *comp)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    ucs_status_t status;

    if (comp != NULL) {
        return UCS_ERR_UNSUPPORTED; /* as UCX's transports */
    }
    UCS_ASYNC_BLOCK(iface->super.worker->async);
    status = aptus_rc_chan_flush_all(&iface->rc);
    if (status == UCS_OK) {
        status = aptus_ud_chan_flush_all(&iface->ud, flags, NULL);
    }
    if ((status == UCS_OK) &&
        (aptus_udz_flush(&iface->udz, NULL, NULL, 0) == UCS_INPROGRESS)) {
        status = UCS_INPROGRESS;
    }
    UCS_ASYNC_UNBLOCK(iface->super.worker->async);
    return uct_aptus_flush_return(iface->super.worker->async, status);
}

/* ---- attributes and addresses ----------------------------------------- */

static ucs_status_t uct_aptus_tl_iface_query(uct_iface_h tl_iface,
                                             uct_iface_attr_t *attr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    size_t max_msg = iface->ud.config.max_msg - UCT_APTUS_TRAILER_LEN;

    uct_base_iface_query(&iface->super, attr);

    attr->cap.flags = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                      UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY |
                      UCT_IFACE_FLAG_AM_ZCOPY | UCT_IFACE_FLAG_PENDING |
                      UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_EP_CHECK |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;

    attr->cap.am.max_short       = iface->max_short;
    attr->cap.am.max_bcopy       = max_msg;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = max_msg;
    attr->cap.am.max_hdr         = iface->ud.config.max_am_hdr;
    attr->cap.am.max_iov         = APTUS_UD_MAX_IOV - 1; /* + the trailer */
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;

    /* one-sided: short and buffered in the UD stream; zero-copy over
     * RC-RDMA where a connection reaches, else UD-ZCopy */
    uct_aptus_rma_query(&iface->udz, 1, attr);

    attr->device_addr_len = aptus_sock_dev_addr_len(&iface->dgram->addr);
    attr->iface_addr_len  = sizeof(uct_aptus_tl_iface_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;

    attr->latency             = ucs_linear_func_make(iface->latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->bandwidth;
    attr->overhead            = 3e-6;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t
uct_aptus_tl_iface_get_device_address(uct_iface_h tl_iface,
                                      uct_device_addr_t *addr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);

    aptus_sock_dev_addr_pack(&iface->dgram->addr, addr);
    return UCS_OK;
}

static ucs_status_t uct_aptus_tl_iface_get_address(uct_iface_h tl_iface,
                                                   uct_iface_addr_t *addr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);
    uct_aptus_tl_iface_addr_t *aaddr = (uct_aptus_tl_iface_addr_t *)addr;

    aaddr->ud_port    = aptus_sock_wire_addr_port(&iface->dgram->addr);
    aaddr->rc_port    = iface->rc.config.local_port;
    aaddr->key        = iface->ud.local_key;
    aaddr->rc_credits = iface->rc.config.credits;
    aaddr->ud_mtu     = (uint16_t)iface->dgram->mtu;
    return UCS_OK;
}

static int uct_aptus_tl_iface_is_reachable(const uct_iface_h tl_iface,
                                           const uct_device_addr_t *dev_addr,
                                           const uct_iface_addr_t *iface_addr)
{
    uct_aptus_tl_iface_t *iface =
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t);

    return (dev_addr != NULL) &&
           aptus_sock_dev_addr_reachable(&iface->dgram->addr, dev_addr);
}

/* ---- statistics ------------------------------------------------------------
 */

unsigned uct_aptus_tl_iface_stats(uct_aptus_tl_iface_t *iface,
                                  uct_aptus_stat_t *stats, unsigned max)
{
    const uct_aptus_tl_stats_t *s  = &iface->stats;
    const aptus_alloc_stats_t *a   = &iface->alloc.stats;
    const aptus_ud_chan_stats_t *u = &iface->ud.stats;
    const aptus_rc_chan_stats_t *r = &iface->rc.stats;
    uint64_t tx_msgs = 0, tx_bytes = 0;
    int rcvbuf, sndbuf;
    unsigned i;

    aptus_sock_dgram_bufsizes(iface->dgram, &rcvbuf, &sndbuf);
    for (i = 0; i < APTUS_CHAN_LAST; ++i) {
        tx_msgs += s->tx_msgs[i];
        tx_bytes += s->tx_bytes[i];
    }
    {
        uct_aptus_stat_t all[] = {
            /* as every transport of the module says them */
            { "tx_msgs", tx_msgs },
            { "tx_bytes", tx_bytes }, /* every channel, gets included */
            { "rx_msgs", s->rx_in_order + s->rx_held },
            { "ud_sr_msgs", s->tx_msgs[APTUS_CHAN_UD_SR] },
            { "ud_sr_bytes", s->tx_bytes[APTUS_CHAN_UD_SR] },
            { "rc_sr_msgs", s->tx_msgs[APTUS_CHAN_RC_SR] },
            { "rc_sr_bytes", s->tx_bytes[APTUS_CHAN_RC_SR] },
            { "rc_rdma_msgs", s->tx_msgs[APTUS_CHAN_RC_RDMA] },
            { "rc_rdma_bytes", s->tx_bytes[APTUS_CHAN_RC_RDMA] },
            { "ud_zcopy_msgs", s->tx_msgs[APTUS_CHAN_UD_ZCOPY] },
            { "ud_zcopy_bytes", s->tx_bytes[APTUS_CHAN_UD_ZCOPY] },
            { "rc_fp_msgs", s->tx_msgs[APTUS_CHAN_RC_FP] },
            { "rx_in_order", s->rx_in_order },
            { "rx_held", s->rx_held },
            { "rx_max_held", s->max_held },
            { "rx_duplicates", s->rx_duplicates },
            { "rx_reorder_full", s->rx_reorder_full },
            { "rx_malformed", s->rx_malformed },
            { "rx_unknown_link", s->rx_unknown_link },
            { "rc_max", iface->alloc.config.max[APTUS_ALLOC_RC] },
            { "rc_now", iface->alloc.used[APTUS_ALLOC_RC] },
            { "rc_peak", a->peak[APTUS_ALLOC_RC] },
            { "rc_requested", a->requested[APTUS_ALLOC_RC] },
            { "rc_granted", a->granted[APTUS_ALLOC_RC] },
            { "rc_refused", a->refused[APTUS_ALLOC_RC] },
            { "rc_refusals", a->refusals[APTUS_ALLOC_RC] },
            { "rc_demoted", a->demoted[APTUS_ALLOC_RC] },
            { "rc_expired", a->expired[APTUS_ALLOC_RC] },
            { "rc_connects", s->rc_connects },
            { "rc_closed", s->rc_closed },
            { "rc_failed", s->rc_failed },
            { "rc_fallbacks", s->rc_fallbacks },
            { "resent", s->resent },
            { "xacks_sent", s->xacks_sent },
            { "xacks_spared", s->xacks_spared },
            { "kept_now", s->kept_now },
            { "kept_bytes", s->kept_bytes },
            { "rc_shared", r->shared },
            { "rc_switched", r->switched },
            { "fp_max", iface->alloc.config.max[APTUS_ALLOC_FP] },
            { "fp_now", iface->alloc.used[APTUS_ALLOC_FP] },
            { "fp_peak", a->peak[APTUS_ALLOC_FP] },
            { "fp_requested", a->requested[APTUS_ALLOC_FP] },
            { "fp_granted", a->granted[APTUS_ALLOC_FP] },
            { "fp_refused", a->refused[APTUS_ALLOC_FP] },
            { "fp_refusals", a->refusals[APTUS_ALLOC_FP] },
            { "fp_demoted", a->demoted[APTUS_ALLOC_FP] },
            { "fp_expired", a->expired[APTUS_ALLOC_FP] },
            { "fp_block_bytes", iface->fpc.geom.size },
            /* blocks are mapped on first use and kept until close */
            { "fp_blocks_bytes",
              (uint64_t)iface->fpc.num_mapped * iface->fpc.geom.size },
            { "fp_blocks_active", iface->fpc.num_active },
            { "fp_blocks_orphaned", s->fp_blocks_orphaned },
            { "fp_tx_msgs", iface->fpc.stats.tx_msgs },
            { "fp_rx_msgs", iface->fpc.stats.rx_msgs },
            { "fp_no_credit", iface->fpc.stats.no_credit },
            { "fp_credit_msgs", s->fp_credit_msgs },
            { "fp_credits_piggybacked", iface->fpc.stats.credits_piggybacked },
            { "fp_credits_bad", iface->fpc.stats.credits_bad },
            { "fp_write_failures", iface->fpc.stats.write_failures },
            { "fp_rx_corrupt", iface->fpc.stats.rx_corrupt },
            { "fp_refused_no_block", s->fp_refused_no_block },
            { "ctl_sent", s->ctl_sent },
            { "ctl_received", s->ctl_received },
            { "ctl_deferred", s->ctl_deferred },
            { "ud_polls_shared", s->ud_polls_shared },
            { "async_wakeups", iface->timer.wakeups },
            { "async_arms", iface->async_rx.arms },
            { "async_events", iface->async_rx.events },
            { "peers", aptus_ud_chan_num_peers(&iface->ud) },
            { "peer_bytes", aptus_ud_chan_peer_bytes(&iface->ud) },
            { "ud_tx_data", u->tx_data_dgrams },
            { "ud_tx_acks", u->tx_acks },
            { "ud_probes", u->tx_probes },
            { "ud_retransmits", u->tx_retransmits },
            { "ud_rx_deferred", u->rx_deferred },
            { "rc_no_credits", r->no_credits },
            { "rc_half_open_dropped", r->half_open_dropped },
            { "rc_accept_paused", iface->conn->stats.accept_paused },
            { "rc_pid_proven", iface->conn->stats.pid_proven },
            { "rc_pid_unproven", iface->conn->stats.pid_unproven },
            { "rc_pid_refused", iface->conn->stats.pid_refused },
            { "zc_gets", iface->udz.stats.zc_gets },
            { "copy_gets", iface->udz.stats.copy_gets },
            { "zc_puts", iface->udz.stats.writes },
            { "put_refused", iface->udz.stats.write_refused },
            { "puts_inline", iface->udz.stats.puts_inline },
            { "zc_reflect_refused", iface->udz.stats.reflect_refused },
            { "ud_rx_bad_key", u->rx_bad_key },
            { "ud_rx_peer_limit", u->rx_peer_limit },
            { "ud_path_probes", u->path_probes },
            { "ud_path_raised", u->path_raised },
            { "ud_path_lost", u->path_lost },
            { "ud_rx_opening", u->rx_opening },
            { "ud_open_resends", u->tx_open_resends },
            { "ud_rx_stale", u->rx_stale },
            { "ud_rx_challenges", u->rx_challenges },
            { "ud_open_refused", u->open_refused },
            { "ud_open_evicted", u->open_evicted },
            { "ud_rx_reasm_limit", u->rx_reasm_limit },
            { "ud_rx_copied_small", u->rx_copied_small },
            { "ud_rx_hold_limit", u->rx_hold_limit },
            { "zc_serve_limit", iface->udz.stats.serve_limit },
            { "zc_busy_retries", iface->udz.stats.busy_retries },
            { "zc_async_yields", iface->udz.stats.async_yields },
            /* the kernel's share: the UD socket, a socket per zero-copy
             * context opened so far, the buffer bytes granted */
            { "sock_fds", 1 + iface->udz.stats.ctxs_open },
            { "sock_rcvbuf", (uint64_t)ucs_max(rcvbuf, 0) },
            { "sock_sndbuf", (uint64_t)ucs_max(sndbuf, 0) },
        };
        unsigned n = ucs_min(max, sizeof(all) / sizeof(all[0]));

        memcpy(stats, all, n * sizeof(*stats));
        return n;
    }
}

/* One line per peer that carried traffic: channel use by peer. */
static void uct_aptus_tl_iface_print_peer(uct_aptus_tl_iface_t *iface,
                                          const char *dest,
                                          aptus_ud_peer_t *peer)
{
    uct_aptus_tl_ep_t *ep = uct_aptus_tl_ep_of_peer(peer);
    char name[64];

    if (!(ep->flags & UCT_APTUS_EP_INITED) || (ep->xtx.next == 0)) {
        return;
    }
    {
        uct_aptus_stat_t stats[] = {
            { "ud_sr_msgs", ep->tx_msgs[APTUS_CHAN_UD_SR] },
            { "ud_sr_bytes", ep->tx_bytes[APTUS_CHAN_UD_SR] },
            { "rc_sr_msgs", ep->tx_msgs[APTUS_CHAN_RC_SR] },
            { "rc_sr_bytes", ep->tx_bytes[APTUS_CHAN_RC_SR] },
            { "rc_rdma_msgs", ep->tx_msgs[APTUS_CHAN_RC_RDMA] },
            { "rc_rdma_bytes", ep->tx_bytes[APTUS_CHAN_RC_RDMA] },
            { "ud_zcopy_msgs", ep->tx_msgs[APTUS_CHAN_UD_ZCOPY] },
            { "ud_zcopy_bytes", ep->tx_bytes[APTUS_CHAN_UD_ZCOPY] },
            { "rc_now",
              ep->alloc.slot[APTUS_ALLOC_RC].state == APTUS_ALLOC_GRANTED },
            { "rx_held_now", ep->xrx.num_held },
            { "rc_fp_msgs", ep->tx_msgs[APTUS_CHAN_RC_FP] },
            { "rc_fp_bytes", ep->tx_bytes[APTUS_CHAN_RC_FP] },
            { "fp_now", uct_aptus_tl_fp_usable(ep) },
        };

        snprintf(name, sizeof(name), "%s/peer-%08x-%u", iface->dev_name,
                 (unsigned)(uint32_t)peer->remote_key, peer->conn_id);
        uct_aptus_stats_print(dest, "aptus-peer", name, stats,
                              sizeof(stats) / sizeof(stats[0]));
    }
}

/* One line per channel: messages by size class ("le64", "le256", ...). */
static void uct_aptus_tl_iface_print_sizes(uct_aptus_tl_iface_t *iface,
                                           const char *dest)
{
    static const char *const names[UCT_APTUS_SIZE_CLASSES] = {
        "le64",  "le256",  "le1k", "le4k", "le16k",
        "le64k", "le256k", "le1m", "gt1m"
    };
    uct_aptus_stat_t stats[UCT_APTUS_SIZE_CLASSES];
    char name[64];
    unsigned chan, c;

    if ((dest == NULL) || (dest[0] == '\0')) {
        return;
    }
    for (chan = 0; chan < APTUS_CHAN_LAST; ++chan) {
        if (iface->stats.tx_msgs[chan] == 0) {
            continue;
        }
        for (c = 0; c < UCT_APTUS_SIZE_CLASSES; ++c) {
            stats[c].name  = names[c];
            stats[c].value = iface->stats.tx_by_size[chan][c];
        }
        snprintf(name, sizeof(name), "%s/%s", iface->dev_name,
                 aptus_chan_names[chan]);
        uct_aptus_stats_print(dest, "aptus-sizes", name, stats,
                              UCT_APTUS_SIZE_CLASSES);
    }
}

static void uct_aptus_tl_iface_print_peers(uct_aptus_tl_iface_t *iface,
                                           const char *dest)
{
    aptus_ud_peer_t *peer;

    if ((dest == NULL) || (dest[0] == '\0')) {
        return;
    }
    kh_foreach_key(&iface->ud.peers, peer,
                   uct_aptus_tl_iface_print_peer(iface, dest, peer))
}

/* ---- life -------------------------------------------------------------- */

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_aptus_tl_iface_t, uct_iface_t);

static uct_iface_ops_t uct_aptus_tl_iface_tl_ops = {
    .ep_am_short            = uct_aptus_tl_ep_am_short,
    .ep_am_short_iov        = uct_base_ep_am_short_iov,
    .ep_am_bcopy            = uct_aptus_tl_ep_am_bcopy,
    .ep_am_zcopy            = uct_aptus_tl_ep_am_zcopy,
    .ep_put_zcopy           = uct_aptus_tl_ep_put_zcopy,
    .ep_put_short           = uct_aptus_tl_ep_put_short,
    .ep_put_bcopy           = uct_aptus_tl_ep_put_bcopy,
    .ep_get_bcopy           = uct_aptus_tl_ep_get_bcopy,
    .ep_get_zcopy           = uct_aptus_tl_ep_get_zcopy,
    .ep_pending_add         = uct_aptus_tl_ep_pending_add,
    .ep_pending_purge       = uct_aptus_tl_ep_pending_purge,
    .ep_flush               = uct_aptus_tl_ep_flush,
    .ep_fence               = uct_aptus_tl_ep_fence,
    .ep_check               = uct_aptus_tl_ep_check,
    .ep_create              = uct_aptus_tl_ep_create,
    .ep_destroy             = uct_aptus_tl_ep_destroy,
    .iface_flush            = uct_aptus_tl_iface_flush,
    .iface_fence            = uct_base_iface_fence,
    .iface_progress_enable  = uct_base_iface_progress_enable,
    .iface_progress_disable = uct_base_iface_progress_disable,
    .iface_progress         = uct_aptus_tl_iface_progress,
    .iface_event_fd_get     = ucs_empty_function_return_unsupported,
    .iface_event_arm        = ucs_empty_function_return_unsupported,
    .iface_close            = UCS_CLASS_DELETE_FUNC_NAME(uct_aptus_tl_iface_t),
    .iface_query            = uct_aptus_tl_iface_query,
    .iface_get_device_address = uct_aptus_tl_iface_get_device_address,
    .iface_get_address        = uct_aptus_tl_iface_get_address,
    .iface_is_reachable       = uct_aptus_tl_iface_is_reachable,
};

static ucs_status_t uct_aptus_tl_iface_estimate_perf(uct_iface_h tl_iface,
                                                     uct_perf_attr_t *perf_attr)
{
    return uct_aptus_iface_estimate_perf(
        tl_iface, perf_attr,
        ucs_derived_of(tl_iface, uct_aptus_tl_iface_t)->copy_bandwidth);
}

static uct_iface_internal_ops_t uct_aptus_tl_iface_internal_ops = {
    .iface_estimate_perf = uct_aptus_tl_iface_estimate_perf,
    .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function,
    .ep_query      = (uct_ep_query_func_t)ucs_empty_function_return_unsupported,
    .ep_invalidate = uct_aptus_tl_ep_invalidate,
};

/* The transport's own settings (the UD channels' are checked with
 * ud_sr's). Times: negative ones wrapped into hours, a zero window or
 * request timeout means nothing. */
static ucs_status_t
uct_aptus_tl_iface_check_config(const uct_aptus_tl_iface_config_t *config)
{
    const uct_aptus_time_range_t times[] = {
        { "ALLOC_WINDOW", config->alloc_window, 1e-3, 3600.0 },
        { "REQUEST_TIMEOUT", config->request_timeout, 1e-3, 3600.0 },
        { "BACKOFF", config->backoff, 0.0, 3600.0 },
        { "IDLE", config->idle, 0.0, 3600.0 },
        { "HOLD", config->hold, 0.0, 3600.0 },
    };
    const uct_aptus_range_t counts[] = {
        { "MAX_RC", uct_aptus_uint(config->max_rc), 0, 65536 },
        { "MAX_FP", uct_aptus_uint(config->max_fp), 0, 4096 },
        { "FP_MSGS", uct_aptus_uint(config->fp_msgs), 0, 1048576 },
        { "FP_BLOCK_SIZE", uct_aptus_bytes(config->fp_block_size),
          APTUS_VB_MIN_SIZE, APTUS_VB_MAX_SIZE },
        { "RC_MSGS", uct_aptus_uint(config->rc_msgs), 0, 1048576 },
        { "RC_BYTES", uct_aptus_bytes(config->rc_bytes), 0, UCS_GBYTE },
        { "REORDER_MAX", uct_aptus_uint(config->reorder_max), 1, 16777216 },
        { "RC_SEG_SIZE", uct_aptus_bytes(config->rc_seg_size),
          UCT_UD_SR_MAX_AM_HDR + sizeof(uint64_t) + UCT_APTUS_TRAILER_LEN,
          APTUS_FRAME_MAX_LEN - APTUS_RC_HDR_LEN },
        { "RC_CREDITS", uct_aptus_uint(config->rc_credits), 1,
          APTUS_RC_MAX_CREDITS },
        { "RC_RX_QUEUE_LEN", uct_aptus_uint(config->rc_rx_queue_len), 1,
          1048576 },
        { "RC_TX_BACKLOG", uct_aptus_bytes(config->rc_tx_backlog), 4096,
          UCS_GBYTE },
    };

    if (!uct_aptus_iface_config_check(
            UCT_APTUS_TL_NAME, UCT_APTUS_TL_CONFIG_PREFIX, &config->super) ||
        !uct_aptus_time_ranges_check(UCT_APTUS_TL_NAME,
                                     UCT_APTUS_TL_CONFIG_PREFIX, times,
                                     ucs_static_array_size(times)) ||
        !uct_aptus_ranges_check(UCT_APTUS_TL_NAME, UCT_APTUS_TL_CONFIG_PREFIX,
                                counts, ucs_static_array_size(counts))) {
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

static ucs_status_t
uct_aptus_tl_iface_rules(uct_aptus_tl_iface_t *iface,
                         const uct_aptus_tl_iface_config_t *config)
{
    aptus_rule_error_t err;
    uint64_t size, peers;

    if (aptus_rule_chain_parse(config->send_rules, &iface->rules, &err) != 0) {
        ucs_error(
            "aptus: invalid configuration: UCX_" UCT_APTUS_TL_CONFIG_PREFIX
            "SEND_RULES=\"%s\": at character %u: %s",
            config->send_rules, err.position, err.message);
        return UCS_ERR_INVALID_PARAM;
    }
    if (!aptus_rule_chain_covers(&iface->rules, &size, &peers)) {
        ucs_error(
            "aptus: invalid configuration: UCX_" UCT_APTUS_TL_CONFIG_PREFIX
            "SEND_RULES=\"%s\": a message of %" PRIu64 " bytes (with %" PRIu64
            " peers) matches no rule of a UD channel, which "
            "every peer has; end the chain with {any ud_sr} or "
            "{any ud_zcopy}",
            config->send_rules, size, peers);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* The largest message size a rule admits (capped at 64 KB, more than a
 * fast-path message may hold), 0 when none. */
static uint32_t uct_aptus_tl_rule_max_size(const aptus_rule_t *rule)
{
    uint64_t max = UINT16_MAX;
    unsigned i;

    for (i = 0; i < rule->num_conds; ++i) {
        if (rule->conds[i].subject != APTUS_RULE_SIZE) {
            continue;
        }
        switch (rule->conds[i].op) {
        case APTUS_RULE_LE:
        case APTUS_RULE_EQ:
            max = ucs_min(max, rule->conds[i].value);
            break;
        case APTUS_RULE_LT:
            max = (rule->conds[i].value == 0)
                      ? 0
                      : ucs_min(max, rule->conds[i].value - 1);
            break;
        default:
            break;
        }
    }
    return (uint32_t)max;
}

static ucs_status_t
uct_aptus_tl_iface_alloc_init(uct_aptus_tl_iface_t *iface,
                              const uct_aptus_tl_iface_config_t *config)
{
    aptus_alloc_config_t ac;
    const char *bad;
    uint32_t fp_max_size = 0;
    unsigned i;

    /* the largest message an rc_fp rule takes: what earns a fast path */
    for (i = 0; i < iface->rules.num_rules; ++i) {
        if (iface->rules.rules[i].chan == APTUS_RULE_RC_FP) {
            fp_max_size =
                ucs_max(fp_max_size,
                        uct_aptus_tl_rule_max_size(&iface->rules.rules[i]));
        }
    }
    memset(&ac, 0, sizeof(ac));
    ac.max[APTUS_ALLOC_RC] = config->max_rc;
    /* a fast path needs RC: MAX_RC=0 (UD only) turns them off too, and so
     * does a chain without an rc_fp rule */
    ac.max[APTUS_ALLOC_FP] =
        (fp_max_size == 0) ? 0 : ucs_min(config->max_fp, config->max_rc);
    ac.window_us          = uct_ud_sr_usec(config->alloc_window);
    ac.rc_msgs            = config->rc_msgs;
    ac.rc_bytes           = config->rc_bytes;
    ac.fp_msgs            = (ac.max[APTUS_ALLOC_FP] == 0) ? 0 : config->fp_msgs;
    ac.fp_max_size        = (fp_max_size == 0) ? 2048 : fp_max_size;
    ac.request_timeout_us = uct_ud_sr_usec(config->request_timeout);
    ac.backoff_us         = uct_ud_sr_usec(config->backoff);
    ac.idle_us            = uct_ud_sr_usec(config->idle);
    ac.hold_us            = uct_ud_sr_usec(config->hold);
    bad                   = aptus_alloc_config_check(&ac);
    if (bad != NULL) {
        ucs_error(
            "aptus: invalid configuration: %s (UCX_" UCT_APTUS_TL_CONFIG_PREFIX
            "MAX_RC=%u, MAX_FP=%u, "
            "RC_MSGS=%u, RC_BYTES=%zu)",
            bad, config->max_rc, config->max_fp, config->rc_msgs,
            config->rc_bytes);
        return UCS_ERR_INVALID_PARAM;
    }
    aptus_alloc_init(&iface->alloc, &ac);
    return UCS_OK;
}

static ucs_status_t
uct_aptus_tl_iface_rc_init(uct_aptus_tl_iface_t *iface,
                           const uct_aptus_tl_iface_config_t *config)
{
    aptus_conn_wire_config_t wire_config;
    aptus_rc_chan_config_t chan_config;
    ucs_status_t status;

    /* messages are delivered in place and never held there */
    memset(&wire_config, 0, sizeof(wire_config));
    /* RC_SEG_SIZE of the user's bytes, and the trailer */
    wire_config.max_frame =
        APTUS_RC_HDR_LEN + config->rc_seg_size + UCT_APTUS_TRAILER_LEN;
    wire_config.rx_headroom    = 0;
    wire_config.rx_buffers     = config->rc_rx_queue_len;
    wire_config.rx_max_buffers = config->rc_rx_queue_len;
    wire_config.rx_alignment   = iface->am_align;
    wire_config.rx_align_offset =
        APTUS_FRAME_HDR_LEN + APTUS_RC_HDR_LEN + iface->am_align_offset;
    wire_config.max_backlog = config->rc_tx_backlog;
    wire_config.handlers    = &aptus_rc_chan_wire_handlers;
    wire_config.arg         = &iface->rc;
    status = aptus_sock_conn_open(iface->dev_name, &wire_config, &iface->conn);
    if (status != UCS_OK) {
        return status;
    }

    chan_config.credits    = config->rc_credits;
    chan_config.max_msg    = config->rc_seg_size + UCT_APTUS_TRAILER_LEN;
    chan_config.local_port = aptus_sock_wire_addr_port(&iface->conn->addr);
    /* one key names the interface on both channels */
    status =
        aptus_rc_chan_init(&iface->rc, iface->conn, &chan_config,
                           iface->ud.local_key, &uct_aptus_tl_rc_ops, iface);
    if (status != UCS_OK) {
        iface->conn->ops->close(iface->conn);
        return status;
    }
    /* a peer on another host gets its one-sided operations over UD-ZCopy:
     * the data and the messages that announce it may take different
     * channels here, so nothing may complete before the data is in place */
    status = aptus_rc_rdma_chan_init(&iface->rdma, &iface->rc, 0);
    if (status != UCS_OK) {
        aptus_rc_chan_cleanup(&iface->rc);
        iface->conn->ops->close(iface->conn);
        return status;
    }
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_aptus_tl_iface_t, uct_md_h md,
                           uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_aptus_tl_iface_config_t *config =
        ucs_derived_of(tl_config, uct_aptus_tl_iface_config_t);
    uct_ud_sr_setup_t setup;
    ucs_async_context_t *async;
    ucs_status_t status;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("aptus: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(
        uct_base_iface_t, &uct_aptus_tl_iface_tl_ops,
        &uct_aptus_tl_iface_internal_ops, md, worker, params,
        tl_config UCS_STATS_ARG(NULL) UCS_STATS_ARG(UCT_APTUS_TL_NAME));

    ucs_strncpy_zero(self->dev_name, params->mode.device.dev_name,
                     sizeof(self->dev_name));
    uct_aptus_failures_init(&self->failures);
    self->ctl_list      = NULL;
    self->xack_list     = NULL;
    self->num_xack      = 0;
    self->max_xack      = 0;
    self->resend_list   = NULL;
    self->num_resend    = 0;
    self->max_resend    = 0;
    self->num_ctl       = 0;
    self->max_ctl       = 0;
    self->rc_list       = NULL;
    self->num_rc        = 0;
    self->max_rc_list   = 0;
    self->next_check_us = 0;
    self->dispatching   = NULL;
    self->timer.fd      = -1;
    self->rma           = config->rc_rma;
    self->reorder_max   = config->reorder_max;
    self->rx_headroom =
        UCT_IFACE_PARAM_VALUE(params, rx_headroom, RX_HEADROOM, 0);
    self->held_release.cb = uct_aptus_tl_held_release;
    memset(&self->stats, 0, sizeof(self->stats));
    async  = self->super.worker->async;
    status = uct_aptus_iface_async_check(UCT_APTUS_TL_NAME, async);
    if (status != UCS_OK) {
        return status;
    }

    /* Every setting is checked before anything opens. */
    status = uct_aptus_tl_iface_check_config(config);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_ud_sr_params_setup(
        &config->ud, UCT_APTUS_TL_NAME, UCT_APTUS_TL_CONFIG_PREFIX, params,
        ucs_offsetof(uct_aptus_tl_ep_t, peer), &setup);
    if (status != UCS_OK) {
        return status;
    }
    self->am_align        = setup.chan.am_align;
    self->am_align_offset = setup.chan.am_align_offset;
    status                = uct_aptus_tl_iface_rules(self, config);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_aptus_tl_iface_alloc_init(self, config);
    if (status != UCS_OK) {
        return status;
    }
    memset(&self->fpc, 0, sizeof(self->fpc)); /* cleanup-safe until init */
    self->rc_idle_tick = 0;

    self->bounce =
        ucs_malloc(ucs_max(setup.chan.max_msg,
                           config->rc_seg_size + UCT_APTUS_TRAILER_LEN),
                   "uct_aptus_bounce");
    if (self->bounce == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    kh_init_inplace(uct_aptus_rc_peers, &self->rc_peers);
    ucs_arbiter_init(&self->pending);

    status = ucs_mpool_init(&self->zcomp_mp, 0, sizeof(uct_aptus_tl_zcomp_t), 0,
                            8, 128, UINT_MAX, &aptus_mpool_plain_ops,
                            "aptus_zcopy_comps");
    if (status != UCS_OK) {
        goto err_bounce;
    }
    status = ucs_mpool_init(&self->keep_mp, 0,
                            sizeof(uct_aptus_tl_copy_t) + config->rc_seg_size +
                                UCT_APTUS_TRAILER_LEN,
                            0, 8, 16, UINT_MAX, &aptus_mpool_plain_ops,
                            "aptus_rc_copies");
    if (status != UCS_OK) {
        goto err_zcomp;
    }

    status = aptus_sock_dgram_open(self->dev_name, &setup.wire, &self->dgram);
    if (status != UCS_OK) {
        goto err_mpool;
    }
    status = aptus_ud_chan_init(&self->ud, &setup.chan, self->dgram, async,
                                &uct_aptus_tl_ud_ops, self, uct_ud_sr_clock,
                                uct_ud_sr_random_key());
    if (status != UCS_OK) {
        goto err_dgram;
    }
    status = aptus_udz_init(&self->udz, &self->ud, &setup.udz,
                            uct_aptus_md_check_region_cb,
                            ucs_derived_of(md, uct_aptus_md_t));
    if (status != UCS_OK) {
        goto err_ud;
    }
    aptus_ud_chan_set_internal(&self->ud, uct_aptus_tl_ud_internal, self);
    self->udz.stop_async = &self->async_rx.user_waiting;
    /* one datagram, trailer included (RC would take more) */
    self->max_short =
        aptus_ud_chan_max_short(&self->ud) - UCT_APTUS_TRAILER_LEN;

    status = uct_aptus_tl_iface_rc_init(self, config);
    if (status != UCS_OK) {
        goto err_udz;
    }
    status = uct_aptus_tl_fp_init(self, config);
    if (status != UCS_OK) {
        goto err_rc;
    }

    aptus_sock_netif_caps(self->dev_name, &self->latency,
                          &self->copy_bandwidth);
    /* the rendezvous' get is zero copy (RC-RDMA, or UD-ZCopy, the slower) */
    self->bandwidth =
        aptus_sock_netif_zcopy_bw(self->dev_name, self->copy_bandwidth);
    status = uct_aptus_async_timer_start(
        &self->timer, async, setup.async_interval_us, setup.async_max_us,
        uct_aptus_tl_iface_timer, self);
    if (status != UCS_OK) {
        ucs_error("aptus: cannot start the async timer: %s",
                  ucs_status_string(status));
        goto err_fp;
    }

    uct_aptus_async_rx_init(&self->async_rx, UCT_APTUS_TL_NAME, async,
                            self->dgram->ops->event_fd(self->dgram),
                            uct_aptus_tl_iface_event, self);
    self->ud_watched = (self->conn->ops->watch_fd != NULL) &&
                       (self->dgram->ops->event_fd(self->dgram) >= 0) &&
                       (self->conn->ops->watch_fd(
                            self->conn, self->dgram->ops->event_fd(self->dgram),
                            &self->ud_ready) == UCS_OK);

    ucs_debug("aptus/%s: key 0x%016" PRIx64 " max_rc %u rules %s",
              self->dev_name, self->ud.local_key, config->max_rc,
              config->send_rules);
    return UCS_OK;

err_fp:
    uct_aptus_tl_fp_cleanup(self);
err_rc:
    aptus_rc_chan_cleanup(&self->rc);
    self->conn->ops->close(self->conn);
    aptus_rc_rdma_chan_cleanup(&self->rdma);
err_udz:
    aptus_udz_cleanup(&self->udz);
err_ud:
    aptus_ud_chan_cleanup(&self->ud);
err_dgram:
    self->dgram->ops->close(self->dgram);
err_mpool:
    ucs_mpool_cleanup(&self->keep_mp, 0);
err_zcomp:
    ucs_mpool_cleanup(&self->zcomp_mp, 0);
err_bounce:
    ucs_arbiter_cleanup(&self->pending);
    kh_destroy_inplace(uct_aptus_rc_peers, &self->rc_peers);
    ucs_free(self->bounce);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_aptus_tl_iface_t)
{
    uct_aptus_md_t *md = ucs_derived_of(self->super.md, uct_aptus_md_t);
    uct_aptus_stat_t stats[128];
    unsigned n;

    uct_aptus_async_timer_stop(&self->timer);
    uct_aptus_async_rx_cleanup(&self->async_rx);

    UCS_ASYNC_BLOCK(self->super.worker->async);
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    n = uct_aptus_tl_iface_stats(self, stats, 128);
    uct_aptus_stats_print(md->stats, UCT_APTUS_TL_NAME, self->dev_name, stats,
                          n);
    uct_aptus_tl_iface_print_sizes(self, md->stats);
    uct_aptus_tl_iface_print_peers(self, md->stats);
    /* the streams first: their peers give their connections back to the
     * RC channel, which then closes them all */
    aptus_udz_cleanup(&self->udz);
    aptus_ud_chan_cleanup(&self->ud);
    self->dgram->ops->close(self->dgram);
    aptus_rc_chan_cleanup(&self->rc);
    self->conn->ops->close(self->conn);
    aptus_rc_rdma_chan_cleanup(&self->rdma);
    uct_aptus_tl_fp_cleanup(self); /* a late write from a peer now fails */
    ucs_mpool_cleanup(&self->keep_mp, 1);
    ucs_mpool_cleanup(&self->zcomp_mp, 1);
    ucs_arbiter_cleanup(&self->pending);
    kh_destroy_inplace(uct_aptus_rc_peers, &self->rc_peers);
    uct_aptus_failures_cleanup(&self->failures);
    ucs_free(self->ctl_list);
    ucs_free(self->xack_list);
    ucs_free(self->resend_list);
    ucs_free(self->rc_list);
    ucs_free(self->bounce);
    UCS_ASYNC_UNBLOCK(self->super.worker->async);
}

UCS_CLASS_DEFINE(uct_aptus_tl_iface_t, uct_base_iface_t);

static UCS_CLASS_DEFINE_NEW_FUNC(uct_aptus_tl_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t *,
                                 const uct_iface_config_t *);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_aptus_tl_iface_t, uct_iface_t);

static ucs_status_t
uct_aptus_tl_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                           unsigned *num_devices_p)
{
    return uct_aptus_iface_query_devices(md, 0, devices_p, num_devices_p);
}

UCT_TL_DEFINE_ENTRY(&uct_aptus_component, aptus, uct_aptus_tl_query_devices,
                    uct_aptus_tl_iface_t, UCT_APTUS_TL_CONFIG_PREFIX,
                    uct_aptus_tl_iface_config_table,
                    uct_aptus_tl_iface_config_t);
