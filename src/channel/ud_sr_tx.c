/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel, send side: messages, segmentation, ACKs,
 * retransmission.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_chan_int.h"

#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>

static inline aptus_ud_tx_frag_t *aptus_ud_txe_frag(aptus_rel_txe_t *txe)
{
    return ucs_container_of(txe, aptus_ud_tx_frag_t, rel);
}

/* Payload of one fragment as a gather list; returns the entry count. */
static unsigned aptus_ud_tx_frag_iov(aptus_ud_chan_t *chan,
                                     aptus_ud_tx_msg_t *msg,
                                     const aptus_ud_tx_frag_t *frag,
                                     struct iovec *iov)
{
    size_t skip = frag->offset, left = frag->length, take;
    unsigned i, n                    = 0;

    if (left == 0) {
        return 0;
    }
    if (msg->owned != NULL) {
        iov[0].iov_base = UCS_PTR_BYTE_OFFSET(msg->owned, frag->offset);
        iov[0].iov_len  = left;
        return 1;
    }
    if (msg->iovcnt == 0) {
        iov[0].iov_base =
            UCS_PTR_BYTE_OFFSET(aptus_ud_tx_msg_data(chan, msg), frag->offset);
        iov[0].iov_len = left;
        return 1;
    }

    for (i = 0; (i < msg->iovcnt) && (left > 0); ++i) {
        if (skip >= msg->iov[i].iov_len) {
            skip -= msg->iov[i].iov_len;
            continue;
        }
        take            = ucs_min(msg->iov[i].iov_len - skip, left);
        iov[n].iov_base = UCS_PTR_BYTE_OFFSET(msg->iov[i].iov_base, skip);
        iov[n].iov_len  = take;
        ++n;
        left -= take;
        skip = 0;
    }
    ucs_assert(left == 0);
    return n;
}

static inline aptus_dgram_tx_t *aptus_ud_tx_batch_slot(aptus_ud_chan_t *chan,
                                                       uint8_t **hdr_p,
                                                       struct iovec **iov_p)
{
    aptus_ud_tx_batch_t *batch = &chan->batch;
    unsigned idx;

    if (batch->count == batch->max) {
        aptus_ud_tx_batch_flush(chan);
    }
    idx    = batch->count++;
    *hdr_p = batch->hdrs + idx * APTUS_UD_SR_ACK_MAX_LEN;
    *iov_p = batch->iov + idx * APTUS_DGRAM_MAX_IOV;
    return &batch->tx[idx];
}

/* Build a fragment's datagram: its header into hdr, the gather list (the
 * header first) into iov, and tx naming both. */
static void aptus_ud_tx_frag_build(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                   aptus_ud_tx_frag_t *frag, int ack_req,
                                   uint8_t *hdr, struct iovec *iov,
                                   aptus_dgram_tx_t *tx)
{
    aptus_ud_tx_msg_t *msg = frag->msg;
    aptus_ud_sr_pkt_t pkt;
    unsigned n, i;
    uint8_t flags;

    n = aptus_ud_tx_frag_iov(chan, msg, frag, iov + 1);
    /* without the remote's token the data asks for the handshake */
    flags = frag->flags | msg->hdr_flags |
            (ack_req ? APTUS_UD_SR_F_ACK_REQ : 0) |
            ((peer->remote_token != 0) ? 0 : APTUS_UD_SR_F_OPEN);
    if (ucs_likely(!chan->config.crc && ((frag->flags & (APTUS_UD_SR_F_FIRST |
                                                         APTUS_UD_SR_F_LAST)) !=
                                         APTUS_UD_SR_F_FIRST))) {
        /* no extension: the header alone, straight from the peer */
        iov[0].iov_len = aptus_ud_sr_build_hdr(
            hdr, peer->remote_key, chan->local_key, peer->remote_token,
            peer->local_token, frag->rel.psn, peer->rx.expected,
            APTUS_UD_SR_TYPE_DATA, msg->am_id, flags, peer->conn_id);
        goto out;
    }

    pkt.dest_key   = peer->remote_key;
    pkt.src_key    = chan->local_key;
    pkt.dest_token = peer->remote_token;
    pkt.src_token  = peer->local_token;
    pkt.psn        = frag->rel.psn;
    pkt.ack        = peer->rx.expected;
    pkt.type       = APTUS_UD_SR_TYPE_DATA;
    pkt.flags      = flags;
    pkt.am_id      = msg->am_id;
    pkt.conn_id    = peer->conn_id;
    pkt.msg_len    = msg->length;
    pkt.crc        = 0;
    if (chan->config.crc) {
        pkt.flags |= APTUS_UD_SR_F_CRC;
        for (i = 0; i < n; ++i) {
            pkt.crc =
                aptus_crc32c(pkt.crc, iov[1 + i].iov_base, iov[1 + i].iov_len);
        }
    }

    iov[0].iov_len = aptus_ud_sr_build(hdr, &pkt);

out:
    iov[0].iov_base = hdr;
    tx->dst         = &peer->addr;
    tx->iov         = iov;
    tx->iovcnt      = n + 1;

    /* The cumulative ack just went out with the data. */
    aptus_rel_rx_acked(&peer->rx, 0);
    chan->stats.tx_data_dgrams++;
}

