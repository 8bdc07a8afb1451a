/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD-ZCopy channel (see ud_zcopy.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_zcopy.h"
#include "../proto/random.h"
#include "ud_sr_chan_int.h"
#include "base/aptus_log.h"

#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/uid.h>

#include <string.h>

#define APTUS_UDZ_MSG_MAX  256   /* encoded control message, without data */
#define APTUS_UDZ_SPILL    65536 /* room behind the posted slots: a train */
#define APTUS_UDZ_RING_MAX 4096  /* indices whose send sequence is kept */

enum {
    APTUS_UDZ_SEND_REQ    = 1u << 0,
    APTUS_UDZ_SEND_CREDIT = 1u << 1,
    APTUS_UDZ_SEND_DONE   = 1u << 2
};

/* The initiator's side of a transfer. */
struct aptus_udz_get {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer;
    uint32_t xfer;
    uint8_t to_send;  /* control messages that could not go yet */
    uint8_t copy;     /* copy-based path */
    uint8_t finished; /* completed; only DONE left to send */
    uint8_t *dest;
    uint64_t length;
    uint64_t remote_addr;
    uint64_t token;
    uct_completion_t *comp;
    int32_t done_status;
    uint64_t copied;      /* copy path */
    aptus_udz_ctx_t *ctx; /* zero-copy path */
    aptus_zc_rx_t rx;
    uint64_t *bitmap;
    uint64_t last_data_us;
    uint64_t last_credit_us;
    uint32_t stall_shift;
    uint32_t expect;        /* index the next arrival most likely has */
    uint64_t busy_until_us; /* the owner said "busy": ask again then */
};

/* The owner's side of a transfer. */
typedef struct aptus_udz_put {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer;
    uint32_t xfer;
    uint8_t copy;
    uint8_t error_pending; /* an ERROR reply could not go yet */
    int32_t error;
    const uint8_t *src;
    uint64_t length;
    uint32_t payload;
    aptus_wire_addr_t ctx_addr;
    uint64_t ctx_key;
    aptus_zc_tx_t tx;
    aptus_zc_sent_t *ring; /* send sequence of indices in play */
    uint32_t ring_size;
    uint32_t seen_seq; /* latest the initiator reported */
    uint32_t probe_shift;
    uint64_t copy_offset;
    uint64_t last_heard_us; /* request, credit */
    uint64_t last_send_us;
    uint64_t token; /* what the request named the source with */
} aptus_udz_put_t;

/* The writer's side of a put: its source is exported to the target under a
 * token made for this transfer, until the target says it has the data. */
typedef struct aptus_udz_write {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer;
    uint32_t xfer;
    uint8_t req_pending; /* WRITE could not go yet */
    const uint8_t *src;
    uint64_t length;
    uint64_t remote_addr; /* the target's, and its token */
    uint64_t token;
    uint64_t src_token;
    uct_completion_t *comp;
} aptus_udz_write_t;

static int aptus_udz_write_exported(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                    uint64_t token, uint64_t address,
                                    uint64_t length);

/* The target's side: the get that reads the writer's data, then WDONE. */
typedef struct aptus_udz_wtarget {
    ucs_list_link_t list;
    aptus_udz_t *udz;
    aptus_ud_peer_t *peer;
    uint32_t xfer; /* the writer's */
    uint8_t reply_pending;
    int32_t status;
    uct_completion_t comp; /* of the get */
} aptus_udz_wtarget_t;

typedef struct aptus_udz_flush {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer; /* NULL: every peer */
    uct_completion_t *comp;
} aptus_udz_flush_t;

const char *aptus_udz_config_check(const aptus_udz_config_t *config)
{
    if (config->window < 4) {
        return "ZCOPY_WINDOW must be at least 4";
    }
    if (config->batch == 0) {
        return "RX_BATCH must be at least 1";
    }
    if (config->max_get == 0) {
        return "ZCOPY_MAX must be positive";
    }
    if (config->max_served == 0) {
        return "ZCOPY_MAX_SERVED must be at least 1";
    }
    return NULL;
}

/* Keys and tokens come from the OS CSPRNG (proto/random.h): a guessed one
 * lets a stray process into a transfer. There is no weaker fallback. */
static uint32_t aptus_udz_random(void)
{
    uint32_t r = aptus_random32();

    if (r == 0) {
        ucs_fatal("ud_zcopy: the OS gives no randomness (getrandom: %m)");
    }
    return r;
}

static uint64_t aptus_udz_random64(void)
{
    uint64_t r = aptus_random64();

    if (r == 0) {
        ucs_fatal("ud_zcopy: the OS gives no randomness (getrandom: %m)");
    }
    return r;
}

/* The receive contexts and the batch arrays (any of them may be NULL). */
static void aptus_udz_free_arrays(aptus_udz_t *udz)
{
    unsigned i;

    for (i = 0; i < udz->num_ctxs; ++i) {
        if (udz->ctxs[i].rxq != NULL) {
            udz->ud->wire->ops->rxq_close(udz->ctxs[i].rxq);
        }
    }
    udz->num_ctxs = 0;
    ucs_free(udz->hdrs);
    ucs_free(udz->scratch);
    ucs_free(udz->staging);
    ucs_free(udz->rx_iov);
    ucs_free(udz->rxv);
    ucs_free(udz->slots);
    ucs_free(udz->tx);
    ucs_free(udz->tx_iov);
    ucs_free(udz->tx_hdrs);
    ucs_free(udz->ctxs);
}

ucs_status_t aptus_udz_init(aptus_udz_t *udz, aptus_ud_chan_t *ud,
                            const aptus_udz_config_t *config,
                            aptus_udz_check_t check, void *check_arg)
{
    unsigned batch = config->batch;
    ucs_status_t status;
    const char *bad;

    bad = aptus_udz_config_check(config);
    if (bad != NULL) {
        ucs_error("ud_sr: invalid configuration: %s", bad);
        return UCS_ERR_INVALID_PARAM;
    }

    memset(udz, 0, sizeof(*udz));
    udz->super.ops     = &aptus_udz_chan_iface_ops;
    udz->super.carrier = &ud->super;
    udz->ud            = ud;
    udz->config        = *config;
    udz->check         = check;
    udz->check_arg     = check_arg;
    udz->payload       = ud->wire->mtu - APTUS_ZC_HDR_LEN;
    /* datagrams per segmented send (0: the wire has none) */
    udz->max_train =
        ucs_min(ucs_min(ud->wire->seg_max_count, APTUS_UDZ_TRAIN_MAX),
                ud->wire->seg_max_bytes / ud->wire->mtu);
    udz->next_xfer = aptus_udz_random();
    ucs_list_head_init(&udz->gets);
    ucs_list_head_init(&udz->puts);
    ucs_list_head_init(&udz->flushes);
    ucs_list_head_init(&udz->writes);
    ucs_list_head_init(&udz->wtargets);
    udz->closing = 0;

    status = ucs_mpool_init(&udz->get_mp, 0, sizeof(aptus_udz_get_t), 0, 8, 16,
                            UINT_MAX, &aptus_mpool_plain_ops, "aptus_udz_gets");
    if (status != UCS_OK) {
        return status;
    }
    status = ucs_mpool_init(&udz->put_mp, 0, sizeof(aptus_udz_put_t), 0, 8, 16,
                            UINT_MAX, &aptus_mpool_plain_ops, "aptus_udz_puts");
    if (status != UCS_OK) {
        goto err_get_mp;
    }

    batch        = ucs_max(batch, APTUS_UDZ_TRAIN_MAX);
    udz->hdrs    = ucs_calloc(batch, APTUS_ZC_HDR_LEN, "aptus_udz_hdrs");
    udz->scratch = ucs_malloc(APTUS_UDZ_SPILL, "aptus_udz_spill");
    udz->staging = ucs_malloc(APTUS_UDZ_SPILL, "aptus_udz_staging");
    udz->rx_iov =
        ucs_calloc(batch * 2 + 1, sizeof(*udz->rx_iov), "aptus_udz_iov");
    udz->rxv     = ucs_calloc(1, sizeof(*udz->rxv), "aptus_udz_rxv");
    udz->slots   = ucs_calloc(batch, sizeof(*udz->slots), "aptus_udz_slots");
    udz->tx      = ucs_calloc(batch, sizeof(*udz->tx), "aptus_udz_tx");
    udz->tx_iov  = ucs_calloc(batch * 2, sizeof(*udz->tx_iov), "aptus_udz_txv");
    udz->tx_hdrs = ucs_calloc(batch, APTUS_ZC_HDR_LEN, "aptus_udz_txh");
    udz->ctxs    = ucs_calloc(ucs_max(config->contexts, 1), sizeof(*udz->ctxs),
                              "aptus_udz_ctxs");
    if ((udz->hdrs == NULL) || (udz->scratch == NULL) ||
        (udz->staging == NULL) || (udz->rx_iov == NULL) || (udz->rxv == NULL) ||
        (udz->slots == NULL) || (udz->tx == NULL) || (udz->tx_iov == NULL) ||
        (udz->tx_hdrs == NULL) || (udz->ctxs == NULL)) {
        status = UCS_ERR_NO_MEMORY;
        goto err_arrays;
    }

    /* the contexts (a socket each on the sock wire) open on first use: an
     * interface that never fetches by zero copy holds none */
    udz->num_ctxs = config->contexts;
    return UCS_OK;

err_arrays:
    aptus_udz_free_arrays(udz);
    ucs_mpool_cleanup(&udz->put_mp, 0);
err_get_mp:
    ucs_mpool_cleanup(&udz->get_mp, 0);
    return status;
}

/* ---- control messages ------------------------------------------------- */

/* Returns UCS_OK when sent, UCS_ERR_NO_RESOURCE to retry later. */
static ucs_status_t aptus_udz_send(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                   const aptus_zc_msg_t *msg, const void *data,
                                   size_t data_len)
{
    uint8_t buf[APTUS_UDZ_MSG_MAX];
    size_t len = aptus_zc_msg_build(buf, msg);
    ssize_t ret;

    ret = aptus_ud_chan_send_internal(udz->ud, peer, APTUS_UDZ_MSG_ID, buf, len,
                                      data, data_len);
    if (ret >= 0) {
        return UCS_OK;
    }
    if (ret == UCS_ERR_NO_RESOURCE) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* the stream is dead: its failure handler cleans up */
    return UCS_OK;
}

/* ---- the initiator's side -------------------------------------------- */

static unsigned aptus_udz_outstanding(aptus_udz_t *udz, aptus_ud_peer_t *peer)
{
    aptus_udz_get_t *get;
    unsigned n = 0;

    aptus_udz_write_t *wr;

    ucs_list_for_each(get, &udz->gets, list)
    {
        n += !get->finished && ((peer == NULL) || (get->peer == peer));
    }
    ucs_list_for_each(wr, &udz->writes, list)
    {
        n += (peer == NULL) || (wr->peer == peer);
    }
    return n;
}

static void aptus_udz_complete_later(aptus_udz_t *udz, uct_completion_t *comp,
                                     ucs_status_t status)
{
    aptus_ud_comp_list_add(&udz->done, comp, status);
}

static void aptus_udz_dispatch_completions(aptus_udz_t *udz)
{
    if (!udz->ud->in_async) { /* a peer failed in async context: later */
        aptus_ud_comp_list_dispatch(&udz->done);
    }
}

static void aptus_udz_check_flushes(aptus_udz_t *udz)
{
    aptus_udz_flush_t *fl, *tmp;

    ucs_list_for_each_safe(fl, tmp, &udz->flushes, list)
    {
        if (aptus_udz_outstanding(udz, fl->peer) == 0) {
            ucs_list_del(&fl->list);
            aptus_udz_complete_later(udz, fl->comp, UCS_OK);
            ucs_free(fl);
        }
    }
}

static void aptus_udz_release_ctx(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    if (get->ctx != NULL) {
        get->ctx->get = NULL;
        get->ctx      = NULL;
    }
    ucs_free(get->bitmap);
    get->bitmap = NULL;
}

static void aptus_udz_get_free(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    ucs_list_del(&get->list);
    aptus_udz_release_ctx(udz, get);
    ucs_mpool_put(get);
}

static void aptus_udz_send_done(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    aptus_zc_msg_t msg;

    msg.type        = APTUS_ZC_MSG_DONE;
    msg.xfer        = get->xfer;
    msg.done.status = get->done_status;
    if (aptus_udz_send(udz, get->peer, &msg, NULL, 0) == UCS_OK) {
        aptus_udz_get_free(udz, get);
    } else {
        get->to_send = APTUS_UDZ_SEND_DONE;
    }
}

/* The get ends: the user learns the result now; the owner is told (when
 * it may still be working for it) as soon as the stream takes a message. */
static void aptus_udz_get_finish(aptus_udz_t *udz, aptus_udz_get_t *get,
                                 ucs_status_t status, int tell_owner)
{
    uct_completion_t *comp = get->comp;

    get->finished    = 1;
    get->comp        = NULL;
    get->done_status = status;
    aptus_udz_release_ctx(udz, get);
    if (status != UCS_OK) {
        udz->stats.aborted++;
    }
    if (tell_owner) {
        aptus_udz_send_done(udz, get);
    } else {
        aptus_udz_get_free(udz, get);
    }
    if (comp != NULL) {
        aptus_udz_complete_later(udz, comp, status);
    }
    aptus_udz_check_flushes(udz);
}

static aptus_udz_get_t *aptus_udz_find_get(aptus_udz_t *udz,
                                           aptus_ud_peer_t *peer, uint32_t xfer)
{
    aptus_udz_get_t *get;

    ucs_list_for_each(get, &udz->gets, list)
    {
        if ((get->xfer == xfer) && (get->peer == peer) && !get->finished) {
            return get;
        }
    }
    return NULL;
}

static aptus_udz_ctx_t *aptus_udz_take_ctx(aptus_udz_t *udz)
{
    aptus_udz_ctx_t *ctx, *fresh = NULL;
    ucs_status_t status;
    unsigned i;

    /* an open one first; a context opens only when none is free */
    for (i = 0; i < udz->num_ctxs; ++i) {
        ctx = &udz->ctxs[i];
        if (ctx->get != NULL) {
            continue;
        }
        if (ctx->rxq != NULL) {
            /* whatever a previous transfer left behind is stale */
            udz->ud->wire->ops->rxq_drain(ctx->rxq);
            ctx->key = aptus_udz_random64();
            return ctx;
        }
        if (fresh == NULL) {
            fresh = ctx;
        }
    }
    if (fresh == NULL) {
        return NULL;
    }
    status = udz->ud->wire->ops->rxq_open(udz->ud->wire, udz->config.window,
                                          &fresh->rxq);
    if (status != UCS_OK) {
        /* out of descriptors or memory: the copy path serves it */
        fresh->rxq = NULL;
        udz->stats.ctx_open_failed++;
        ucs_diag("ud_zcopy: cannot open a receive context: %s",
                 ucs_status_string(status));
        return NULL;
    }
    udz->stats.ctxs_open++;
    fresh->key = aptus_udz_random64();
    return fresh;
}

static void aptus_udz_send_req(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    aptus_zc_msg_t msg;

    memset(&msg, 0, sizeof(msg));
    msg.type            = APTUS_ZC_MSG_REQ;
    msg.xfer            = get->xfer;
    msg.req.remote_addr = get->remote_addr;
    msg.req.length      = get->length;
    msg.req.token       = get->token;
    if (get->copy) {
        msg.req.flags = APTUS_ZC_REQ_COPY;
    } else {
        memcpy(msg.req.ctx_addr, get->ctx->rxq->addr.raw, APTUS_ZC_ADDR_LEN);
        msg.req.ctx_key   = get->ctx->key;
        msg.req.payload   = get->rx.payload;
        msg.req.edge      = aptus_zc_rx_edge(&get->rx);
        get->rx.edge_sent = msg.req.edge;
    }
    if (aptus_udz_send(udz, get->peer, &msg, NULL, 0) == UCS_OK) {
        get->to_send &= ~APTUS_UDZ_SEND_REQ;
    } else {
        get->to_send |= APTUS_UDZ_SEND_REQ;
    }
}

ucs_status_t aptus_udz_get(aptus_udz_t *udz, aptus_ud_peer_t *peer, void *dest,
                           uint64_t length, uint64_t remote_addr,
                           uint64_t token, uct_completion_t *comp)
{
    aptus_udz_get_t *get;
    uint32_t count, payload;

    if (peer->flags & APTUS_UD_PEER_FAILED) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }
    if (length == 0) {
        return UCS_OK;
    }
    if (length > udz->config.max_get) {
        return UCS_ERR_INVALID_PARAM;
    }

    get = ucs_mpool_get(&udz->get_mp);
    if (get == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memset(get, 0, sizeof(*get));
    get->peer        = peer;
    get->xfer        = udz->next_xfer++;
    get->dest        = dest;
    get->length      = length;
    get->remote_addr = remote_addr;
    get->token       = token;
    get->comp        = comp;
    get->copy        = 1;

    if (length >= udz->config.thresh) {
        get->ctx = aptus_udz_take_ctx(udz);
        if (get->ctx == NULL) {
            udz->stats.pool_empty++; /* fall back: copy through the stream */
        } else {
            /* datagrams of the size the path to the peer carries */
            payload = (uint32_t)ucs_min(udz->payload,
                                        aptus_ud_peer_mtu(udz->ud, peer) -
                                            APTUS_ZC_HDR_LEN);
            count   = aptus_zc_count(length, payload);
            get->bitmap =
                ucs_malloc(aptus_zc_bitmap_words(count) * sizeof(uint64_t),
                           "aptus_udz_bitmap");
            if (get->bitmap == NULL) {
                get->ctx = NULL;
            } else {
                get->ctx->get = get;
                get->copy     = 0;
                aptus_zc_rx_init(&get->rx, length, payload, udz->config.window,
                                 get->bitmap);
                get->expect = 0;
            }
        }
    }
    if (get->copy) {
        udz->stats.copy_gets++;
    } else {
        udz->stats.zc_gets++;
    }

    get->last_data_us   = udz->ud->now_us;
    get->last_credit_us = udz->ud->now_us;
    ucs_list_add_tail(&udz->gets, &get->list);
    aptus_udz_send_req(udz, get);
    return UCS_INPROGRESS;
}

/* Time without data after which the initiator names what is missing:
 * two round trips of the stream, at least two timer ticks; doubled each
 * time it passes without progress (up to 64 times). */
static uint64_t aptus_udz_stall_us(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    uint64_t base = ucs_max(2 * (uint64_t)get->peer->tx.srtt_us,
                            2 * (uint64_t)udz->ud->config.tick_us);

    return base << ucs_min(get->stall_shift, 6);
}

static void aptus_udz_send_credit(aptus_udz_t *udz, aptus_udz_get_t *get,
                                  uint32_t missing_upto)
{
    aptus_zc_msg_t msg;

    msg.type            = APTUS_ZC_MSG_CREDIT;
    msg.credit.seen_seq = get->rx.seen_seq;
    msg.xfer            = get->xfer;
    msg.credit.edge     = aptus_zc_rx_edge(&get->rx);
    msg.credit.num_ranges =
        (missing_upto == 0)
            ? 0
            : aptus_zc_rx_missing(&get->rx, missing_upto, msg.credit.ranges,
                                  APTUS_ZC_MAX_RANGES);
    if (aptus_udz_send(udz, get->peer, &msg, NULL, 0) != UCS_OK) {
        get->to_send |= APTUS_UDZ_SEND_CREDIT;
        return;
    }
    get->to_send &= ~APTUS_UDZ_SEND_CREDIT;
    get->rx.edge_sent   = msg.credit.edge;
    get->last_credit_us = udz->ud->now_us;
    udz->stats.credits++;
    if (msg.credit.num_ranges > 0) {
        get->rx.nack_seq = msg.credit.seen_seq;
        udz->stats.nacks++;
    }
}

/* Copy len bytes at logical offset off of a posted scatter list. */
static void aptus_udz_gather(const struct iovec *iov, unsigned iovcnt,
                             size_t off, void *dst, size_t len)
{
    size_t take;
    unsigned i;

    for (i = 0; (i < iovcnt) && (len > 0); ++i) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        take = ucs_min(iov[i].iov_len - off, len);
        memcpy(dst, UCS_PTR_BYTE_OFFSET(iov[i].iov_base, off), take);
        dst = UCS_PTR_BYTE_OFFSET(dst, take);
        len -= take;
        off = 0;
    }
}

