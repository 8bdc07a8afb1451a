/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the one interface of every message channel.
 *
 * A channel is one of the paper channels of Koop et al., "MVAPICH-Aptus:
 * Scalable High-Performance Multi-Transport MPI over InfiniBand", IPDPS
 * 2008: UD-SR, UD-ZCopy, RC-SR, RC-RDMA (and RC-FP). Each implements the
 * same small operations table, so that a transport can compose several of
 * them under one endpoint: ud_sr and rc_sr are thin UCT transports over one
 * or two channels, aptus owns a peer on several at once.
 *
 * A channel peer is a plain object (a UD stream, an RC link, a fast-path
 * sender) owned by a transport endpoint; the endpoint is never the peer
 * itself. Operations a channel does not have (put on UD-SR, send on
 * RC-RDMA) are NULL in its table: the composing transport does not pick
 * that channel for them.
 *
 * Transports call the table through the aptus_chan_*() functions below,
 * never a channel's own functions: ud_sr, rc_sr and rc_fp are thin UCT
 * layers over one to three channels.
 */
#ifndef APTUS_CHAN_H_
#define APTUS_CHAN_H_

#include "wire/conn.h"

#include <uct/api/uct.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aptus_chan_type {
    APTUS_CHAN_UD_SR,
    APTUS_CHAN_UD_ZCOPY,
    APTUS_CHAN_RC_SR,
    APTUS_CHAN_RC_RDMA,
    APTUS_CHAN_RC_FP,
    APTUS_CHAN_LAST
} aptus_chan_type_t;

/* The names used in configuration (UCX_APTUS_SEND_RULES) and statistics. */
extern const char *const aptus_chan_names[APTUS_CHAN_LAST];

/* Writes the payload to dest and returns its length. */
typedef size_t (*aptus_chan_pack_cb_t)(void *dest, void *arg);

typedef enum aptus_chan_send_kind {
    APTUS_CHAN_SEND_COPY, /* hdr, then buffer: copied before the call returns */
    APTUS_CHAN_SEND_PACK, /* the pack callback writes the whole message */
    APTUS_CHAN_SEND_IOV   /* hdr (copied), then iov from the caller's memory
                             until comp is called */
} aptus_chan_send_kind_t;

enum {
    /* the channel's own control message: not held back behind the user's
     * pending requests */
    APTUS_CHAN_SEND_F_INTERNAL = 1u << 0
};

enum {
    /* flush, with UCT's flags: comp already waits for another channel's
     * flush of the same peer (that one returned UCS_INPROGRESS), so this
     * channel adds to its count rather than starts it */
    APTUS_CHAN_FLUSH_F_SHARED_COMP = 1u << 16
};

/* An eager message: an active message id, a header and a payload. */
typedef struct aptus_chan_send {
    aptus_chan_send_kind_t kind;
    uint8_t am_id;
    uint8_t flags;
    const void *hdr; /* COPY and IOV */
    unsigned hdr_len;
    union {
        struct {
            const void *buffer;
            unsigned length;
        } copy;
        struct {
            aptus_chan_pack_cb_t cb;
            void *arg;
            unsigned length; /* what cb will pack, when the caller knows it
                                (0: not known): the buffer fits it */
        } pack;
        struct {
            const struct iovec *iov;
            unsigned iovcnt;
            uct_completion_t *comp; /* NULL: done when the call returns */
        } iov;
    };
} aptus_chan_send_t;

static inline void aptus_chan_send_copy(aptus_chan_send_t *send, uint8_t am_id,
                                        const void *hdr, unsigned hdr_len,
                                        const void *buffer, unsigned length)
{
    send->kind        = APTUS_CHAN_SEND_COPY;
    send->am_id       = am_id;
    send->flags       = 0;
    send->hdr         = hdr;
    send->hdr_len     = hdr_len;
    send->copy.buffer = buffer;
    send->copy.length = length;
}

static inline void aptus_chan_send_pack(aptus_chan_send_t *send, uint8_t am_id,
                                        aptus_chan_pack_cb_t cb, void *arg)
{
    send->kind        = APTUS_CHAN_SEND_PACK;
    send->am_id       = am_id;
    send->flags       = 0;
    send->hdr         = NULL;
    send->hdr_len     = 0;
    send->pack.cb     = cb;
    send->pack.arg    = arg;
    send->pack.length = 0;
}