static void aptus_ud_tx_batch_add_frag(aptus_ud_chan_t *chan,
                                       aptus_ud_peer_t *peer,
                                       aptus_ud_tx_frag_t *frag, int ack_req)
{
    aptus_dgram_tx_t *tx;
    struct iovec *iov;
    uint8_t *hdr;

    tx = aptus_ud_tx_batch_slot(chan, &hdr, &iov);
    aptus_ud_tx_frag_build(chan, peer, frag, ack_req, hdr, iov, tx);
}

void aptus_ud_tx_send_ctl(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                          uint8_t type, int ack_req)
{
    aptus_ud_sr_pkt_t pkt;
    aptus_dgram_tx_t *tx;
    struct iovec *iov;
    uint8_t *hdr;

    if (ucs_unlikely(peer->remote_token == 0) &&
        (type == APTUS_UD_SR_TYPE_ACK)) {
        return; /* no incarnation the remote side would take it in */
    }
    tx = aptus_ud_tx_batch_slot(chan, &hdr, &iov);

    pkt.dest_key   = peer->remote_key;
    pkt.src_key    = chan->local_key;
    pkt.dest_token = peer->remote_token;
    pkt.src_token  = peer->local_token;
    pkt.psn        = 0;
    pkt.ack        = peer->rx.expected;
    pkt.type       = type;
    pkt.flags      = 0;
    pkt.am_id      = 0;
    pkt.conn_id    = peer->conn_id;
    pkt.sack_words = 0;
    pkt.msg_len    = 0;
    pkt.crc        = 0;
    if (type == APTUS_UD_SR_TYPE_ACK) {
        if (ack_req) {
            /* a probe: "tell me what you have of everything before this" */
            pkt.flags |= APTUS_UD_SR_F_ACK_REQ;
            pkt.psn = (peer->win == NULL)
                          ? peer->parked.next_psn
                          : aptus_rel_tx_probe_upto(&peer->win->tx);
        } else if (peer->rx.flags & APTUS_REL_RX_REPLY) {
            pkt.flags |= APTUS_UD_SR_F_REPLY;
            pkt.psn = peer->rx.reply_upto;
        }
    }
    if (type == APTUS_UD_SR_TYPE_ACK) {
        pkt.sack_words = (uint8_t)aptus_rel_rx_sack(
            &peer->rx, aptus_ud_peer_rx_map(peer), pkt.sack);
        if (pkt.sack_words != 0) {
            pkt.flags |= APTUS_UD_SR_F_SACK;
        }
    }

    iov[0].iov_base = hdr;
    iov[0].iov_len  = aptus_ud_sr_build(hdr, &pkt);
    tx->dst         = &peer->addr;
    tx->iov         = iov;
    tx->iovcnt      = 1;

    if (type == APTUS_UD_SR_TYPE_ACK) {
        aptus_rel_rx_acked(&peer->rx, 1);
        chan->stats.tx_acks++;
    } else {
        chan->stats.tx_resets++;
    }
}

/* Zeros that pad path probes (bss: no page is used until read). */
static uint8_t aptus_ud_path_pad[APTUS_UD_PATH_PAD_MAX];

