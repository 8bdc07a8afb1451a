/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's byte-stream framing: the receive pool, the
 * send path and its backlog, and cutting received bytes into frames.
 *
 * Each read takes as many bytes as one pool buffer holds and delivers
 * every whole frame in it; the first frame of a buffer may be kept in
 * place by the receiver, the tail of a frame cut by the buffer's end moves
 * to the start of a fresh buffer. A connection holds a buffer only while a
 * frame is half received, and a send backlog only while the socket refuses
 * bytes: idle connections cost their state and their socket.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_conn_int.h"
#include "proto/le.h"
#include "sock_frame.h"
#include "sock_sys.h"
#include "base/aptus_log.h"

#include <ucs/datastruct/mpool.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

void aptus_sock_conn_buf_put(aptus_conn_buf_t *buf)
{
    buf->wire->stats.rx_pool_in_use--;
    ucs_mpool_put(buf);
}

static uint8_t *aptus_sock_conn_area(aptus_sock_conn_wire_t *cw,
                                     aptus_conn_buf_t *buf)
{
    return aptus_conn_buf_area(buf, cw->config.rx_headroom);
}

static aptus_conn_buf_t *aptus_sock_conn_buf_get(aptus_sock_conn_wire_t *cw)
{
    aptus_conn_buf_t *buf = ucs_mpool_get(&cw->rx_mp);

    if (buf != NULL) {
        buf->wire = &cw->super;
        buf->refs = 1;
        if (++cw->super.stats.rx_pool_in_use > cw->super.stats.rx_pool_peak) {
            cw->super.stats.rx_pool_peak = cw->super.stats.rx_pool_in_use;
        }
    }
    return buf;
}

static ucs_status_t aptus_sock_conn_errno_status(int err)
{
    switch (err) {
    case ECONNRESET:
    case EPIPE:
    case ECONNREFUSED:
    case ENOTCONN:
        return UCS_ERR_CONNECTION_RESET;
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    default:
        return UCS_ERR_IO_ERROR;
    }
}

/* Make room for total more bytes in the copy backlog. */
static ucs_status_t aptus_sock_conn_txq_reserve(aptus_sock_conn_t *conn,
                                                size_t total)
{
    size_t need = conn->txq_len + total, cap;
    uint8_t *txq;

    if ((need > conn->txq_cap) && (conn->txq_off > 0)) {
        /* what was sent goes only when room is needed: moving the rest at
         * every frame would copy a long backlog once per frame */
        memmove(conn->txq, conn->txq + conn->txq_off,
                conn->txq_len - conn->txq_off);
        conn->txq_len -= conn->txq_off;
        conn->txq_off = 0;
        need          = conn->txq_len + total;
    }
    if (need > conn->txq_cap) {
        cap = ucs_max(need, conn->txq_cap * 2);
        txq = ucs_realloc(conn->txq, cap, "aptus_sock_conn_txq");
        if (txq == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        conn->txq     = txq;
        conn->txq_cap = cap;
    }
    return UCS_OK;
}

/* Queue bytes the socket did not take, after whatever is queued: iov[0..
 * zc_from) copied, the rest by reference. */
static ucs_status_t aptus_sock_conn_queue(aptus_sock_conn_t *conn,
                                          const struct iovec *iov,
                                          unsigned iovcnt, size_t skip,
                                          unsigned zc_from, uint64_t token)
{
    aptus_sock_zseg_t *zseg = NULL;
    size_t copy = 0, total = 0, n;
    ucs_status_t status;
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        total += iov[i].iov_len;
        copy += (i < zc_from) ? iov[i].iov_len : 0;
    }
    status = aptus_sock_conn_txq_reserve(conn, copy - ucs_min(copy, skip));
    if (status != UCS_OK) {
        return status;
    }
    if (total > ucs_max(copy, skip)) {
        /* bytes by reference are left (they follow the copied ones) */
        ucs_assert(iovcnt - zc_from <= APTUS_CONN_RMA_MAX_IOV);
        zseg = ucs_malloc(sizeof(*zseg), "aptus_sock_zseg");
        if (zseg == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        zseg->iovcnt = 0;
        zseg->first  = 0;
        zseg->token  = token;
    }
    for (i = 0; i < iovcnt; ++i) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        n = iov[i].iov_len - skip;
        if (i < zc_from) {
            memcpy(conn->txq + conn->txq_len, (uint8_t *)iov[i].iov_base + skip,
                   n);
            conn->txq_len += n;
            conn->super.wire->stats.tx_copied_bytes += n;
        } else if (n > 0) {
            zseg->iov[zseg->iovcnt].iov_base =
                UCS_PTR_BYTE_OFFSET(iov[i].iov_base, skip);
            zseg->iov[zseg->iovcnt++].iov_len = n;
            conn->zseg_bytes += n;
        }
        skip = 0;
    }
    if (zseg != NULL) {
        /* after every byte copied so far, this frame's header included */
        zseg->pos = conn->txq_pos + (conn->txq_len - conn->txq_off);
        ucs_queue_push(&conn->zsegs, &zseg->queue);
    }
    conn->super.wire->stats.tx_queued++;
    aptus_sock_conn_set_events(conn, conn->events | EPOLLOUT);
    return UCS_OK;
}

