/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the fast path (RC-FP) of the aptus transport.
 *
 * A peer that holds RC and keeps sending small messages earns a fast-path
 * slot under UCX_APTUS_MAX_FP (proto/chan_alloc.h: both sides reserve one
 * before it is used). Each side then gives the other a block of its own
 * memory (FP_BLOCK over the UD stream), a Veloblock ring (proto/fp_ring.h)
 * that the other writes messages into with one ordered one-sided write and
 * that this side polls. A message carries the peer's sequence number in
 * its trailer like every aptus message, so the receiver's one order per
 * peer covers the fast path too, and a message without room in the block
 * simply takes the next channel of the rule chain.
 *
 * Credits (freed bytes) ride on fast-path messages going back, or go in an
 * FP_CREDIT message once a quarter of the block piled up. A side that
 * stops writing into a block (its slot was demoted, refused or released)
 * says FP_DONE after its last write; the owner drains the block and frees
 * it. A block whose endpoint went before FP_DONE came is not reused (the
 * peer may still write into it) until that FP_DONE arrives.
 *
 * The data path is the RC-FP channel (channel/rc_fp_chan.h), the same as
 * rc_fp's: its blocks (at most MAX_FP, mapped on first use and kept until
 * close, when a late write from a peer fails at the writer), rings, writes,
 * polling and piggybacked credits. This file is the control around it:
 * which peer gets a block, and the UD messages that say so. The order
 * word of the channel's header stays 0: the trailer's sequence number
 * orders a peer's messages across every channel.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "proto/le.h"

static const aptus_fp_chan_upcalls_t uct_aptus_tl_fp_upcalls;

ucs_status_t uct_aptus_tl_fp_init(uct_aptus_tl_iface_t *iface,
                                  const uct_aptus_tl_iface_config_t *config)
{
    unsigned num = iface->alloc.config.max[APTUS_ALLOC_FP];
    aptus_fp_geom_t geom;
    ucs_status_t status;
    const char *why;

    iface->fp_next_nonce = 0;
    if (aptus_fp_geom_make(APTUS_FP_VELOBLOCK, config->fp_block_size, 0, 0,
                           &geom, &why) != 0) {
        ucs_error(
            "aptus: invalid configuration: UCX_" UCT_APTUS_TL_CONFIG_PREFIX
            "FP_BLOCK_SIZE=%zu: %s",
            config->fp_block_size, why);
        return UCS_ERR_INVALID_PARAM;
    }
    /* as many blocks to give as peers to write into: the allocator grants
     * both directions of one slot together */
    status = aptus_fp_chan_init(&iface->fpc, &geom, num, num, iface->conn,
                                &iface->ud.chan.super, &uct_aptus_tl_fp_upcalls,
                                iface);
    if (status != UCS_OK) {
        ucs_error("aptus: cannot set up %u fast-path channels", num);
        return status;
    }
    iface->fpc.numa_node = iface->ud.chan.config.numa_node;
    return UCS_OK;
}

void uct_aptus_tl_fp_cleanup(uct_aptus_tl_iface_t *iface)
{
    aptus_fp_chan_cleanup(&iface->fpc);
}

int uct_aptus_tl_fp_open(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep)
{
    aptus_fp_block_t *b;

    if (ep->act->fp_rx != NULL) {
        return 1; /* a repeated grant: the same block */
    }
    if (++iface->fp_next_nonce == 0) {
        ++iface->fp_next_nonce; /* 0 names no block */
    }
    b = aptus_fp_chan_block_open(&iface->fpc, ep, ep->peer.remote_key,
                                 iface->fp_next_nonce);
    if (b == NULL) {
        iface->stats.fp_refused_no_block++;
        return 0;
    }
    ep->act->fp_rx = b;
    return 1;
}

static void uct_aptus_tl_fp_block_free(uct_aptus_tl_iface_t *iface,
                                       aptus_fp_block_t *b)
{
    uct_aptus_tl_ep_t *ep = b->owner;

    if ((ep != NULL) && (ep->act != NULL)) {
        ep->act->fp_rx = NULL;
    }
    aptus_fp_chan_block_close(&iface->fpc, b);
}

static void uct_aptus_tl_fp_tx_free(uct_aptus_tl_iface_t *iface,
                                    uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_fp_tx_t *tx = ep->act->fp_tx;

    if (tx == NULL) {
        return;
    }
    if (tx->connected) {
        aptus_chan_peer_disconnect(&iface->fpc.super,
                                   (aptus_chan_peer_t *)&tx->peer);
    }
    ucs_free(tx);
    ep->act->fp_tx = NULL;
}

