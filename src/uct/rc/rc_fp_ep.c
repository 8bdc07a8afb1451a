/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: rc_fp endpoints: active messages over the fast path or over
 * RC-SR, in one order, and the sending side of the channel's control.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_fp.h"

#include <uct/base/uct_iov.inl>

#include <string.h>

static inline uct_rc_fp_iface_t *uct_rc_fp_ep_iface(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep->iface, uct_rc_fp_iface_t);
}

/* A control message over the endpoint's connection. */
static ucs_status_t uct_rc_fp_ep_ctl(uct_rc_fp_iface_t *iface,
                                     aptus_rc_link_t *link,
                                     const aptus_fp_ctl_t *ctl)
{
    uint8_t buf[APTUS_FP_CTL_MAX_LEN];
    aptus_chan_send_t send;
    ssize_t ret;

    aptus_chan_send_copy(&send, APTUS_FP_CTL_AM, NULL, 0, buf,
                         aptus_fp_ctl_pack(buf, ctl));
    send.flags = APTUS_CHAN_SEND_F_INTERNAL;
    ret = aptus_chan_send(&iface->super.chan.super, (aptus_chan_peer_t *)link,
                          &send);
    return (ret >= 0) ? UCS_OK : (ucs_status_t)ret;
}

static void uct_rc_fp_tx_table_del(uct_rc_fp_iface_t *iface, uct_rc_fp_ep_t *ep)
{
    uct_rc_fp_ep_t *last = iface->tx[--iface->num_tx];

    iface->tx[ep->fp.slot] = last;
    last->fp.slot          = ep->fp.slot;
}

/* The fast path of ep ends (refused, unreachable, failed, or the endpoint
 * goes); tell: whether the receiver's block is to be released. */
static void uct_rc_fp_tx_off(uct_rc_fp_iface_t *iface, uct_rc_fp_ep_t *ep,
                             int tell)
{
    int was_on = (ep->fp.state == UCT_RC_FP_TX_ON);
    aptus_fp_ctl_t ctl;

    if ((ep->fp.state != UCT_RC_FP_TX_REQUESTED) && !was_on) {
        return;
    }
    /* off first: the RELEASE below may fail the connection, whose failure
     * comes back here */
    ep->fp.state = UCT_RC_FP_TX_OFF;
    uct_rc_fp_tx_table_del(iface, ep);
    if (was_on) {
        aptus_chan_peer_disconnect(&iface->fpc.super,
                                   (aptus_chan_peer_t *)&ep->fp.peer);
    }
    if (tell) {
        ctl.type             = APTUS_FP_CTL_RELEASE;
        ctl.nonce            = ep->fp.nonce;
        ctl.release.fp_total = ep->fp.peer.sent;
        if (uct_rc_fp_ep_ctl(iface, &ep->super.link, &ctl) == UCS_OK) {
            iface->stats.released++;
        } else if (iface->num_releases < iface->max_channels) {
            /* no credit now: progress sends it over any connection to the
             * peer (without one left, the peer frees the block itself) */
            iface->releases[iface->num_releases].peer_key =
                ep->super.link.peer_key;
            iface->releases[iface->num_releases].nonce = ctl.nonce;
            iface->releases[iface->num_releases].fp_total =
                ctl.release.fp_total;
            iface->num_releases++;
            iface->answers_owed = 1;
        }
    }
    ep->super.link.reserved = 0;
}

void uct_rc_fp_peer_lost(void *arg, aptus_fp_peer_t *peer)
{
    uct_rc_fp_iface_t *iface = arg;

    uct_rc_fp_tx_off(iface, ucs_container_of(peer, uct_rc_fp_ep_t, fp.peer), 1);
}

void uct_rc_fp_link_failed(uct_rc_sr_iface_t *sr, aptus_rc_link_t *link,
                           ucs_status_t status)
{
    uct_rc_fp_iface_t *iface = ucs_derived_of(sr, uct_rc_fp_iface_t);
    uct_rc_fp_ep_t *ep = ucs_container_of(link, uct_rc_fp_ep_t, super.link);

    /* nothing more is written into the peer's block, nor sent */
    uct_rc_fp_tx_off(iface, ep, 0);
    aptus_fp_peer_fail(&iface->fpc, &ep->fp.peer, status);
}

/* Enough small messages went to this peer: ask for a channel. */
static void uct_rc_fp_ep_request(uct_rc_fp_iface_t *iface, uct_rc_fp_ep_t *ep)
{
    aptus_fp_ctl_t ctl;

    if (iface->num_tx >= iface->max_channels) {
        return; /* this process sends into as many as it may */
    }
    if (++iface->next_nonce == 0) {
        iface->next_nonce = 1;
    }
    ctl.type            = APTUS_FP_CTL_REQUEST;
    ctl.nonce           = iface->next_nonce;
    ctl.request.host_id = iface->host_id;
    if (uct_rc_fp_ep_ctl(iface, &ep->super.link, &ctl) != UCS_OK) {
        return; /* no credit now: asked again with the next message */
    }
    ep->fp.state = UCT_RC_FP_TX_REQUESTED;
    /* the RELEASE at the end must find a credit */
    ep->super.link.reserved    = 1;
    ep->fp.nonce               = ctl.nonce;
    ep->fp.rc_early            = 0; /* RC-SR messages on its account */
    ep->fp.slot                = iface->num_tx;
    iface->tx[iface->num_tx++] = ep;
    iface->stats.tx_peak       = ucs_max(iface->stats.tx_peak, iface->num_tx);
    iface->stats.requests++;
}