/*
 * Take what arrived into the destination; returns datagrams taken.
 *
 * Each receive posts a run of consecutive missing indices from where the
 * next arrival most likely belongs -- [header | its place in the
 * destination] each -- and a spill area behind them. A train of datagrams
 * (UDP GRO) or a single one lands on those places in order; whatever
 * landed elsewhere than its index (after a loss, a resend) is staged and
 * moved once the whole receive is read.
 */
static unsigned aptus_udz_get_recv(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    const size_t seg_full  = APTUS_ZC_HDR_LEN + get->rx.payload;
    aptus_dgram_rxv_t *rxv = &udz->rxv[0];
    struct iovec *iov      = udz->rx_iov;
    uint32_t j, start, idx, nslots, nstaged, last_index;
    unsigned rounds, total = 0;
    size_t seg, pos, seglen, plen, staged_off;
    aptus_zc_data_t data;
    aptus_zc_verdict_t v;
    uint8_t hdr[APTUS_ZC_HDR_LEN];
    uint32_t staged_idx[APTUS_UDZ_TRAIN_MAX];
    size_t staged_at[APTUS_UDZ_TRAIN_MAX];

    for (rounds = 0; rounds < 64; ++rounds) {
        start = get->expect;
        if ((start >= get->rx.count) || aptus_zc_rx_has(&get->rx, start)) {
            start = get->rx.lowest_missing;
        }
        if (start >= get->rx.count) {
            break; /* complete */
        }
        for (nslots = 0, j = start;
             (nslots < APTUS_UDZ_TRAIN_MAX) && (j < get->rx.count) &&
             !aptus_zc_rx_has(&get->rx, j);
             ++nslots, ++j) {
            udz->slots[nslots]       = j;
            iov[2 * nslots].iov_base = udz->hdrs + nslots * APTUS_ZC_HDR_LEN;
            iov[2 * nslots].iov_len  = APTUS_ZC_HDR_LEN;
            iov[2 * nslots + 1].iov_base =
                get->dest + aptus_zc_offset(&get->rx, j);
            iov[2 * nslots + 1].iov_len = aptus_zc_len(&get->rx, j);
        }
        iov[2 * nslots].iov_base = udz->scratch;
        iov[2 * nslots].iov_len  = APTUS_UDZ_SPILL;
        rxv->iov                 = iov;
        rxv->iovcnt              = 2 * nslots + 1;

        if (udz->ud->wire->ops->rxq_recv(get->ctx->rxq, rxv, 1) == 0) {
            break;
        }
        if (rxv->truncated) {
            udz->stats.truncated++;
            continue;
        }

        seg        = (rxv->seg_size != 0) ? rxv->seg_size : rxv->length;
        nstaged    = 0;
        staged_off = 0;
        last_index = UINT32_MAX;
        for (pos = 0; pos < rxv->length; pos += seg) {
            seglen = ucs_min(seg, rxv->length - pos);
            udz->stats.dgrams_received++;
            ++total;
            if (seglen < APTUS_ZC_HDR_LEN) {
                udz->stats.truncated++;
                break;
            }
            aptus_udz_gather(iov, rxv->iovcnt, pos, hdr, APTUS_ZC_HDR_LEN);
            if ((aptus_zc_data_parse(hdr, seglen, &data) != 0) ||
                (data.key != get->ctx->key) || (data.xfer != get->xfer)) {
                aptus_trace_data("udz rx: %zu bytes, stale or forged", seglen);
                udz->stats.bad_key++; /* stale or forged: slots stay missing */
                continue;
            }
            plen = seglen - APTUS_ZC_HDR_LEN;
            aptus_trace_data("udz rx: xfer %u index %u seq %u len %zu",
                             data.xfer, data.index, data.seq, plen);
            /* slots are full-size but for the transfer's last index, which
             * is posted last: a datagram at a multiple of the full size
             * landed in the slot of that rank */
            j = ((pos % seg_full == 0) && (pos / seg_full < nslots))
                    ? udz->slots[pos / seg_full]
                    : UINT32_MAX;
            v = aptus_zc_rx_accept(&get->rx, j, data.index, data.seq, plen);
            switch (v) {
            case APTUS_ZC_PLACED:
                last_index = data.index;
                break;
            case APTUS_ZC_MISPLACED:
                udz->stats.misplaced++;
                aptus_udz_gather(iov, rxv->iovcnt, pos + APTUS_ZC_HDR_LEN,
                                 udz->staging + staged_off, plen);
                staged_idx[nstaged] = data.index;
                staged_at[nstaged]  = staged_off;
                staged_off += plen;
                ++nstaged;
                last_index = data.index;
                break;
            case APTUS_ZC_DUPLICATE:
                udz->stats.duplicates++;
                break;
            default:
                udz->stats.bad_index++;
                break;
            }
        }
        /* every staged payload was read before any is written back */
        for (j = 0; j < nstaged; ++j) {
            idx = staged_idx[j];
            memcpy(get->dest + aptus_zc_offset(&get->rx, idx),
                   udz->staging + staged_at[j], aptus_zc_len(&get->rx, idx));
        }
        if (last_index != UINT32_MAX) {
            get->expect = last_index + 1;
        }
        if (aptus_zc_rx_complete(&get->rx)) {
            break;
        }
    }
    return total;
}