static void aptus_ud_tx_path(aptus_ud_chan_t *chan,
                             const aptus_wire_addr_t *dst, uint64_t dest_key,
                             uint16_t conn_id, uint32_t dest_token,
                             uint32_t src_token, size_t size, int reply)
{
    uint8_t hdr[APTUS_UD_SR_HDR_LEN];
    struct iovec iov[2];
    aptus_ud_sr_pkt_t pkt;
    aptus_dgram_tx_t tx;
    unsigned sent;

    memset(&pkt, 0, sizeof(pkt));
    pkt.dest_key    = dest_key;
    pkt.src_key     = chan->local_key;
    pkt.dest_token  = dest_token;
    pkt.src_token   = src_token;
    pkt.psn         = (uint16_t)size;
    pkt.type        = APTUS_UD_SR_TYPE_ACK;
    pkt.flags       = APTUS_UD_SR_F_PATH | (reply ? APTUS_UD_SR_F_REPLY : 0);
    pkt.conn_id     = conn_id;
    iov[0].iov_base = hdr;
    iov[0].iov_len  = aptus_ud_sr_build(hdr, &pkt);
    iov[1].iov_base = aptus_ud_path_pad;
    iov[1].iov_len  = reply ? 0 : size - iov[0].iov_len;
    tx.dst          = dst;
    tx.iov          = iov;
    tx.iovcnt       = reply ? 1 : 2;
    aptus_ud_tx_batch_flush(chan); /* in order behind what is built */
    aptus_ud_trace_tx(chan, &tx, 1);
    (void)chan->wire->ops->send(chan->wire, &tx, 1, &sent);
}

void aptus_ud_tx_path_probe(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                            size_t size)
{
    ucs_assert(size <= APTUS_UD_PATH_PAD_MAX);
    aptus_ud_tx_path(chan, &peer->addr, peer->remote_key, peer->conn_id,
                     peer->remote_token, peer->local_token, size, 0);
}

void aptus_ud_tx_path_reply(aptus_ud_chan_t *chan, const aptus_wire_addr_t *dst,
                            const aptus_ud_sr_pkt_t *probe)
{
    /* stateless: the probe's tokens go back, swapped, so that only the
     * incarnation that asked takes the answer */
    aptus_ud_tx_path(chan, dst, probe->src_key, probe->conn_id,
                     probe->src_token, probe->dest_token, probe->psn, 1);
}

void aptus_ud_tx_probe(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_tx_ctx_t ctx;

    if (peer->flags & APTUS_UD_PEER_HEARD) {
        aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_ACK, 1);
        return;
    }
    /* The peer may not have the stream yet (its first data lost): only
     * data with the OPEN flag may start it there, so the probe is the
     * oldest packet again, asking for an acknowledgement. */
    ctx.chan   = chan;
    ctx.peer   = peer;
    ctx.status = UCS_OK;
    chan->stats.tx_retransmits += aptus_rel_tx_resend_oldest(
        &peer->win->tx, chan->now_us, aptus_ud_tx_resend, &ctx);
}

void aptus_ud_tx_batch_flush(aptus_ud_chan_t *chan)
{
    aptus_ud_tx_batch_t *batch = &chan->batch;
    unsigned sent;

    if (batch->count == 0) {
        return;
    }
    /* What the wire could not take stays in the window and goes again when
     * its timer expires, like a datagram lost on the way. */
    aptus_ud_trace_tx(chan, batch->tx, batch->count);
    (void)chan->wire->ops->send(chan->wire, batch->tx, batch->count, &sent);
    batch->count = 0;
}

/* Whether the datagrams of a message of num_frags may go as trains. */
static inline int aptus_ud_tx_train_ok(aptus_ud_chan_t *chan,
                                       unsigned num_frags)
{
    return (num_frags > 1) && (chan->wire->ops->send_seg != NULL) &&
           (chan->wire->seg_max_bytes != 0);
}

/* Send the batch whose entries from start on are one message's datagrams,
 * all of seg_size bytes but the last: those go as trains, one system call
 * and one pass through the kernel's UDP stack for up to a train's worth
 * (UDP GSO). Each datagram keeps its own header, so the receiver cannot
 * tell. Where the wire refuses, they go one by one as before. */