void aptus_sock_conn_zsegs_free(aptus_sock_conn_t *conn)
{
    aptus_sock_zseg_t *zseg;

    while (!ucs_queue_is_empty(&conn->zsegs)) {
        zseg = ucs_queue_pull_elem_non_empty(&conn->zsegs, aptus_sock_zseg_t,
                                             queue);
        ucs_free(zseg);
    }
    conn->zseg_bytes = 0;
}

ucs_status_t aptus_sock_conn_send_frame_zc(aptus_sock_conn_t *conn,
                                           unsigned type,
                                           const struct iovec *iov,
                                           unsigned iovcnt, unsigned zc_from,
                                           uint64_t token, int force)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    struct iovec frame_iov[APTUS_SOCK_CONN_MAX_IOV + 1];
    uint8_t hdr[APTUS_FRAME_HDR_LEN];
    uint8_t small[APTUS_SOCK_CONN_COALESCE];
    size_t total = 0, queued, len, max_len;
    struct msghdr msg;
    ucs_status_t status;
    ssize_t sent = 0;
    unsigned i;

    if (conn->flags & APTUS_SOCK_CONN_BROKEN) {
        return UCS_ERR_CONNECTION_RESET;
    }
    if (iovcnt > APTUS_SOCK_CONN_MAX_IOV) {
        return UCS_ERR_INVALID_PARAM;
    }
    max_len = aptus_frame_max_payload(type, cw->config.max_frame);
    for (i = 0; i < iovcnt; ++i) {
        if (iov[i].iov_len > max_len - total) {
            return UCS_ERR_INVALID_PARAM; /* (also when the sum wraps) */
        }
        frame_iov[i + 1] = iov[i];
        total += iov[i].iov_len;
    }
    queued = aptus_sock_conn_queued(conn);
    if (!force && (queued > 0) &&
        (queued + total + APTUS_FRAME_HDR_LEN > cw->config.max_backlog)) {
        return UCS_ERR_NO_RESOURCE;
    }
    queued = aptus_sock_conn_pending(conn);

    aptus_frame_hdr_pack(hdr, type, total);
    aptus_trace_data("sock conn %d: tx %s frame, %zu bytes", conn->fd,
                     aptus_frame_type_str(type), total);
    frame_iov[0].iov_base = hdr;
    frame_iov[0].iov_len  = sizeof(hdr);
    total += sizeof(hdr);

    if ((queued == 0) && !(conn->flags & APTUS_SOCK_CONN_CONNECTING)) {
        memset(&msg, 0, sizeof(msg));
        if (total <= APTUS_SOCK_CONN_COALESCE) {
            /* a small frame goes out of one buffer: the kernel copies it
             * faster than piece by piece */
            for (i = 0, len = 0; i <= iovcnt; ++i) {
                if (frame_iov[i].iov_len > 0) {
                    memcpy(small + len, frame_iov[i].iov_base,
                           frame_iov[i].iov_len);
                    len += frame_iov[i].iov_len;
                }
            }
            frame_iov[0].iov_base = small;
            frame_iov[0].iov_len  = len;
            msg.msg_iovlen        = 1;
            iovcnt                = 0;
            zc_from               = 0;
        } else {
            msg.msg_iovlen = iovcnt + 1;
        }
        msg.msg_iov = frame_iov;
        sent = aptus_sock_sendmsg(conn->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0) {
            if ((errno != EAGAIN) && (errno != EWOULDBLOCK) &&
                (errno != EINTR)) {
                /* progress reports it through the failed handler */
                conn->flags |= APTUS_SOCK_CONN_BROKEN;
                return aptus_sock_conn_errno_status(errno);
            }
            sent = 0;
        }
    }
    cw->super.stats.tx_frames++;
    cw->super.stats.tx_bytes += total;
    if ((size_t)sent == total) {
        return UCS_OK;
    }
    status = aptus_sock_conn_queue(conn, frame_iov, iovcnt + 1, sent,
                                   ucs_min(zc_from, iovcnt) + 1, token);
    if (status != UCS_OK) {
        /* part of the frame went out: the stream cannot continue */
        conn->flags |= APTUS_SOCK_CONN_BROKEN;
    }
    return status;
}