void uct_aptus_tl_fp_sync(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep)
{
    uint16_t nonce;

    if ((ep->act->fp_tx == NULL) ||
        (ep->act->alloc.slot[APTUS_ALLOC_FP].state != APTUS_ALLOC_NONE)) {
        return;
    }
    nonce = ep->act->fp_tx->nonce;
    uct_aptus_tl_fp_tx_free(iface, ep);
    ep->act->fp_done_nonce = nonce;
    /* after the last write: the owner may drain and free its block */
    uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_FP_DONE, APTUS_ALLOC_FP);
}

void uct_aptus_tl_fp_forget(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep)
{
    aptus_fp_block_t *b = ep->act->fp_rx;

    /* nothing is sent from here (the stream may be closing, or the
     * interface): the peer's block for us is orphaned on its side when
     * its endpoint for us goes */
    uct_aptus_tl_fp_tx_free(iface, ep);
    ep->act->fp_done_nonce = 0;
    if (b != NULL) {
        /* the peer may still write into it until its FP_DONE */
        iface->stats.fp_blocks_orphaned++;
        aptus_fp_chan_block_orphan(&iface->fpc, b);
        ep->act->fp_rx = NULL;
    }
}

/* The peer's block is unusable (a write failed, credits it never had):
 * give the slot back, stop, tell the peer. */
static void uct_aptus_tl_fp_drop(uct_aptus_tl_iface_t *iface,
                                 uct_aptus_tl_ep_t *ep)
{
    aptus_alloc_release(&iface->alloc, &ep->act->alloc, APTUS_ALLOC_FP,
                        uct_ud_sr_clock());
    uct_aptus_tl_fp_sync(iface, ep);
    uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_DEMOTE, APTUS_ALLOC_FP);
}

void uct_aptus_tl_ep_set_remote(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep)
{
    if (ep->flags & UCT_APTUS_EP_REMOTE) {
        return;
    }
    ep->flags |= UCT_APTUS_EP_REMOTE;
    if (ep->act == NULL) {
        /* an idle peer holds no slot: its active state, when it comes,
         * starts barred (uct_aptus_tl_ep_init_state_slow) */
        iface->alloc.stats.barred[APTUS_ALLOC_FP]++;
        return;
    }
    if (ep->act->alloc.slot[APTUS_ALLOC_FP].state != APTUS_ALLOC_NONE) {
        uct_aptus_tl_fp_drop(iface, ep);
    }
    aptus_alloc_bar(&iface->alloc, &ep->act->alloc, APTUS_ALLOC_FP,
                    uct_ud_sr_clock());
}

void uct_aptus_tl_fp_attach(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_fp_tx_t *tx = ep->act->fp_tx;
    aptus_fp_remote_t remote;
    aptus_chan_peer_t *cpeer;
    ucs_status_t status;

    if (ep->act->alloc.slot[APTUS_ALLOC_FP].state == APTUS_ALLOC_NONE) {
        tx->waiting = 0; /* given up meanwhile */
        return;
    }
    if ((ep->act->rc != NULL) && !ep->act->rc->connected) {
        (void)uct_aptus_tl_ep_rc_link(iface, ep); /* the proof rides on it */
    }
    remote.peer_key     = ep->peer.remote_key;
    remote.carrier_peer = &ep->peer;
    remote.geom         = &tx->geom;
    remote.key          = &tx->key;
    /* the grant came over UD: its pid is held to the RC connection's
     * proven peer (FP goes with RC) */
    remote.conn   = ((ep->act->rc != NULL) && ep->act->rc->connected)
                        ? ep->act->rc->link.conn
                        : NULL;
    remote.nonce  = tx->nonce;
    remote.before = 0; /* the trailer's sequence orders */
    if ((remote.conn == NULL) && (ep->act->rc != NULL)) {
        return; /* still connecting: asked again with the next send */
    }
    status =
        aptus_chan_peer_connect(&iface->fpc.super, &remote, &tx->peer, &cpeer);
    if (status == UCS_ERR_NO_RESOURCE) {
        return; /* the proof is on its way: asked again */
    }
    tx->waiting = 0;
    if (status != UCS_OK) {
        /* another host (no fast path to it), an edited grant, or no room */
        uct_aptus_tl_fp_drop(iface, ep);
        if (status == UCS_ERR_UNREACHABLE) {
            /* the wire proved the peer is out of its reach: not again */
            uct_aptus_tl_ep_set_remote(iface, ep);
        }
        return;
    }
    tx->connected = 1;
}

