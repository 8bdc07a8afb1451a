/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's one-sided operations carried over a
 * connection, for peers whose memory process_vm cannot reach (another
 * host): what an RC queue pair does in hardware, done by the target's
 * progress. Writes are frames the target copies into registered memory;
 * reads are requests the target answers, in the order they came, with the
 * bytes as frames of at most the largest frame, as the backlog has room
 * (so a large read keeps the connection full without queueing all of it
 * at once). Every range is checked against the registration its token
 * names before a byte moves; a peer that names memory outside any, or
 * asks for more reads than APTUS_CONN_MAX_READS at once, is cut off like
 * a queue pair that takes a remote access error.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_conn_int.h"
#include "proto/le.h"
#include "sock_frame.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <string.h>

/* A read of this side, waiting for its bytes. */
typedef struct aptus_sock_read {
    ucs_queue_elem_t queue;
    aptus_conn_rma_req_t *req;
    size_t length; /* 0: a fence behind writes */
    size_t received;
    unsigned iovcnt;
    struct iovec iov[APTUS_CONN_RMA_MAX_IOV];
} aptus_sock_read_t;

void aptus_sock_rma_init(aptus_sock_conn_t *conn)
{
    memset(&conn->rma, 0, sizeof(conn->rma));
    ucs_queue_head_init(&conn->rma.reads);
}

static size_t aptus_sock_rma_length(const struct iovec *iov, unsigned iovcnt)
{
    size_t length = 0;
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        length += iov[i].iov_len;
    }
    return length;
}

/* Checked by the initiator too, so that a mistake of its own user is an
 * error here and not a connection cut by the target. */
static int aptus_sock_rma_in_key(const aptus_mem_key_t *key, uint64_t addr,
                                 size_t length)
{
    return (addr >= key->address) && (length <= key->length) &&
           (addr - key->address <= key->length - length);
}

static size_t aptus_sock_rma_queued(const aptus_sock_conn_t *conn)
{
    return aptus_sock_conn_pending(conn);
}

/* The next at most max bytes of iov from offset, as iovecs; returns how
 * many entries it wrote. */
static unsigned aptus_sock_rma_slice(const struct iovec *iov, unsigned iovcnt,
                                     size_t offset, size_t max,
                                     struct iovec *out)
{
    unsigned i, n = 0;
    size_t take;

    for (i = 0; (i < iovcnt) && (max > 0); ++i) {
        if (offset >= iov[i].iov_len) {
            offset -= iov[i].iov_len;
            continue;
        }
        take             = ucs_min(iov[i].iov_len - offset, max);
        out[n].iov_base  = UCS_PTR_BYTE_OFFSET(iov[i].iov_base, offset);
        out[n++].iov_len = take;
        max -= take;
        offset = 0;
    }
    return n;
}

/* Copy length bytes of data to where the sink's next bytes go (its
 * iovecs are advanced by aptus_sock_rma_sink_advance). */
static void aptus_sock_rma_sink_place(const aptus_sock_sink_t *sink,
                                      const uint8_t *data, size_t length)
{
    unsigned i;
    size_t n;

    for (i = 0; (i < sink->iovcnt) && (length > 0); ++i) {
        n = ucs_min(length, sink->iov[i].iov_len);
        memcpy(sink->iov[i].iov_base, data, n);
        data += n;
        length -= n;
    }
}

/* Ask for length bytes at remote_addr (0: a fence) and wait for them in
 * order behind the requests before. */
