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
 * peer may still write into it) until that FP_DONE arrives. The blocks
 * are mapped once at interface open, MAX_FP of them, and unmapped at
 * close: a late write from a peer then fails at the writer.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"
#include "../proto/le.h"

#include <sys/mman.h>
#include <unistd.h>

ucs_status_t uct_aptus_tl_fp_init(uct_aptus_tl_iface_t *iface,
                                  const uct_aptus_tl_iface_config_t *config)
{
    unsigned num = iface->alloc.config.max[APTUS_ALLOC_FP];
    const char *why;
    unsigned i;

    memset(&iface->fp, 0, sizeof(iface->fp));
    if (aptus_fp_geom_make(APTUS_FP_VELOBLOCK, config->fp_block_size, 0, 0,
                           &iface->fp.geom, &why) != 0) {
        ucs_error("aptus: invalid configuration: UCX_"
                  UCT_APTUS_TL_CONFIG_PREFIX "FP_BLOCK_SIZE=%zu: %s",
                  config->fp_block_size, why);
        return UCS_ERR_INVALID_PARAM;
    }
    iface->fp.credit_quarter = ucs_max(iface->fp.geom.size / 4, 1);
    if (num == 0) {
        return UCS_OK;
    }
    iface->fp.scratch = ucs_malloc(
        aptus_vb_image_len(aptus_fp_max_len(&iface->fp.geom)),
        "uct_aptus_fp_scratch");
    iface->fp.blocks = ucs_calloc(num, sizeof(*iface->fp.blocks),
                                  "uct_aptus_fp_blocks");
    if ((iface->fp.scratch == NULL) || (iface->fp.blocks == NULL)) {
        goto err;
    }
    for (i = 0; i < num; ++i) {
        iface->fp.blocks[i].mem = mmap(NULL, iface->fp.geom.size,
                                       PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (iface->fp.blocks[i].mem == MAP_FAILED) {
            iface->fp.blocks[i].mem = NULL;
            goto err;
        }
        iface->fp.num_blocks++;
    }
    return UCS_OK;

err:
    ucs_error("aptus: cannot allocate %u fast-path blocks of %u bytes", num,
              iface->fp.geom.size);
    uct_aptus_tl_fp_cleanup(iface);
    return UCS_ERR_NO_MEMORY;
}

void uct_aptus_tl_fp_cleanup(uct_aptus_tl_iface_t *iface)
{
    unsigned i;

    for (i = 0; i < iface->fp.num_blocks; ++i) {
        munmap(iface->fp.blocks[i].mem, iface->fp.geom.size);
    }
    ucs_free(iface->fp.blocks);
    ucs_free(iface->fp.scratch);
    iface->fp.blocks     = NULL;
    iface->fp.scratch    = NULL;
    iface->fp.num_blocks = 0;
}

int uct_aptus_tl_fp_open(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_fp_rx_t *b;
    unsigned i;

    if (ep->fp_rx != NULL) {
        return 1; /* a repeated grant: the same block */
    }
    for (i = 0; i < iface->fp.num_blocks; ++i) {
        b = &iface->fp.blocks[i];
        if (b->state != UCT_APTUS_FP_BLOCK_FREE) {
            continue;
        }
        memset(b->mem, 0, iface->fp.geom.size);
        aptus_fp_rx_init(&b->ring, &iface->fp.geom);
        if (++iface->fp.next_nonce == 0) {
            ++iface->fp.next_nonce; /* 0 names no block */
        }
        b->nonce    = iface->fp.next_nonce;
        b->ep       = ep;
        b->peer_key = ep->peer.remote_key;
        b->state    = UCT_APTUS_FP_BLOCK_ACTIVE;
        b->failed   = 0;
        ep->fp_rx   = b;
        iface->fp.num_active++;
        return 1;
    }
    iface->stats.fp_refused_no_block++;
    return 0;
}

static void uct_aptus_tl_fp_block_free(uct_aptus_tl_iface_t *iface,
                                       uct_aptus_tl_fp_rx_t *b)
{
    if (b->state == UCT_APTUS_FP_BLOCK_ACTIVE) {
        iface->fp.num_active--;
    }
    if (b->ep != NULL) {
        b->ep->fp_rx = NULL;
    }
    b->ep    = NULL;
    b->state = UCT_APTUS_FP_BLOCK_FREE;
}

void uct_aptus_tl_fp_sync(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_fp_tx_t *tx = ep->fp_tx;

    if ((tx == NULL) ||
        (ep->alloc.slot[APTUS_ALLOC_FP].state != APTUS_ALLOC_NONE)) {
        return;
    }
    ep->fp_tx         = NULL;
    ep->fp_done_nonce = tx->nonce;
    ucs_free(tx);
    /* after the last write: the owner may drain and free its block */
    uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_FP_DONE, APTUS_ALLOC_FP);
}