size_t uct_aptus_tl_fp_ctl_pack(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep, unsigned type,
                                uint8_t *msg)
{
    aptus_fp_block_t *b = ep->act->fp_rx;
    aptus_mem_key_t key;
    uint32_t credits;

    msg[0] = type;
    msg[1] = APTUS_ALLOC_FP;
    switch (type) {
    case UCT_APTUS_CTL_FP_CREDIT:
        if ((b == NULL) ||
            ((credits = aptus_fp_rx_pending_credits(&b->ring)) == 0)) {
            return 0;
        }
        aptus_put16(msg + 2, b->nonce);
        aptus_put32(msg + 4, credits);
        return UCT_APTUS_CTL_LEN;
    case UCT_APTUS_CTL_FP_DONE:
        if (ep->act->fp_done_nonce == 0) {
            return 0;
        }
        aptus_put16(msg + 2, ep->act->fp_done_nonce);
        aptus_put32(msg + 4, 0);
        return UCT_APTUS_CTL_LEN;
    case UCT_APTUS_CTL_FP_BLOCK:
        if (b == NULL) {
            return 0;
        }
        aptus_fp_chan_block_key(&iface->fpc, b, &key);
        aptus_put16(msg + 2, b->nonce);
        aptus_put32(msg + 4, key.length);
        aptus_put64(msg + 8, key.address);
        aptus_put32(msg + 16, key.pid);
        aptus_put64(msg + 20, key.host_id);
        aptus_put64(msg + 28, key.token);
        return UCT_APTUS_FP_BLOCK_LEN;
    default:
        return 0;
    }
}

void uct_aptus_tl_fp_credits_sent(uct_aptus_tl_iface_t *iface,
                                  uct_aptus_tl_ep_t *ep)
{
    if (ep->act->fp_rx != NULL) {
        /* the ones packed */
        (void)aptus_fp_chan_block_take_credits(&iface->fpc, ep->act->fp_rx);
    }
}

void uct_aptus_tl_fp_ctl_recv(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep, const uint8_t *msg,
                              size_t length)
{
    uct_aptus_tl_fp_tx_t *tx;
    aptus_fp_block_t *b;
    aptus_fp_geom_t geom;
    uint16_t nonce;
    const char *why;

    if (length < 4) {
        iface->stats.rx_malformed++;
        return;
    }
    nonce = aptus_get16(msg + 2);
    switch (msg[0]) {
    case UCT_APTUS_CTL_FP_CREDIT:
        if (length != UCT_APTUS_CTL_LEN) {
            break;
        }
        iface->stats.ctl_received++;
        /* of a block given up meanwhile: nothing to credit */
        (void)aptus_fp_chan_credit_in(&iface->fpc, ep->peer.remote_key, nonce,
                                      aptus_get32(msg + 4));
        return;
    case UCT_APTUS_CTL_FP_DONE:
        if (length != UCT_APTUS_CTL_LEN) {
            break;
        }
        iface->stats.ctl_received++;
        if ((ep->act->fp_rx != NULL) && (ep->act->fp_rx->nonce == nonce)) {
            /* every write came before this message: deliver, then free */
            aptus_fp_chan_block_drain(&iface->fpc, ep->act->fp_rx, UINT32_MAX);
            if (ep->act->fp_rx != NULL) {
                uct_aptus_tl_fp_block_free(iface, ep->act->fp_rx);
            }
            return;
        }
        b = aptus_fp_chan_block_find(&iface->fpc, ep->peer.remote_key, nonce);
        if ((b != NULL) && (b->state == APTUS_FP_BLOCK_ORPHAN)) {
            uct_aptus_tl_fp_block_free(iface, b);
        }
        return;
    case UCT_APTUS_CTL_FP_BLOCK:
        if ((length != UCT_APTUS_FP_BLOCK_LEN) || (nonce == 0) ||
            (aptus_fp_geom_make(APTUS_FP_VELOBLOCK, aptus_get32(msg + 4), 0, 0,
                                &geom, &why) != 0)) {
            break;
        }
        iface->stats.ctl_received++;
        if (ep->act->alloc.slot[APTUS_ALLOC_FP].state == APTUS_ALLOC_NONE) {
            return; /* given up meanwhile: its FP_DONE is on the way */
        }
        tx = ep->act->fp_tx;
        if (tx == NULL) {
            tx = ucs_calloc(1, sizeof(*tx), "uct_aptus_fp_tx");
            if (tx == NULL) {
                uct_aptus_tl_fp_drop(iface, ep);
                return;
            }
            tx->ep         = ep;
            ep->act->fp_tx = tx;
        } else if (tx->connected) {
            /* a repeated grant: the channel starts over */
            aptus_chan_peer_disconnect(&iface->fpc.super,
                                       (aptus_chan_peer_t *)&tx->peer);
            tx->connected = 0;
        }
        tx->key.address = aptus_get64(msg + 8);
        tx->key.length  = geom.size;
        tx->key.pid     = aptus_get32(msg + 16);
        tx->key.host_id = aptus_get64(msg + 20);
        tx->key.token   = aptus_get64(msg + 28);
        tx->geom        = geom;
        tx->nonce       = nonce;
        tx->waiting     = 1;
        uct_aptus_tl_fp_attach(iface, ep);
        return;
    default:
        break;
    }
    iface->stats.rx_malformed++;
}