ucs_status_t aptus_sock_conn_send_frame(aptus_sock_conn_t *conn, unsigned type,
                                        const struct iovec *iov,
                                        unsigned iovcnt, int force)
{
    return aptus_sock_conn_send_frame_zc(conn, type, iov, iovcnt, iovcnt, 0,
                                         force);
}

ucs_status_t aptus_sock_conn_send(aptus_conn_t *conn, const struct iovec *iov,
                                  unsigned iovcnt)
{
    return aptus_sock_conn_send_frame(aptus_sock_conn(conn),
                                      APTUS_FRAME_TYPE_MSG, iov, iovcnt, 0);
}

size_t aptus_sock_conn_backlog(aptus_conn_t *tl_conn)
{
    return aptus_sock_conn_queued(aptus_sock_conn(tl_conn));
}

/* The queued bytes in stream order, as at most max iovecs: the copied ones
 * up to each reference, then the reference's. */
static unsigned aptus_sock_conn_tx_iov(aptus_sock_conn_t *conn,
                                       struct iovec *iov, unsigned max)
{
    uint64_t pos = conn->txq_pos;
    size_t off   = conn->txq_off;
    aptus_sock_zseg_t *zseg;
    unsigned n = 0, i;
    size_t len;

    ucs_queue_for_each(zseg, &conn->zsegs, queue)
    {
        if ((zseg->pos > pos) && (n < max)) {
            len              = zseg->pos - pos;
            iov[n].iov_base  = conn->txq + off;
            iov[n++].iov_len = len;
            off += len;
            pos += len;
        }
        for (i = 0; (i < zseg->iovcnt) && (n < max); ++i) {
            iov[n++] = zseg->iov[zseg->first + i];
        }
        if (n == max) {
            return n;
        }
    }
    if ((off < conn->txq_len) && (n < max)) {
        iov[n].iov_base  = conn->txq + off;
        iov[n++].iov_len = conn->txq_len - off;
    }
    return n;
}

