/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's send side: messages, credits, the backlog,
 * and the one-sided operations (RDMA write, read, write-with-immediate).
 *
 * The caller's memory is not registered (the interface carries no local
 * key), so every byte goes through the wire's registered send buffers:
 * a message is copied into one (or sent inline when small), a write into
 * as many as it needs, a read lands in one and is copied out. A message
 * or write-with-immediate needs a credit (a receive buffer the peer
 * granted), one credit always kept back for the close (DISC). What cannot
 * go now (no credit, send queue or buffers full, not yet connected) waits
 * in the connection's backlog, in order, copied; progress pushes it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_conn_int.h"

#include "base/aptus_numa.h"

#include <ucs/debug/assert.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <arpa/inet.h>
#include <endian.h>
#include <string.h>

/* Polls a direct read spins for its completion, at most. */
#define APTUS_VERBS_READ_SPINS 100000000ul

ucs_status_t aptus_verbs_tx_init(aptus_verbs_conn_wire_t *cw)
{
    size_t size;
    unsigned i;

    cw->send_cq =
        ibv_create_cq(cw->dev->ctx, APTUS_VERBS_CONN_TX_CQ, NULL, NULL, 0);
    if (cw->send_cq == NULL) {
        ucs_error("verbs conn: ibv_create_cq failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    /* at least a page each, so that a large write takes few requests */
    cw->tx_stride = ucs_align_up(ucs_max(cw->config.max_frame, 8192), 64);
    size          = cw->tx_stride * APTUS_VERBS_CONN_TX_BUFS;
    if (cw->config.numa_node >= 0) {
        /* the HCA reads them: on its node, pages bound before the first
         * touch (and before registration), as the receive buffers */
        cw->tx_buf = aptus_numa_alloc(&size, cw->config.numa_node,
                                      "aptus_verbs_tx_bufs");
    } else if (ucs_posix_memalign((void **)&cw->tx_buf, 4096, size,
                                  "aptus_verbs_tx_bufs") != 0) {
        cw->tx_buf = NULL;
    }
    if (cw->tx_buf == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    cw->tx_mr =
        ibv_reg_mr(cw->dev->pd, cw->tx_buf, size, IBV_ACCESS_LOCAL_WRITE);
    if (cw->tx_mr == NULL) {
        ucs_error("verbs conn: ibv_reg_mr of %zu bytes failed: %m", size);
        return UCS_ERR_IO_ERROR;
    }
    cw->tx_free = ucs_calloc(APTUS_VERBS_CONN_TX_BUFS, sizeof(*cw->tx_free),
                             "aptus_verbs_tx_free");
    if (cw->tx_free == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < APTUS_VERBS_CONN_TX_BUFS; ++i) {
        cw->tx_free[cw->tx_num_free++] = i;
    }
    cw->max_inline = APTUS_VERBS_CONN_INLINE;
    return UCS_OK;
}

void aptus_verbs_tx_cleanup(aptus_verbs_conn_wire_t *cw)
{
    if ((cw->tx_mr != NULL) && ibv_dereg_mr(cw->tx_mr)) {
        ucs_warn("verbs conn: ibv_dereg_mr failed");
    }
    ucs_free(cw->tx_buf);
    ucs_free(cw->tx_free);
    if ((cw->send_cq != NULL) && ibv_destroy_cq(cw->send_cq)) {
        ucs_warn("verbs conn: ibv_destroy_cq failed");
    }
}

static uint8_t *aptus_verbs_tx_buf(aptus_verbs_conn_wire_t *cw, unsigned idx)
{
    return cw->tx_buf + (size_t)idx * cw->tx_stride;
}

/* What a failed send completion says: an access the target's HCA refused
 * (a key of another protection domain, out of its bounds or rights) is
 * this side's error, never a peer that went away, which a connection
 * given up in a merge expects. */
static ucs_status_t aptus_verbs_wc_status(enum ibv_wc_status status)
{
    switch (status) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
        return UCS_ERR_INVALID_ADDR;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_LOC_LEN_ERR:
        return UCS_ERR_INVALID_PARAM;
    default:
        return UCS_ERR_CONNECTION_RESET;
    }
}

/* Completions of sends: buffers and send queue slots come back; a failed
 * one broke its connection (RC: the QP is in error). */
unsigned aptus_verbs_tx_poll(aptus_verbs_conn_wire_t *cw)
{
    struct ibv_wc wc[APTUS_VERBS_BATCH];
    aptus_verbs_conn_t *conn;
    unsigned count = 0, kind, idx;
    int i, n;

    do {
        n = ibv_poll_cq(cw->send_cq, APTUS_VERBS_BATCH, wc);
        if (n < 0) {
            ucs_error("verbs conn: polling the send CQ failed");
            return count;
        }
        for (i = 0; i < n; ++i) {
            kind = (unsigned)(wc[i].wr_id >> 32);
            idx  = (unsigned)(wc[i].wr_id & 0xffffffffu);
            if (idx > 0) {
                cw->tx_free[cw->tx_num_free++] = idx - 1;
            }
            --cw->tx_outstanding;
            if (kind == APTUS_VERBS_WR_READ) {
                cw->read_done   = 1;
                cw->read_status = wc[i].status;
            }
            conn = aptus_verbs_conn_by_qpn(cw, wc[i].qp_num);
            if (conn == NULL) {
                continue;
            }
            --conn->sq_outstanding;
            ++conn->sq_completed;
            if (wc[i].status != IBV_WC_SUCCESS) {
                ucs_debug("verbs conn %p: send failed: %s", conn,
                          ibv_wc_status_str(wc[i].status));
                aptus_verbs_conn_fail(conn,
                                      aptus_verbs_wc_status(wc[i].status));
            }
        }
        count += n;
    } while (n == APTUS_VERBS_BATCH);
    return count;
}

/* Room for count more work requests on conn's QP and the send CQ. */
static int aptus_verbs_tx_room(aptus_verbs_conn_t *conn, unsigned count)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);

    return (conn->sq_outstanding + count <= APTUS_VERBS_CONN_SQ_DEPTH) &&
           (cw->tx_outstanding + count <= APTUS_VERBS_CONN_TX_CQ);
}