static void aptus_ud_tx_batch_flush_trains(aptus_ud_chan_t *chan,
                                           unsigned start, size_t seg_size)
{
    aptus_ud_tx_batch_t *batch = &chan->batch;
    aptus_dgram_wire_t *wire   = chan->wire;
    unsigned i, k, j, n, left, trains, max_train, iovcnt, sent;
    ucs_status_t status;
    size_t len;

    aptus_ud_trace_tx(chan, batch->tx, batch->count);
    if (start > 0) {
        (void)wire->ops->send(wire, batch->tx, start, &sent);
        if (sent < start) {
            goto out; /* the socket is full: the window sends it later */
        }
    }

    max_train = ucs_min(ucs_min(wire->seg_max_count, APTUS_UD_TX_TRAIN_MAX),
                        wire->seg_max_bytes / seg_size);
    for (i = start; (i < batch->count) && (max_train >= 2); i += n) {
        /* trains of even length, so that no tail of one datagram is left */
        left   = batch->count - i;
        trains = ucs_div_round_up(left, max_train);
        n      = ucs_div_round_up(left, trains);
        if (n < 2) {
            break;
        }

        iovcnt = 0;
        for (k = i; k < i + n; ++k) {
            len = 0;
            for (j = 0; j < batch->tx[k].iovcnt; ++j) {
                len += batch->tx[k].iov[j].iov_len;
                batch->train_iov[iovcnt++] = batch->tx[k].iov[j];
            }
            /* the kernel cuts at seg_size: a short datagram inside would
             * shift every header after it */
            if ((len > seg_size) || ((len != seg_size) && (k + 1 < i + n))) {
                ucs_assertv(0, "datagram of %zu in a train of %zu", len,
                            seg_size);
                goto one_by_one;
            }
        }

        status = wire->ops->send_seg(wire, batch->tx[i].dst, batch->train_iov,
                                     iovcnt, seg_size);
        if (status == UCS_OK) {
            chan->stats.tx_trains++;
            chan->stats.tx_train_dgrams += n;
        } else if (status == UCS_ERR_UNSUPPORTED) {
            break;
        } else {
            goto out; /* as a datagram the wire could not take */
        }
    }

one_by_one:
    if (i < batch->count) {
        (void)wire->ops->send(wire, batch->tx + i, batch->count - i, &sent);
    }
out:
    batch->count = 0;
}

void aptus_ud_tx_release(void *arg, aptus_rel_txe_t *txe)
{
    aptus_ud_tx_ctx_t *ctx   = arg;
    aptus_ud_tx_frag_t *frag = aptus_ud_txe_frag(txe);
    aptus_ud_tx_msg_t *msg   = frag->msg;

    ucs_assert(ctx->peer->win->tx_bytes >= frag->length);
    ctx->peer->win->tx_bytes -= frag->length;
    if (--msg->frags_left > 0) {
        return;
    }
    if (msg->comp != NULL) {
        aptus_ud_chan_complete(ctx->chan, msg->comp, ctx->status);
    }
    if (ucs_unlikely(msg->owned != NULL)) {
        ucs_free(msg->owned);
    }
    ctx->chan->tx_msg_bytes -= msg->length;
    ucs_mpool_put_inline(msg);
}

void aptus_ud_tx_resend(void *arg, aptus_rel_txe_t *txe)
{
    aptus_ud_tx_ctx_t *ctx = arg;

    aptus_ud_tx_batch_add_frag(ctx->chan, ctx->peer, aptus_ud_txe_frag(txe), 1);
}

void aptus_ud_tx_purge(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                       ucs_status_t status)
{
    aptus_ud_tx_ctx_t ctx = { chan, peer, status };

    if (peer->win != NULL) {
        aptus_rel_tx_purge(&peer->win->tx, aptus_ud_tx_release, &ctx);
    }
}

static void aptus_ud_tx_own_cb(void *arg, aptus_rel_txe_t *txe)
{
    aptus_ud_tx_ctx_t *ctx = arg;
    aptus_ud_tx_msg_t *msg = aptus_ud_txe_frag(txe)->msg;
    size_t off             = 0;
    unsigned i;

    if ((msg->iovcnt == 0) || (msg->owned != NULL) || (ctx->status != UCS_OK)) {
        return; /* inline payload, or already copied */
    }

    msg->owned = ucs_malloc(ucs_max(msg->length, 1), "aptus_ud_tx_owned");
    if (msg->owned == NULL) {
        ctx->status = UCS_ERR_NO_MEMORY;
        return;
    }
    for (i = 0; i < msg->iovcnt; ++i) {
        memcpy(UCS_PTR_BYTE_OFFSET(msg->owned, off), msg->iov[i].iov_base,
               msg->iov[i].iov_len);
        off += msg->iov[i].iov_len;
    }
    if (msg->comp != NULL) {
        aptus_ud_chan_complete(ctx->chan, msg->comp, UCS_OK);
        msg->comp = NULL;
    }
}

void aptus_ud_tx_take_ownership(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_tx_ctx_t ctx = { chan, peer, UCS_OK };

    if (peer->win != NULL) {
        aptus_rel_tx_for_each(&peer->win->tx, aptus_ud_tx_own_cb, &ctx);
    }
    if (ctx.status != UCS_OK) {
        /* cannot keep the data alive without the user's buffers */
        aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_NO_MEMORY);
    }
}