void uct_aptus_tl_fp_forget(uct_aptus_tl_iface_t *iface,
                            uct_aptus_tl_ep_t *ep)
{
    uct_aptus_tl_fp_rx_t *b = ep->fp_rx;

    /* nothing is sent from here (the stream may be closing, or the
     * interface): the peer's block for us is orphaned on its side when
     * its endpoint for us goes */
    ucs_free(ep->fp_tx);
    ep->fp_tx         = NULL;
    ep->fp_done_nonce = 0;
    if (b != NULL) {
        /* the peer may still write into it until its FP_DONE */
        iface->fp.num_active--;
        iface->stats.fp_blocks_orphaned++;
        b->state  = UCT_APTUS_FP_BLOCK_ORPHAN;
        b->ep     = NULL;
        ep->fp_rx = NULL;
    }
}

/* The peer's block is unusable (a write failed, credits it never had):
 * give the slot back, stop, tell the peer. */
static void uct_aptus_tl_fp_drop(uct_aptus_tl_iface_t *iface,
                                 uct_aptus_tl_ep_t *ep)
{
    aptus_alloc_release(&iface->alloc, &ep->alloc, APTUS_ALLOC_FP,
                        uct_ud_sr_clock());
    uct_aptus_tl_fp_sync(iface, ep);
    uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_DEMOTE, APTUS_ALLOC_FP);
}

static void uct_aptus_tl_fp_credit(uct_aptus_tl_iface_t *iface,
                                   uct_aptus_tl_ep_t *ep, uint16_t nonce,
                                   uint32_t credits)
{
    if ((ep->fp_tx == NULL) || (ep->fp_tx->nonce != nonce)) {
        return; /* of a block given up meanwhile */
    }
    if (aptus_fp_tx_credit(&ep->fp_tx->ring, credits) != APTUS_VB_OK) {
        iface->stats.rx_malformed++;
        ucs_error("aptus/%s: peer 0x%08x returned %u fast-path credits it "
                  "was not given: fast path off",
                  iface->dev_name, ep->peer.remote_key, credits);
        uct_aptus_tl_fp_drop(iface, ep);
    }
}

size_t uct_aptus_tl_fp_ctl_pack(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep, unsigned type,
                                uint8_t *msg)
{
    uct_aptus_tl_fp_rx_t *b = ep->fp_rx;
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
        if (ep->fp_done_nonce == 0) {
            return 0;
        }
        aptus_put16(msg + 2, ep->fp_done_nonce);
        aptus_put32(msg + 4, 0);
        return UCT_APTUS_CTL_LEN;
    case UCT_APTUS_CTL_FP_BLOCK:
        if (b == NULL) {
            return 0;
        }
        aptus_put16(msg + 2, b->nonce);
        aptus_put32(msg + 4, iface->fp.geom.size);
        aptus_put64(msg + 8, (uintptr_t)b->mem);
        aptus_put32(msg + 16, getpid());
        aptus_put64(msg + 20, iface->conn->host_id);
        return UCT_APTUS_FP_BLOCK_LEN;
    default:
        return 0;
    }
}

static unsigned uct_aptus_tl_fp_drain(uct_aptus_tl_iface_t *iface,
                                      uct_aptus_tl_fp_rx_t *b);