/* The owner serves too many transfers: ask again after the stall time,
 * doubled each time it says so. */
static void aptus_udz_get_busy(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    get->busy_until_us = udz->ud->now_us + aptus_udz_stall_us(udz, get);
    get->stall_shift++;
    get->to_send |= APTUS_UDZ_SEND_REQ;
    udz->stats.busy_retries++;
}

/* Returns the datagrams that arrived, and 1 more if the get completed:
 * only what happened counts as progress, so that a caller waiting on an
 * owner that is not running (MPI on oversubscribed cores) yields. */
static unsigned aptus_udz_get_progress(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    uint64_t now = udz->ud->now_us, stall;
    unsigned count;
    uint32_t edge;

    if (ucs_unlikely(get->busy_until_us != 0)) {
        if ((int64_t)(now - get->busy_until_us) < 0) {
            return 0;
        }
        get->busy_until_us  = 0;
        get->last_data_us   = now;
        get->last_credit_us = now;
    }
    if (get->to_send & APTUS_UDZ_SEND_REQ) {
        aptus_udz_send_req(udz, get);
        return 0;
    }
    if (get->copy) {
        /* data comes through the stream. An owner at MAX_SERVED whose
         * stream to us was full dropped its "busy" answer: with nothing
         * heard for a stall, ask again (an owner serving it ignores a
         * repeated request). 100,000 gets of 128 KB in flight (MPICH's
         * manyget) hung here for good. */
        stall = aptus_udz_stall_us(udz, get);
        if ((now - get->last_data_us) >= stall) {
            get->last_data_us = now;
            get->stall_shift++;
            udz->stats.stalls++;
            aptus_udz_send_req(udz, get);
        }
        return 0;
    }

    count = aptus_udz_get_recv(udz, get);
    if (count > 0) {
        get->last_data_us = now;
        get->stall_shift  = 0;
    }
    if (aptus_zc_rx_complete(&get->rx)) {
        udz->stats.zc_bytes += get->length;
        aptus_udz_get_finish(udz, get, UCS_OK, 1);
        return count + 1;
    }

    stall = aptus_udz_stall_us(udz, get);
    edge  = aptus_zc_rx_edge(&get->rx);
    if (((now - get->last_data_us) >= stall) &&
        ((now - get->last_credit_us) >= stall)) {
        /* nothing for a while: report, so that an owner that lost track
         * of the transfer says so (the owner's probe finds lost tails) */
        aptus_udz_send_credit(udz, get, edge);
        get->stall_shift++;
        udz->stats.stalls++;
    } else if (aptus_zc_rx_want_nack(&get->rx)) {
        /* holes below what arrived: lost, on a wire that keeps order */
        aptus_udz_send_credit(udz, get, get->rx.highest_seen);
    } else if (aptus_zc_rx_want_credit(&get->rx) ||
               (get->to_send & APTUS_UDZ_SEND_CREDIT)) {
        aptus_udz_send_credit(udz, get, 0);
    }
    return count;
}