/*
 * A user's active message, iov[1 .. iovcnt) its bytes (iov[0] and
 * iov[iovcnt] are this function's): over the fast path when it may, else
 * over RC-SR with the order trailer.
 */
static ucs_status_t uct_rc_fp_ep_send(uct_rc_fp_iface_t *iface,
                                      uct_rc_fp_ep_t *ep, uint8_t id,
                                      struct iovec *iov, unsigned iovcnt,
                                      size_t length)
{
    uint8_t trailer[APTUS_FP_TRAILER_LEN];
    aptus_chan_send_t send;
    ucs_status_t status;

    if (length <= iface->max_msg) {
        iface->stats.eligible++;
        if (ucs_likely(ep->fp.state == UCT_RC_FP_TX_ON)) {
            /* into the block, the credits of the one back riding along;
             * no room, or the block is lost: over RC-SR */
            ep->fp.peer.back =
                uct_rc_fp_back_block(iface, ep->super.link.peer_key);
            aptus_chan_send_iov(&send, id, NULL, 0, iov + 1, iovcnt - 1, NULL);
            if (aptus_chan_send(&iface->fpc.super,
                                (aptus_chan_peer_t *)&ep->fp.peer,
                                &send) == UCS_OK) {
                return UCS_OK;
            }
        } else if ((ep->fp.state == UCT_RC_FP_TX_NONE) &&
                   (++ep->fp.eligible >= iface->thresh)) {
            uct_rc_fp_ep_request(iface, ep);
        }
    }

    aptus_fp_trailer_pack(trailer, ep->fp.nonce, ep->fp.peer.sent);
    iov[iovcnt].iov_base = trailer;
    iov[iovcnt].iov_len  = sizeof(trailer);
    aptus_chan_send_iov(&send, id, NULL, 0, iov + 1, iovcnt, NULL);
    status = (ucs_status_t)aptus_chan_send(
        &iface->super.chan.super, (aptus_chan_peer_t *)&ep->super.link, &send);
    if ((status == UCS_OK) && (ep->fp.nonce != 0)) {
        /* the fast-path messages after it wait for it */
        if (ep->fp.peer.attached) {
            ep->fp.peer.before++;
        } else {
            ep->fp.rc_early++;
        }
    }
    return status;
}

ucs_status_t uct_rc_fp_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length)
{
    uct_rc_fp_iface_t *iface = uct_rc_fp_ep_iface(tl_ep);
    struct iovec iov[4];

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(header) + length, 0,
                     iface->super.chan.config.max_msg - APTUS_FP_TRAILER_LEN,
                     "am_short");
    iov[1].iov_base = &header;
    iov[1].iov_len  = sizeof(header);
    iov[2].iov_base = (void *)payload;
    iov[2].iov_len  = length;
    return uct_rc_fp_ep_send(iface, ucs_derived_of(tl_ep, uct_rc_fp_ep_t), id,
                             iov, 3, sizeof(header) + length);
}

ssize_t uct_rc_fp_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                              uct_pack_callback_t pack_cb, void *arg,
                              unsigned flags)
{
    uct_rc_fp_iface_t *iface = uct_rc_fp_ep_iface(tl_ep);
    uct_rc_fp_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_fp_ep_t);
    struct iovec iov[3];
    ucs_status_t status;
    size_t length;

    UCT_CHECK_AM_ID(id);
    /* where it goes depends on its size: pack first (an RC-SR send that
     * finds no credit then leaves the packed bytes unused) */
    if ((ep->fp.state != UCT_RC_FP_TX_ON) &&
        (aptus_rc_chan_rma_check(&iface->super.chan, &ep->super.link) ==
         UCS_ERR_NO_RESOURCE)) {
        return UCS_ERR_NO_RESOURCE;
    }
    length          = pack_cb(iface->super.bounce, arg);
    iov[1].iov_base = iface->super.bounce;
    iov[1].iov_len  = length;
    status          = uct_rc_fp_ep_send(iface, ep, id, iov, 2, length);
    return (status == UCS_OK) ? (ssize_t)length : status;
}