/* Credits the peer granted and our sends have not used. */
static uint64_t aptus_verbs_tx_credits(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);

    if (cw->unpaced) {
        return UINT32_MAX;
    }
    return be64toh(conn->ctl->granted) - conn->tx_used;
}

static ucs_status_t aptus_verbs_tx_post(aptus_verbs_conn_t *conn,
                                        struct ibv_send_wr *wr)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    struct ibv_send_wr *bad;
    int ret;

    wr->send_flags |= IBV_SEND_SIGNALED;
    wr->next = NULL;
    ret      = ibv_post_send(conn->qp, wr, &bad);
    if (ret != 0) {
        ucs_debug("verbs conn %p: ibv_post_send failed: %s", conn,
                  strerror(ret));
        aptus_verbs_conn_fail(conn, UCS_ERR_IO_ERROR);
        return UCS_ERR_IO_ERROR;
    }
    ++conn->sq_outstanding;
    ++conn->sq_posted;
    ++cw->tx_outstanding;
    return UCS_OK;
}

static void aptus_verbs_iov_copy(uint8_t *dst, const struct iovec *iov,
                                 unsigned iovcnt)
{
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        if (iov[i].iov_len == 0) {
            continue; /* its base may be NULL: memcpy may not see it */
        }
        memcpy(dst, iov[i].iov_base, iov[i].iov_len);
        dst += iov[i].iov_len;
    }
}

static size_t aptus_verbs_iov_len(const struct iovec *iov, unsigned iovcnt)
{
    size_t len = 0;
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        len += iov[i].iov_len;
    }
    return len;
}

ucs_status_t aptus_verbs_tx_credit(aptus_verbs_conn_t *conn)
{
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    uint64_t value;

    if ((conn->state != APTUS_VERBS_CONN_S_UP) ||
        !aptus_verbs_tx_room(conn, 1)) {
        return UCS_ERR_NO_RESOURCE;
    }
    value = htobe64(conn->rx_granted);
    memset(&wr, 0, sizeof(wr));
    sge.addr               = (uintptr_t)&value;
    sge.length             = sizeof(value);
    sge.lkey               = 0;
    wr.wr_id               = (uint64_t)APTUS_VERBS_WR_CREDIT << 32;
    wr.opcode              = IBV_WR_RDMA_WRITE;
    wr.send_flags          = IBV_SEND_INLINE; /* copied at posting */
    wr.sg_list             = &sge;
    wr.num_sge             = 1;
    wr.wr.rdma.remote_addr = conn->peer_ctl_addr;
    wr.wr.rdma.rkey        = conn->peer_ctl_rkey;
    if (aptus_verbs_tx_post(conn, &wr) != UCS_OK) {
        return UCS_ERR_IO_ERROR;
    }
    conn->rx_written = conn->rx_granted;
    return UCS_OK;
}