static inline void aptus_chan_send_iov(aptus_chan_send_t *send, uint8_t am_id,
                                       const void *hdr, unsigned hdr_len,
                                       const struct iovec *iov, unsigned iovcnt,
                                       uct_completion_t *comp)
{
    send->kind       = APTUS_CHAN_SEND_IOV;
    send->am_id      = am_id;
    send->flags      = 0;
    send->hdr        = hdr;
    send->hdr_len    = hdr_len;
    send->iov.iov    = iov;
    send->iov.iovcnt = iovcnt;
    send->iov.comp   = comp;
}

/* Total bytes of a message (the pack callback's are known only after). */
static inline size_t aptus_chan_send_length(const aptus_chan_send_t *send)
{
    size_t length = send->hdr_len;
    unsigned i;

    if (send->kind == APTUS_CHAN_SEND_COPY) {
        return length + send->copy.length;
    }
    for (i = 0; (send->kind == APTUS_CHAN_SEND_IOV) && (i < send->iov.iovcnt);
         ++i) {
        length += send->iov.iov[i].iov_len;
    }
    return length;
}

/* Remote memory, as one memory domain key describes it to every data path:
 * the region itself (RC-RDMA reads and writes it one-sided) and the
 * owner's registration token (UD-ZCopy asks the owner to stream it). */
typedef struct aptus_chan_key {
    aptus_mem_key_t mem;
    uint64_t token;
} aptus_chan_key_t;

typedef struct aptus_chan aptus_chan_t;
typedef struct aptus_chan_peer aptus_chan_peer_t; /* a channel's own peer */

typedef struct aptus_chan_ops {
    aptus_chan_type_t type;

    /* A peer at remote, which each channel describes in its own header
     * (aptus_ud_remote_t, aptus_rc_remote_t, aptus_fp_remote_t), held in
     * storage (peer_size bytes of the caller's, as an RC link in its
     * endpoint) or found or made by the channel (a UD stream: storage is
     * NULL). NULL for a channel that uses its carrier's peers (UD-ZCopy,
     * RC-RDMA): the carrier's peer is theirs. */
    size_t peer_size;
    ucs_status_t (*peer_connect)(aptus_chan_t *chan, const void *remote,
                                 void *storage, aptus_chan_peer_t **peer_p);
    /* The owner is done with the peer (and, with a carrier, the channel
     * with its state for it; NULL: it keeps none): what was accepted is
     * still delivered, then the peer goes. */
    void (*peer_disconnect)(aptus_chan_t *chan, aptus_chan_peer_t *peer);

    /* An eager message to peer. Returns UCS_OK or the packed length (PACK):
     * taken; UCS_INPROGRESS: taken, comp is called later (IOV);
     * UCS_ERR_NO_RESOURCE: no room now (retry, or pending_add); another
     * error: the peer failed. */
    ssize_t (*send)(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                    const aptus_chan_send_t *send);

    /* Move iov to (put) or from (get) [remote_addr, +length) of key's
     * region on peer. UCS_OK: done; UCS_INPROGRESS: comp is called when
     * every byte is in place; UCS_ERR_NO_RESOURCE: retry later. */
    ucs_status_t (*put)(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                        const struct iovec *iov, unsigned iovcnt,
                        uint64_t remote_addr, const aptus_chan_key_t *key,
                        uct_completion_t *comp);
    ucs_status_t (*get)(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                        const struct iovec *iov, unsigned iovcnt,
                        uint64_t remote_addr, const aptus_chan_key_t *key,
                        uct_completion_t *comp);

    /* Everything issued to peer before is complete (UCS_OK), or comp is
     * called when it is (UCS_INPROGRESS). */
    ucs_status_t (*flush)(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                          unsigned flags, uct_completion_t *comp);

    /* Wait for room to send to peer (UCS_ERR_BUSY: there is room now). */
    ucs_status_t (*pending_add)(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                                uct_pending_req_t *req, unsigned flags);
    void (*pending_purge)(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                          uct_pending_purge_callback_t cb, void *arg);

    /* Make sure a silent peer's failure is noticed (keepalive). */
    ucs_status_t (*check)(aptus_chan_t *chan, aptus_chan_peer_t *peer);

    /* Fail the peer now: its outstanding operations complete with an
     * error and the failure is reported as any other. */
    void (*invalidate)(aptus_chan_t *chan, aptus_chan_peer_t *peer);

    /* Receive, deliver (through the channel's receive upcall, which names
     * the peer), acknowledge, retransmit. Returns events handled. */
    unsigned (*progress)(aptus_chan_t *chan, int is_async);
} aptus_chan_ops_t;

