/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: aptus channel allocation between two processes.
 *
 * The decisions are the pure allocator's (proto/chan_alloc.h); this file
 * carries them over the peer's UD stream and opens or closes the RC
 * connection they agree on:
 *
 *  - a peer whose traffic earns RC (only messages the rule chain would
 *    send over RC or its fast path count) makes the sender reserve a slot and
 * send REQUEST; the receiver grants only if it can reserve one too (GRANT),
 *    else REFUSE: a connection is used only once both hold a slot, so no
 *    process ever holds more than UCX_APTUS_MAX_RC;
 *  - the requester connects when GRANT arrives; the grantor takes that
 *    connection for its own sends (or connects itself, the two are merged);
 *  - a connection idle for UCX_APTUS_IDLE (and older than UCX_APTUS_HOLD)
 *    is demoted: the slot is given back, DEMOTE tells the peer, both close
 *    their end. What was sent on it is still delivered, in order.
 *
 * The messages go through the hub of control messages (aptus_tl_ctl.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "proto/le.h"

static uint64_t uct_aptus_tl_rc_map_key(const uct_aptus_tl_ep_t *ep)
{
    return uct_aptus_tl_rc_map_key_of(ep->peer.remote_key, ep->peer.conn_id);
}

static void uct_aptus_tl_map_add(uct_aptus_tl_iface_t *iface,
                                 uct_aptus_tl_ep_t *ep)
{
    khiter_t iter;
    int ret;

    if (ep->flags & UCT_APTUS_EP_IN_MAP) {
        return;
    }
    iter = kh_put(uct_aptus_rc_peers, &iface->rc_peers,
                  uct_aptus_tl_rc_map_key(ep), &ret);
    if (ret == UCS_KH_PUT_FAILED) {
        return; /* its connection's messages then count as unknown */
    }
    kh_value(&iface->rc_peers, iter) = ep;
    ep->flags |= UCT_APTUS_EP_IN_MAP;
}

/* The peer holds an RC slot: set up its connection state (unconnected). */
static int uct_aptus_tl_rc_open(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_rc_t *rc;

    uct_aptus_tl_map_add(iface, ep);
    if (ep->act->rc != NULL) {
        return 1;
    }
    rc = ucs_calloc(1, sizeof(*rc), "uct_aptus_rc");
    if (rc == NULL) {
        return 0;
    }
    if (!uct_aptus_tl_ep_list_add(&iface->rc_list, ep)) {
        ucs_free(rc);
        return 0;
    }
    rc->ep      = ep;
    ep->act->rc = rc;
    return 1;
}

void uct_aptus_tl_ep_rc_close(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_rc_t *rc = ep->act->rc;

    if (rc == NULL) {
        return;
    }
    ep->act->rc = NULL;
    uct_aptus_tl_ep_list_del(&iface->rc_list, ep);
    if (rc->connected) {
        /* the channel keeps the connection until what was sent on it is
         * out, and keeps receiving until the peer closes its end */
        aptus_chan_peer_disconnect(&iface->rc.super,
                                   (aptus_chan_peer_t *)&rc->link);
        iface->stats.rc_closed++;
    }
    ucs_free(rc);
    if (ep->blocked == UCT_APTUS_BLOCKED_RC) {
        ep->blocked = UCT_APTUS_BLOCKED_UD;
    }
    uct_aptus_tl_fp_sync(iface, ep); /* a fast path goes with RC */
}

static void uct_aptus_tl_act(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                             aptus_alloc_action_t act, aptus_alloc_kind_t kind)
{
    static const char *act_names[] = { "none",   "request", "grant",
                                       "refuse", "open",    "demote" };

    if (act != APTUS_ALLOC_ACT_NONE) {
        ucs_debug("aptus/%s: ep %p %s %s (used %u/%u)", iface->dev_name, ep,
                  act_names[act], (kind == APTUS_ALLOC_RC) ? "rc" : "fp",
                  iface->alloc.used[kind], iface->alloc.config.max[kind]);
    }
    switch (act) {
    case APTUS_ALLOC_ACT_REQUEST:
        /* the peer may grant and send over its connection before its GRANT
         * reaches us: its messages must find this peer already */
        uct_aptus_tl_map_add(iface, ep);
        uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_REQUEST, kind);
        break;
    case APTUS_ALLOC_ACT_GRANT:
        if (((kind == APTUS_ALLOC_RC) && !uct_aptus_tl_rc_open(iface, ep)) ||
            ((kind == APTUS_ALLOC_FP) && !uct_aptus_tl_fp_open(iface, ep))) {
            /* no memory (no free block) for it: give the slot back */
            aptus_alloc_release(&iface->alloc, &ep->act->alloc, kind,
                                uct_ud_sr_clock());
            uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_REFUSE, kind);
            break;
        }
        uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_GRANT, kind);
        if (kind == APTUS_ALLOC_FP) {
            /* after GRANT on the stream: our block, for the peer to use */
            uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_FP_BLOCK, kind);
        }
        break;
    case APTUS_ALLOC_ACT_REFUSE:
        uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_REFUSE, kind);
        break;
    case APTUS_ALLOC_ACT_OPEN:
        if ((kind == APTUS_ALLOC_RC) && uct_aptus_tl_rc_open(iface, ep)) {
            /* the requester connects at once: the grantor then finds the
             * connection there when it first sends */
            uct_aptus_tl_ep_rc_link(iface, ep);
            break;
        }
        if ((kind == APTUS_ALLOC_FP) && uct_aptus_tl_fp_open(iface, ep)) {
            uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_FP_BLOCK, kind);
            break;
        }
        aptus_alloc_release(&iface->alloc, &ep->act->alloc, kind,
                            uct_ud_sr_clock());
        uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_DEMOTE, kind);
        break;
    case APTUS_ALLOC_ACT_DEMOTE:
        if (kind == APTUS_ALLOC_RC) {
            uct_aptus_tl_ep_rc_close(iface, ep);
        }
        uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_DEMOTE, kind);
        break;
    default:
        break;
    }
    /* whatever freed the fast-path slot: stop writing, say so */
    uct_aptus_tl_fp_sync(iface, ep);
}