/* ---- sending ------------------------------------------------------------ */

ucs_status_t uct_aptus_tl_fp_send(uct_aptus_tl_iface_t *iface,
                                  uct_aptus_tl_ep_t *ep, uint8_t id,
                                  const void *header, size_t header_length,
                                  const struct iovec *iov, unsigned iovcnt)
{
    aptus_fp_peer_t *peer = &ep->act->fp_tx->peer;
    aptus_chan_send_t send;

    /* what the peer freed in our block rides along */
    peer->back = ep->act->fp_rx;
    aptus_chan_send_iov(&send, id, header, header_length, iov, iovcnt, NULL);
    /* no room, or the block is lost: the next channel of the rules */
    return (aptus_chan_send(&iface->fpc.super, (aptus_chan_peer_t *)peer,
                            &send) == UCS_OK)
               ? UCS_OK
               : UCS_ERR_NO_RESOURCE;
}

/* ---- the channel's upcalls ---------------------------------------------- */

static ucs_status_t uct_aptus_tl_fp_deliver(void *arg, aptus_fp_block_t *b,
                                            uint8_t am_id, void *data,
                                            size_t length)
{
    if (length < UCT_APTUS_TRAILER_LEN) {
        return UCS_ERR_INVALID_PARAM; /* no sequence number: corrupt */
    }
    /* in place, no descriptor: a user that keeps it copies it */
    uct_aptus_tl_rx(arg, b->owner, am_id, data, length, 0);
    return UCS_OK;
}

static void uct_aptus_tl_fp_credits_owed(void *arg, aptus_fp_block_t *b)
{
    uct_aptus_tl_iface_t *iface = arg;

    iface->stats.fp_credit_msgs++;
    uct_aptus_tl_ctl_send(iface, b->owner, UCT_APTUS_CTL_FP_CREDIT,
                          APTUS_ALLOC_FP);
}

static void uct_aptus_tl_fp_block_failed(void *arg, aptus_fp_block_t *b,
                                         const char *why)
{
    uct_aptus_tl_iface_t *iface = arg;
    uct_aptus_tl_ep_t *ep       = b->owner;

    ucs_error("aptus/%s: fast-path block of peer 0x%016" PRIx64
              " is corrupt (%s): "
              "the peer is failed",
              iface->dev_name, b->peer_key, why);
    /* a message may be lost: the one order per peer cannot go on */
    aptus_chan_invalidate(&iface->ud.chan.super,
                          (aptus_chan_peer_t *)&ep->peer);
}

static void uct_aptus_tl_fp_peer_lost(void *arg, aptus_fp_peer_t *peer)
{
    uct_aptus_tl_fp_tx_t *tx =
        ucs_container_of(peer, uct_aptus_tl_fp_tx_t, peer);

    ucs_debug("aptus/%s: the fast path to 0x%016" PRIx64 " is lost: off",
              ((uct_aptus_tl_iface_t *)arg)->dev_name, peer->peer_key);
    uct_aptus_tl_fp_drop(arg, tx->ep);
}

static const aptus_fp_chan_upcalls_t uct_aptus_tl_fp_upcalls = {
    .deliver      = uct_aptus_tl_fp_deliver,
    .credits_owed = uct_aptus_tl_fp_credits_owed,
    .block_failed = uct_aptus_tl_fp_block_failed,
    .peer_lost    = uct_aptus_tl_fp_peer_lost,
};