ucs_status_t aptus_verbs_tx_disc(aptus_verbs_conn_t *conn)
{
    struct ibv_send_wr wr;

    if ((aptus_verbs_tx_credits(conn) < 1) || !aptus_verbs_tx_room(conn, 1)) {
        return UCS_ERR_NO_RESOURCE;
    }
    memset(&wr, 0, sizeof(wr));
    wr.wr_id    = (uint64_t)APTUS_VERBS_WR_DISC << 32;
    wr.opcode   = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(APTUS_VERBS_CONN_IMM_DISC);
    wr.num_sge  = 0;
    if (aptus_verbs_tx_post(conn, &wr) != UCS_OK) {
        return UCS_ERR_IO_ERROR;
    }
    ++conn->tx_used;
    return UCS_OK;
}

/* Post a message of length bytes from iov or data now, if it may go. */
static ucs_status_t aptus_verbs_tx_msg(aptus_verbs_conn_t *conn,
                                       const struct iovec *iov, unsigned iovcnt,
                                       const void *data, size_t length)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    uint8_t inl[APTUS_VERBS_CONN_INLINE];
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    unsigned idx = 0;
    uint8_t *dst;

    if ((aptus_verbs_tx_credits(conn) < 2) || !aptus_verbs_tx_room(conn, 1)) {
        return UCS_ERR_NO_RESOURCE;
    }
    memset(&wr, 0, sizeof(wr));
    if (length <= cw->max_inline) {
        dst           = inl;
        sge.lkey      = 0;
        wr.send_flags = IBV_SEND_INLINE;
    } else if (cw->tx_num_free > 0) {
        idx      = cw->tx_free[--cw->tx_num_free];
        dst      = aptus_verbs_tx_buf(cw, idx);
        sge.lkey = cw->tx_mr->lkey;
        ++idx;
    } else {
        return UCS_ERR_NO_RESOURCE;
    }
    if (data != NULL) {
        memcpy(dst, data, length);
    } else {
        aptus_verbs_iov_copy(dst, iov, iovcnt);
    }
    sge.addr   = (uintptr_t)dst;
    sge.length = (uint32_t)length;
    wr.wr_id   = ((uint64_t)APTUS_VERBS_WR_SEND << 32) | idx;
    wr.opcode  = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = (length > 0) ? 1 : 0;
    if (aptus_verbs_tx_post(conn, &wr) != UCS_OK) {
        if (idx > 0) {
            cw->tx_free[cw->tx_num_free++] = idx - 1;
        }
        return UCS_ERR_IO_ERROR;
    }
    ++conn->tx_used;
    ++cw->super.stats.tx_frames;
    cw->super.stats.tx_bytes += length;
    return UCS_OK;
}

/* Post what remains of a write (with its immediate on the last piece) as
 * far as buffers, queue room and credits allow; UCS_OK when all went. */
static ucs_status_t aptus_verbs_tx_write(aptus_verbs_conn_t *conn,
                                         aptus_verbs_conn_op_t *op)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    const int with_imm          = (op->kind == APTUS_VERBS_OP_WRITE_IMM);
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    unsigned idx;
    size_t len;
    int last;

    do {
        len  = ucs_min(op->length - op->offset, cw->tx_stride);
        last = (op->offset + len == op->length);
        if ((cw->tx_num_free == 0) || !aptus_verbs_tx_room(conn, 1) ||
            (last && with_imm && (aptus_verbs_tx_credits(conn) < 2))) {
            return UCS_ERR_NO_RESOURCE;
        }
        idx = cw->tx_free[--cw->tx_num_free];
        memcpy(aptus_verbs_tx_buf(cw, idx), op->data + op->offset, len);
        memset(&wr, 0, sizeof(wr));
        sge.addr   = (uintptr_t)aptus_verbs_tx_buf(cw, idx);
        sge.length = (uint32_t)len;
        sge.lkey   = cw->tx_mr->lkey;
        wr.wr_id   = ((uint64_t)APTUS_VERBS_WR_WRITE << 32) | (idx + 1);
        wr.opcode =
            (last && with_imm) ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.imm_data            = htonl(op->imm);
        wr.sg_list             = &sge;
        wr.num_sge             = (len > 0) ? 1 : 0;
        wr.wr.rdma.remote_addr = op->remote_addr + op->offset;
        wr.wr.rdma.rkey        = op->rkey;
        if (aptus_verbs_tx_post(conn, &wr) != UCS_OK) {
            cw->tx_free[cw->tx_num_free++] = idx;
            return UCS_ERR_IO_ERROR;
        }
        op->offset += len;
        if (last && with_imm) {
            ++conn->tx_used;
        }
    } while (!last);
    return UCS_OK;
}