void uct_aptus_tl_ep_sent(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                          aptus_chan_type_t chan, size_t size)
{
    aptus_alloc_kind_t used, kind;
    aptus_alloc_action_t act;
    unsigned rule, rc_chans;
    aptus_rule_chan_t would;

    ep->act->tx_msgs[chan]++;
    ep->act->tx_bytes[chan] += size;
    iface->stats.tx_msgs[chan]++;
    iface->stats.tx_bytes[chan] += size;
    iface->stats.tx_by_size[chan][uct_aptus_size_class(size)]++;
    if (iface->alloc.config.max[APTUS_ALLOC_RC] == 0) {
        return; /* UD only */
    }
    if ((chan == APTUS_CHAN_RC_SR) || (chan == APTUS_CHAN_RC_RDMA)) {
        used = APTUS_ALLOC_RC;
    } else if (chan == APTUS_CHAN_RC_FP) {
        used = APTUS_ALLOC_FP;
    } else if ((ep->act->alloc.slot[APTUS_ALLOC_RC].state ==
                APTUS_ALLOC_GRANTED) &&
               (iface->alloc.config.fp_msgs > 0) &&
               (size <= iface->alloc.config.fp_max_size)) {
        /* a peer with RC earns a fast path by its small messages, which
         * the rules keep on UD until it has one */
        used = APTUS_ALLOC_KIND_LAST;
    } else {
        /* Only traffic that a connection or its fast path would carry
         * earns one: small messages go by the fast path where a rule says
         * so (the frequent peers of an all-to-all of 64 B: 4 ranks 19 ->
         * 11 us per call, 16 ranks 245 -> 190 us, where UD pays an ACK
         * per datagram), and stay on UD where none does. (To a peer on
         * another host, the connection carries what a fast path would.) */
        rc_chans = APTUS_RULE_BIT(APTUS_RULE_RC_SR) |
                   (iface->rma ? APTUS_RULE_BIT(APTUS_RULE_RC_RDMA) : 0) |
                   (((iface->alloc.config.max[APTUS_ALLOC_FP] > 0) &&
                     (iface->alloc.config.fp_msgs > 0))
                        ? APTUS_RULE_BIT(APTUS_RULE_RC_FP)
                        : 0);
        would = aptus_rule_chain_select(
            &iface->rules,
            (chan == APTUS_CHAN_UD_ZCOPY) ? APTUS_RULE_DATA_CHANS
                                          : APTUS_RULE_EAGER_CHANS,
            size, aptus_ud_chan_num_peers(&iface->ud.chan),
            APTUS_RULE_UD_CHANS | rc_chans, &rule);
        if (!(APTUS_RULE_BIT(would) & rc_chans) ||
            ((would == APTUS_RULE_RC_SR) &&
             (size + UCT_APTUS_TRAILER_LEN > iface->rc.config.max_msg))) {
            return; /* UD would carry it anyway */
        }
        used = APTUS_ALLOC_KIND_LAST;
    }
    act = aptus_alloc_sent(&iface->alloc, &ep->act->alloc, size, used,
                           uct_ud_sr_clock(), &kind);
    if (ucs_unlikely(act != APTUS_ALLOC_ACT_NONE)) {
        uct_aptus_tl_act(iface, ep, act, kind);
    }
}