ucs_status_t uct_rc_fp_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                   const void *header, unsigned header_length,
                                   const uct_iov_t *uiov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp)
{
    uct_rc_fp_iface_t *iface = uct_rc_fp_ep_iface(tl_ep);
    struct iovec iov[APTUS_RC_MAX_IOV + 1];
    size_t length = header_length;
    size_t i;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_IOV_SIZE(iovcnt, (size_t)APTUS_RC_MAX_IOV - 2,
                       "uct_rc_fp_ep_am_zcopy");
    UCT_CHECK_LENGTH(header_length, 0, UCT_RC_SR_MAX_AM_HDR, "am_zcopy header");
    iov[1].iov_base = (void *)header;
    iov[1].iov_len  = header_length;
    for (i = 0; i < iovcnt; ++i) {
        iov[2 + i].iov_base = uiov[i].buffer;
        iov[2 + i].iov_len  = uct_iov_get_length(&uiov[i]);
        length += iov[2 + i].iov_len;
    }
    UCT_CHECK_LENGTH(length, 0,
                     iface->super.chan.config.max_msg - APTUS_FP_TRAILER_LEN,
                     "am_zcopy");
    /* both paths have the bytes when they return: no completion */
    return uct_rc_fp_ep_send(iface, ucs_derived_of(tl_ep, uct_rc_fp_ep_t), id,
                             iov, 2 + iovcnt, length);
}

ucs_status_t uct_rc_fp_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p)
{
    uct_rc_fp_ep_t *ep;
    ucs_status_t status;

    /* rc_sr's endpoint, of rc_fp's size: the fast path starts off */
    status = uct_rc_sr_ep_create(params, ep_p);
    if (status != UCS_OK) {
        return status;
    }
    /* the channel's peer is made when the block is granted */
    ep = ucs_derived_of(*ep_p, uct_rc_fp_ep_t);
    memset(&ep->fp, 0, sizeof(ep->fp));
    ep->fp.peer.status = UCS_OK;
    return UCS_OK;
}

void uct_rc_fp_ep_destroy(uct_ep_h tl_ep)
{
    uct_rc_fp_iface_t *iface = uct_rc_fp_ep_iface(tl_ep);
    uct_rc_fp_ep_t *ep       = ucs_derived_of(tl_ep, uct_rc_fp_ep_t);

    uct_rc_fp_tx_off(iface, ep, 1);
    uct_rc_sr_ep_destroy(tl_ep);
}

/* ---- control from the receiver ----------------------------------------- */

static uct_rc_fp_ep_t *uct_rc_fp_find_tx(uct_rc_fp_iface_t *iface,
                                         uint64_t peer_key, uint16_t nonce)
{
    unsigned i;

    for (i = 0; i < iface->num_tx; ++i) {
        if ((iface->tx[i]->fp.nonce == nonce) &&
            (iface->tx[i]->super.link.peer_key == peer_key)) {
            return iface->tx[i];
        }
    }
    return NULL;
}

static void uct_rc_fp_granted(uct_rc_fp_iface_t *iface, uct_rc_fp_ep_t *ep,
                              const aptus_fp_ctl_t *ctl)
{
    aptus_fp_remote_t remote;
    aptus_chan_peer_t *peer;
    aptus_mem_key_t key;
    aptus_fp_geom_t geom;
    ucs_status_t status;

    /* the receiver's geometry (checked by the parser), and its block */
    geom.mode           = (aptus_fp_mode_t)ctl->grant.mode;
    geom.size           = ctl->grant.size;
    geom.slots          = ctl->grant.slots;
    geom.slot_size      = ctl->grant.slot_size;
    key.address         = ctl->grant.address;
    key.length          = ctl->grant.size;
    key.host_id         = ctl->grant.host_id;
    key.pid             = ctl->grant.pid;
    key.token           = ctl->grant.token;
    remote.peer_key     = ep->super.link.peer_key;
    remote.carrier_peer = &ep->super.link;
    remote.geom         = &geom;
    remote.key          = &key;
    remote.conn         = ep->super.link.conn; /* the grant came over it */
    remote.nonce        = ep->fp.nonce;
    remote.before       = ep->fp.rc_early;
    status = aptus_chan_peer_connect(&iface->fpc.super, &remote, &ep->fp.peer,
                                     &peer);
    if (status != UCS_OK) {
        iface->stats.unreachable += (status == UCS_ERR_UNREACHABLE);
        uct_rc_fp_tx_off(iface, ep, 1);
        return;
    }
    ep->fp.state = UCT_RC_FP_TX_ON;
    iface->stats.granted++;
}

void uct_rc_fp_ep_handle_ctl(uct_rc_fp_iface_t *iface, aptus_rc_link_t *link,
                             const aptus_fp_ctl_t *ctl)
{
    uct_rc_fp_ep_t *ep = uct_rc_fp_find_tx(iface, link->peer_key, ctl->nonce);

    if (ep == NULL) {
        iface->stats.ctl_unknown++; /* the endpoint went meanwhile */
        return;
    }
    switch (ctl->type) {
    case APTUS_FP_CTL_GRANT:
        if (ep->fp.state == UCT_RC_FP_TX_REQUESTED) {
            uct_rc_fp_granted(iface, ep, ctl);
        }
        break;
    case APTUS_FP_CTL_REFUSE:
        iface->stats.refused++;
        uct_rc_fp_tx_off(iface, ep, 0);
        break;
    case APTUS_FP_CTL_CREDIT:
        iface->stats.credit_msgs_received++;
        (void)aptus_fp_chan_credit_in(&iface->fpc, link->peer_key, ctl->nonce,
                                      ctl->credit.credits);
        break;
    default:
        iface->stats.ctl_unknown++;
        break;
    }
}