/* A read of length bytes at remote_addr into iov, waited for: the bytes
 * land in a send buffer (registered), then are copied out. */
static ucs_status_t aptus_verbs_tx_read(aptus_verbs_conn_t *conn, uint32_t rkey,
                                        uint64_t remote_addr,
                                        const struct iovec *iov,
                                        unsigned iovcnt)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    size_t length = aptus_verbs_iov_len(iov, iovcnt), offset = 0, len;
    size_t iov_off = 0, n;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    unsigned idx, i = 0;
    unsigned long spins;
    uint8_t *src;

    while (offset < length) {
        len = ucs_min(length - offset, cw->tx_stride);
        for (spins = 0; (cw->tx_num_free == 0) || !aptus_verbs_tx_room(conn, 1);
             ++spins) {
            if ((conn->state != APTUS_VERBS_CONN_S_UP) ||
                (spins > APTUS_VERBS_READ_SPINS)) {
                return UCS_ERR_CONNECTION_RESET;
            }
            aptus_verbs_tx_poll(cw);
        }
        idx = cw->tx_free[--cw->tx_num_free];
        memset(&wr, 0, sizeof(wr));
        sge.addr   = (uintptr_t)aptus_verbs_tx_buf(cw, idx);
        sge.length = (uint32_t)len;
        sge.lkey   = cw->tx_mr->lkey;
        wr.wr_id   = ((uint64_t)APTUS_VERBS_WR_READ << 32) | (idx + 1);
        wr.opcode  = IBV_WR_RDMA_READ;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.wr.rdma.remote_addr = remote_addr + offset;
        wr.wr.rdma.rkey        = rkey;
        cw->read_done          = 0;
        if (aptus_verbs_tx_post(conn, &wr) != UCS_OK) {
            cw->tx_free[cw->tx_num_free++] = idx;
            return UCS_ERR_CONNECTION_RESET;
        }
        /* the buffer is free again once polled, and stays as it is until
         * the next post: copy out right after */
        for (spins = 0; !cw->read_done; ++spins) {
            if (spins > APTUS_VERBS_READ_SPINS) {
                return UCS_ERR_CONNECTION_RESET;
            }
            aptus_verbs_tx_poll(cw);
        }
        if (cw->read_status != IBV_WC_SUCCESS) {
            return UCS_ERR_CONNECTION_RESET;
        }
        src = aptus_verbs_tx_buf(cw, idx);
        for (n = len; n > 0;) {
            size_t take = ucs_min(n, iov[i].iov_len - iov_off);
            if (take > 0) { /* an empty piece's base may be NULL */
                memcpy((uint8_t *)iov[i].iov_base + iov_off, src, take);
            }
            src += take;
            n -= take;
            iov_off += take;
            if (iov_off == iov[i].iov_len) {
                ++i;
                iov_off = 0;
            }
        }
        offset += len;
    }
    return UCS_OK;
}

static void aptus_verbs_tx_pending(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);

    if (!conn->in_tx_list) {
        ucs_list_add_tail(&cw->tx_pending, &conn->tx_list);
        conn->in_tx_list = 1;
    }
}

void aptus_verbs_tx_wake(aptus_verbs_conn_t *conn)
{
    if ((conn->backlog != NULL) || (conn->dones != NULL)) {
        aptus_verbs_tx_pending(conn);
    }
}

/* A request is done once the work requests posted so far are. */
static void aptus_verbs_tx_add_done(aptus_verbs_conn_t *conn,
                                    aptus_conn_rma_req_t *req)
{
    aptus_verbs_conn_done_t *d;

    d = ucs_malloc(sizeof(*d), "aptus_verbs_conn_done");
    ucs_assert_always(d != NULL);
    d->next           = NULL;
    d->req            = req;
    d->seq            = conn->sq_posted;
    *conn->dones_tail = d;
    conn->dones_tail  = &d->next;
    aptus_verbs_tx_pending(conn);
}