static ucs_status_t
aptus_sock_rma_request(aptus_sock_conn_t *conn, uint64_t remote_addr,
                       size_t length, uint64_t token, const struct iovec *iov,
                       unsigned iovcnt, aptus_conn_rma_req_t *req)
{
    uint8_t body[APTUS_FRAME_READ_REQ_LEN];
    struct iovec biov = { body, sizeof(body) };
    aptus_sock_read_t *rd;
    ucs_status_t status;

    rd = ucs_malloc(sizeof(*rd), "aptus_sock_read");
    if (rd == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    aptus_put64(body, remote_addr);
    aptus_put64(body + 8, length);
    aptus_put64(body + 16, token);
    status = aptus_sock_conn_send_frame(conn, APTUS_FRAME_TYPE_READ_REQ, &biov,
                                        1, 1);
    if (status != UCS_OK) {
        ucs_free(rd);
        return status;
    }
    rd->req      = req;
    rd->length   = length;
    rd->received = 0;
    rd->iovcnt   = iovcnt;
    if (iovcnt > 0) { /* a fence has none */
        memcpy(rd->iov, iov, iovcnt * sizeof(*iov));
    }
    ucs_queue_push(&conn->rma.reads, &rd->queue);
    conn->rma.num_reads++;
    return UCS_OK;
}

/* Whether an operation of iov to remote_addr may start now (its length in
 * *length_p): UCS_OK, or why not, with nothing sent. */
static ucs_status_t aptus_sock_rma_admit(aptus_sock_conn_t *conn,
                                         const aptus_mem_key_t *key,
                                         uint64_t remote_addr,
                                         const struct iovec *iov,
                                         unsigned iovcnt, size_t *length_p)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    size_t length;

    if (conn->flags & APTUS_SOCK_CONN_BROKEN) {
        return UCS_ERR_CONNECTION_RESET;
    }
    if (iovcnt > APTUS_CONN_RMA_MAX_IOV) {
        return UCS_ERR_INVALID_PARAM;
    }
    length = aptus_sock_rma_length(iov, iovcnt);
    if ((length == 0) || !aptus_sock_rma_in_key(key, remote_addr, length)) {
        cw->super.stats.refused++;
        return UCS_ERR_INVALID_ADDR;
    }
    if ((conn->rma.num_reads >= APTUS_CONN_MAX_READS) ||
        (aptus_sock_rma_queued(conn) >= cw->config.max_backlog)) {
        return UCS_ERR_NO_RESOURCE;
    }
    *length_p = length;
    return UCS_OK;
}

ucs_status_t
aptus_sock_conn_write_conn(aptus_conn_t *tl_conn, const aptus_mem_key_t *key,
                           uint64_t remote_addr, const struct iovec *iov,
                           unsigned iovcnt, aptus_conn_rma_req_t *req)
{
    aptus_sock_conn_t *conn    = ucs_derived_of(tl_conn, aptus_sock_conn_t);
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(tl_conn->wire);
    size_t chunk =
        aptus_frame_max_payload(APTUS_FRAME_TYPE_WRITE, cw->config.max_frame) -
        APTUS_FRAME_WRITE_HDR_LEN;
    size_t length, offset;
    struct iovec fiov[1 + APTUS_CONN_RMA_MAX_IOV];
    uint8_t hdr[APTUS_FRAME_WRITE_HDR_LEN];
    ucs_status_t status;
    unsigned n;

    status = aptus_sock_rma_admit(conn, key, remote_addr, iov, iovcnt, &length);
    if (status != UCS_OK) {
        return status;
    }

    /* all frames or none: once the first is the connection's, the rest
     * follow whatever the backlog (as a message may pass the bound); with
     * req, the data waits in the user's memory, not in a copy */
    fiov[0].iov_base = hdr;
    fiov[0].iov_len  = sizeof(hdr);
    for (offset = 0; offset < length; offset += chunk) {
        n = aptus_sock_rma_slice(iov, iovcnt, offset, chunk, fiov + 1);
        aptus_put64(hdr, remote_addr + offset);
        aptus_put64(hdr + 8, key->token);
        status = aptus_sock_conn_send_frame_zc(conn, APTUS_FRAME_TYPE_WRITE,
                                               fiov, n + 1,
                                               (req != NULL) ? 1 : n + 1, 0, 1);
        if (status != UCS_OK) {
            return status; /* the connection broke: it says so */
        }
    }
    /* the fence that says when they are in place */
    status = aptus_sock_rma_request(conn, 0, 0, 0, NULL, 0, req);
    if (status != UCS_OK) {
        return status;
    }
    cw->super.stats.conn_writes++;
    cw->super.stats.conn_write_bytes += length;
    return UCS_OK;
}