void uct_aptus_tl_fp_ctl_recv(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep, const uint8_t *msg,
                              size_t length)
{
    uct_aptus_tl_fp_tx_t *tx;
    aptus_fp_geom_t geom;
    uint16_t nonce;
    const char *why;
    unsigned i;

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
        uct_aptus_tl_fp_credit(iface, ep, nonce, aptus_get32(msg + 4));
        return;
    case UCT_APTUS_CTL_FP_DONE:
        if (length != UCT_APTUS_CTL_LEN) {
            break;
        }
        iface->stats.ctl_received++;
        if ((ep->fp_rx != NULL) && (ep->fp_rx->nonce == nonce)) {
            /* every write came before this message: deliver, then free */
            uct_aptus_tl_fp_drain(iface, ep->fp_rx);
            if (ep->fp_rx != NULL) {
                uct_aptus_tl_fp_block_free(iface, ep->fp_rx);
            }
            return;
        }
        for (i = 0; i < iface->fp.num_blocks; ++i) {
            if ((iface->fp.blocks[i].state == UCT_APTUS_FP_BLOCK_ORPHAN) &&
                (iface->fp.blocks[i].nonce == nonce) &&
                (iface->fp.blocks[i].peer_key == ep->peer.remote_key)) {
                uct_aptus_tl_fp_block_free(iface, &iface->fp.blocks[i]);
            }
        }
        return;
    case UCT_APTUS_CTL_FP_BLOCK:
        if ((length != UCT_APTUS_FP_BLOCK_LEN) || (nonce == 0) ||
            (aptus_fp_geom_make(APTUS_FP_VELOBLOCK, aptus_get32(msg + 4), 0,
                                0, &geom, &why) != 0)) {
            break;
        }
        iface->stats.ctl_received++;
        if (ep->alloc.slot[APTUS_ALLOC_FP].state == APTUS_ALLOC_NONE) {
            return; /* given up meanwhile: its FP_DONE is on the way */
        }
        tx = ep->fp_tx;
        if (tx == NULL) {
            tx = ucs_malloc(sizeof(*tx), "uct_aptus_fp_tx");
            if (tx == NULL) {
                uct_aptus_tl_fp_drop(iface, ep);
                return;
            }
        }
        aptus_fp_tx_init(&tx->ring, &geom);
        tx->nonce       = nonce;
        tx->key.address = aptus_get64(msg + 8);
        tx->key.length  = geom.size;
        tx->key.pid     = aptus_get32(msg + 16);
        tx->key.host_id = aptus_get64(msg + 20);
        ep->fp_tx       = tx;
        if (!iface->conn->ops->key_reachable(iface->conn, &tx->key)) {
            /* another host: no fast path to it */
            uct_aptus_tl_fp_drop(iface, ep);
        }
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
    uct_aptus_tl_fp_tx_t *tx = ep->fp_tx;
    uct_aptus_tl_fp_rx_t *b  = ep->fp_rx;
    struct iovec liov[APTUS_UD_MAX_IOV + 2];
    uint8_t hdr[UCT_APTUS_FP_HDR_LEN];
    uint32_t credits = 0;
    const uint8_t *image;
    aptus_vb_status_t st;
    aptus_vb_write_t w;
    unsigned n = 0, i;

    if (iovcnt > APTUS_UD_MAX_IOV) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* what the peer freed in our block rides along */
    if ((b != NULL) && (b->state == UCT_APTUS_FP_BLOCK_ACTIVE)) {
        credits = aptus_fp_rx_pending_credits(&b->ring);
    }
    hdr[0] = id;
    aptus_put16(hdr + 1, (credits > 0) ? b->nonce : 0);
    aptus_put32(hdr + 3, credits);
    liov[n].iov_base = hdr;
    liov[n++].iov_len = sizeof(hdr);
    if (header_length > 0) {
        liov[n].iov_base  = (void *)header;
        liov[n++].iov_len = header_length;
    }
    for (i = 0; i < iovcnt; ++i) {
        liov[n++] = iov[i];
    }

    while ((st = aptus_fp_tx_pack(&tx->ring, liov, n, iface->fp.scratch, NULL,
                                  &image, &w)) == APTUS_VB_WRAPPED) {
        if (uct_aptus_fp_write(iface->conn, &tx->key, &tx->ring.geom,
                               image, &w) != UCS_OK) {
            goto failed;
        }
    }
    if (st != APTUS_VB_OK) {
        iface->stats.fp_no_credit++;
        return UCS_ERR_NO_RESOURCE; /* the next channel of the rules */
    }
    if (uct_aptus_fp_write(iface->conn, &tx->key, &tx->ring.geom,
                               image, &w) != UCS_OK) {
        goto failed;
    }
    if (credits > 0) {
        aptus_fp_rx_take_credits(&b->ring);
        iface->stats.fp_credits_piggybacked += credits;
    }
    return UCS_OK;

failed:
    /* the peer's memory cannot be reached (it went, or unmapped it): this
     * message and the later ones take the other channels */
    iface->stats.fp_write_failures++;
    ucs_debug("aptus/%s: fast-path write to 0x%08x failed: fast path off",
              iface->dev_name, ep->peer.remote_key);
    uct_aptus_tl_fp_drop(iface, ep);
    return UCS_ERR_NO_RESOURCE;
}