/* A write all posted: complete once the HCA acknowledges its last piece
 * (with req, through it; a direct write counts in writes_pending, what a
 * flush waits for: posted is not yet in the peer's memory). */
static void aptus_verbs_tx_written(aptus_verbs_conn_t *conn,
                                   aptus_conn_rma_req_t *req)
{
    conn->writes_pending += (req == NULL);
    aptus_verbs_tx_add_done(conn, req);
}

static aptus_verbs_conn_op_t *aptus_verbs_tx_queue(aptus_verbs_conn_t *conn,
                                                   uint8_t kind, size_t length)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    aptus_verbs_conn_op_t *op;

    op = ucs_malloc(sizeof(*op) + length, "aptus_verbs_conn_op");
    if (op == NULL) {
        return NULL;
    }
    memset(op, 0, sizeof(*op));
    op->kind            = kind;
    op->length          = length;
    *conn->backlog_tail = op;
    conn->backlog_tail  = &op->next;
    conn->backlog_bytes += length;
    ++cw->super.stats.tx_queued;
    cw->super.stats.tx_copied_bytes += length;
    aptus_verbs_tx_pending(conn);
    return op;
}

static ucs_status_t aptus_verbs_conn_status(aptus_verbs_conn_t *conn)
{
    switch (conn->state) {
    case APTUS_VERBS_CONN_S_FAILED:
        return conn->fail_status;
    case APTUS_VERBS_CONN_S_CLOSED:
        return UCS_ERR_NOT_CONNECTED;
    default:
        return UCS_OK;
    }
}

ucs_status_t aptus_verbs_conn_send(aptus_conn_t *c, const struct iovec *iov,
                                   unsigned iovcnt)
{
    aptus_verbs_conn_t *conn    = aptus_verbs_conn(c);
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(c->wire);
    size_t length               = aptus_verbs_iov_len(iov, iovcnt);
    aptus_verbs_conn_op_t *op;
    ucs_status_t status;

    status = aptus_verbs_conn_status(conn);
    if (status != UCS_OK) {
        return status;
    }
    if (length > cw->config.max_frame) {
        return UCS_ERR_INVALID_PARAM;
    }
    if ((conn->backlog == NULL) && (conn->state == APTUS_VERBS_CONN_S_UP)) {
        status = aptus_verbs_tx_msg(conn, iov, iovcnt, NULL, length);
        if (status != UCS_ERR_NO_RESOURCE) {
            return status;
        }
    }
    if ((conn->backlog_bytes > 0) &&
        (conn->backlog_bytes + length > cw->config.max_backlog)) {
        conn->want_writable = 1;
        return UCS_ERR_NO_RESOURCE;
    }
    op = aptus_verbs_tx_queue(conn, APTUS_VERBS_OP_MSG, length);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    aptus_verbs_iov_copy(op->data, iov, iovcnt);
    return UCS_OK;
}

size_t aptus_verbs_conn_backlog(aptus_conn_t *c)
{
    return aptus_verbs_conn(c)->backlog_bytes;
}

/* Whether key reaches [remote_addr, +length) through conn (up, or being
 * set up where setup_ok: the operation waits for it in the backlog). */
static ucs_status_t aptus_verbs_tx_check_state(aptus_verbs_conn_t *conn,
                                               const aptus_mem_key_t *key,
                                               uint64_t remote_addr,
                                               size_t length, int setup_ok)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);

    if ((key->host_id != cw->super.host_id) ||
        !((conn->state == APTUS_VERBS_CONN_S_UP) ||
          (setup_ok && (conn->state == APTUS_VERBS_CONN_S_SETUP)))) {
        ++cw->super.stats.refused;
        return UCS_ERR_UNREACHABLE;
    }
    if ((remote_addr < key->address) || (length > key->length) ||
        (remote_addr - key->address > key->length - length)) {
        ++cw->super.stats.refused;
        return UCS_ERR_INVALID_ADDR;
    }
    return UCS_OK;
}

static ucs_status_t aptus_verbs_tx_check(aptus_verbs_conn_t *conn,
                                         const aptus_mem_key_t *key,
                                         uint64_t remote_addr, size_t length)
{
    return aptus_verbs_tx_check_state(conn, key, remote_addr, length, 0);
}