ucs_status_t aptus_sock_conn_read_conn(aptus_conn_t *tl_conn,
                                       const aptus_mem_key_t *key,
                                       uint64_t remote_addr,
                                       const struct iovec *iov, unsigned iovcnt,
                                       aptus_conn_rma_req_t *req)
{
    aptus_sock_conn_t *conn    = ucs_derived_of(tl_conn, aptus_sock_conn_t);
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(tl_conn->wire);
    ucs_status_t status;
    size_t length;

    status = aptus_sock_rma_admit(conn, key, remote_addr, iov, iovcnt, &length);
    if (status != UCS_OK) {
        return status;
    }
    status = aptus_sock_rma_request(conn, remote_addr, length, key->token, iov,
                                    iovcnt, req);
    if (status != UCS_OK) {
        return status;
    }
    cw->super.stats.conn_reads++;
    cw->super.stats.conn_read_bytes += length;
    return UCS_OK;
}

unsigned aptus_sock_conn_reads_outstanding(aptus_conn_t *tl_conn)
{
    return ucs_derived_of(tl_conn, aptus_sock_conn_t)->rma.num_reads;
}

static int aptus_sock_rma_allowed(aptus_sock_conn_wire_t *cw, uint64_t token,
                                  uint64_t addr, uint64_t length);

void aptus_sock_rma_serve(aptus_sock_conn_t *conn)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    aptus_sock_rma_t *rma      = &conn->rma;
    aptus_sock_serve_t *s;
    struct iovec iov;
    size_t chunk;

    while ((rma->serve_count > 0) && !(conn->flags & APTUS_SOCK_CONN_BROKEN) &&
           (aptus_sock_rma_queued(conn) < cw->config.max_backlog)) {
        s = &rma->serve[rma->serve_head];
        if (s->length == 0) {
            (void)aptus_sock_conn_send_frame(conn, s->answer, NULL, 0, 1);
        } else {
            /* frames as large as the wire carries, sent from the served
             * memory itself: the requester places them without a copy */
            chunk = ucs_min(s->length - s->offset,
                            aptus_frame_max_payload(APTUS_FRAME_TYPE_READ_RESP,
                                                    cw->config.max_frame));
            if (!aptus_sock_rma_allowed(cw, s->token, s->address + s->offset,
                                        chunk)) {
                /* deregistered since the request came: the rest is an
                 * error, as a read of a region gone is on an HCA, and not
                 * whatever the memory holds now */
                cw->super.stats.conn_refused++;
                (void)aptus_sock_conn_send_frame(
                    conn, APTUS_FRAME_TYPE_READ_ERR, NULL, 0, 1);
                goto next;
            }
            iov.iov_base = (void *)(uintptr_t)(s->address + s->offset);
            iov.iov_len  = chunk;
            (void)aptus_sock_conn_send_frame_zc(
                conn, APTUS_FRAME_TYPE_READ_RESP, &iov, 1, 0, s->token, 1);
            s->offset += chunk;
            cw->super.stats.conn_served_bytes += chunk;
            if (s->offset < s->length) {
                continue;
            }
            cw->super.stats.conn_served++;
        }
    next:
        rma->serve_head = (rma->serve_head + 1) % APTUS_CONN_MAX_READS;
        rma->serve_count--;
    }
}

/* A peer broke the rules of one-sided access: cut it off. */
static int aptus_sock_rma_bad(aptus_sock_conn_t *conn, const char *why)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);

    ucs_debug("sock conn %d: %s: connection cut", conn->fd, why);
    cw->super.stats.rx_malformed++;
    aptus_sock_conn_fail(conn, UCS_ERR_IO_ERROR);
    return 0;
}