static inline uint8_t aptus_ud_send_hdr_flags(const aptus_chan_send_t *send)
{
    return (send->flags & APTUS_CHAN_SEND_F_INTERNAL) ? APTUS_UD_SR_F_INTERNAL
                                                      : 0;
}

/* Split length bytes into fragments of the peer's size; returns their
 * number. */
static inline unsigned aptus_ud_tx_num_frags(const aptus_ud_dg_class_t *cls,
                                             size_t length)
{
    if (length <= cls->single) {
        return 1;
    }
    return 1 + ucs_div_round_up(length - cls->first, cls->single);
}

static inline unsigned aptus_ud_tx_room(aptus_ud_chan_t *chan,
                                        aptus_ud_peer_t *peer)
{
    if (aptus_ud_tx_opening(peer)) {
        return 0;
    }
    return chan->config.rel.tx_window - aptus_rel_tx_inflight(&peer->win->tx);
}

/* A message of one datagram with nothing built before it goes straight to
 * the wire, its header on the stack: no batch to fill and flush. */
static void aptus_ud_tx_post_one(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                 aptus_ud_tx_msg_t *msg)
{
    aptus_ud_tx_frag_t *frag = &msg->frags[0];
    uint8_t hdr[APTUS_UD_SR_HDR_MAX_LEN];
    struct iovec iov[APTUS_DGRAM_MAX_IOV];
    aptus_dgram_tx_t tx;
    unsigned sent;

    frag->msg    = msg;
    frag->offset = 0;
    frag->flags  = APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST;
    frag->length = msg->length;
    aptus_rel_tx_push(&peer->win->tx, &frag->rel, chan->now_us);
    peer->win->tx_bytes += msg->length;
    aptus_ud_tx_frag_build(
        chan, peer, frag,
        (msg->comp != NULL) || aptus_ud_tx_want_ack(chan, peer), hdr, iov, &tx);
    aptus_ud_trace_tx(chan, &tx, 1);
    /* what the wire cannot take goes again when its timer expires */
    (void)chan->wire->ops->send(chan->wire, &tx, 1, &sent);
}

/* Put a filled message into the window and on the wire. */
static void aptus_ud_tx_post(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                             aptus_ud_tx_msg_t *msg)
{
    const aptus_ud_dg_class_t *cls;
    aptus_ud_tx_frag_t *frag;
    size_t offset = 0, len;
    unsigned i, start;
    int ack_req, train;

    if (ucs_likely((msg->num_frags == 1) && (chan->batch.count == 0))) {
        aptus_ud_tx_post_one(chan, peer, msg);
        goto out;
    }

    cls   = aptus_ud_peer_class(chan, peer);
    train = aptus_ud_tx_train_ok(chan, msg->num_frags);
    /* a train is built whole in the batch, behind what is already there */
    if (train && (chan->batch.count + msg->num_frags > chan->batch.max)) {
        aptus_ud_tx_batch_flush(chan);
    }
    start = chan->batch.count;
    for (i = 0; i < msg->num_frags; ++i) {
        frag         = &msg->frags[i];
        frag->msg    = msg;
        frag->offset = offset;
        frag->flags  = 0;
        if (i == 0) {
            frag->flags |= APTUS_UD_SR_F_FIRST;
            len = (msg->num_frags == 1) ? msg->length : cls->first;
        } else {
            len = ucs_min(cls->single, msg->length - offset);
        }
        if (i == msg->num_frags - 1) {
            frag->flags |= APTUS_UD_SR_F_LAST;
        }
        frag->length = len;
        offset += len;

        aptus_rel_tx_push(&peer->win->tx, &frag->rel, chan->now_us);
        peer->win->tx_bytes += len;
        /* Ask for an ACK with the last datagram when the window is filling
         * up or a completion waits for it (zero-copy). */
        ack_req = (i == msg->num_frags - 1) &&
                  ((msg->comp != NULL) || aptus_ud_tx_want_ack(chan, peer));
        aptus_ud_tx_batch_add_frag(chan, peer, frag, ack_req);
    }
    ucs_assert(offset == msg->length);
    if (train) {
        /* every datagram of a message but its last is the peer's size:
         * the first fragment's longer header takes from its payload */
        aptus_ud_tx_batch_flush_trains(chan, start, cls->mtu);
    } else {
        aptus_ud_tx_batch_flush(chan);
    }

out:
    if (chan->config.rel.probe_min_us != 0) {
        /* this datagram's probe; older ones were counted when sent */
        uint64_t due = chan->now_us + aptus_rel_tx_probe_after(
                                          &peer->win->tx, &chan->config.rel);
        if (due < chan->next_due_us) {
            chan->next_due_us = due;
        }
    }

    chan->tx_msg_bytes += msg->length;
    chan->stats.tx_msgs++;
    chan->stats.tx_bytes += msg->length;
    aptus_ud_chan_activate(chan, peer);
}

