/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-ZCopy, the owner's side of a get: serving requests,
 * streaming the data.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_zcopy_int.h"

#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>

/* ---- the owner's side ------------------------------------------------- */

/* Time without anything to send or anything heard after which the owner
 * probes: like the initiator's stall time, doubled each time it passes. */
uint64_t aptus_udz_probe_us(aptus_udz_t *udz, aptus_udz_put_t *put)
{
    uint64_t base = ucs_max(2 * (uint64_t)aptus_ud_peer_srtt_us(put->peer),
                            2 * (uint64_t)udz->ud->config.tick_us);

    return base << ucs_min(put->probe_shift, 6);
}

aptus_udz_put_t *aptus_udz_find_put(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                    uint32_t xfer)
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

void aptus_udz_put_free(aptus_udz_t *udz, aptus_udz_put_t *put)
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
int aptus_udz_put_pump(aptus_udz_t *udz, aptus_udz_put_t *put)
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
void aptus_udz_reply_error(aptus_udz_t *udz, aptus_ud_peer_t *peer,
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

void aptus_udz_handle_req(aptus_udz_t *udz, aptus_ud_peer_t *peer,
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