/* ---- the owner's side ------------------------------------------------- */

/* Time without anything to send or anything heard after which the owner
 * probes: like the initiator's stall time, doubled each time it passes. */
static uint64_t aptus_udz_probe_us(aptus_udz_t *udz, aptus_udz_put_t *put)
{
    uint64_t base = ucs_max(2 * (uint64_t)put->peer->tx.srtt_us,
                            2 * (uint64_t)udz->ud->config.tick_us);

    return base << ucs_min(put->probe_shift, 6);
}

static aptus_udz_put_t *aptus_udz_find_put(aptus_udz_t *udz,
                                           aptus_ud_peer_t *peer, uint32_t xfer)
{
    aptus_udz_put_t *put;

    ucs_list_for_each(put, &udz->puts, list)
    {
        if ((put->xfer == xfer) && (put->peer == peer)) {
            return put;
        }
    }
    return NULL;
}

static void aptus_udz_put_free(aptus_udz_t *udz, aptus_udz_put_t *put)
{
    ucs_assert(udz->num_puts > 0);
    udz->num_puts--;
    ucs_list_del(&put->list);
    ucs_free(put->ring);
    ucs_mpool_put(put);
}

static inline uint32_t aptus_udz_put_len(const aptus_udz_put_t *put,
                                         uint32_t index)
{
    return (index + 1 < put->tx.count)
               ? put->payload
               : (uint32_t)(put->length - (uint64_t)index * put->payload);
}

/* Stream what the window allows, from the user's buffer. Returns 1 if the
 * put is done with (and freed). */
