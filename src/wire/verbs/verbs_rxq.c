/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's receive queues: a UD QP of their own on the
 * wire's port, with a CQ and registered buffers of their own; what lands
 * there is copied into the caller's scatter lists (which are not
 * registered).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_addr.h"
#include "verbs_dgram_int.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>

typedef struct aptus_verbs_rxq {
    aptus_dgram_rxq_t super;
    struct ibv_cq *cq;
    aptus_verbs_ud_t ud;
} aptus_verbs_rxq_t;

ucs_status_t aptus_verbs_rxq_open(aptus_dgram_wire_t *wire, unsigned depth,
                                  aptus_dgram_rxq_t **rxq_p)
{
    aptus_verbs_dgram_t *v = ucs_derived_of(wire, aptus_verbs_dgram_t);
    aptus_verbs_rxq_t *rxq;
    ucs_status_t status;

    depth = ucs_max(depth, 1);
    rxq   = ucs_calloc(1, sizeof(*rxq), "aptus_verbs_rxq");
    if (rxq == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    rxq->super.wire = wire;
    rxq->cq         = ibv_create_cq(v->ctx, (int)depth, NULL, NULL, 0);
    if (rxq->cq == NULL) {
        ucs_error("verbs wire: ibv_create_cq for a receive queue failed: %m");
        ucs_free(rxq);
        return UCS_ERR_IO_ERROR;
    }
    /* it never sends: one send work request, on the wire's send CQ */
    status = aptus_verbs_ud_open(v, &rxq->ud, depth, 0, 1, rxq->cq);
    if (status != UCS_OK) {
        ibv_destroy_cq(rxq->cq);
        ucs_free(rxq);
        return status;
    }
    aptus_verbs_addr_pack(rxq->ud.qp->qp_num, v->lid, APTUS_VERBS_QKEY,
                          v->global ? &v->gid : NULL, &rxq->super.addr);
    wire->stats.rxqs_opened++;
    *rxq_p = &rxq->super;
    return UCS_OK;
}

/* Copy length bytes into a scatter list; returns how many fitted. */
static size_t aptus_verbs_scatter(const struct iovec *iov, unsigned iovcnt,
                                  const uint8_t *data, size_t length)
{
    size_t done = 0, n;
    unsigned i;

    for (i = 0; (i < iovcnt) && (done < length); ++i) {
        n = ucs_min(iov[i].iov_len, length - done);
        memcpy(iov[i].iov_base, data + done, n);
        done += n;
    }
    return done;
}

unsigned aptus_verbs_rxq_recv(aptus_dgram_rxq_t *q, aptus_dgram_rxv_t *rx,
                              unsigned count)
{
    aptus_verbs_rxq_t *rxq = ucs_derived_of(q, aptus_verbs_rxq_t);
    struct ibv_wc wc[APTUS_VERBS_BATCH];
    aptus_verbs_repost_t repost;
    unsigned filled = 0;
    const uint8_t *buf;
    size_t length;
    int i, n;

    count = ucs_min(count, APTUS_VERBS_BATCH);
    n     = ibv_poll_cq(rxq->cq, (int)count, wc);
    if (n < 0) {
        ucs_error("verbs wire: polling a receive queue's CQ failed");
        return 0;
    }
    repost.count = 0;
    for (i = 0; i < n; ++i) {
        --rxq->ud.rx_posted;
        if (wc[i].status != IBV_WC_SUCCESS) {
            rxq->ud.broken = 1;
            continue;
        }
        buf    = rxq->ud.buf + wc[i].wr_id * rxq->ud.rx_stride;
        length = wc[i].byte_len - APTUS_VERBS_GRH_LEN;
        rx[filled].length =
            aptus_verbs_scatter(rx[filled].iov, rx[filled].iovcnt,
                                buf + APTUS_VERBS_GRH_LEN, length);
        rx[filled].truncated = (rx[filled].length < length);
        rx[filled].seg_size  = 0;
        q->wire->stats.rx_dgrams++;
        q->wire->stats.rx_bytes += length;
        ++filled;
        aptus_verbs_ud_repost_add(&rxq->ud, &repost, (unsigned)wc[i].wr_id);
    }
    if (ucs_likely(!rxq->ud.broken)) {
        aptus_verbs_ud_repost_flush(&rxq->ud, &repost);
    } else {
        /* nothing more on a QP in the error state: every buffer is
         * posted again when it is back */
        aptus_verbs_ud_recover(
            &rxq->ud, ucs_derived_of(q->wire, aptus_verbs_dgram_t)->port, 1);
    }
    return filled;
}

void aptus_verbs_rxq_drain(aptus_dgram_rxq_t *q)
{
    aptus_verbs_rxq_t *rxq = ucs_derived_of(q, aptus_verbs_rxq_t);
    struct ibv_wc wc[APTUS_VERBS_BATCH];
    aptus_verbs_repost_t repost;
    int i, n;

    do {
        repost.count = 0;
        n            = ibv_poll_cq(rxq->cq, APTUS_VERBS_BATCH, wc);
        for (i = 0; i < n; ++i) {
            --rxq->ud.rx_posted;
            if (wc[i].status == IBV_WC_SUCCESS) {
                aptus_verbs_ud_repost_add(&rxq->ud, &repost,
                                          (unsigned)wc[i].wr_id);
            }
        }
        aptus_verbs_ud_repost_flush(&rxq->ud, &repost);
    } while (n == APTUS_VERBS_BATCH);
}

void aptus_verbs_rxq_close(aptus_dgram_rxq_t *q)
{
    aptus_verbs_rxq_t *rxq = ucs_derived_of(q, aptus_verbs_rxq_t);

    aptus_verbs_ud_close(&rxq->ud);
    if (ibv_destroy_cq(rxq->cq)) {
        ucs_warn("verbs wire: ibv_destroy_cq failed");
    }
    ucs_free(rxq);
}