/* sent bytes of the queue went out. */
static void aptus_sock_conn_tx_sent(aptus_sock_conn_t *conn, size_t sent)
{
    aptus_sock_zseg_t *zseg;
    struct iovec *iov;
    size_t n;

    while (sent > 0) {
        zseg = ucs_queue_is_empty(&conn->zsegs)
                   ? NULL
                   : ucs_queue_head_elem_non_empty(&conn->zsegs,
                                                   aptus_sock_zseg_t, queue);
        if ((zseg == NULL) || (zseg->pos > conn->txq_pos)) {
            n = (zseg == NULL) ? sent
                               : ucs_min(sent, zseg->pos - conn->txq_pos);
            ucs_assert(n <= conn->txq_len - conn->txq_off);
            conn->txq_off += n;
            conn->txq_pos += n;
            sent -= n;
            continue;
        }
        iov           = &zseg->iov[zseg->first];
        n             = ucs_min(sent, iov->iov_len);
        iov->iov_base = UCS_PTR_BYTE_OFFSET(iov->iov_base, n);
        iov->iov_len -= n;
        conn->zseg_bytes -= n;
        sent -= n;
        if (iov->iov_len == 0) {
            zseg->first++;
            if (--zseg->iovcnt == 0) {
                ucs_queue_pull_non_empty(&conn->zsegs);
                ucs_free(zseg);
            }
        }
    }
}

/* Send what the backlog holds; tell the owner when it is empty. */
void aptus_sock_conn_writable(aptus_sock_conn_t *conn)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    struct iovec iov[APTUS_SOCK_CONN_MAX_IOV];
    struct msghdr msg;
    unsigned iovcnt;
    ssize_t sent;
    socklen_t len;
    int err;

    if (conn->flags & APTUS_SOCK_CONN_CONNECTING) {
        len = sizeof(err);
        if ((getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) ||
            (err != 0)) {
            aptus_sock_conn_fail(conn, (err == ECONNREFUSED)
                                           ? UCS_ERR_UNREACHABLE
                                           : aptus_sock_conn_errno_status(err));
            return;
        }
        conn->flags &=
            ~(APTUS_SOCK_CONN_CONNECTING | APTUS_SOCK_CONN_PROVE_QUEUED);
        (void)aptus_sock_prove_own_view(conn);
    }
    while (aptus_sock_conn_pending(conn) > 0) {
        if (!aptus_sock_rma_zsegs_valid(conn)) {
            return;
        }
        iovcnt = aptus_sock_conn_tx_iov(conn, iov, APTUS_SOCK_CONN_MAX_IOV);
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov    = iov;
        msg.msg_iovlen = iovcnt;
        sent = aptus_sock_sendmsg(conn->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0) {
            if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
                return;
            } else if (errno == EINTR) {
                continue;
            }
            aptus_sock_conn_fail(conn, aptus_sock_conn_errno_status(errno));
            return;
        }
        aptus_sock_conn_tx_sent(conn, sent);
        if ((conn->rma.serve_count > 0) &&
            (aptus_sock_conn_pending(conn) < cw->config.max_backlog)) {
            aptus_sock_rma_serve(conn); /* keep the socket full */
        }
    }
    /* an idle connection keeps no backlog memory */
    ucs_assert(ucs_queue_is_empty(&conn->zsegs));
    ucs_free(conn->txq);
    conn->txq     = NULL;
    conn->txq_off = conn->txq_len = conn->txq_cap = 0;
    aptus_sock_conn_set_events(conn, conn->events & ~EPOLLOUT);
    if (conn->rma.serve_count > 0) {
        aptus_sock_rma_serve(conn); /* the peer's reads go on */
        if (aptus_sock_conn_pending(conn) > 0) {
            return;
        }
    }
    cw->config.handlers->writable(cw->config.arg, &conn->super);
}

/* Move a cut frame to the start of a buffer of its own (the current one
 * may be held by the receiver). Returns 0 when no buffer is free. */