static int aptus_udz_put_pump(aptus_udz_t *udz, aptus_udz_put_t *put)
{
    aptus_zc_msg_t msg;
    aptus_zc_data_t data;
    uint32_t index, first_new, idx[64];
    unsigned n, sent, k, rounds, max;
    ucs_status_t status;
    size_t chunk;

    if (put->error_pending) {
        msg.type        = APTUS_ZC_MSG_ERROR;
        msg.xfer        = put->xfer;
        msg.done.status = put->error;
        if (aptus_udz_send(udz, put->peer, &msg, NULL, 0) != UCS_OK) {
            return 0;
        }
        udz->stats.errors++;
        aptus_udz_put_free(udz, put);
        return 1;
    }

    if (put->copy) {
        while (put->copy_offset < put->length) {
            chunk           = ucs_min(udz->ud->config.max_msg - 16,
                                      put->length - put->copy_offset);
            msg.type        = APTUS_ZC_MSG_COPY;
            msg.xfer        = put->xfer;
            msg.copy.offset = put->copy_offset;
            if (aptus_udz_send(udz, put->peer, &msg,
                               put->src + put->copy_offset, chunk) != UCS_OK) {
                return 0; /* window full: go on from progress */
            }
            put->copy_offset += chunk;
            udz->stats.copy_bytes += chunk;
        }
        aptus_udz_put_free(udz, put); /* the stream delivers the rest */
        return 1;
    }

    for (rounds = 0; rounds < 64; ++rounds) {
        if (ucs_unlikely(udz->ud->in_async && (udz->stop_async != NULL) &&
                         *udz->stop_async)) {
            udz->stats.async_yields++;
            break; /* the user's progress streams the rest */
        }
        first_new = put->tx.next_new;
        max       = udz->max_train;
        /* a train of consecutive indices in one segmented send; one by one
         * where the wire cannot */
        for (n = 0; n < ucs_min(max ? max : udz->config.batch, 64);) {
            if (!aptus_zc_tx_peek(&put->tx, &index) ||
                ((max != 0) && (n > 0) && (index != idx[n - 1] + 1))) {
                break;
            }
            (void)aptus_zc_tx_next(&put->tx, &index, &data.seq);
            data.key   = put->ctx_key;
            data.xfer  = put->xfer;
            data.index = index;
            aptus_zc_data_build(udz->tx_hdrs + n * APTUS_ZC_HDR_LEN, &data);
            udz->tx_iov[2 * n].iov_base = udz->tx_hdrs + n * APTUS_ZC_HDR_LEN;
            udz->tx_iov[2 * n].iov_len  = APTUS_ZC_HDR_LEN;
            udz->tx_iov[2 * n + 1].iov_base =
                (void *)(put->src + (uint64_t)index * put->payload);
            udz->tx_iov[2 * n + 1].iov_len = aptus_udz_put_len(put, index);
            udz->tx[n].dst                 = &put->ctx_addr;
            udz->tx[n].iov                 = &udz->tx_iov[2 * n];
            udz->tx[n].iovcnt              = 2;
            idx[n]                         = index;
            aptus_trace_data("udz tx: xfer %u index %u seq %u len %zu",
                             data.xfer, data.index, data.seq,
                             udz->tx_iov[2 * n + 1].iov_len);
            if (index < first_new) {
                udz->stats.dgrams_resent++;
            }
            ++n;
        }
        if (n == 0) {
            break;
        }

        sent = 0;
        if (max != 0) {
            status = udz->ud->wire->ops->send_seg(
                udz->ud->wire, &put->ctx_addr, udz->tx_iov, 2 * n,
                APTUS_ZC_HDR_LEN + put->payload);
            if (status == UCS_OK) {
                sent = n;
            } else if (status == UCS_ERR_UNSUPPORTED) {
                udz->max_train = 0; /* and this batch goes one by one */
                (void)udz->ud->wire->ops->send(udz->ud->wire, udz->tx, n,
                                               &sent);
            }
        } else {
            (void)udz->ud->wire->ops->send(udz->ud->wire, udz->tx, n, &sent);
        }
        udz->stats.dgrams_sent += sent;
        if (sent > 0) {
            put->last_send_us = udz->ud->now_us;
        }
        if (sent < n) {
            /* the socket is full: what did not go, goes later */
            for (k = sent; k < n; ++k) {
                aptus_zc_tx_unsend(&put->tx, idx[k]);
            }
            break;
        }
    }
    return 0;
}

/* A transfer served: at most MAX_SERVED at once, so that requests (from
 * peers that may never finish them) cannot grow the owner's state without
 * bound. */
static aptus_udz_put_t *aptus_udz_put_new(aptus_udz_t *udz,
                                          aptus_ud_peer_t *peer, uint32_t xfer)
{
    aptus_udz_put_t *put;

    if (udz->num_puts >= udz->config.max_served) {
        return NULL;
    }
    put = ucs_mpool_get(&udz->put_mp);
    if (put == NULL) {
        return NULL;
    }
    udz->num_puts++;
    memset(put, 0, sizeof(*put));
    put->peer          = peer;
    put->xfer          = xfer;
    put->last_heard_us = udz->ud->now_us;
    put->last_send_us  = udz->ud->now_us;
    ucs_list_add_tail(&udz->puts, &put->list);
    return put;
}

/* Tell the initiator that its transfer cannot be served: at once if the
 * stream takes it, else from a served slot that waits for room. With
 * neither (the stream to that peer full and MAX_SERVED reached) the reply
 * is dropped and counted; the initiator's stall report asks again. */
static void aptus_udz_reply_error(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                  uint32_t xfer, ucs_status_t status)
{
    aptus_udz_put_t *put;
    aptus_zc_msg_t msg;

    memset(&msg, 0, sizeof(msg));
    msg.type        = APTUS_ZC_MSG_ERROR;
    msg.xfer        = xfer;
    msg.done.status = status;
    if (aptus_udz_send(udz, peer, &msg, NULL, 0) == UCS_OK) {
        return;
    }
    put = aptus_udz_put_new(udz, peer, xfer);
    if (put == NULL) {
        udz->stats.errors_dropped++;
        return;
    }
    put->error_pending = 1;
    put->error         = status;
    aptus_udz_put_pump(udz, put);
}

static void aptus_udz_handle_req(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                 const aptus_zc_msg_t *msg)
{
    aptus_udz_put_t *put;
    uint32_t count;

    udz->last_req_us = udz->ud->now_us;
    if (aptus_udz_find_put(udz, peer, msg->xfer) != NULL) {
        return; /* already serving it */
    }
    if (!(msg->req.flags & APTUS_ZC_REQ_COPY) &&
        (udz->ud->wire->ops->same_node != NULL)) {
        /* data goes only to the requester's own contexts, never to an
         * address a forged request names (a reflector for a flood) */
        aptus_wire_addr_t ctx;
        memcpy(ctx.raw, msg->req.ctx_addr, APTUS_ZC_ADDR_LEN);
        if (!udz->ud->wire->ops->same_node(&peer->addr, &ctx)) {
            udz->stats.reflect_refused++;
            return;
        }
    }
    put = aptus_udz_put_new(udz, peer, msg->xfer);
    if (put == NULL) {
        /* at MAX_SERVED (or out of memory): the initiator asks again */
        udz->stats.serve_limit++;
        aptus_udz_reply_error(udz, peer, msg->xfer, UCS_ERR_BUSY);
        return;
    }
    put->src    = (const uint8_t *)(uintptr_t)msg->req.remote_addr;
    put->length = msg->req.length;
    put->copy   = !!(msg->req.flags & APTUS_ZC_REQ_COPY);
    put->token  = msg->req.token;

    /* serve only memory the user registered and gave the key of, or the
     * source of this side's write to that peer */
    if (!aptus_udz_write_exported(udz, peer, msg->req.token,
                                  msg->req.remote_addr, msg->req.length) &&
        ((udz->check == NULL) ||
         !udz->check(udz->check_arg, msg->req.token, msg->req.remote_addr,
                     msg->req.length))) {
        put->error_pending = 1;
        put->error         = UCS_ERR_INVALID_ADDR;
    } else if (!put->copy &&
               ((msg->req.payload > udz->ud->wire->mtu - APTUS_ZC_HDR_LEN) ||
                (msg->req.payload < 64))) {
        put->error_pending = 1;
        put->error         = UCS_ERR_INVALID_PARAM;
    } else if (!put->copy) {
        memcpy(put->ctx_addr.raw, msg->req.ctx_addr, APTUS_ZC_ADDR_LEN);
        put->ctx_key   = msg->req.ctx_key;
        put->payload   = msg->req.payload;
        count          = aptus_zc_count(put->length, put->payload);
        put->ring_size = ucs_min(aptus_zc_tx_ring_size(count, msg->req.edge),
                                 APTUS_UDZ_RING_MAX);
        put->ring =
            ucs_malloc(put->ring_size * sizeof(*put->ring), "aptus_udz_ring");
        if (put->ring == NULL) {
            put->error_pending = 1;
            put->error         = UCS_ERR_NO_MEMORY;
        } else {
            aptus_zc_tx_init(&put->tx, count, msg->req.edge, put->ring,
                             put->ring_size);
        }
    }
    aptus_udz_put_pump(udz, put);
}

