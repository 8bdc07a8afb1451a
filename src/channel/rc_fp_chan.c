/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-FP channel (see rc_fp_chan.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_fp_chan.h"
#include "chan_pending.h"
#include "base/aptus_numa.h"

#include <inttypes.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define APTUS_FP_CHAN_MAX_IOV 64

static inline aptus_fp_chan_t *aptus_fp_chan_of(aptus_chan_t *chan)
{
    return ucs_derived_of(chan, aptus_fp_chan_t);
}

ucs_status_t aptus_fp_chan_init(aptus_fp_chan_t *chan,
                                const aptus_fp_geom_t *geom,
                                unsigned max_blocks, unsigned max_senders,
                                aptus_conn_wire_t *wire, aptus_chan_t *carrier,
                                const aptus_fp_chan_upcalls_t *ops, void *arg)
{
    uint32_t total = aptus_fp_credits_total(geom);

    memset(chan, 0, sizeof(*chan));
    chan->super.ops     = &aptus_fp_chan_iface_ops;
    chan->super.carrier = carrier;
    chan->wire          = wire;
    chan->geom          = *geom;
    chan->max_len       = aptus_fp_max_len(geom);
    /* a quarter, but at least two slots where there are two: one freed
     * slot waits for a message back to ride on (Original-Reduced has 2) */
    chan->credit_quarter = ucs_max(total / 4, ucs_min(2, total));
    chan->max_blocks     = max_blocks;
    chan->max_senders    = max_senders;
    chan->ops            = ops;
    chan->arg            = arg;
    chan->numa_node      = -1; /* the owner may name its device's */
    ucs_arbiter_init(&chan->pending);
    if ((max_blocks == 0) && (max_senders == 0)) {
        return UCS_OK;
    }
    chan->blocks  = ucs_calloc(ucs_max(max_blocks, 1), sizeof(*chan->blocks),
                               "aptus_fp_blocks");
    chan->senders = ucs_calloc(ucs_max(max_senders, 1), sizeof(*chan->senders),
                               "aptus_fp_senders");
    /* the image of the largest Veloblock message any peer's block takes
     * (fixed-slot images are built in the mirror), then a bounce buffer
     * for packed messages, as large as the largest message either way */
    chan->bounce_len = ucs_max(APTUS_VB_MAX_LEN, chan->max_len);
    chan->bounce_off = aptus_vb_image_len(APTUS_VB_MAX_LEN);
    chan->scratch =
        ucs_malloc(chan->bounce_off + chan->bounce_len, "aptus_fp_scratch");
    if ((chan->blocks == NULL) || (chan->senders == NULL) ||
        (chan->scratch == NULL)) {
        aptus_fp_chan_cleanup(chan);
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

/* A block's registration with the wire goes with its grant: a peer that
 * held an earlier grant of the same memory reaches nothing of the next. */
static void aptus_fp_chan_block_dereg(aptus_fp_chan_t *chan,
                                      aptus_fp_block_t *block)
{
    if (block->memh != NULL) {
        chan->wire->ops->mem_dereg(chan->wire, block->memh);
        block->memh = NULL;
    }
    block->token = 0;
}

void aptus_fp_chan_revoke(aptus_fp_chan_t *chan)
{
    unsigned i;

    for (i = 0; (chan->blocks != NULL) && (i < chan->max_blocks); ++i) {
        aptus_fp_chan_block_dereg(chan, &chan->blocks[i]);
    }
}

void aptus_fp_chan_cleanup(aptus_fp_chan_t *chan)
{
    unsigned i;

    if (chan->super.ops == NULL) {
        return; /* zeroed, never initialized */
    }
    for (i = 0; (chan->blocks != NULL) && (i < chan->max_blocks); ++i) {
        aptus_fp_chan_block_dereg(chan, &chan->blocks[i]);
        if (chan->blocks[i].mem != NULL) {
            munmap(chan->blocks[i].mem, chan->geom.size);
        }
    }
    while (chan->num_senders > 0) {
        aptus_fp_peer_detach(chan, chan->senders[0]);
    }
    ucs_arbiter_cleanup(&chan->pending);
    ucs_free(chan->blocks);
    ucs_free(chan->senders);
    ucs_free(chan->scratch);
    chan->blocks     = NULL;
    chan->senders    = NULL;
    chan->scratch    = NULL;
    chan->num_mapped = 0;
    chan->num_active = 0;
    chan->super.ops  = NULL;
}

/* ---- the receiving side ------------------------------------------------ */

aptus_fp_block_t *aptus_fp_chan_block_open(aptus_fp_chan_t *chan, void *owner,
                                           uint64_t peer_key, uint16_t nonce)
{
    aptus_fp_block_t *block, *unmapped = NULL;
    aptus_mem_key_t key;
    unsigned i;
    void *mem;

    for (i = 0; i < chan->max_blocks; ++i) {
        block = &chan->blocks[i];
        if (block->state != APTUS_FP_BLOCK_FREE) {
            continue;
        }
        if (block->mem != NULL) {
            goto found; /* mapped already: no new memory */
        }
        if (unmapped == NULL) {
            unmapped = block;
        }
    }
    if (unmapped == NULL) {
        return NULL;
    }
    mem = mmap(NULL, chan->geom.size, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        ucs_error("%s: cannot map a fast-path block of %u bytes: %m",
                  aptus_chan_name(&chan->super), chan->geom.size);
        return NULL;
    }
    /* the peer's writes land here and this process polls it: the device's
     * node, before the first touch (the memset below) */
    (void)aptus_numa_place(mem, chan->geom.size, chan->numa_node);
    block      = unmapped;
    block->mem = mem;
    chan->num_mapped++;
    chan->stats.blocks_peak =
        ucs_max(chan->stats.blocks_peak, chan->num_mapped);

found:
    if (chan->wire->ops->mem_reg != NULL) {
        if (chan->wire->ops->mem_reg(chan->wire, block->mem, chan->geom.size,
                                     &key, &block->memh) != UCS_OK) {
            return NULL; /* the peer stays on the carrier */
        }
        block->token = key.token;
    }
    memset(block->mem, 0, chan->geom.size);
    aptus_fp_rx_init(&block->ring, &chan->geom);
    block->owner     = owner;
    block->peer_key  = peer_key;
    block->nonce     = nonce;
    block->state     = APTUS_FP_BLOCK_ACTIVE;
    block->failed    = 0;
    block->delivered = 0;
    block->carried   = 0;
    chan->num_active++;
    return block;
}

aptus_fp_block_t *aptus_fp_chan_block_find(aptus_fp_chan_t *chan,
                                           uint64_t peer_key, uint16_t nonce)
{
    aptus_fp_block_t *block;
    unsigned i;

    for (i = 0; i < chan->max_blocks; ++i) {
        block = &chan->blocks[i];
        if ((block->state != APTUS_FP_BLOCK_FREE) &&
            (block->peer_key == peer_key) && (block->nonce == nonce)) {
            return block;
        }
    }
    return NULL;
}

void aptus_fp_chan_block_orphan(aptus_fp_chan_t *chan, aptus_fp_block_t *block)
{
    if (block->state == APTUS_FP_BLOCK_ACTIVE) {
        chan->num_active--;
    }
    block->state = APTUS_FP_BLOCK_ORPHAN;
    block->owner = NULL;
}

void aptus_fp_chan_block_close(aptus_fp_chan_t *chan, aptus_fp_block_t *block)
{
    if (block->state == APTUS_FP_BLOCK_ACTIVE) {
        chan->num_active--;
    }
    aptus_fp_chan_block_dereg(chan, block);
    block->state = APTUS_FP_BLOCK_FREE;
    block->owner = NULL;
}

static void aptus_fp_chan_block_fail(aptus_fp_chan_t *chan,
                                     aptus_fp_block_t *block, const char *why)
{
    block->failed = 1;
    chan->stats.rx_corrupt++;
    chan->ops->block_failed(chan->arg, block, why);
}

unsigned aptus_fp_chan_block_drain(aptus_fp_chan_t *chan,
                                   aptus_fp_block_t *block, uint32_t target)
{
    int must       = (target != UINT32_MAX);
    void *owner    = block->owner;
    unsigned count = 0;
    aptus_fp_msg_hdr_t hdr;
    aptus_vb_status_t st;
    aptus_vb_msg_t msg;
    ucs_status_t status;

    /* a handler may close or orphan the block (its endpoint went) */
    while (!block->failed && (block->state == APTUS_FP_BLOCK_ACTIVE) &&
           (block->owner == owner) && (block->delivered != target)) {
        st = aptus_fp_rx_poll(&block->ring, block->mem, &msg);
        if (st == APTUS_VB_EMPTY) {
            if (must) {
                aptus_fp_chan_block_fail(chan, block,
                                         "a message sent before one over the "
                                         "carrier is not in the block");
            }
            break;
        }
        if ((st != APTUS_VB_OK) ||
            (aptus_fp_msg_hdr_parse(msg.data, msg.length, UCT_AM_ID_MAX,
                                    &hdr) != 0)) {
            aptus_fp_chan_block_fail(chan, block, "corrupt ring");
            break;
        }
        if (hdr.rc_before != block->carried) {
            if (!must && ((int32_t)(hdr.rc_before - block->carried) > 0)) {
                chan->stats.rx_held_for_order++;
                break; /* sent after a carrier message not here yet */
            }
            aptus_fp_chan_block_fail(chan, block, "order counts disagree");
            break;
        }
        if (hdr.credits > 0) {
            /* before the handler, which may answer */
            chan->stats.credits_piggyback_received += hdr.credits;
            (void)aptus_fp_chan_credit_in(chan, block->peer_key,
                                          hdr.credit_nonce, hdr.credits);
        }
        block->delivered++;
        chan->stats.rx_msgs++;
        chan->stats.rx_bytes += msg.length - APTUS_FP_MSG_HDR_LEN;
        /* in place, no descriptor: a user that keeps it copies it */
        status = chan->ops->deliver(chan->arg, block, hdr.am_id,
                                    (void *)(msg.data + APTUS_FP_MSG_HDR_LEN),
                                    msg.length - APTUS_FP_MSG_HDR_LEN);
        aptus_fp_rx_release(&block->ring, block->mem, &msg);
        ++count;
        if (status != UCS_OK) {
            aptus_fp_chan_block_fail(chan, block,
                                     "the transport refused a message");
            break;
        }
    }
    if ((count > 0) && !block->failed &&
        (block->state == APTUS_FP_BLOCK_ACTIVE) && (block->owner == owner) &&
        (aptus_fp_rx_pending_credits(&block->ring) >= chan->credit_quarter)) {
        /* nothing went back to carry them */
        chan->ops->credits_owed(chan->arg, block);
    }
    return count;
}

uint32_t aptus_fp_chan_block_take_credits(aptus_fp_chan_t *chan,
                                          aptus_fp_block_t *block)
{
    uint32_t credits = aptus_fp_rx_take_credits(&block->ring);

    chan->stats.credits_explicit += credits;
    return credits;
}

void aptus_fp_chan_block_key(const aptus_fp_chan_t *chan,
                             const aptus_fp_block_t *block,
                             aptus_mem_key_t *key)
{
    key->address = (uintptr_t)block->mem;
    key->length  = chan->geom.size;
    key->token   = block->token;
    key->pid     = aptus_conn_pid();
    key->host_id = chan->wire->host_id;
}

/* ---- the sending side --------------------------------------------------- */

void aptus_fp_peer_init(aptus_fp_peer_t *peer, uint64_t peer_key,
                        void *carrier_peer)
{
    memset(peer, 0, sizeof(*peer));
    peer->peer_key     = peer_key;
    peer->carrier_peer = carrier_peer;
    peer->status       = UCS_OK;
    ucs_arbiter_group_init(&peer->pending);
}

ucs_status_t aptus_fp_peer_attach(aptus_fp_chan_t *chan, aptus_fp_peer_t *peer,
                                  const aptus_fp_geom_t *geom,
                                  const aptus_mem_key_t *key,
                                  aptus_conn_t *conn, uint16_t nonce)
{
    ucs_status_t status;

    if (peer->attached) {
        aptus_fp_peer_detach(chan, peer); /* a repeated grant: start over */
    }
    if (conn == NULL) {
        return UCS_ERR_UNREACHABLE;
    }
    /* the block is written long after, over no particular connection:
     * the grant's pid is held to the peer's proven one now */
    status = chan->wire->ops->key_check(conn, key);
    if (status != UCS_OK) {
        if (status == UCS_ERR_INVALID_ADDR) {
            ucs_error("%s: a grant names a process other than the peer's: "
                      "fast path refused",
                      aptus_chan_name(&chan->super));
        }
        return status;
    }
    if (chan->num_senders >= chan->max_senders) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (aptus_fp_send_bytes(geom) > 0) {
        peer->mirror =
            ucs_calloc(1, aptus_fp_send_bytes(geom), "aptus_fp_mirror");
        if (peer->mirror == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
    }
    aptus_fp_tx_init(&peer->ring, geom);
    peer->key      = *key;
    peer->nonce    = nonce;
    peer->attached = 1; /* before and sent count from when the transport
                           named the channel, which may be earlier */
    peer->slot                         = chan->num_senders;
    chan->senders[chan->num_senders++] = peer;
    chan->stats.senders_peak =
        ucs_max(chan->stats.senders_peak, chan->num_senders);
    return UCS_OK;
}

void aptus_fp_peer_detach(aptus_fp_chan_t *chan, aptus_fp_peer_t *peer)
{
    aptus_fp_peer_t *last;

    if (!peer->attached) {
        return;
    }
    last                      = chan->senders[--chan->num_senders];
    chan->senders[peer->slot] = last;
    last->slot                = peer->slot;
    peer->attached            = 0;
    ucs_free(peer->mirror);
    peer->mirror = NULL;
}

void aptus_fp_peer_fail(aptus_fp_chan_t *chan, aptus_fp_peer_t *peer,
                        ucs_status_t status)
{
    if (peer->status == UCS_OK) {
        peer->status = status;
    }
    aptus_fp_peer_detach(chan, peer);
}

static void aptus_fp_peer_lost(aptus_fp_chan_t *chan, aptus_fp_peer_t *peer)
{
    aptus_fp_peer_detach(chan, peer);
    chan->ops->peer_lost(chan->arg, peer);
}

int aptus_fp_chan_credit_in(aptus_fp_chan_t *chan, uint64_t peer_key,
                            uint16_t nonce, uint32_t credits)
{
    aptus_fp_peer_t *peer;
    unsigned i;

    for (i = 0; i < chan->num_senders; ++i) {
        peer = chan->senders[i];
        if ((peer->nonce != nonce) || (peer->peer_key != peer_key)) {
            continue;
        }
        if (aptus_fp_tx_credit(&peer->ring, credits) != APTUS_VB_OK) {
            chan->stats.credits_bad++;
            ucs_error("%s: 0x%016" PRIx64
                      " returned %u credits it was not given: "
                      "fast path off",
                      aptus_chan_name(&chan->super), peer_key, credits);
            aptus_fp_peer_lost(chan, peer);
            return 0;
        }
        if (!ucs_arbiter_group_is_empty(&peer->pending)) {
            ucs_arbiter_group_schedule(&chan->pending, &peer->pending);
        }
        return 0;
    }
    chan->stats.credits_unknown++; /* the channel went meanwhile */
    return -1;
}

/* Write one image into the peer's block, the polled byte last. */
static ucs_status_t aptus_fp_chan_write(aptus_fp_chan_t *chan,
                                        aptus_fp_peer_t *peer,
                                        const uint8_t *image,
                                        const aptus_vb_write_t *w)
{
    aptus_fp_piece_t pieces[APTUS_FP_MAX_PIECES];
    aptus_conn_piece_t wire_pieces[APTUS_FP_MAX_PIECES];
    unsigned i, count;

    count = aptus_fp_write_pieces(&peer->ring.geom, w, pieces);
    for (i = 0; i < count; ++i) {
        wire_pieces[i].local = image + pieces[i].offset;
        wire_pieces[i].remote_addr =
            peer->key.address + w->offset + pieces[i].offset;
        wire_pieces[i].length = pieces[i].length;
    }
    return chan->wire->ops->write_ordered(chan->wire, &peer->key, wire_pieces,
                                          count);
}

static ssize_t aptus_fp_chan_send_op(aptus_chan_t *super,
                                     aptus_chan_peer_t *cpeer,
                                     const aptus_chan_send_t *send)
{
    aptus_fp_chan_t *chan  = aptus_fp_chan_of(super);
    aptus_fp_peer_t *peer  = (aptus_fp_peer_t *)cpeer;
    aptus_fp_block_t *back = peer->back;
    struct iovec iov[APTUS_FP_CHAN_MAX_IOV + 2];
    uint8_t hdr[APTUS_FP_MSG_HDR_LEN];
    uint32_t credits = 0;
    const uint8_t *image;
    aptus_vb_status_t st;
    aptus_vb_write_t w;
    size_t length;
    unsigned n = 0, i;

    if (ucs_unlikely(peer->status != UCS_OK)) {
        return peer->status;
    }
    if (ucs_unlikely(!peer->attached)) {
        return UCS_ERR_UNREACHABLE; /* no block (any more): another channel */
    }
    if (!ucs_arbiter_group_is_empty(&peer->pending) &&
        !(send->flags & APTUS_CHAN_SEND_F_INTERNAL) &&
        (chan->dispatching != peer)) {
        return UCS_ERR_NO_RESOURCE; /* behind the requests waiting */
    }

    /* what the peer freed in the block it writes into us rides along */
    if ((back != NULL) && (back->state == APTUS_FP_BLOCK_ACTIVE) &&
        !back->failed) {
        credits = aptus_fp_rx_pending_credits(&back->ring);
    }
    aptus_fp_msg_hdr_pack(hdr, send->am_id, peer->before,
                          (credits > 0) ? back->nonce : 0, credits);
    iov[n].iov_base  = hdr;
    iov[n++].iov_len = sizeof(hdr);
    if (send->hdr_len > 0) {
        iov[n].iov_base  = (void *)send->hdr;
        iov[n++].iov_len = send->hdr_len;
    }
    switch (send->kind) {
    case APTUS_CHAN_SEND_COPY:
        iov[n].iov_base  = (void *)send->copy.buffer;
        iov[n++].iov_len = send->copy.length;
        length           = send->hdr_len + send->copy.length;
        break;
    case APTUS_CHAN_SEND_PACK:
        /* the image needs the length before the payload: pack aside (at
         * most bounce_len bytes, the largest message of any mode) */
        length =
            send->pack.cb(chan->scratch + chan->bounce_off, send->pack.arg);
        iov[n].iov_base  = chan->scratch + chan->bounce_off;
        iov[n++].iov_len = length;
        break;
    default:
        if (send->iov.iovcnt > APTUS_FP_CHAN_MAX_IOV) {
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        for (i = 0; i < send->iov.iovcnt; ++i) {
            iov[n++] = send->iov.iov[i];
        }
        length = aptus_chan_send_length(send);
        break;
    }

    while ((st = aptus_fp_tx_pack(&peer->ring, iov, n, chan->scratch,
                                  peer->mirror, &image, &w)) ==
           APTUS_VB_WRAPPED) {
        if (aptus_fp_chan_write(chan, peer, image, &w) != UCS_OK) {
            goto failed;
        }
    }
    if (st == APTUS_VB_TOO_BIG) {
        return UCS_ERR_EXCEEDS_LIMIT; /* for another channel */
    } else if (st != APTUS_VB_OK) {
        chan->stats.no_credit++;
        return UCS_ERR_NO_RESOURCE;
    }
    if (aptus_fp_chan_write(chan, peer, image, &w) != UCS_OK) {
        goto failed;
    }
    if (credits > 0) {
        aptus_fp_rx_take_credits(&back->ring);
        chan->stats.credits_piggybacked += credits;
    }
    peer->sent++;
    chan->stats.tx_msgs++;
    chan->stats.tx_bytes += length;
    return (send->kind == APTUS_CHAN_SEND_PACK) ? (ssize_t)length : UCS_OK;

failed:
    /* the peer's memory cannot be reached (it went, or unmapped it): this
     * message and the later ones take the other channels */
    chan->stats.write_failures++;
    ucs_debug("%s: write to 0x%016" PRIx64 " failed: fast path off",
              aptus_chan_name(&chan->super), peer->peer_key);
    aptus_fp_peer_lost(chan, peer);
    return UCS_ERR_UNREACHABLE;
}

static ucs_status_t aptus_fp_chan_flush_op(aptus_chan_t *super,
                                           aptus_chan_peer_t *cpeer,
                                           unsigned flags,
                                           uct_completion_t *comp)
{
    /* a write is in the peer's memory when it returns */
    return ((aptus_fp_peer_t *)cpeer)->status;
}

static ucs_status_t aptus_fp_chan_pending_add_op(aptus_chan_t *super,
                                                 aptus_chan_peer_t *cpeer,
                                                 uct_pending_req_t *req,
                                                 unsigned flags)
{
    aptus_fp_chan_t *chan = aptus_fp_chan_of(super);
    aptus_fp_peer_t *peer = (aptus_fp_peer_t *)cpeer;

    /* room for the largest message, or no block to wait on: a retry goes
     * through, or learns why not, now */
    if (ucs_arbiter_group_is_empty(&peer->pending) &&
        ((peer->status != UCS_OK) || !peer->attached ||
         aptus_fp_tx_may_send(&peer->ring,
                              aptus_fp_max_len(&peer->ring.geom)))) {
        return UCS_ERR_BUSY;
    }
    uct_pending_req_arb_group_push(&peer->pending, req);
    (void)chan; /* scheduled when credits come back */
    return UCS_OK;
}

static void aptus_fp_chan_pending_purge_op(aptus_chan_t *super,
                                           aptus_chan_peer_t *cpeer,
                                           uct_pending_purge_callback_t cb,
                                           void *arg)
{
    aptus_fp_chan_t *chan    = aptus_fp_chan_of(super);
    aptus_fp_peer_t *peer    = (aptus_fp_peer_t *)cpeer;
    uct_purge_cb_args_t args = { cb, arg };

    ucs_arbiter_group_purge(&chan->pending, &peer->pending,
                            aptus_pending_purge_cb, &args);
}

static ucs_status_t aptus_fp_chan_check_op(aptus_chan_t *super,
                                           aptus_chan_peer_t *cpeer)
{
    aptus_fp_peer_t *peer = (aptus_fp_peer_t *)cpeer;

    if ((super->carrier == NULL) || (peer->carrier_peer == NULL)) {
        return peer->status;
    }
    return super->carrier->ops->check(super->carrier, peer->carrier_peer);
}

static void aptus_fp_chan_invalidate_op(aptus_chan_t *super,
                                        aptus_chan_peer_t *cpeer)
{
    aptus_fp_peer_t *peer = (aptus_fp_peer_t *)cpeer;

    aptus_fp_peer_fail(aptus_fp_chan_of(super), peer, UCS_ERR_ENDPOINT_TIMEOUT);
    if ((super->carrier != NULL) && (peer->carrier_peer != NULL)) {
        /* the failure is the peer's, reported once through its carrier */
        super->carrier->ops->invalidate(super->carrier, peer->carrier_peer);
    }
}

static ucs_status_t aptus_fp_chan_peer_connect_op(aptus_chan_t *super,
                                                  const void *remote,
                                                  void *storage,
                                                  aptus_chan_peer_t **peer_p)
{
    const aptus_fp_remote_t *r = remote;
    aptus_fp_peer_t *peer      = storage;
    ucs_status_t status;

    aptus_fp_peer_init(peer, r->peer_key, r->carrier_peer);
    peer->before = r->before;
    status       = aptus_fp_peer_attach(aptus_fp_chan_of(super), peer, r->geom,
                                        r->key, r->conn, r->nonce);
    if (status != UCS_OK) {
        ucs_arbiter_group_cleanup(&peer->pending);
        return status;
    }
    *peer_p = (aptus_chan_peer_t *)peer;
    return UCS_OK;
}

static void aptus_fp_chan_peer_disconnect_op(aptus_chan_t *super,
                                             aptus_chan_peer_t *cpeer)
{
    aptus_fp_chan_t *chan = aptus_fp_chan_of(super);
    aptus_fp_peer_t *peer = (aptus_fp_peer_t *)cpeer;

    /* writes are in place when they return: nothing is left to deliver */
    aptus_fp_chan_pending_purge_op(super, cpeer, NULL, NULL);
    aptus_fp_peer_detach(chan, peer);
    ucs_arbiter_group_cleanup(&peer->pending);
}

static ucs_arbiter_cb_result_t
aptus_fp_chan_dispatch_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                          ucs_arbiter_elem_t *elem, void *arg)
{
    aptus_fp_chan_t *chan  = arg;
    aptus_fp_peer_t *peer  = ucs_container_of(group, aptus_fp_peer_t, pending);
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    ucs_status_t status;

    chan->dispatching = peer;
    status            = req->func(req);
    chan->dispatching = NULL;
    /* no room: scheduled again when credits come back */
    return aptus_pending_result(status, &chan->stats.pending_dispatched);
}

unsigned aptus_fp_chan_progress(aptus_fp_chan_t *chan)
{
    unsigned count = 0;
    unsigned i, seen;

    chan->stats.polls++;
    /* blocks are opened lowest first: the loop ends after the last one
     * active, so an idle slot costs nothing (the paper's polling cost is
     * per channel that exists) */
    for (i = 0, seen = 0; (seen < chan->num_active) && (i < chan->max_blocks);
         ++i) {
        if (chan->blocks[i].state == APTUS_FP_BLOCK_ACTIVE) {
            ++seen;
            chan->stats.poll_blocks++;
            count +=
                aptus_fp_chan_block_drain(chan, &chan->blocks[i], UINT32_MAX);
        }
    }
    if (ucs_unlikely(!ucs_arbiter_is_empty(&chan->pending))) {
        ucs_arbiter_dispatch(&chan->pending, 1, aptus_fp_chan_dispatch_cb,
                             chan);
    }
    return count;
}

static unsigned aptus_fp_chan_progress_op(aptus_chan_t *super, int is_async)
{
    return aptus_fp_chan_progress(aptus_fp_chan_of(super));
}

uint64_t aptus_fp_chan_bytes(const aptus_fp_chan_t *chan)
{
    uint64_t bytes = (uint64_t)chan->num_mapped * chan->geom.size;
    unsigned i;

    for (i = 0; i < chan->num_senders; ++i) {
        bytes += aptus_fp_send_bytes(&chan->senders[i]->ring.geom);
    }
    return bytes;
}

const aptus_chan_ops_t aptus_fp_chan_iface_ops = {
    .type            = APTUS_CHAN_RC_FP,
    .peer_size       = sizeof(aptus_fp_peer_t),
    .peer_connect    = aptus_fp_chan_peer_connect_op,
    .peer_disconnect = aptus_fp_chan_peer_disconnect_op,
    .send            = aptus_fp_chan_send_op,
    .put             = NULL,
    .get             = NULL,
    .flush           = aptus_fp_chan_flush_op,
    .pending_add     = aptus_fp_chan_pending_add_op,
    .pending_purge   = aptus_fp_chan_pending_purge_op,
    .check           = aptus_fp_chan_check_op,
    .invalidate      = aptus_fp_chan_invalidate_op,
    .progress        = aptus_fp_chan_progress_op,
};