static int aptus_sock_conn_rx_compact(aptus_sock_conn_wire_t *cw,
                                      aptus_sock_conn_t *conn)
{
    size_t left = conn->rx_len - conn->rx_off;
    aptus_conn_buf_t *buf;

    if (conn->rx_off == 0) {
        return 1;
    }
    if (left == 0) {
        aptus_conn_buf_release(conn->rx_buf);
        conn->rx_buf = NULL;
        conn->rx_off = conn->rx_len = 0;
        return 1;
    }
    if (conn->rx_buf->refs == 1) {
        memmove(aptus_sock_conn_area(cw, conn->rx_buf),
                aptus_sock_conn_area(cw, conn->rx_buf) + conn->rx_off, left);
    } else {
        buf = aptus_sock_conn_buf_get(cw);
        if (buf == NULL) {
            return 0;
        }
        memcpy(aptus_sock_conn_area(cw, buf),
               aptus_sock_conn_area(cw, conn->rx_buf) + conn->rx_off, left);
        aptus_conn_buf_release(conn->rx_buf);
        conn->rx_buf = buf;
    }
    conn->rx_off = 0;
    conn->rx_len = left;
    return 1;
}

/* Deliver every whole frame in the buffer. Returns 0 when the connection
 * was closed or broken meanwhile. */
static int aptus_sock_conn_rx_frames(aptus_sock_conn_wire_t *cw,
                                     aptus_sock_conn_t *conn)
{
    uint8_t *area                  = aptus_sock_conn_area(cw, conn->rx_buf);
    const aptus_conn_handlers_t *h = cw->config.handlers;
    aptus_frame_result_t result;
    aptus_frame_t frame;
    size_t avail;
    ssize_t taken;

    for (;;) {
        avail  = conn->rx_len - conn->rx_off;
        result = aptus_frame_parse(area + conn->rx_off, avail,
                                   cw->config.max_frame, &frame);
        if ((result == APTUS_FRAME_PARTIAL) && (avail >= APTUS_FRAME_HDR_LEN) &&
            ((frame.type == APTUS_FRAME_TYPE_WRITE) ||
             (frame.type == APTUS_FRAME_TYPE_READ_RESP))) {
            /* the rest of one-sided data goes straight to its memory */
            taken = aptus_sock_rma_sink_start(conn, frame.type, frame.length,
                                              area + conn->rx_off, avail);
            if (taken < 0) {
                return 0;
            } else if (taken > 0) {
                cw->super.stats.rx_frames++;
                cw->super.stats.rx_bytes += APTUS_FRAME_HDR_LEN + frame.length;
                conn->rx_off += taken;
            }
            return 1;
        } else if (result == APTUS_FRAME_PARTIAL) {
            return 1;
        } else if (result == APTUS_FRAME_BAD) {
            cw->super.stats.rx_malformed++;
            aptus_sock_conn_fail(conn, UCS_ERR_IO_ERROR);
            return 0;
        }
        cw->super.stats.rx_frames++;
        cw->super.stats.rx_bytes += APTUS_FRAME_HDR_LEN + frame.length;
        aptus_trace_data("sock conn %d: rx %s frame, %zu bytes", conn->fd,
                         aptus_frame_type_str(frame.type), frame.length);
        if (frame.type == APTUS_FRAME_TYPE_MSG) {
            h->recv(cw->config.arg, &conn->super, (void *)frame.payload,
                    frame.length, conn->rx_buf, conn->rx_off == 0);
        } else if (frame.type == APTUS_FRAME_TYPE_IMM) {
            h->imm(cw->config.arg, &conn->super, aptus_get32(frame.payload));
        } else if ((frame.type == APTUS_FRAME_TYPE_PROVE_REQ) ||
                   (frame.type == APTUS_FRAME_TYPE_PROVE_ANS)) {
            if (!aptus_sock_prove_frame(conn, frame.type, frame.payload)) {
                return 0;
            }
        } else if (!aptus_sock_rma_frame(conn, frame.type, frame.payload,
                                         frame.length)) {
            return 0; /* failed for it */
        }
        conn->rx_off += APTUS_FRAME_HDR_LEN + frame.length;
        if (conn->flags & (APTUS_SOCK_CONN_REPORTED | APTUS_SOCK_CONN_CLOSED)) {
            return 0;
        }
    }
}