/* ---- writes (put): a get turned around -------------------------------- */

static aptus_udz_write_t *
aptus_udz_find_write(aptus_udz_t *udz, aptus_ud_peer_t *peer, uint32_t xfer)
{
    aptus_udz_write_t *wr;

    ucs_list_for_each(wr, &udz->writes, list)
    {
        if ((wr->xfer == xfer) && (wr->peer == peer)) {
            return wr;
        }
    }
    return NULL;
}

/* Whether [address, +length) lies in the source of a write to peer that
 * token names: only the target of that write may read it. */
static int aptus_udz_write_exported(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                    uint64_t token, uint64_t address,
                                    uint64_t length)
{
    aptus_udz_write_t *wr;
    uint64_t start;

    ucs_list_for_each(wr, &udz->writes, list)
    {
        start = (uintptr_t)wr->src;
        if ((wr->peer == peer) && (wr->src_token == token) &&
            (address >= start) && (length <= wr->length) &&
            (address - start <= wr->length - length)) {
            return 1;
        }
    }
    return 0;
}

static void aptus_udz_send_write(aptus_udz_t *udz, aptus_udz_write_t *wr)
{
    aptus_zc_msg_t msg;

    memset(&msg, 0, sizeof(msg));
    msg.type             = APTUS_ZC_MSG_WRITE;
    msg.xfer             = wr->xfer;
    msg.write.dest_addr  = wr->remote_addr;
    msg.write.length     = wr->length;
    msg.write.dest_token = wr->token;
    msg.write.src_addr   = (uintptr_t)wr->src;
    msg.write.src_token  = wr->src_token;
    wr->req_pending = (aptus_udz_send(udz, wr->peer, &msg, NULL, 0) != UCS_OK);
}

/* The write ends: the source is no longer exported, and what this side
 * still streams from it stops. */
static void aptus_udz_write_finish(aptus_udz_t *udz, aptus_udz_write_t *wr,
                                   ucs_status_t status)
{
    aptus_udz_put_t *put, *tmp;

    ucs_list_for_each_safe(put, tmp, &udz->puts, list)
    {
        if ((put->peer == wr->peer) && (put->token == wr->src_token)) {
            aptus_udz_put_free(udz, put);
        }
    }
    ucs_list_del(&wr->list);
    if (status == UCS_OK) {
        udz->stats.write_bytes += wr->length;
    } else {
        udz->stats.aborted++;
    }
    if (wr->comp != NULL) {
        aptus_udz_complete_later(udz, wr->comp, status);
    }
    ucs_free(wr);
    aptus_udz_check_flushes(udz);
}

ucs_status_t aptus_udz_put_inline(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                  const void *src, size_t length,
                                  uint64_t remote_addr, uint64_t token)
{
    aptus_zc_msg_t msg;
    ucs_status_t status;

    if (peer->flags & APTUS_UD_PEER_FAILED) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }
    if (length > aptus_udz_put_inline_max(udz)) {
        return UCS_ERR_INVALID_PARAM;
    }
    memset(&msg, 0, sizeof(msg));
    msg.type           = APTUS_ZC_MSG_PUT;
    msg.put.dest_addr  = remote_addr;
    msg.put.dest_token = token;
    status             = aptus_udz_send(udz, peer, &msg, src, length);
    if (status == UCS_OK) {
        udz->stats.puts_inline++;
        udz->stats.write_bytes += length;
    }
    return status;
}

/* A small put arrived: the bytes go where the writer said if the user
 * registered that memory under the token; else they are dropped and
 * counted (the writer's flush still completes: as with a wrong rkey over
 * UCX's own transports, the data does not land). Served in the async
 * thread too, so that it is in place before the stream acknowledges it. */
static void aptus_udz_handle_put(aptus_udz_t *udz, const aptus_zc_msg_t *msg)
{
    if ((msg->put.length > 0) &&
        ((udz->check == NULL) ||
         !udz->check(udz->check_arg, msg->put.dest_token, msg->put.dest_addr,
                     msg->put.length))) {
        if (udz->stats.write_refused++ == 0) {
            ucs_diag("ud_zcopy: a put of %zu bytes to 0x%" PRIx64 " names "
                     "memory not registered under its key: dropped",
                     msg->put.length, msg->put.dest_addr);
        }
        return;
    }
    memcpy((void *)(uintptr_t)msg->put.dest_addr, msg->put.data,
           msg->put.length);
}

ucs_status_t aptus_udz_put(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           const void *src, uint64_t length,
                           uint64_t remote_addr, uint64_t token,
                           uct_completion_t *comp)
{
    aptus_udz_write_t *wr;

    if (peer->flags & APTUS_UD_PEER_FAILED) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }
    if (length == 0) {
        return UCS_OK;
    }
    if ((length > udz->config.max_get) ||
        ((uintptr_t)src + length < (uintptr_t)src)) {
        return UCS_ERR_INVALID_PARAM;
    }
    wr = ucs_malloc(sizeof(*wr), "aptus_udz_write");
    if (wr == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    wr->peer        = peer;
    wr->xfer        = udz->next_xfer++;
    wr->src         = src;
    wr->length      = length;
    wr->remote_addr = remote_addr;
    wr->token       = token;
    wr->src_token   = aptus_udz_random64();
    wr->comp        = comp;
    ucs_list_add_tail(&udz->writes, &wr->list);
    udz->stats.writes++;
    aptus_udz_send_write(udz, wr);
    return UCS_INPROGRESS;
}

static void aptus_udz_wtarget_reply(aptus_udz_t *udz, aptus_udz_wtarget_t *wt)
{
    aptus_zc_msg_t msg;

    msg.type        = APTUS_ZC_MSG_WDONE;
    msg.xfer        = wt->xfer;
    msg.done.status = wt->status;
    if (udz->closing ||
        (aptus_udz_send(udz, wt->peer, &msg, NULL, 0) == UCS_OK)) {
        ucs_list_del(&wt->list);
        ucs_free(wt);
    } else {
        wt->reply_pending = 1;
    }
}

/* The target's get of the writer's data ended. */
static void aptus_udz_wtarget_done(uct_completion_t *comp)
{
    aptus_udz_wtarget_t *wt = ucs_container_of(comp, aptus_udz_wtarget_t, comp);

    wt->status = comp->status;
    aptus_udz_wtarget_reply(wt->udz, wt);
}