/* The pool for a single-datagram message with this much inline payload. */
static inline unsigned aptus_ud_tx_pool(size_t inline_len)
{
    return (inline_len <= APTUS_UD_TINY_PAYLOAD) ? APTUS_UD_TX_TINY
                                                 : APTUS_UD_TX_SMALL;
}

static inline aptus_ud_tx_msg_t *aptus_ud_tx_msg_get(aptus_ud_chan_t *chan,
                                                     unsigned pool,
                                                     uint8_t am_id,
                                                     uint8_t hdr_flags)
{
    aptus_ud_tx_msg_t *msg = ucs_mpool_get_inline(&chan->tx_mp[pool]);

    if (msg != NULL) {
        msg->comp      = NULL;
        msg->owned     = NULL;
        msg->pool      = pool;
        msg->am_id     = am_id;
        msg->iovcnt    = 0;
        msg->hdr_flags = hdr_flags;
    }
    return msg;
}

static ssize_t aptus_ud_tx_bcopy(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                 const aptus_chan_send_t *send)
{
    aptus_ud_tx_msg_t *msg, *small;
    unsigned nfrags, pool;
    size_t length;

    /* Unless the caller says, the size is known only after packing, so pack
     * into a buffer for the largest message (a single datagram's when one
     * holds any message); a result that fits a smaller buffer moves there,
     * so that large buffers are held only by large messages. */
    if ((send->pack.length != 0) &&
        (send->pack.length <= aptus_ud_peer_class(chan, peer)->single)) {
        pool = aptus_ud_tx_pool(send->pack.length);
    } else if (aptus_ud_peer_class(chan, peer)->single >=
               chan->config.max_msg) {
        pool = APTUS_UD_TX_SMALL;
    } else {
        pool = APTUS_UD_TX_LARGE;
    }
    msg = aptus_ud_tx_msg_get(chan, pool, send->am_id,
                              aptus_ud_send_hdr_flags(send));
    if (msg == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }
    length = send->pack.cb(aptus_ud_tx_msg_data(chan, msg), send->pack.arg);
    ucs_assertv(length <= chan->config.max_msg, "packed %zu > max %zu", length,
                chan->config.max_msg);
    ucs_assertv((send->pack.length == 0) || (length <= send->pack.length),
                "packed %zu > announced %u", length, send->pack.length);

    nfrags = aptus_ud_tx_num_frags(aptus_ud_peer_class(chan, peer), length);
    if (nfrags > aptus_ud_tx_room(chan, peer)) {
        ucs_mpool_put_inline(msg);
        chan->stats.tx_window_full++;
        return UCS_ERR_NO_RESOURCE;
    }

    if ((nfrags == 1) && (aptus_ud_tx_pool(length) < msg->pool)) {
        small = aptus_ud_tx_msg_get(chan, aptus_ud_tx_pool(length), send->am_id,
                                    aptus_ud_send_hdr_flags(send));
        if (small != NULL) {
            memcpy(aptus_ud_tx_msg_data(chan, small),
                   aptus_ud_tx_msg_data(chan, msg), length);
            ucs_mpool_put_inline(msg);
            msg = small;
        }
    }

    msg->length     = length;
    msg->num_frags  = nfrags;
    msg->frags_left = nfrags;
    aptus_ud_tx_post(chan, peer, msg);
    return length;
}