/* ---- receiving ---------------------------------------------------------- */

static void uct_aptus_tl_fp_fail(uct_aptus_tl_iface_t *iface,
                                 uct_aptus_tl_fp_rx_t *b, const char *why)
{
    uct_aptus_tl_ep_t *ep = b->ep;

    b->failed = 1;
    iface->stats.fp_rx_corrupt++;
    ucs_error("aptus/%s: fast-path block of peer 0x%08x is corrupt (%s): "
              "the peer is failed",
              iface->dev_name, b->peer_key, why);
    /* a message may be lost: the one order per peer cannot go on */
    aptus_ud_chan_peer_invalidate(&iface->ud, &ep->peer);
}

static unsigned uct_aptus_tl_fp_drain(uct_aptus_tl_iface_t *iface,
                                      uct_aptus_tl_fp_rx_t *b)
{
    uct_aptus_tl_ep_t *ep = b->ep;
    unsigned count        = 0;
    aptus_vb_status_t st;
    aptus_vb_msg_t msg;
    uint32_t credits;

    while (!b->failed && (b->ep == ep) &&
           (st = aptus_fp_rx_poll(&b->ring, b->mem, &msg)) != APTUS_VB_EMPTY) {
        if ((st != APTUS_VB_OK) ||
            (msg.length < UCT_APTUS_FP_HDR_LEN + UCT_APTUS_TRAILER_LEN) ||
            (msg.data[0] >= UCT_AM_ID_MAX)) {
            uct_aptus_tl_fp_fail(iface, b, (st != APTUS_VB_OK) ?
                                                   "ring" : "message");
            break;
        }
        credits = aptus_get32(msg.data + 3);
        if (credits > 0) {
            /* before the handler, which may answer */
            uct_aptus_tl_fp_credit(iface, ep, aptus_get16(msg.data + 1),
                                   credits);
        }
        iface->stats.fp_rx_msgs++;
        /* in place, no descriptor: a user that keeps it copies it */
        uct_aptus_tl_rx(iface, ep, msg.data[0],
                        (void *)(msg.data + UCT_APTUS_FP_HDR_LEN),
                        msg.length - UCT_APTUS_FP_HDR_LEN, 0);
        aptus_fp_rx_release(&b->ring, b->mem, &msg);
        ++count;
    }
    if ((count > 0) && (b->ep == ep) && (ep != NULL) &&
        (aptus_fp_rx_pending_credits(&b->ring) >= iface->fp.credit_quarter)) {
        /* nothing went back to carry them: say it */
        iface->stats.fp_credit_msgs++;
        uct_aptus_tl_ctl_send(iface, ep, UCT_APTUS_CTL_FP_CREDIT,
                              APTUS_ALLOC_FP);
    }
    return count;
}

unsigned uct_aptus_tl_fp_progress(uct_aptus_tl_iface_t *iface)
{
    unsigned i, count = 0;

    if (ucs_likely(iface->fp.num_active == 0)) {
        return 0;
    }
    for (i = 0; i < iface->fp.num_blocks; ++i) {
        if (iface->fp.blocks[i].state == UCT_APTUS_FP_BLOCK_ACTIVE) {
            count += uct_aptus_tl_fp_drain(iface, &iface->fp.blocks[i]);
        }
    }
    return count;
}