static void aptus_udz_handle_write(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                   const aptus_zc_msg_t *msg)
{
    aptus_udz_wtarget_t *wt;
    ucs_status_t status;

    wt = ucs_calloc(1, sizeof(*wt), "aptus_udz_wtarget");
    if (wt == NULL) {
        return; /* the writer's stream check finds the peer alive, so it
                 * waits: the same as a lost request of a get */
    }
    wt->udz  = udz;
    wt->peer = peer;
    wt->xfer = msg->xfer;
    ucs_list_add_tail(&udz->wtargets, &wt->list);

    /* write only into memory the user registered and gave the key of */
    if ((udz->check == NULL) ||
        !udz->check(udz->check_arg, msg->write.dest_token, msg->write.dest_addr,
                    msg->write.length)) {
        udz->stats.write_refused++;
        wt->status = UCS_ERR_INVALID_ADDR;
        aptus_udz_wtarget_reply(udz, wt);
        return;
    }
    wt->comp.func   = aptus_udz_wtarget_done;
    wt->comp.count  = 1;
    wt->comp.status = UCS_OK;
    status = aptus_udz_get(udz, peer, (void *)(uintptr_t)msg->write.dest_addr,
                           msg->write.length, msg->write.src_addr,
                           msg->write.src_token, &wt->comp);
    if (status != UCS_INPROGRESS) {
        wt->status = (status == UCS_OK) ? UCS_OK : status;
        aptus_udz_wtarget_reply(udz, wt);
    }
}

static unsigned aptus_udz_writes_progress(aptus_udz_t *udz)
{
    aptus_udz_write_t *wr;
    aptus_udz_wtarget_t *wt, *tmp;
    unsigned count = 0;

    ucs_list_for_each(wr, &udz->writes, list)
    {
        if (wr->req_pending) {
            aptus_udz_send_write(udz, wr);
            ++count;
        }
    }
    ucs_list_for_each_safe(wt, tmp, &udz->wtargets, list)
    {
        if (wt->reply_pending) {
            aptus_udz_wtarget_reply(udz, wt);
            ++count;
        }
    }
    return count;
}

/* peer's stream failed (status) or its endpoint is gone (CANCELED). */
static void aptus_udz_writes_stop(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                  ucs_status_t status, int failed)
{
    aptus_udz_write_t *wr, *wtmp;
    aptus_udz_wtarget_t *wt, *ttmp;

    ucs_list_for_each_safe(wr, wtmp, &udz->writes, list)
    {
        if (wr->peer == peer) {
            aptus_udz_write_finish(udz, wr, status);
        }
    }
    /* the targets' gets end with the stream: only replies still waiting
     * for room are dropped here */
    ucs_list_for_each_safe(wt, ttmp, &udz->wtargets, list)
    {
        if (failed && (wt->peer == peer) && wt->reply_pending) {
            ucs_list_del(&wt->list);
            ucs_free(wt);
        }
    }
}

/* ---- dispatch --------------------------------------------------------- */

ucs_status_t aptus_udz_internal(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                const void *data, size_t length, int is_async)
{
    aptus_udz_get_t *get;
    aptus_udz_put_t *put;
    aptus_udz_write_t *wr;
    aptus_zc_msg_t msg;

    if (aptus_zc_msg_parse(data, length, &msg) != 0) {
        udz->ud->stats.rx_malformed++;
        return UCS_OK;
    }
    if (is_async && (msg.type != APTUS_ZC_MSG_REQ) &&
        (msg.type != APTUS_ZC_MSG_CREDIT) && (msg.type != APTUS_ZC_MSG_DONE) &&
        (msg.type != APTUS_ZC_MSG_PUT)) {
        /* completions belong to the user's thread; the owner's side (a
         * request, its credits, its end) is served while the user computes.
         * A deferred DONE would hold every later message of the stream,
         * the next request too, until the user's next progress call. */
        return UCS_ERR_BUSY;
    }

    switch (msg.type) {
    case APTUS_ZC_MSG_REQ:
        aptus_udz_handle_req(udz, peer, &msg);
        return UCS_OK; /* nothing to complete */
    case APTUS_ZC_MSG_PUT:
        aptus_udz_handle_put(udz, &msg);
        return UCS_OK;
    case APTUS_ZC_MSG_CREDIT:
        put = aptus_udz_find_put(udz, peer, msg.xfer);
        if (put == NULL) {
            /* forgotten (idle too long, or no memory for the request) */
            aptus_udz_reply_error(udz, peer, msg.xfer, UCS_ERR_NO_ELEM);
        } else if (!put->copy && !put->error_pending) {
            put->last_heard_us = udz->ud->now_us;
            if ((msg.credit.edge > put->tx.edge) ||
                aptus_zc_seq_after(msg.credit.seen_seq, put->seen_seq)) {
                put->probe_shift = 0; /* the initiator is keeping up */
                put->seen_seq    = msg.credit.seen_seq;
            }
            aptus_zc_tx_credit(&put->tx, msg.credit.edge, msg.credit.ranges,
                               msg.credit.num_ranges, msg.credit.seen_seq);
            aptus_udz_put_pump(udz, put);
        }
        return UCS_OK;
    case APTUS_ZC_MSG_DONE:
        put = aptus_udz_find_put(udz, peer, msg.xfer);
        if (put != NULL) {
            aptus_udz_put_free(udz, put);
        }
        break;
    case APTUS_ZC_MSG_ERROR:
        get = aptus_udz_find_get(udz, peer, msg.xfer);
        if (get == NULL) {
            break;
        }
        if ((ucs_status_t)msg.done.status == UCS_ERR_BUSY) {
            aptus_udz_get_busy(udz, get);
        } else {
            aptus_udz_get_finish(udz, get, (ucs_status_t)msg.done.status, 0);
        }
        break;
    case APTUS_ZC_MSG_WRITE:
        aptus_udz_handle_write(udz, peer, &msg);
        break;
    case APTUS_ZC_MSG_WDONE:
        wr = aptus_udz_find_write(udz, peer, msg.xfer);
        if (wr != NULL) {
            aptus_udz_write_finish(udz, wr, (ucs_status_t)msg.done.status);
        }
        break;
    case APTUS_ZC_MSG_COPY:
        get = aptus_udz_find_get(udz, peer, msg.xfer);
        if ((get == NULL) || !get->copy) {
            break; /* cancelled meanwhile */
        }
        if ((msg.copy.offset > get->length) ||
            (msg.copy.length > get->length - msg.copy.offset)) {
            aptus_udz_get_finish(udz, get, UCS_ERR_IO_ERROR, 1);
            break;
        }
        memcpy(get->dest + msg.copy.offset, msg.copy.data, msg.copy.length);
        get->copied += msg.copy.length;
        get->last_data_us = udz->ud->now_us;
        get->stall_shift  = 0;
        if (get->copied == get->length) {
            udz->stats.copy_bytes += get->length;
            aptus_udz_get_finish(udz, get, UCS_OK, 0);
        }
        break;
    }
    aptus_udz_dispatch_completions(udz);
    return UCS_OK;
}

unsigned aptus_udz_progress_owner(aptus_udz_t *udz)
{
    aptus_udz_put_t *put, *ptmp;
    unsigned count = 0;

    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        if (put->error_pending || put->copy || (put->tx.num_rtx > 0) ||
            (put->tx.next_new < put->tx.edge)) {
            aptus_udz_put_pump(udz, put);
            ++count;
        }
    }
    return count;
}