static ucs_status_t aptus_ud_tx_zcopy(aptus_ud_chan_t *chan,
                                      aptus_ud_peer_t *peer,
                                      const aptus_chan_send_t *send)
{
    aptus_ud_tx_msg_t *msg;
    size_t length = aptus_chan_send_length(send);
    unsigned nfrags, i, n;

    if ((length > chan->config.max_msg) ||
        (send->iov.iovcnt > APTUS_UD_MAX_IOV)) {
        return UCS_ERR_INVALID_PARAM;
    }

    nfrags = aptus_ud_tx_num_frags(aptus_ud_peer_class(chan, peer), length);
    if (nfrags > aptus_ud_tx_room(chan, peer)) {
        chan->stats.tx_window_full++;
        return UCS_ERR_NO_RESOURCE;
    }

    /* a single datagram keeps only our copy of the header inline */
    msg = aptus_ud_tx_msg_get(chan,
                              (nfrags == 1) ? aptus_ud_tx_pool(send->hdr_len)
                                            : APTUS_UD_TX_LARGE,
                              send->am_id, aptus_ud_send_hdr_flags(send));
    if (msg == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }

    /* Our copy of the AM header, then the user's buffers in place. */
    n = 0;
    if (send->hdr_len > 0) {
        memcpy(aptus_ud_tx_msg_data(chan, msg), send->hdr, send->hdr_len);
        msg->iov[n].iov_base = aptus_ud_tx_msg_data(chan, msg);
        msg->iov[n].iov_len  = send->hdr_len;
        ++n;
    }
    for (i = 0; i < send->iov.iovcnt; ++i) {
        if (send->iov.iov[i].iov_len == 0) {
            continue;
        }
        msg->iov[n++] = send->iov.iov[i];
    }
    msg->iovcnt     = n;
    msg->length     = length;
    msg->num_frags  = nfrags;
    msg->frags_left = nfrags;
    if (n == 0) {
        msg->iovcnt = 0; /* empty message: nothing to gather */
    }
    msg->comp = send->iov.comp;
    aptus_ud_tx_post(chan, peer, msg);
    return (msg->comp == NULL) ? UCS_OK : UCS_INPROGRESS;
}

static ssize_t aptus_ud_tx_copy_split(aptus_ud_chan_t *chan,
                                      aptus_ud_peer_t *peer,
                                      const aptus_chan_send_t *send,
                                      size_t length)
{
    unsigned nfrags =
        aptus_ud_tx_num_frags(aptus_ud_peer_class(chan, peer), length);
    aptus_ud_tx_msg_t *msg;
    void *data;

    if (nfrags > aptus_ud_tx_room(chan, peer)) {
        chan->stats.tx_window_full++;
        return UCS_ERR_NO_RESOURCE;
    }
    msg = aptus_ud_tx_msg_get(chan, APTUS_UD_TX_LARGE, send->am_id,
                              aptus_ud_send_hdr_flags(send));
    if (msg == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }
    data = aptus_ud_tx_msg_data(chan, msg);
    if (send->hdr_len > 0) {
        memcpy(data, send->hdr, send->hdr_len);
    }
    memcpy(UCS_PTR_BYTE_OFFSET(data, send->hdr_len), send->copy.buffer,
           send->copy.length); /* longer than a datagram: never empty */
    msg->length     = length;
    msg->num_frags  = nfrags;
    msg->frags_left = nfrags;
    aptus_ud_tx_post(chan, peer, msg);
    return UCS_OK;
}

ssize_t aptus_ud_chan_send(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                           const aptus_chan_send_t *send)
{
    aptus_ud_tx_msg_t *msg;
    size_t length;
    void *data;

    if (ucs_unlikely(peer->flags & APTUS_UD_PEER_FAILED)) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }
    if (ucs_unlikely(aptus_ud_peer_has_pending(peer) && !chan->in_pending &&
                     !(send->flags & APTUS_CHAN_SEND_F_INTERNAL))) {
        return UCS_ERR_NO_RESOURCE; /* keep order behind queued requests */
    }
    if (ucs_unlikely(peer->win == NULL)) {
        if (aptus_ud_peer_win_open(chan, peer) != UCS_OK) {
            return UCS_ERR_NO_RESOURCE; /* the next progress may have room */
        }
    } else if (ucs_unlikely(aptus_ud_tx_window_full(chan, peer))) {
        chan->stats.tx_window_full++;
        return UCS_ERR_NO_RESOURCE;
    }
    if (aptus_ud_chan_tx_all_full(chan)) {
        chan->stats.tx_all_full++;
        return UCS_ERR_NO_RESOURCE;
    }

    aptus_ud_chan_now(chan);

    switch (send->kind) {
    case APTUS_CHAN_SEND_COPY:
        length = send->hdr_len + send->copy.length;
        if (ucs_unlikely(length > aptus_ud_peer_class(chan, peer)->single)) {
            /* a short message of the wire's size to a peer whose path
             * takes smaller datagrams */
            if (length > chan->single_payload) {
                return UCS_ERR_INVALID_PARAM;
            }
            return aptus_ud_tx_copy_split(chan, peer, send, length);
        }
        msg = aptus_ud_tx_msg_get(chan, aptus_ud_tx_pool(length), send->am_id,
                                  aptus_ud_send_hdr_flags(send));
        if (msg == NULL) {
            return UCS_ERR_NO_RESOURCE;
        }
        data = aptus_ud_tx_msg_data(chan, msg);
        if (send->hdr_len > 0) {
            memcpy(data, send->hdr, send->hdr_len);
        }
        if (send->copy.length > 0) {
            memcpy(UCS_PTR_BYTE_OFFSET(data, send->hdr_len), send->copy.buffer,
                   send->copy.length);
        }
        msg->length     = length;
        msg->num_frags  = 1;
        msg->frags_left = 1;
        aptus_ud_tx_post(chan, peer, msg);
        return UCS_OK;
    case APTUS_CHAN_SEND_PACK:
        return aptus_ud_tx_bcopy(chan, peer, send);
    case APTUS_CHAN_SEND_IOV:
        return aptus_ud_tx_zcopy(chan, peer, send);
    }
    return UCS_ERR_INVALID_PARAM;
}