/* A write, in order behind the backlog: posted now when it can all go,
 * else queued (copied) whole. */
static ucs_status_t aptus_verbs_tx_write_start(aptus_verbs_conn_t *conn,
                                               uint8_t kind, uint32_t rkey,
                                               uint64_t remote_addr,
                                               const struct iovec *iov,
                                               unsigned iovcnt, uint32_t imm,
                                               aptus_conn_rma_req_t *req)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    size_t length               = aptus_verbs_iov_len(iov, iovcnt);
    unsigned pieces = (unsigned)((length + cw->tx_stride - 1) / cw->tx_stride);
    aptus_verbs_conn_op_t *op;
    ucs_status_t status;

    op = aptus_verbs_tx_queue(conn, kind, length);
    if (op == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    op->rkey        = rkey;
    op->remote_addr = remote_addr;
    op->imm         = imm;
    op->req         = req;
    aptus_verbs_iov_copy(op->data, iov, iovcnt);
    if ((conn->backlog == op) && (conn->state == APTUS_VERBS_CONN_S_UP) &&
        (cw->tx_num_free >= ucs_max(pieces, 1)) &&
        aptus_verbs_tx_room(conn, ucs_max(pieces, 1))) {
        /* all of it goes now: take it back out of the backlog */
        status = aptus_verbs_tx_write(conn, op);
        if (status == UCS_OK) {
            conn->backlog      = NULL;
            conn->backlog_tail = &conn->backlog;
            conn->backlog_bytes -= length;
            --cw->super.stats.tx_queued;
            cw->super.stats.tx_copied_bytes -= length;
            aptus_verbs_tx_written(conn, req);
            ucs_free(op);
        } else if (status != UCS_ERR_NO_RESOURCE) {
            return status; /* broken: the backlog goes with it */
        }
    }
    return UCS_OK;
}

/* A write, with an immediate or not, checked and counted. */
static ucs_status_t
aptus_verbs_conn_write_op(aptus_conn_t *c, const aptus_mem_key_t *key,
                          uint64_t remote_addr, const struct iovec *iov,
                          unsigned iovcnt, uint8_t op, uint32_t imm)
{
    aptus_verbs_conn_t *conn = aptus_verbs_conn(c);
    size_t length            = aptus_verbs_iov_len(iov, iovcnt);
    ucs_status_t status;

    status = aptus_verbs_tx_check(conn, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }
    ++c->wire->stats.writes;
    c->wire->stats.write_bytes += length;
    return aptus_verbs_tx_write_start(conn, op, (uint32_t)key->token,
                                      remote_addr, iov, iovcnt, imm, NULL);
}

ucs_status_t aptus_verbs_conn_write(aptus_conn_t *c, const aptus_mem_key_t *key,
                                    uint64_t remote_addr,
                                    const struct iovec *iov, unsigned iovcnt)
{
    return aptus_verbs_conn_write_op(c, key, remote_addr, iov, iovcnt,
                                     APTUS_VERBS_OP_WRITE, 0);
}

ucs_status_t aptus_verbs_conn_write_imm(aptus_conn_t *c,
                                        const aptus_mem_key_t *key,
                                        uint64_t remote_addr,
                                        const struct iovec *iov,
                                        unsigned iovcnt, uint32_t imm)
{
    return aptus_verbs_conn_write_op(c, key, remote_addr, iov, iovcnt,
                                     APTUS_VERBS_OP_WRITE_IMM, imm);
}

ucs_status_t aptus_verbs_conn_read(aptus_conn_t *c, const aptus_mem_key_t *key,
                                   uint64_t remote_addr,
                                   const struct iovec *iov, unsigned iovcnt)
{
    aptus_verbs_conn_t *conn = aptus_verbs_conn(c);
    size_t length            = aptus_verbs_iov_len(iov, iovcnt);
    ucs_status_t status;

    status = aptus_verbs_tx_check(conn, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }
    status = aptus_verbs_tx_read(conn, (uint32_t)key->token, remote_addr, iov,
                                 iovcnt);
    if (status == UCS_OK) {
        ++c->wire->stats.reads;
        c->wire->stats.read_bytes += length;
    }
    return status;
}