static int aptus_sock_rma_allowed(aptus_sock_conn_wire_t *cw, uint64_t token,
                                  uint64_t addr, uint64_t length)
{
    return (cw->config.mem_check != NULL) &&
           cw->config.mem_check(cw->config.mem_arg, token, addr, length);
}

static int aptus_sock_rma_read_req(aptus_sock_conn_t *conn,
                                   const uint8_t *payload)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    aptus_sock_rma_t *rma      = &conn->rma;
    uint64_t addr              = aptus_get64(payload);
    uint64_t length            = aptus_get64(payload + 8);
    uint64_t token             = aptus_get64(payload + 16);
    aptus_sock_serve_t *s;

    if (rma->serve_count == APTUS_CONN_MAX_READS) {
        return aptus_sock_rma_bad(conn, "more reads than allowed at once");
    }
    if (rma->serve == NULL) {
        rma->serve = ucs_malloc(APTUS_CONN_MAX_READS * sizeof(*rma->serve),
                                "aptus_sock_serve");
        if (rma->serve == NULL) {
            return aptus_sock_rma_bad(conn, "no memory to serve a read");
        }
    }
    s          = &rma->serve[(rma->serve_head + rma->serve_count) %
                    APTUS_CONN_MAX_READS];
    s->address = addr;
    s->offset  = 0;
    s->length  = length;
    s->token   = token;
    s->answer  = APTUS_FRAME_TYPE_FENCE_ACK; /* a fence, if length is 0 */
    if ((length != 0) && !aptus_sock_rma_allowed(cw, token, addr, length)) {
        cw->super.stats.conn_refused++;
        s->length = 0; /* answered in its turn */
        s->answer = APTUS_FRAME_TYPE_READ_ERR;
    }
    rma->serve_count++;
    aptus_sock_rma_serve(conn);
    return 1;
}

static void aptus_sock_rma_read_done(aptus_sock_conn_t *conn,
                                     aptus_sock_read_t *rd, ucs_status_t status)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    aptus_conn_rma_req_t *req  = rd->req;

    ucs_queue_pull_non_empty(&conn->rma.reads);
    conn->rma.num_reads--;
    ucs_free(rd);
    if (req != NULL) {
        req->done(req, status);
    }
    if ((conn->rma.num_reads == 0) && (aptus_sock_rma_queued(conn) == 0) &&
        !(conn->flags & APTUS_SOCK_CONN_BROKEN)) {
        /* what a flush waits for is over */
        cw->config.handlers->writable(cw->config.arg, &conn->super);
    }
}

static int aptus_sock_rma_read_resp(aptus_sock_conn_t *conn,
                                    const uint8_t *payload, size_t length)
{
    aptus_sock_read_t *rd;
    struct iovec out[APTUS_CONN_RMA_MAX_IOV];
    size_t done = 0;
    unsigned i, n;

    if (ucs_queue_is_empty(&conn->rma.reads)) {
        return aptus_sock_rma_bad(conn, "read data nobody asked for");
    }
    rd = ucs_queue_head_elem_non_empty(&conn->rma.reads, aptus_sock_read_t,
                                       queue);
    if ((rd->length == 0) || (length > rd->length - rd->received)) {
        return aptus_sock_rma_bad(conn, "more read data than asked for");
    }
    n = aptus_sock_rma_slice(rd->iov, rd->iovcnt, rd->received, length, out);
    for (i = 0; i < n; ++i) {
        memcpy(out[i].iov_base, payload + done, out[i].iov_len);
        done += out[i].iov_len;
    }
    rd->received += length;
    if (rd->received == rd->length) {
        aptus_sock_rma_read_done(conn, rd, UCS_OK);
    }
    return 1;
}