/* Receive the rest of a one-sided frame into its memory, and what follows
 * it into the receive buffer (the next frame's start, in the same system
 * call). *room_p: in, the buffer's room; out, the whole read's. */
static ssize_t aptus_sock_conn_rx_sink(aptus_sock_conn_t *conn, size_t *room_p)
{
    aptus_sock_conn_wire_t *cw    = aptus_sock_cw(conn->super.wire);
    const aptus_sock_sink_t *sink = &conn->rma.sink;
    struct iovec iov[APTUS_CONN_RMA_MAX_IOV + 1];
    size_t left = sink->left, n;
    struct msghdr msg;
    unsigned i;

    memset(&msg, 0, sizeof(msg));
    for (i = 0; (i < sink->iovcnt) && (left > 0); ++i) {
        n               = ucs_min(left, sink->iov[i].iov_len);
        iov[i].iov_base = sink->iov[i].iov_base;
        iov[i].iov_len  = n;
        left -= n;
    }
    iov[i].iov_base = aptus_sock_conn_area(cw, conn->rx_buf) + conn->rx_len;
    iov[i].iov_len  = *room_p;
    msg.msg_iov     = iov;
    msg.msg_iovlen  = i + 1;
    *room_p += sink->left;
    return aptus_sock_recvmsg(conn->fd, &msg, MSG_DONTWAIT);
}

unsigned aptus_sock_conn_rx(aptus_sock_conn_t *conn)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    unsigned reads, count = 0;
    size_t room, placed;
    ssize_t ret;

    for (reads = 0; reads < APTUS_SOCK_CONN_READS; ++reads) {
        if ((conn->rx_buf != NULL) && !aptus_sock_conn_rx_compact(cw, conn)) {
            cw->super.stats.rx_pool_empty++;
            return count;
        }
        if (conn->rx_buf == NULL) {
            conn->rx_buf = aptus_sock_conn_buf_get(cw);
            if (conn->rx_buf == NULL) {
                /* the data waits in the socket: never dropped */
                cw->super.stats.rx_pool_empty++;
                return count;
            }
            conn->rx_off = conn->rx_len = 0;
        }

        room = cw->area_size - conn->rx_len;
        if (conn->rma.sink.left > 0) {
            if (!aptus_sock_rma_sink_valid(conn)) {
                return count;
            }
            ret = aptus_sock_conn_rx_sink(conn, &room);
        } else {
            ret = aptus_sock_recv(
                conn->fd, aptus_sock_conn_area(cw, conn->rx_buf) + conn->rx_len,
                room, MSG_DONTWAIT);
        }
        cw->super.stats.rx_syscalls++;
        if (ret <= 0) {
            if ((ret < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) ||
                              (errno == EINTR))) {
                break;
            }
            aptus_sock_conn_fail(
                conn, (ret == 0) ? UCS_ERR_NOT_CONNECTED
                                 : aptus_sock_conn_errno_status(errno));
            return count;
        }
        count++;
        placed = 0;
        if (conn->rma.sink.left > 0) {
            /* the sink's bytes first, the rest went to the buffer */
            placed = ucs_min((size_t)ret, conn->rma.sink.left);
            ret -= placed;
            if (!aptus_sock_rma_sink_advance(conn, placed)) {
                return count;
            }
        }
        conn->rx_len += ret;
        if (!aptus_sock_conn_rx_frames(cw, conn)) {
            return count;
        }
        if ((size_t)(ret + placed) < room) {
            break; /* the socket is empty: spare the system call */
        }
    }

    /* keep a buffer only for a frame that is half received */
    if ((conn->rx_buf != NULL) && (conn->rx_off == conn->rx_len)) {
        aptus_conn_buf_release(conn->rx_buf);
        conn->rx_buf = NULL;
        conn->rx_off = conn->rx_len = 0;
    }
    return count;
}