ucs_status_t aptus_verbs_conn_write_ordered(aptus_conn_wire_t *wire,
                                            const aptus_mem_key_t *key,
                                            const aptus_conn_piece_t *pieces,
                                            unsigned count)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(wire);
    aptus_verbs_conn_t *conn    = NULL, *c;
    struct iovec iov;
    ucs_status_t status;
    khiter_t iter;
    unsigned i;

    iter = kh_get(aptus_verbs_key, &cw->keys, key->token);
    if ((key->host_id != wire->host_id) || (iter == kh_end(&cw->keys))) {
        ++wire->stats.refused;
        return UCS_ERR_UNREACHABLE;
    }
    /* any connection up to the key's owner: RC places one QP's writes in
     * order (see docs/verbs.md for the assumption) */
    ucs_list_for_each(c, &cw->conns, list)
    {
        if ((c->state == APTUS_VERBS_CONN_S_UP) &&
            !memcmp(&c->peer, &kh_val(&cw->keys, iter), sizeof(c->peer))) {
            conn = c;
            break;
        }
    }
    if (conn == NULL) {
        ++wire->stats.refused;
        return UCS_ERR_UNREACHABLE;
    }
    for (i = 0; i < count; ++i) {
        status = aptus_verbs_tx_check(conn, key, pieces[i].remote_addr,
                                      pieces[i].length);
        if (status != UCS_OK) {
            return status;
        }
    }
    for (i = 0; i < count; ++i) {
        iov.iov_base = (void *)pieces[i].local;
        iov.iov_len  = pieces[i].length;
        status       = aptus_verbs_tx_write_start(
                  conn, APTUS_VERBS_OP_WRITE, (uint32_t)key->token,
                  pieces[i].remote_addr, &iov, 1, 0, NULL);
        if (status != UCS_OK) {
            return status;
        }
        ++wire->stats.writes;
        wire->stats.write_bytes += pieces[i].length;
    }
    return UCS_OK;
}

ucs_status_t
aptus_verbs_conn_write_conn(aptus_conn_t *c, const aptus_mem_key_t *key,
                            uint64_t remote_addr, const struct iovec *iov,
                            unsigned iovcnt, aptus_conn_rma_req_t *req)
{
    aptus_verbs_conn_t *conn    = aptus_verbs_conn(c);
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(c->wire);
    size_t length               = aptus_verbs_iov_len(iov, iovcnt);
    ucs_status_t status;

    status = aptus_verbs_tx_check_state(conn, key, remote_addr, length, 1);
    if (status != UCS_OK) {
        return status;
    }
    if (((req != NULL) && (conn->rma_pending >= APTUS_CONN_MAX_READS)) ||
        ((conn->backlog_bytes > 0) &&
         (conn->backlog_bytes + length > cw->config.max_backlog))) {
        conn->want_writable = 1;
        return UCS_ERR_NO_RESOURCE;
    }
    status = aptus_verbs_tx_write_start(conn, APTUS_VERBS_OP_WRITE,
                                        (uint32_t)key->token, remote_addr, iov,
                                        iovcnt, 0, req);
    if (status == UCS_OK) {
        conn->rma_pending += (req != NULL);
        ++c->wire->stats.conn_writes;
        c->wire->stats.conn_write_bytes += length;
    }
    return status;
}

ucs_status_t
aptus_verbs_conn_read_conn(aptus_conn_t *c, const aptus_mem_key_t *key,
                           uint64_t remote_addr, const struct iovec *iov,
                           unsigned iovcnt, aptus_conn_rma_req_t *req)
{
    aptus_verbs_conn_t *conn = aptus_verbs_conn(c);
    size_t length            = aptus_verbs_iov_len(iov, iovcnt);
    ucs_status_t status;

    status = aptus_verbs_tx_check_state(conn, key, remote_addr, length, 1);
    if (status != UCS_OK) {
        return status;
    }
    if ((conn->rma_pending >= APTUS_CONN_MAX_READS) ||
        (conn->state != APTUS_VERBS_CONN_S_UP)) {
        /* asked again from the writable handler: when the connection
         * comes up, or a read completes */
        conn->want_writable = 1;
        return UCS_ERR_NO_RESOURCE;
    }
    /* the read is waited for here; done runs from progress, in order */
    status = aptus_verbs_tx_read(conn, (uint32_t)key->token, remote_addr, iov,
                                 iovcnt);
    if (status != UCS_OK) {
        return status;
    }
    ++c->wire->stats.conn_reads;
    c->wire->stats.conn_read_bytes += length;
    if (req != NULL) {
        ++conn->rma_pending;
        aptus_verbs_tx_add_done(conn, req);
    }
    return UCS_OK;
}

