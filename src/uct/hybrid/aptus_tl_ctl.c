/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the hybrid's control messages, one hub.
 *
 * Every control message between two aptus interfaces rides the peer's UD
 * stream as an internal message: the allocation's REQUEST, GRANT, REFUSE
 * and DEMOTE (aptus_tl_alloc.c), the fast path's credits, blocks and DONE
 * (aptus_tl_fp.c), and the XACK of messages a failed connection left
 * unconfirmed (aptus_tl_resend.c). Here they are sent, owed when the
 * stream's window is full and sent from progress, and received and handed
 * to the part each type belongs to, so the parts talk to the hub and not
 * to each other.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "proto/le.h"

/* An owed allocation message: its type (low 4 bits) and kind */
#define UCT_APTUS_CTL_OWED(_type, _kind) ((uint8_t)((_type) | ((_kind) << 4)))
#define UCT_APTUS_CTL_OWED_TYPE(_owed)   ((_owed)&0xf)
#define UCT_APTUS_CTL_OWED_KIND(_owed)   ((_owed) >> 4)

/* Owe a control message: the allocation's go in the order they were made
 * (a GRANT of a connection before the request for its fast path, a DEMOTE
 * of the fast path before its connection's), and a later one of the same
 * kind replaces the earlier, since it says what this side holds now; the
 * fast path's are built from the endpoint's state when sent. */
static void uct_aptus_tl_ctl_owe(uct_aptus_tl_iface_t *iface,
                                 uct_aptus_tl_ep_t *ep,
                                 uct_aptus_ctl_type_t type,
                                 aptus_alloc_kind_t kind)
{
    uint8_t *q = ep->act->ctl_alloc;
    unsigned i, n;

    if (type >= UCT_APTUS_CTL_FP_CREDIT) {
        ep->act->ctl_owed |= UCS_BIT(type - 1);
    } else {
        for (i = 0, n = 0; i < APTUS_ALLOC_KIND_LAST; ++i) {
            if ((q[i] != 0) && (UCT_APTUS_CTL_OWED_KIND(q[i]) != kind)) {
                q[n++] = q[i];
            }
        }
        q[n++] = UCT_APTUS_CTL_OWED(type, kind);
        for (; n < APTUS_ALLOC_KIND_LAST; ++n) {
            q[n] = 0;
        }
    }
    iface->stats.ctl_deferred++;
    if (!(ep->flags & UCT_APTUS_EP_CTL_LIST) &&
        uct_aptus_tl_ep_list_add(&iface->ctl_list, ep)) {
        ep->flags |= UCT_APTUS_EP_CTL_LIST;
    }
}

static ssize_t uct_aptus_tl_ctl_try(uct_aptus_tl_iface_t *iface,
                                    uct_aptus_tl_ep_t *ep,
                                    uct_aptus_ctl_type_t type,
                                    aptus_alloc_kind_t kind)
{
    uint8_t msg[ucs_max(UCT_APTUS_CTL_LEN, UCT_APTUS_FP_BLOCK_LEN)];
    size_t length = UCT_APTUS_CTL_LEN;
    ssize_t ret;

    if (type >= UCT_APTUS_CTL_FP_CREDIT) {
        length = uct_aptus_tl_fp_ctl_pack(iface, ep, type, msg);
        if (length == 0) {
            return 0; /* nothing to say any more */
        }
    } else {
        msg[0] = type;
        msg[1] = kind;
        aptus_put16(msg + 2, iface->rc.config.credits);
        aptus_put32(msg + 4, iface->rc.config.local_port);
    }
    ret = aptus_ud_chan_send_internal(
        &iface->ud.chan, &ep->peer, UCT_APTUS_CTL_MSG_ID, msg, length, NULL, 0);
    if (ret >= 0) {
        if (type == UCT_APTUS_CTL_FP_CREDIT) {
            uct_aptus_tl_fp_credits_sent(iface, ep);
        } else if (type == UCT_APTUS_CTL_FP_DONE) {
            ep->act->fp_done_nonce = 0;
        }
    }
    return ret;
}