ucs_status_t aptus_ud_chan_check(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer)
{
    aptus_ud_tx_msg_t *msg;

    if ((peer->flags & APTUS_UD_PEER_FAILED) || !aptus_ud_peer_tx_idle(peer)) {
        /* already reported, or outstanding data will find out */
        return UCS_OK;
    }

    aptus_ud_chan_now(chan);
    if ((peer->win == NULL) && (aptus_ud_peer_win_open(chan, peer) != UCS_OK)) {
        return UCS_ERR_NO_RESOURCE;
    }
    msg = aptus_ud_tx_msg_get(chan, APTUS_UD_TX_TINY, 0, APTUS_UD_SR_F_NOP);
    if (msg == NULL) {
        return UCS_ERR_NO_RESOURCE;
    }
    msg->length     = 0;
    msg->num_frags  = 1;
    msg->frags_left = 1;
    aptus_ud_tx_post(chan, peer, msg);
    chan->stats.tx_msgs--; /* not an active message */
    chan->stats.checks++;
    return UCS_OK;
}

typedef struct aptus_ud_internal_pack {
    const void *hdr;
    size_t hdr_len;
    const void *data;
    size_t data_len;
} aptus_ud_internal_pack_t;

static size_t aptus_ud_internal_pack(void *dest, void *arg)
{
    aptus_ud_internal_pack_t *p = arg;

    memcpy(dest, p->hdr, p->hdr_len);
    if (p->data_len > 0) {
        memcpy(UCS_PTR_BYTE_OFFSET(dest, p->hdr_len), p->data, p->data_len);
    }
    return p->hdr_len + p->data_len;
}

ssize_t aptus_ud_chan_send_internal(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer, uint8_t id,
                                    const void *hdr, size_t hdr_len,
                                    const void *data, size_t data_len)
{
    aptus_ud_internal_pack_t pack = { hdr, hdr_len, data, data_len };
    aptus_chan_send_t send;

    ucs_assert(id < APTUS_UD_SR_INTERNAL_MAX);
    ucs_assert(hdr_len + data_len <= chan->config.max_msg);
    aptus_chan_send_pack(&send, id, aptus_ud_internal_pack, &pack);
    send.flags = APTUS_CHAN_SEND_F_INTERNAL;
    return aptus_ud_chan_send(chan, peer, &send);
}

void aptus_ud_trace_dgram(aptus_ud_chan_t *chan, const char *dir,
                          const aptus_wire_addr_t *addr,
                          const struct iovec *iov, unsigned iovcnt)
{
    aptus_ud_sr_parse_status_t status;
    char addr_str[64], pkt_str[256];
    aptus_ud_sr_pkt_t pkt;
    size_t length = 0;
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        length += iov[i].iov_len;
    }
    /* the header and its extensions are in the first piece; the parser
     * reads no payload without a CRC check */
    status = aptus_ud_sr_parse(iov[0].iov_base, length, 0, &pkt);
    chan->wire->ops->addr_str(addr, addr_str, sizeof(addr_str));
    if (status != APTUS_UD_SR_PARSE_OK) {
        aptus_trace_data("%s %s %s: %zu bytes, %s",
                         aptus_chan_name(&chan->super), dir, addr_str, length,
                         aptus_ud_sr_parse_status_str(status));
        return;
    }
    aptus_ud_sr_snprint(&pkt, pkt_str, sizeof(pkt_str));
    aptus_trace_data("%s %s %s: %s", aptus_chan_name(&chan->super), dir,
                     addr_str, pkt_str);
}
