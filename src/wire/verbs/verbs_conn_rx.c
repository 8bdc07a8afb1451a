/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's shared receive queue and its credits.
 *
 * Every connection of the wire receives into one SRQ of registered
 * buffers (aptus_conn_buf_t, the owner's headroom, then max_frame bytes of
 * receive area: a message always starts a buffer). A sender may only use
 * buffers the receiver granted it: each connection's side keeps the total
 * it granted (rx_granted) and writes it by RDMA into the peer's credit word
 * whenever it grows; the sender may have (granted - used) sends and
 * write-with-immediates in flight. Grants never exceed the buffers posted:
 * promised = sum of (granted - received) over live connections, and
 * promised + orphans <= posted, so no send ever finds the SRQ empty.
 * A connection is granted up to a share of the pool, rx_max / connections,
 * between APTUS_VERBS_CONN_MIN_CREDITS and APTUS_VERBS_CONN_CREDITS; the
 * pool grows (chunks, one registration each) towards rx_max_buffers while
 * grants are wanted. A buffer the owner holds is out of circulation until
 * buf_put; the grant it was is replaced from the pool if it can grow.
 * What a broken or closed connection had been granted becomes "orphans":
 * unusable until the receive CQ has been polled empty once after it (then
 * none of its messages can still be on the way: its QP is in error).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_conn_int.h"
#include "base/aptus_numa.h"

#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>

#include <arpa/inet.h>
#include <string.h>

static void aptus_verbs_rx_post(aptus_verbs_conn_wire_t *cw,
                                aptus_conn_buf_t *buf)
{
    struct ibv_recv_wr wr, *bad;
    struct ibv_sge sge;
    int ret;

    sge.addr   = (uintptr_t)aptus_conn_buf_area(buf, cw->rx_headroom);
    sge.length = (uint32_t)cw->config.max_frame;
    sge.lkey   = buf->reserved; /* the chunk's registration */
    wr.wr_id   = (uintptr_t)buf;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.next    = NULL;
    ret        = ibv_post_srq_recv(cw->srq, &wr, &bad);
    if (ret != 0) {
        /* sized for every buffer: only a broken SRQ refuses */
        ucs_error("verbs conn: ibv_post_srq_recv failed: %s", strerror(ret));
        cw->rx_free[cw->rx_num_free++] = buf;
        return;
    }
    ++cw->rx_posted;
}

/* Allocate and post up to count more buffers, one registration. */
static unsigned aptus_verbs_rx_grow(aptus_verbs_conn_wire_t *cw, unsigned count)
{
    size_t alignment =
        ucs_max(cw->config.rx_alignment, UCS_SYS_CACHE_LINE_SIZE);
    aptus_verbs_rx_chunk_t *chunk;
    aptus_conn_buf_t *buf;
    unsigned i;

    count = ucs_min(count, cw->rx_max - cw->rx_total);
    if (count == 0) {
        return 0;
    }
    chunk = ucs_calloc(1, sizeof(*chunk), "aptus_verbs_rx_chunk");
    if (chunk == NULL) {
        return 0;
    }
    chunk->size = cw->rx_lead + (size_t)count * cw->rx_stride;
    if ((cw->config.numa_node >= 0) && (alignment <= ucs_get_page_size())) {
        /* the HCA writes them: on its node, pages bound before the first
         * touch (and before registration) */
        chunk->mem = aptus_numa_alloc(&chunk->size, cw->config.numa_node,
                                      "aptus_verbs_rx_bufs");
    } else if (ucs_posix_memalign(&chunk->mem, alignment, chunk->size,
                                  "aptus_verbs_rx_bufs") != 0) {
        chunk->mem = NULL;
    }
    if (chunk->mem == NULL) {
        ucs_free(chunk);
        return 0;
    }
    chunk->mr = ibv_reg_mr(cw->dev->pd, chunk->mem, chunk->size,
                           IBV_ACCESS_LOCAL_WRITE);
    if (chunk->mr == NULL) {
        ucs_error("verbs conn: ibv_reg_mr of %zu bytes failed: %m",
                  chunk->size);
        ucs_free(chunk->mem);
        ucs_free(chunk);
        return 0;
    }
    chunk->next = cw->chunks;
    cw->chunks  = chunk;
    for (i = 0; i < count; ++i) {
        buf       = (aptus_conn_buf_t *)((uint8_t *)chunk->mem + cw->rx_lead +
                                   (size_t)i * cw->rx_stride);
        buf->wire = &cw->super;
        buf->refs = 0;
        buf->reserved = chunk->mr->lkey;
        aptus_verbs_rx_post(cw, buf);
    }
    cw->rx_total += count;
    return count;
}