/* Everything of conn's send side goes: the backlog, and the requests
 * (done with the connection's error, UCS_ERR_CANCELED when closed here). */
void aptus_verbs_tx_conn_gone(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    ucs_status_t status =
        (conn->fail_status != UCS_OK) ? conn->fail_status : UCS_ERR_CANCELED;
    aptus_verbs_conn_done_t *d;
    aptus_verbs_conn_op_t *op;

    if (conn->in_tx_list) {
        ucs_list_del(&conn->tx_list);
        conn->in_tx_list = 0;
    }
    while ((d = conn->dones) != NULL) {
        conn->dones = d->next;
        if (d->req != NULL) {
            --conn->rma_pending;
            d->req->done(d->req, status);
        } else {
            --conn->writes_pending;
        }
        ucs_free(d);
    }
    conn->dones_tail = &conn->dones;
    while ((op = conn->backlog) != NULL) {
        conn->backlog = op->next;
        if (op->req != NULL) {
            --conn->rma_pending;
            op->req->done(op->req, status);
        }
        ucs_free(op);
    }
    conn->backlog_tail  = &conn->backlog;
    conn->backlog_bytes = 0;
    (void)cw;
}

/* Push conn's backlog; complete its requests. */
static unsigned aptus_verbs_tx_push(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    aptus_verbs_conn_done_t *d;
    aptus_verbs_conn_op_t *op;
    ucs_status_t status;
    unsigned count  = 0;
    int had_backlog = (conn->backlog != NULL);

    while ((op = conn->backlog) != NULL) {
        if (op->kind == APTUS_VERBS_OP_MSG) {
            status = aptus_verbs_tx_msg(conn, NULL, 0, op->data, op->length);
        } else {
            status = aptus_verbs_tx_write(conn, op);
        }
        if (status != UCS_OK) {
            break;
        }
        conn->backlog = op->next;
        if (conn->backlog == NULL) {
            conn->backlog_tail = &conn->backlog;
        }
        conn->backlog_bytes -= op->length;
        if (op->kind != APTUS_VERBS_OP_MSG) {
            aptus_verbs_tx_written(conn, op->req);
        }
        ucs_free(op);
        ++count;
    }
    if (conn->state != APTUS_VERBS_CONN_S_UP) {
        return count;
    }
    while (((d = conn->dones) != NULL) && (d->seq <= conn->sq_completed)) {
        conn->dones = d->next;
        if (conn->dones == NULL) {
            conn->dones_tail = &conn->dones;
        }
        if (d->req != NULL) {
            --conn->rma_pending;
            d->req->done(d->req, UCS_OK);
        } else {
            --conn->writes_pending;
        }
        ucs_free(d);
        ++count;
        if (conn->state != APTUS_VERBS_CONN_S_UP) {
            return count; /* closed from the callback */
        }
    }
    if ((conn->backlog == NULL) && (conn->dones == NULL)) {
        ucs_list_del(&conn->tx_list);
        conn->in_tx_list = 0;
        if (had_backlog || conn->want_writable || (count > 0)) {
            conn->want_writable = 0;
            cw->config.handlers->writable(cw->config.arg, &conn->super);
        }
    }
    return count;
}

unsigned aptus_verbs_tx_progress(aptus_verbs_conn_wire_t *cw)
{
    aptus_verbs_conn_t *conn;
    ucs_list_link_t work;
    unsigned count = 0;

    /* one at a time off a list of its own: a handler may close any
     * connection, which takes it off whatever list it is on */
    ucs_list_head_init(&work);
    ucs_list_splice_tail(&work, &cw->tx_pending);
    ucs_list_head_init(&cw->tx_pending);
    while (!ucs_list_is_empty(&work)) {
        conn = ucs_list_head(&work, aptus_verbs_conn_t, tx_list);
        ucs_list_del(&conn->tx_list);
        ucs_list_add_tail(&cw->tx_pending, &conn->tx_list);
        if (conn->state == APTUS_VERBS_CONN_S_UP) {
            count += aptus_verbs_tx_push(conn);
        }
    }
    return count;
}