unsigned aptus_udz_progress(aptus_udz_t *udz)
{
    aptus_udz_get_t *get, *gtmp;
    aptus_udz_put_t *put, *ptmp;
    uint64_t now   = udz->ud->now_us;
    unsigned count = 0;
    uint64_t sent;

    /* the common case of a progress call: nothing moves by key */
    if (ucs_list_is_empty(&udz->gets) && ucs_list_is_empty(&udz->puts) &&
        ucs_list_is_empty(&udz->writes) && ucs_list_is_empty(&udz->wtargets) &&
        (udz->done.num == 0)) {
        return 0;
    }

    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if (get->finished) {
            aptus_udz_send_done(udz, get); /* frees it once sent */
            ++count;
        } else {
            count += aptus_udz_get_progress(udz, get);
        }
    }
    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        if (put->error_pending || put->copy || (put->tx.num_rtx > 0) ||
            (put->tx.next_new < put->tx.edge)) {
            /* progress if anything went (a full socket sends nothing) */
            sent = udz->stats.dgrams_sent + udz->stats.copy_bytes +
                   udz->stats.errors;
            aptus_udz_put_pump(udz, put);
            count += (udz->stats.dgrams_sent + udz->stats.copy_bytes +
                      udz->stats.errors) != sent;
        } else if ((now - put->last_heard_us) >
                   2 * (uint64_t)udz->ud->config.rel.peer_timeout_us) {
            /* the initiator went quiet for good, yet its stream lives (the
             * probes check it): it lost track of the transfer */
            aptus_udz_put_free(udz, put);
        } else if (((now - put->last_send_us) >=
                    aptus_udz_probe_us(udz, put)) &&
                   aptus_zc_tx_probe(&put->tx)) {
            /* all sent that may be, nothing heard: the tail may be lost,
             * or the initiator gone; a reliable no-op on the stream finds
             * out (its failure ends the put) */
            put->probe_shift++;
            udz->stats.probes++;
            (void)aptus_ud_chan_check(udz->ud, put->peer);
            aptus_udz_put_pump(udz, put);
            ++count;
        }
    }
    count += aptus_udz_writes_progress(udz);
    aptus_udz_dispatch_completions(udz);
    return count;
}

void aptus_udz_peer_failed(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           ucs_status_t status)
{
    aptus_udz_get_t *get, *gtmp;
    aptus_udz_put_t *put, *ptmp;

    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if (get->peer != peer) {
            continue;
        }
        if (get->finished) {
            aptus_udz_get_free(udz, get);
        } else {
            aptus_udz_get_finish(udz, get, status, 0);
        }
    }
    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        if (put->peer == peer) {
            aptus_udz_put_free(udz, put);
        }
    }
    aptus_udz_writes_stop(udz, peer, status, 1);
    aptus_udz_dispatch_completions(udz);
}

void aptus_udz_peer_disconnect(aptus_udz_t *udz, aptus_ud_peer_t *peer)
{
    aptus_udz_get_t *get, *gtmp;

    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if ((get->peer == peer) && !get->finished) {
            aptus_udz_get_finish(udz, get, UCS_ERR_CANCELED, 1);
        }
    }
    aptus_udz_writes_stop(udz, peer, UCS_ERR_CANCELED, 0);
    aptus_udz_dispatch_completions(udz);
}

ucs_status_t aptus_udz_flush(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                             uct_completion_t *comp, int counted)
{
    aptus_udz_flush_t *fl;

    if (aptus_udz_outstanding(udz, peer) == 0) {
        return UCS_OK;
    }
    if (comp == NULL) {
        return UCS_INPROGRESS;
    }
    fl = ucs_malloc(sizeof(*fl), "aptus_udz_flush");
    if (fl == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    fl->peer = peer;
    fl->comp = comp;
    if (counted) {
        comp->count++;
    }
    ucs_list_add_tail(&udz->flushes, &fl->list);
    return UCS_INPROGRESS;
}

void aptus_udz_cleanup(aptus_udz_t *udz)
{
    aptus_udz_get_t *get, *gtmp;
    aptus_udz_put_t *put, *ptmp;
    aptus_udz_flush_t *fl, *ftmp;
    aptus_udz_write_t *wr, *wtmp;
    aptus_udz_wtarget_t *wt, *ttmp;

    udz->closing = 1;
    ucs_list_for_each_safe(wr, wtmp, &udz->writes, list)
    {
        aptus_udz_write_finish(udz, wr, UCS_ERR_CANCELED);
    }
    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if (get->comp != NULL) {
            aptus_udz_complete_later(udz, get->comp, UCS_ERR_CANCELED);
        }
        aptus_udz_get_free(udz, get);
    }
    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        aptus_udz_put_free(udz, put);
    }
    ucs_list_for_each_safe(fl, ftmp, &udz->flushes, list)
    {
        aptus_udz_complete_later(udz, fl->comp, UCS_ERR_CANCELED);
        ucs_free(fl);
    }
    aptus_ud_comp_list_cleanup(&udz->done);
    /* the targets' gets completed above and freed their records */
    ucs_list_for_each_safe(wt, ttmp, &udz->wtargets, list)
    {
        ucs_list_del(&wt->list);
        ucs_free(wt);
    }
    aptus_udz_free_arrays(udz);
    ucs_free(udz->bounce);
    ucs_mpool_cleanup(&udz->put_mp, 1);
    ucs_mpool_cleanup(&udz->get_mp, 1);
}

/* The channel interface (chan.h). */

static ucs_status_t aptus_udz_iface_get(aptus_chan_t *chan,
                                        aptus_chan_peer_t *peer,
                                        const struct iovec *iov,
                                        unsigned iovcnt, uint64_t remote_addr,
                                        const aptus_chan_key_t *key,
                                        uct_completion_t *comp)
{
    if (iovcnt != 1) {
        return UCS_ERR_INVALID_PARAM;
    }
    return aptus_udz_get(ucs_derived_of(chan, aptus_udz_t),
                         (aptus_ud_peer_t *)peer, iov[0].iov_base,
                         iov[0].iov_len, remote_addr, key->token, comp);
}

static ucs_status_t aptus_udz_iface_put(aptus_chan_t *chan,
                                        aptus_chan_peer_t *peer,
                                        const struct iovec *iov,
                                        unsigned iovcnt, uint64_t remote_addr,
                                        const aptus_chan_key_t *key,
                                        uct_completion_t *comp)
{
    if (iovcnt != 1) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* the target reads it from here: complete when it is in place there
     * (the small puts, put_short and put_bcopy, go in the stream:
     * aptus_udz_put_inline) */
    return aptus_udz_put(ucs_derived_of(chan, aptus_udz_t),
                         (aptus_ud_peer_t *)peer, iov[0].iov_base,
                         iov[0].iov_len, remote_addr, key->token, comp);
}

static ucs_status_t aptus_udz_iface_flush(aptus_chan_t *chan,
                                          aptus_chan_peer_t *peer,
                                          unsigned flags,
                                          uct_completion_t *comp)
{
    return aptus_udz_flush(ucs_derived_of(chan, aptus_udz_t),
                           (aptus_ud_peer_t *)peer, comp,
                           !!(flags & APTUS_CHAN_FLUSH_F_SHARED_COMP));
}

static void aptus_udz_iface_peer_disconnect(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer)
{
    aptus_udz_peer_disconnect(ucs_derived_of(chan, aptus_udz_t),
                              (aptus_ud_peer_t *)peer);
}

static unsigned aptus_udz_iface_progress(aptus_chan_t *chan, int is_async)
{
    return aptus_udz_progress(ucs_derived_of(chan, aptus_udz_t));
}

const aptus_chan_ops_t aptus_udz_chan_iface_ops = {
    .type            = APTUS_CHAN_UD_ZCOPY,
    .peer_size       = 0,
    .peer_connect    = NULL,                            /* UD-SR's streams */
    .peer_disconnect = aptus_udz_iface_peer_disconnect, /* its gets, puts */
    .send            = NULL,
    .put             = aptus_udz_iface_put,
    .get             = aptus_udz_iface_get,
    .flush           = aptus_udz_iface_flush,
    .pending_add     = aptus_chan_carrier_pending_add,
    .pending_purge   = aptus_chan_carrier_pending_purge,
    .check           = aptus_chan_carrier_check,
    .invalidate      = aptus_chan_carrier_invalidate,
    .progress        = aptus_udz_iface_progress,
};