/* An allocation message from the peer (REQUEST, GRANT, REFUSE, DEMOTE). */
void uct_aptus_tl_alloc_recv(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                             const uint8_t *msg, size_t length)
{
    uint64_t now = uct_ud_sr_clock();
    aptus_alloc_kind_t kind;
    aptus_alloc_action_t act;

    if ((length != UCT_APTUS_CTL_LEN) || (msg[1] >= APTUS_ALLOC_KIND_LAST) ||
        (msg[0] < UCT_APTUS_CTL_REQUEST) || (msg[0] > UCT_APTUS_CTL_DEMOTE)) {
        iface->stats.rx_malformed++;
        return;
    }
    iface->stats.ctl_received++;
    if (!uct_aptus_tl_ep_init_state(iface, ep)) {
        return; /* out of memory, said so */
    }
    kind = (aptus_alloc_kind_t)msg[1];
    if ((msg[0] == UCT_APTUS_CTL_REQUEST) || (msg[0] == UCT_APTUS_CTL_GRANT)) {
        /* a message refused leaves what we knew of the peer as it was */
        if (aptus_get16(msg + 2) == 0) {
            iface->stats.rx_malformed++;
            return;
        }
        ep->rc_credits = aptus_get16(msg + 2);
        ep->rc_port    = aptus_get32(msg + 4);
    }

    switch (msg[0]) {
    case UCT_APTUS_CTL_REQUEST:
        act = aptus_alloc_requested(&iface->alloc, &ep->act->alloc, kind, now);
        break;
    case UCT_APTUS_CTL_GRANT:
        act =
            aptus_alloc_answered(&iface->alloc, &ep->act->alloc, kind, 1, now);
        if ((act == APTUS_ALLOC_ACT_NONE) &&
            (ep->act->alloc.slot[kind].state == APTUS_ALLOC_GRANTED)) {
            /* both asked at once and both granted: on, no one connected
             * (a fast path: each gave its block with its GRANT) */
            if ((kind == APTUS_ALLOC_RC) ? !uct_aptus_tl_rc_open(iface, ep)
                                         : !uct_aptus_tl_fp_open(iface, ep)) {
                act = APTUS_ALLOC_ACT_DEMOTE;
                aptus_alloc_release(&iface->alloc, &ep->act->alloc, kind, now);
            }
        }
        break;
    case UCT_APTUS_CTL_REFUSE:
        act =
            aptus_alloc_answered(&iface->alloc, &ep->act->alloc, kind, 0, now);
        break;
    default: /* DEMOTE */
        ucs_debug("aptus/%s: ep %p peer demoted %s", iface->dev_name, ep,
                  (kind == APTUS_ALLOC_RC) ? "rc" : "fp");
        if (ep->act->alloc.slot[kind].state != APTUS_ALLOC_NONE) {
            iface->alloc.stats.demoted[kind]++;
        }
        aptus_alloc_release(&iface->alloc, &ep->act->alloc, kind, now);
        if (kind == APTUS_ALLOC_RC) {
            uct_aptus_tl_ep_rc_close(iface, ep);
        }
        act = APTUS_ALLOC_ACT_NONE;
        break;
    }
    uct_aptus_tl_act(iface, ep, act, kind);
}

unsigned uct_aptus_tl_alloc_progress(uct_aptus_tl_iface_t *iface,
                                     uint64_t now_us)
{
    aptus_alloc_action_t act;
    aptus_alloc_kind_t kind;
    uct_aptus_tl_ep_t *ep;
    unsigned i, count = 0;

    /* demotions and unanswered requests, a few times per hold period */
    if ((int64_t)(now_us - iface->next_check_us) < 0) {
        return count;
    }
    iface->next_check_us = now_us + iface->alloc.config.request_timeout_us / 4;
    for (i = 0; i < ucs_array_length(&iface->rc_list);) {
        ep  = ucs_array_elem(&iface->rc_list, i);
        act = aptus_alloc_check(&iface->alloc, &ep->act->alloc, now_us, &kind);
        if (act == APTUS_ALLOC_ACT_DEMOTE) {
            uct_aptus_tl_act(iface, ep, act, kind); /* removes it */
            ++count;
            continue;
        }
        if ((ep->act->alloc.slot[APTUS_ALLOC_RC].state == APTUS_ALLOC_NONE) &&
            (ep->act->rc != NULL)) {
            uct_aptus_tl_ep_rc_close(iface, ep);
            continue;
        }
        uct_aptus_tl_fp_sync(iface, ep); /* a request that expired */
        ++i;
    }
    return count;
}

void uct_aptus_tl_alloc_forget(uct_aptus_tl_iface_t *iface,
                               uct_aptus_tl_ep_t *ep)
{
    khiter_t iter;
    int kind;

    if (ep->act == NULL) {
        return; /* nothing allocated, nothing connected */
    }
    uct_aptus_tl_ep_rc_close(iface, ep);
    uct_aptus_tl_fp_forget(iface, ep);
    for (kind = 0; kind < APTUS_ALLOC_KIND_LAST; ++kind) {
        if (ep->act->alloc.slot[kind].state != APTUS_ALLOC_NONE) {
            aptus_alloc_release(&iface->alloc, &ep->act->alloc, kind, 0);
        }
    }
    if (ep->flags & UCT_APTUS_EP_CTL_LIST) {
        uct_aptus_tl_ep_list_del(&iface->ctl_list, ep);
    }
    uct_aptus_tl_resend_forget(iface, ep);
    if (ep->flags & UCT_APTUS_EP_IN_MAP) {
        iter = kh_get(uct_aptus_rc_peers, &iface->rc_peers,
                      uct_aptus_tl_rc_map_key(ep));
        if ((iter != kh_end(&iface->rc_peers)) &&
            (kh_value(&iface->rc_peers, iter) == ep)) {
            kh_del(uct_aptus_rc_peers, &iface->rc_peers, iter);
        }
    }
    ep->flags = 0;
}