ssize_t aptus_sock_rma_sink_start(aptus_sock_conn_t *conn, unsigned type,
                                  size_t length, const uint8_t *frame,
                                  size_t avail)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    aptus_sock_sink_t *sink    = &conn->rma.sink;
    const uint8_t *payload     = frame + APTUS_FRAME_HDR_LEN;
    size_t taken               = APTUS_FRAME_HDR_LEN;
    aptus_sock_read_t *rd;
    uint64_t addr, token;

    ucs_assert(sink->left == 0);
    avail -= APTUS_FRAME_HDR_LEN;
    if (type == APTUS_FRAME_TYPE_WRITE) {
        if (avail < APTUS_FRAME_WRITE_HDR_LEN) {
            return 0;
        }
        addr  = aptus_get64(payload);
        token = aptus_get64(payload + 8);
        length -= APTUS_FRAME_WRITE_HDR_LEN;
        if (!aptus_sock_rma_allowed(cw, token, addr, length)) {
            cw->super.stats.conn_refused++;
            return aptus_sock_rma_bad(conn, "write outside any registration") -
                   1;
        }
        sink->iov[0].iov_base = (void *)(uintptr_t)addr;
        sink->iov[0].iov_len  = length;
        sink->iovcnt          = 1;
        sink->token           = token;
        payload += APTUS_FRAME_WRITE_HDR_LEN;
        avail -= APTUS_FRAME_WRITE_HDR_LEN;
        taken += APTUS_FRAME_WRITE_HDR_LEN;
    } else {
        ucs_assert(type == APTUS_FRAME_TYPE_READ_RESP);
        if (ucs_queue_is_empty(&conn->rma.reads)) {
            return aptus_sock_rma_bad(conn, "read data nobody asked for") - 1;
        }
        rd = ucs_queue_head_elem_non_empty(&conn->rma.reads, aptus_sock_read_t,
                                           queue);
        if ((rd->length == 0) || (length > rd->length - rd->received)) {
            return aptus_sock_rma_bad(conn, "more read data than asked for") -
                   1;
        }
        sink->iovcnt = aptus_sock_rma_slice(rd->iov, rd->iovcnt, rd->received,
                                            length, sink->iov);
    }
    sink->type   = type;
    sink->length = length;
    sink->left   = length;
    avail        = ucs_min(avail, length);
    aptus_sock_rma_sink_place(sink, payload, avail);
    if (!aptus_sock_rma_sink_advance(conn, avail)) {
        return -1;
    }
    return taken + avail;
}

int aptus_sock_rma_zsegs_valid(aptus_sock_conn_t *conn)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    aptus_sock_zseg_t *zseg;
    unsigned i;

    ucs_queue_for_each(zseg, &conn->zsegs, queue)
    {
        if (zseg->token == 0) {
            continue; /* the user's own buffer, valid until completion */
        }
        for (i = zseg->first; i < zseg->first + zseg->iovcnt; ++i) {
            if (!aptus_sock_rma_allowed(cw, zseg->token,
                                        (uintptr_t)zseg->iov[i].iov_base,
                                        zseg->iov[i].iov_len)) {
                cw->super.stats.conn_refused++;
                return aptus_sock_rma_bad(conn, "a read's data waits in the "
                                                "backlog for a region "
                                                "deregistered since");
            }
        }
    }
    return 1;
}

int aptus_sock_rma_sink_valid(aptus_sock_conn_t *conn)
{
    aptus_sock_sink_t *sink = &conn->rma.sink;

    if ((sink->type != APTUS_FRAME_TYPE_WRITE) ||
        aptus_sock_rma_allowed(aptus_sock_cw(conn->super.wire), sink->token,
                               (uintptr_t)sink->iov[0].iov_base, sink->left)) {
        return 1;
    }
    aptus_sock_cw(conn->super.wire)->super.stats.conn_refused++;
    return aptus_sock_rma_bad(conn, "a write into a region deregistered "
                                    "since its frame began");
}