/* The head of every channel object. */
struct aptus_chan {
    const aptus_chan_ops_t *ops;
    /* The channel whose peers this one uses (RC-RDMA: RC-SR's links,
     * UD-ZCopy: UD-SR's streams), or NULL. */
    aptus_chan_t *carrier;
};

/* Operations a channel leaves to its carrier: requests wait for room on
 * the carrier's peer, and the peer's health is the carrier's. */
ucs_status_t aptus_chan_carrier_pending_add(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer,
                                            uct_pending_req_t *req,
                                            unsigned flags);
void aptus_chan_carrier_pending_purge(aptus_chan_t *chan,
                                      aptus_chan_peer_t *peer,
                                      uct_pending_purge_callback_t cb,
                                      void *arg);
ucs_status_t aptus_chan_carrier_check(aptus_chan_t *chan,
                                      aptus_chan_peer_t *peer);
void aptus_chan_carrier_invalidate(aptus_chan_t *chan, aptus_chan_peer_t *peer);

static inline const char *aptus_chan_name(const aptus_chan_t *chan)
{
    return aptus_chan_names[chan->ops->type];
}

/* ---- what transports call (the table, by name) ---- */

static inline ucs_status_t aptus_chan_peer_connect(aptus_chan_t *chan,
                                                   const void *remote,
                                                   void *storage,
                                                   aptus_chan_peer_t **peer_p)
{
    return chan->ops->peer_connect(chan, remote, storage, peer_p);
}

static inline void aptus_chan_peer_disconnect(aptus_chan_t *chan,
                                              aptus_chan_peer_t *peer)
{
    if (chan->ops->peer_disconnect != NULL) {
        chan->ops->peer_disconnect(chan, peer);
    }
}

static inline ssize_t aptus_chan_send(aptus_chan_t *chan,
                                      aptus_chan_peer_t *peer,
                                      const aptus_chan_send_t *send)
{
    return chan->ops->send(chan, peer, send);
}

static inline ucs_status_t
aptus_chan_put(aptus_chan_t *chan, aptus_chan_peer_t *peer,
               const struct iovec *iov, unsigned iovcnt, uint64_t remote_addr,
               const aptus_chan_key_t *key, uct_completion_t *comp)
{
    return chan->ops->put(chan, peer, iov, iovcnt, remote_addr, key, comp);
}

static inline ucs_status_t
aptus_chan_get(aptus_chan_t *chan, aptus_chan_peer_t *peer,
               const struct iovec *iov, unsigned iovcnt, uint64_t remote_addr,
               const aptus_chan_key_t *key, uct_completion_t *comp)
{
    return chan->ops->get(chan, peer, iov, iovcnt, remote_addr, key, comp);
}

static inline ucs_status_t aptus_chan_flush(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer,
                                            unsigned flags,
                                            uct_completion_t *comp)
{
    return chan->ops->flush(chan, peer, flags, comp);
}

static inline ucs_status_t aptus_chan_pending_add(aptus_chan_t *chan,
                                                  aptus_chan_peer_t *peer,
                                                  uct_pending_req_t *req,
                                                  unsigned flags)
{
    return chan->ops->pending_add(chan, peer, req, flags);
}

static inline void aptus_chan_pending_purge(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer,
                                            uct_pending_purge_callback_t cb,
                                            void *arg)
{
    chan->ops->pending_purge(chan, peer, cb, arg);
}

static inline ucs_status_t aptus_chan_check(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer)
{
    return chan->ops->check(chan, peer);
}

static inline void aptus_chan_invalidate(aptus_chan_t *chan,
                                         aptus_chan_peer_t *peer)
{
    chan->ops->invalidate(chan, peer);
}

static inline unsigned aptus_chan_progress(aptus_chan_t *chan, int is_async)
{
    return chan->ops->progress(chan, is_async);
}

#ifdef __cplusplus
}
#endif

#endif
