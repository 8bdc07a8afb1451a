/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-ZCopy, the initiator's side of a get: requests, credits,
 * receiving the data.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_zcopy_int.h"

#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>

/* ---- the initiator's side -------------------------------------------- */

static void aptus_udz_release_ctx(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    if (get->ctx != NULL) {
        get->ctx->get = NULL;
        get->ctx      = NULL;
    }
    ucs_free(get->bitmap);
    get->bitmap = NULL;
}

void aptus_udz_get_free(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    ucs_list_del(&get->list);
    aptus_udz_release_ctx(udz, get);
    ucs_mpool_put(get);
}

void aptus_udz_send_done(aptus_udz_t *udz, aptus_udz_get_t *get)
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
void aptus_udz_get_finish(aptus_udz_t *udz, aptus_udz_get_t *get,
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

aptus_udz_get_t *aptus_udz_find_get(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                    uint32_t xfer)
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
    uint64_t base = ucs_max(2 * (uint64_t)aptus_ud_peer_srtt_us(get->peer),
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
void aptus_udz_get_busy(aptus_udz_t *udz, aptus_udz_get_t *get)
{
    get->busy_until_us = udz->ud->now_us + aptus_udz_stall_us(udz, get);
    get->stall_shift++;
    get->to_send |= APTUS_UDZ_SEND_REQ;
    udz->stats.busy_retries++;
}

/* Returns the datagrams that arrived, and 1 more if the get completed:
 * only what happened counts as progress, so that a caller waiting on an
 * owner that is not running (MPI on oversubscribed cores) yields. */
unsigned aptus_udz_get_progress(aptus_udz_t *udz, aptus_udz_get_t *get)
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