void uct_aptus_tl_ctl_send(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                           uct_aptus_ctl_type_t type, aptus_alloc_kind_t kind)
{
    ssize_t ret;

    /* a block that drains after its peer fell idle may still owe credits */
    if (!uct_aptus_tl_ep_init_state(iface, ep)) {
        return;
    }
    if (ucs_unlikely(uct_aptus_tl_ctl_owes(ep->act))) {
        /* behind what is owed already, never ahead of it */
        uct_aptus_tl_ctl_owe(iface, ep, type, kind);
        return;
    }
    ret = uct_aptus_tl_ctl_try(iface, ep, type, kind);
    if (ret >= 0) {
        iface->stats.ctl_sent++;
    } else if (ret == UCS_ERR_NO_RESOURCE) {
        uct_aptus_tl_ctl_owe(iface, ep, type, kind);
    }
    /* another error: the stream failed, and the peer with it */
}

/* Send what ep owes, in order; returns the messages sent, and leaves the
 * rest owed when the window fills again. */
static unsigned uct_aptus_tl_ctl_send_owed(uct_aptus_tl_iface_t *iface,
                                           uct_aptus_tl_ep_t *ep)
{
    uint8_t *q = ep->act->ctl_alloc;
    unsigned type, count = 0;
    ssize_t ret;

    while (q[0] != 0) {
        ret = uct_aptus_tl_ctl_try(iface, ep, UCT_APTUS_CTL_OWED_TYPE(q[0]),
                                   UCT_APTUS_CTL_OWED_KIND(q[0]));
        if (ret == UCS_ERR_NO_RESOURCE) {
            return count;
        }
        memmove(q, q + 1, APTUS_ALLOC_KIND_LAST - 1);
        q[APTUS_ALLOC_KIND_LAST - 1] = 0;
        iface->stats.ctl_sent += (ret >= 0);
        ++count;
    }
    for (type = UCT_APTUS_CTL_FP_CREDIT; type <= UCT_APTUS_CTL_FP_BLOCK;
         ++type) {
        if (!(ep->act->ctl_owed & UCS_BIT(type - 1))) {
            continue;
        }
        ret = uct_aptus_tl_ctl_try(iface, ep, type, APTUS_ALLOC_FP);
        if (ret == UCS_ERR_NO_RESOURCE) {
            break;
        }
        ep->act->ctl_owed &= ~UCS_BIT(type - 1);
        iface->stats.ctl_sent += (ret >= 0);
        ++count;
    }
    return count;
}

unsigned uct_aptus_tl_ctl_progress(uct_aptus_tl_iface_t *iface)
{
    unsigned i, count = 0;
    uct_aptus_tl_ep_t *ep;

    for (i = 0; i < ucs_array_length(&iface->ctl_list);) {
        ep = ucs_array_elem(&iface->ctl_list, i);
        count += uct_aptus_tl_ctl_send_owed(iface, ep);
        if (!uct_aptus_tl_ctl_owes(ep->act)) {
            ep->flags &= ~UCT_APTUS_EP_CTL_LIST;
            uct_aptus_tl_ep_list_remove(&iface->ctl_list, i);
        } else {
            ++i;
        }
    }
    return count;
}

ucs_status_t uct_aptus_tl_ctl_recv(uct_aptus_tl_iface_t *iface,
                                   uct_aptus_tl_ep_t *ep, const void *data,
                                   size_t length)
{
    const uint8_t *msg = data;

    if ((length == UCT_APTUS_CTL_LEN) && (msg[0] == UCT_APTUS_CTL_XACK)) {
        iface->stats.ctl_received++;
        if (uct_aptus_tl_ep_init_state(iface, ep)) {
            uct_aptus_tl_xack_recv(iface, ep, aptus_get32(msg + 4));
        }
        return UCS_OK;
    }
    if ((length >= 1) && (msg[0] >= UCT_APTUS_CTL_FP_CREDIT) &&
        (msg[0] <= UCT_APTUS_CTL_FP_BLOCK)) {
        if (uct_aptus_tl_ep_init_state(iface, ep)) {
            uct_aptus_tl_fp_ctl_recv(iface, ep, msg, length);
        }
        return UCS_OK;
    }
    uct_aptus_tl_alloc_recv(iface, ep, msg, length);
    return UCS_OK;
}