ucs_status_t aptus_verbs_rx_init(aptus_verbs_conn_wire_t *cw)
{
    const aptus_conn_wire_config_t *config = &cw->config;
    struct ibv_srq_init_attr srq_init;
    size_t alignment, head;

    cw->rx_max = ucs_max(config->rx_max_buffers, config->rx_buffers);
    /* headroom grown by up to 7 bytes so that the buffer header stays
     * 8-byte aligned whatever offset is to be aligned (as the sock wire) */
    cw->rx_headroom =
        ucs_align_up(config->rx_headroom, 8) +
        (-(sizeof(aptus_conn_buf_t) + config->rx_align_offset) & 7);
    head                  = sizeof(aptus_conn_buf_t) + cw->rx_headroom;
    cw->super.rx_buf_size = head + config->max_frame;
    alignment     = ucs_max(config->rx_alignment, UCS_SYS_CACHE_LINE_SIZE);
    cw->rx_stride = ucs_align_up(cw->super.rx_buf_size, alignment);
    /* the area's byte at rx_align_offset falls on the alignment */
    cw->rx_lead = -(head + config->rx_align_offset) & (alignment - 1);

    cw->rx_free =
        ucs_calloc(cw->rx_max, sizeof(*cw->rx_free), "aptus_verbs_rx_free");
    if (cw->rx_free == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    cw->recv_cq = ibv_create_cq(cw->dev->ctx, (int)cw->rx_max, NULL, NULL, 0);
    if (cw->recv_cq == NULL) {
        ucs_error("verbs conn: ibv_create_cq(%u) failed: %m", cw->rx_max);
        return UCS_ERR_IO_ERROR;
    }
    memset(&srq_init, 0, sizeof(srq_init));
    srq_init.attr.max_wr  = cw->rx_max;
    srq_init.attr.max_sge = 1;
    cw->srq               = ibv_create_srq(cw->dev->pd, &srq_init);
    if (cw->srq == NULL) {
        ucs_error("verbs conn: ibv_create_srq(%u) failed: %m", cw->rx_max);
        return UCS_ERR_IO_ERROR;
    }
    if (aptus_verbs_rx_grow(cw, config->rx_buffers) == 0) {
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

void aptus_verbs_rx_cleanup(aptus_verbs_conn_wire_t *cw)
{
    aptus_verbs_rx_chunk_t *chunk;

    /* the SRQ goes first: its posted buffers with it */
    if ((cw->srq != NULL) && ibv_destroy_srq(cw->srq)) {
        ucs_warn("verbs conn: ibv_destroy_srq failed");
    }
    if ((cw->recv_cq != NULL) && ibv_destroy_cq(cw->recv_cq)) {
        ucs_warn("verbs conn: ibv_destroy_cq failed");
    }
    if (cw->rx_in_use > 0) {
        ucs_warn("verbs conn: %u receive buffers still held at close",
                 cw->rx_in_use);
    }
    while ((chunk = cw->chunks) != NULL) {
        cw->chunks = chunk->next;
        if (ibv_dereg_mr(chunk->mr)) {
            ucs_warn("verbs conn: ibv_dereg_mr failed");
        }
        ucs_free(chunk->mem);
        ucs_free(chunk);
    }
    ucs_free(cw->rx_free);
}

/* What conn was granted and has not used stops counting as promised. */
void aptus_verbs_rx_conn_gone(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    uint64_t out;

    if (conn->rx_gone) {
        return;
    }
    out = conn->rx_granted - conn->rx_received;
    cw->rx_promised -= out;
    cw->rx_orphans += (unsigned)out;
    conn->rx_gone  = 1;
    cw->rx_regrant = 1;
}

void aptus_verbs_conn_buf_put(aptus_conn_buf_t *buf)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(buf->wire);

    --cw->rx_in_use;
    cw->super.stats.rx_pool_in_use = cw->rx_in_use;
    aptus_verbs_rx_post(cw, buf);
    cw->rx_regrant = 1;
}

static int64_t aptus_verbs_rx_spare(aptus_verbs_conn_wire_t *cw)
{
    return (int64_t)cw->rx_posted - (int64_t)cw->rx_promised -
           (int64_t)cw->rx_orphans;
}

/* Grant what is posted and unpromised to connections below their share,
 * growing the pool for them, and tell the peers (RDMA writes). */
void aptus_verbs_rx_grant(aptus_verbs_conn_wire_t *cw)
{
    aptus_verbs_conn_t *conn;
    uint64_t need = 0, out, give;
    unsigned share;
    int64_t spare;

    if (!cw->rx_regrant) {
        return;
    }
    cw->rx_regrant = 0;
    share          = cw->rx_max / ucs_max(cw->num_up, 1);
    share          = ucs_max(ucs_min(share, APTUS_VERBS_CONN_CREDITS),
                             APTUS_VERBS_CONN_MIN_CREDITS);

    ucs_list_for_each(conn, &cw->conns, list)
    {
        if ((conn->state == APTUS_VERBS_CONN_S_UP) && !conn->rx_gone) {
            out = conn->rx_granted - conn->rx_received;
            need += (out < share) ? (share - out) : 0;
        }
    }
    spare = aptus_verbs_rx_spare(cw);
    while ((cw->rx_num_free > 0) && (spare < (int64_t)need)) {
        aptus_verbs_rx_post(cw, cw->rx_free[--cw->rx_num_free]);
        spare = aptus_verbs_rx_spare(cw);
    }
    if ((spare < (int64_t)need) && (cw->rx_total < cw->rx_max)) {
        aptus_verbs_rx_grow(cw, ucs_max(need - spare, cw->config.rx_buffers));
        spare = aptus_verbs_rx_spare(cw);
    }
    if (spare < (int64_t)need) {
        ++cw->super.stats.rx_pool_empty; /* at the ceiling: grants wait */
    }

    ucs_list_for_each(conn, &cw->conns, list)
    {
        if ((conn->state != APTUS_VERBS_CONN_S_UP) || conn->rx_gone) {
            continue;
        }
        out = conn->rx_granted - conn->rx_received;
        if ((out < share) && (spare > 0)) {
            give = ucs_min(share - out, (uint64_t)spare);
            conn->rx_granted += give;
            cw->rx_promised += give;
            spare -= (int64_t)give;
        }
        if ((conn->rx_granted != conn->rx_written) &&
            (aptus_verbs_tx_credit(conn) != UCS_OK)) {
            cw->rx_regrant = 1; /* the send queue is full: next time */
        }
    }
}

static void aptus_verbs_rx_deliver(aptus_verbs_conn_wire_t *cw,
                                   aptus_verbs_conn_t *conn,
                                   const struct ibv_wc *wc,
                                   aptus_conn_buf_t *buf)
{
    const aptus_conn_handlers_t *h = cw->config.handlers;

    ++conn->rx_received;
    --cw->rx_promised;
    if (wc->status != IBV_WC_SUCCESS) {
        aptus_verbs_rx_post(cw, buf);
        ++cw->super.stats.rx_malformed;
        aptus_verbs_conn_fail(conn, UCS_ERR_CONNECTION_RESET);
        return;
    }
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        aptus_verbs_rx_post(cw, buf);
        ++cw->super.stats.imms;
        h->imm(cw->config.arg, &conn->super, ntohl(wc->imm_data));
        return;
    }
    if (wc->wc_flags & IBV_WC_WITH_IMM) {
        aptus_verbs_rx_post(cw, buf);
        if ((ntohl(wc->imm_data) == APTUS_VERBS_CONN_IMM_DISC) &&
            (wc->byte_len == 0)) {
            aptus_verbs_conn_fail(conn, UCS_ERR_NOT_CONNECTED);
        } else {
            ++cw->super.stats.rx_malformed;
            aptus_verbs_conn_fail(conn, UCS_ERR_CONNECTION_RESET);
        }
        return;
    }
    ++cw->super.stats.rx_frames;
    cw->super.stats.rx_bytes += wc->byte_len;
    buf->refs = 1;
    ++cw->rx_in_use;
    cw->super.stats.rx_pool_in_use = cw->rx_in_use;
    cw->super.stats.rx_pool_peak =
        ucs_max(cw->super.stats.rx_pool_peak, cw->rx_in_use);
    h->recv(cw->config.arg, &conn->super,
            aptus_conn_buf_area(buf, cw->rx_headroom), wc->byte_len, buf, 1);
    aptus_conn_buf_release(buf);
}

unsigned aptus_verbs_rx_progress(aptus_verbs_conn_wire_t *cw)
{
    struct ibv_wc wc[APTUS_VERBS_BATCH];
    aptus_verbs_conn_t *conn;
    aptus_conn_buf_t *buf;
    unsigned count = 0, before;
    int i, n;

    do {
        before = cw->rx_orphans; /* gone before this poll */
        n      = ibv_poll_cq(cw->recv_cq, APTUS_VERBS_BATCH, wc);
        if (n < 0) {
            ucs_error("verbs conn: polling the receive CQ failed");
            return count;
        }
        for (i = 0; i < n; ++i) {
            buf = (aptus_conn_buf_t *)(uintptr_t)wc[i].wr_id;
            --cw->rx_posted;
            cw->rx_regrant = 1;
            conn           = aptus_verbs_conn_by_qpn(cw, wc[i].qp_num);
            if ((conn == NULL) || conn->rx_gone) {
                /* from a connection gone since: it used an orphan */
                if (cw->rx_orphans > 0) {
                    --cw->rx_orphans;
                }
                if (before > 0) {
                    --before;
                }
                aptus_verbs_rx_post(cw, buf);
                continue;
            }
            aptus_verbs_rx_deliver(cw, conn, &wc[i], buf);
        }
        count += n;
    } while (n == APTUS_VERBS_BATCH);
    if (before > 0) {
        /* polled empty: what those gone before the poll were granted and
         * did not use will never be used */
        cw->rx_orphans -= before;
        cw->rx_regrant = 1;
    }
    return count;
}