int aptus_sock_rma_sink_advance(aptus_sock_conn_t *conn, size_t length)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    aptus_sock_sink_t *sink    = &conn->rma.sink;
    aptus_sock_read_t *rd;

    ucs_assert(length <= sink->left);
    sink->left -= length;
    cw->super.stats.rx_placed_bytes += length;
    while ((sink->iovcnt > 0) && (length > 0)) {
        if (length < sink->iov[0].iov_len) {
            sink->iov[0].iov_base =
                UCS_PTR_BYTE_OFFSET(sink->iov[0].iov_base, length);
            sink->iov[0].iov_len -= length;
            break;
        }
        length -= sink->iov[0].iov_len;
        memmove(&sink->iov[0], &sink->iov[1],
                --sink->iovcnt * sizeof(sink->iov[0]));
    }
    if ((sink->left > 0) || (sink->type != APTUS_FRAME_TYPE_READ_RESP)) {
        return 1;
    }
    rd = ucs_queue_head_elem_non_empty(&conn->rma.reads, aptus_sock_read_t,
                                       queue);
    rd->received += sink->length;
    if (rd->received == rd->length) {
        aptus_sock_rma_read_done(conn, rd, UCS_OK);
    }
    return !(conn->flags & (APTUS_SOCK_CONN_REPORTED | APTUS_SOCK_CONN_CLOSED));
}

int aptus_sock_rma_frame(aptus_sock_conn_t *conn, unsigned type,
                         const uint8_t *payload, size_t length)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    aptus_sock_read_t *rd;
    uint64_t addr, token;

    switch (type) {
    case APTUS_FRAME_TYPE_WRITE:
        addr  = aptus_get64(payload);
        token = aptus_get64(payload + 8);
        length -= APTUS_FRAME_WRITE_HDR_LEN;
        if (!aptus_sock_rma_allowed(cw, token, addr, length)) {
            cw->super.stats.conn_refused++;
            return aptus_sock_rma_bad(conn, "write outside any registration");
        }
        memcpy((void *)(uintptr_t)addr, payload + APTUS_FRAME_WRITE_HDR_LEN,
               length);
        return 1;
    case APTUS_FRAME_TYPE_READ_REQ:
        return aptus_sock_rma_read_req(conn, payload);
    case APTUS_FRAME_TYPE_READ_RESP:
        return aptus_sock_rma_read_resp(conn, payload, length);
    case APTUS_FRAME_TYPE_READ_ERR:
    case APTUS_FRAME_TYPE_FENCE_ACK:
        if (ucs_queue_is_empty(&conn->rma.reads)) {
            return aptus_sock_rma_bad(conn, "an answer nobody asked for");
        }
        rd = ucs_queue_head_elem_non_empty(&conn->rma.reads, aptus_sock_read_t,
                                           queue);
        if ((rd->length == 0) != (type == APTUS_FRAME_TYPE_FENCE_ACK)) {
            return aptus_sock_rma_bad(conn, "an answer of another kind");
        }
        aptus_sock_rma_read_done(conn, rd,
                                 (type == APTUS_FRAME_TYPE_FENCE_ACK)
                                     ? UCS_OK
                                     : UCS_ERR_INVALID_ADDR);
        return 1;
    default:
        return aptus_sock_rma_bad(conn, "unknown frame");
    }
}

void aptus_sock_rma_cleanup(aptus_sock_conn_t *conn, ucs_status_t status)
{
    aptus_sock_read_t *rd;

    conn->rma.serve_count = 0;
    conn->rma.sink.left   = 0;
    while (!ucs_queue_is_empty(&conn->rma.reads)) {
        rd = ucs_queue_head_elem_non_empty(&conn->rma.reads, aptus_sock_read_t,
                                           queue);
        ucs_queue_pull_non_empty(&conn->rma.reads);
        conn->rma.num_reads--;
        if (rd->req != NULL) {
            rd->req->done(rd->req, status);
        }
        ucs_free(rd);
    }
}
