/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's datagram socket: trains of datagrams received
 * as one (UDP GRO), cut back into datagrams (see aptus_sock_gro_t).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_dgram_int.h"
#include "sock_sys.h"
#include "base/aptus_numa.h"

#include <ucs/debug/assert.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <netinet/udp.h>
#include <errno.h>
#include <string.h>

/* The datagram size of a train (UDP GRO), 0 for a lone datagram. */
static size_t aptus_sock_gro_seg(const struct msghdr *m)
{
    struct cmsghdr *cmsg;
    int seg;

    for (cmsg = CMSG_FIRSTHDR(m); cmsg != NULL;
         cmsg = CMSG_NXTHDR((struct msghdr *)m, cmsg)) {
        if ((cmsg->cmsg_level == SOL_UDP) && (cmsg->cmsg_type == UDP_GRO) &&
            (cmsg->cmsg_len >= CMSG_LEN(sizeof(seg)))) {
            memcpy(&seg, CMSG_DATA(cmsg), sizeof(seg));
            return (seg > 0) ? (size_t)seg : 0;
        }
    }
    return 0;
}

/* Cut the rest of trains out into the caller's buffers rx[0..count), in
 * the order they came; returns how many were filled. */
unsigned aptus_sock_gro_rest(aptus_sock_dgram_t *sock, aptus_dgram_rx_t *rx,
                             unsigned count)
{
    aptus_sock_gro_t *gro = sock->gro;
    aptus_sock_gro_rest_t *r;
    unsigned filled = 0;
    size_t n;

    while ((gro->rest_count > 0) && (filled < count)) {
        r = &gro->rest[gro->rest_first];
        n = ucs_min(r->seg, r->end - r->off);
        memcpy(rx[filled].buf, gro->area + r->slot * gro->stride + r->off, n);
        rx[filled].length = n;
        rx[filled].src    = r->src;
        ++filled;
        r->off += n;
        if (r->off == r->end) {
            ++gro->rest_first;
            --gro->rest_count;
        }
    }
    return filled;
}

static void aptus_sock_gro_rest_add(aptus_sock_gro_t *gro, unsigned slot,
                                    size_t seg, size_t off, size_t end,
                                    const aptus_wire_addr_t *src)
{
    aptus_sock_gro_rest_t *r = &gro->rest[gro->rest_first + gro->rest_count++];

    r->slot = slot;
    r->seg  = seg;
    r->off  = off;
    r->end  = end;
    r->src  = *src;
}

/* What recvmmsg filled from slot first on holds something other than lone
 * datagrams of at most the MTU: trains (UDP GRO) to cut up, or datagrams
 * too large. Hands out, in order, the lone datagrams in their buffers and
 * each train's first datagram in its slot's buffer, the train's other
 * datagrams copied into the buffers recvmmsg left empty; once those run
 * out, the rest of the train and everything behind it wait, in order, for
 * the next calls (no receive until they are out). The caller's
 * buffers are permuted among rx[0..count). */
unsigned aptus_sock_dgram_recv_odd(aptus_sock_dgram_t *sock,
                                   aptus_dgram_rx_t *rx, unsigned count,
                                   unsigned first, unsigned got)
{
    aptus_dgram_wire_t *wire = &sock->super;
    aptus_sock_gro_t *gro    = sock->gro;
    void *kbuf[APTUS_SOCK_BATCH], *spare[APTUS_SOCK_BATCH];
    unsigned i, filled = first, num_spare = 0, next_spare = 0;
    size_t len, seg, off, n, head;
    aptus_wire_addr_t src;
    int stalled = 0;
    struct msghdr *m;
    uint8_t *stage;

    for (i = first; i < count; ++i) {
        if (i < got) {
            kbuf[i] = rx[i].buf;
        } else {
            spare[num_spare++] = rx[i].buf;
        }
    }

    for (i = first; i < got; ++i) {
        m   = &sock->rx_msgs[i].msg_hdr;
        len = sock->rx_msgs[i].msg_len;
        seg = (gro != NULL) ? aptus_sock_gro_seg(m) : 0;
        if ((m->msg_flags & MSG_TRUNC) || (seg > wire->mtu) ||
            ((seg == 0) && (len > wire->mtu))) {
            /* larger than any buffer: dropped, as a UD QP would */
            wire->stats.rx_truncated += (seg == 0) ? 1 : (len + seg - 1) / seg;
            spare[num_spare++] = kbuf[i];
            continue;
        }
        aptus_sock_addr_to_wire((struct sockaddr *)&sock->rx_names[i], &src);
        if ((seg == 0) || (len <= seg)) {
            seg = len; /* a lone datagram */
        }
        wire->stats.rx_dgrams += (len + seg - 1) / seg;
        wire->stats.rx_bytes += len;
        if (seg < len) {
            wire->stats.rx_trains++;
            wire->stats.rx_trains_copied++;
            gro->train_mode = 1;
            gro->lone_run   = 0;
        }

        if (stalled) {
            /* behind a train's rest: all of it waits, in order */
            stage = gro->area + i * gro->stride;
            memcpy(stage, kbuf[i], ucs_min(len, wire->mtu));
            spare[num_spare++] = kbuf[i];
            aptus_sock_gro_rest_add(gro, i, seg, 0, len, &src);
            continue;
        }

        /* the first datagram stays where it is */
        rx[filled].buf    = kbuf[i];
        rx[filled].length = seg;
        rx[filled].src    = src;
        ++filled;
        if (seg == len) {
            continue;
        }

        /* the rest: the bytes the head buffer holds past the first datagram
         * go before the staged rest, so that the train is one run */
        stage = gro->area + i * gro->stride;
        head  = ucs_min(len, wire->mtu);
        memcpy(stage + seg, (uint8_t *)kbuf[i] + seg, head - seg);
        for (off = seg; (off < len) && (next_spare < num_spare); off += n) {
            n              = ucs_min(seg, len - off);
            rx[filled].buf = spare[next_spare++];
            memcpy(rx[filled].buf, stage + off, n);
            rx[filled].length = n;
            rx[filled].src    = src;
            ++filled;
        }
        if (off < len) {
            aptus_sock_gro_rest_add(gro, i, seg, off, len, &src);
            stalled = 1;
        }
    }

    /* the buffers left go after the filled ones */
    for (i = filled; next_spare < num_spare; ++i) {
        rx[i].buf = spare[next_spare++];
    }
    ucs_assert(i == count);
    /* any slot may hold another buffer now */
    sock->rx_written = count;
    return filled;
}

/* Train mode (see aptus_sock_gro_t): one message into rx[0..k) end to
 * end, the rest of a longer train into slot 0's staging area after them,
 * where the rest is cut out from. */
unsigned aptus_sock_dgram_recv_train(aptus_sock_dgram_t *sock,
                                     aptus_dgram_rx_t *rx, unsigned count)
{
    aptus_dgram_wire_t *wire = &sock->super;
    aptus_sock_gro_t *gro    = sock->gro;
    struct msghdr *m         = &gro->train_msg;
    size_t mtu               = wire->mtu, len, seg, off, n;
    unsigned i, filled, k;
    aptus_wire_addr_t src;
    ssize_t ret;

    k = ucs_min(count, APTUS_SOCK_GRO_TRAIN_MAX / mtu);
    for (i = 0; i < k; ++i) {
        gro->train_iov[i].iov_base = rx[i].buf;
        gro->train_iov[i].iov_len  = mtu;
    }
    /* slot 0's staging area holds byte off of the train at off */
    gro->train_iov[k].iov_base = gro->area + k * mtu;
    gro->train_iov[k].iov_len  = gro->stride - k * mtu;
    m->msg_name                = &sock->rx_names[0];
    m->msg_namelen             = sizeof(sock->rx_names[0]);
    m->msg_iov                 = gro->train_iov;
    m->msg_iovlen              = k + 1;
    m->msg_control             = gro->control[0];
    m->msg_controllen          = sizeof(gro->control[0]);
    m->msg_flags               = 0;
    sock->rx_written           = count; /* the batch's headers are stale */

    ret = aptus_sock_recvmsg(sock->fd, m, MSG_DONTWAIT);
    if (ret <= 0) {
        if ((ret < 0) && (errno != EAGAIN) && (errno != EWOULDBLOCK) &&
            (errno != EINTR)) {
            ucs_debug("sock wire: recvmsg failed: %m");
        }
        return 0;
    }
    len = (size_t)ret;
    seg = aptus_sock_gro_seg(m);
    if ((m->msg_flags & MSG_TRUNC) || (seg > mtu) ||
        ((seg == 0) && (len > mtu))) {
        /* larger than any buffer: dropped, as a UD QP would */
        wire->stats.rx_truncated += (seg == 0) ? 1 : (len + seg - 1) / seg;
        return 0;
    }
    aptus_sock_addr_to_wire((struct sockaddr *)&sock->rx_names[0], &src);
    if ((seg == 0) || (len <= seg)) {
        if (++gro->lone_run >= APTUS_SOCK_LONE_RUN) {
            gro->train_mode = 0; /* lone datagrams: back to batches */
        }
        wire->stats.rx_dgrams++;
        wire->stats.rx_bytes += len;
        rx[0].length = len;
        rx[0].src    = src;
        return 1;
    }
    wire->stats.rx_dgrams += (len + seg - 1) / seg;
    wire->stats.rx_bytes += len;
    wire->stats.rx_trains++;
    gro->lone_run = 0;

    filled = 0;
    if (seg == mtu) {
        /* in place: a datagram a buffer */
        for (off = 0; (off < len) && (filled < k); off += n) {
            n                 = ucs_min(seg, len - off);
            rx[filled].length = n;
            rx[filled].src    = src;
            ++filled;
        }
    } else {
        /* datagrams smaller than the buffers (a peer of a smaller MTU):
         * the train made one run in the staging area, then cut */
        wire->stats.rx_trains_copied++;
        for (i = 0; (i < k) && (i * mtu < len); ++i) {
            memcpy(gro->area + i * mtu, rx[i].buf, ucs_min(mtu, len - i * mtu));
        }
        for (off = 0; (off < len) && (filled < count); off += n) {
            n = ucs_min(seg, len - off);
            memcpy(rx[filled].buf, gro->area + off, n);
            rx[filled].length = n;
            rx[filled].src    = src;
            ++filled;
        }
    }
    if (off < len) {
        /* more than the buffers given: the rest is cut out later */
        wire->stats.rx_trains_copied += (seg == mtu);
        aptus_sock_gro_rest_add(gro, 0, seg, off, len, &src);
    }
    return filled;
}

ucs_status_t aptus_sock_gro_open(aptus_sock_dgram_t *sock, const char *dev_name,
                                 int numa_node)
{
    aptus_sock_gro_t *gro;
    unsigned i;
    int on = 1;

    if ((sock->super.mtu > APTUS_SOCK_GRO_MTU_MAX) ||
        (setsockopt(sock->fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) < 0)) {
        return UCS_OK;
    }

    gro = ucs_calloc(1, sizeof(*gro), "aptus_sock_gro");
    if (gro == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    gro->stride = sock->super.mtu + APTUS_SOCK_GRO_TRAIN_MAX;
    /* pages are touched only where trains land: on the NIC's node */
    gro->area = aptus_numa_malloc(APTUS_SOCK_BATCH * gro->stride, numa_node,
                                  "aptus_sock_gro");
    if (gro->area == NULL) {
        ucs_free(gro);
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < APTUS_SOCK_BATCH; ++i) {
        struct msghdr *m       = &sock->rx_msgs[i].msg_hdr;
        gro->iov[i][0].iov_len = sock->super.mtu;
        gro->iov[i][1].iov_base =
            gro->area + (i * gro->stride) + sock->super.mtu;
        gro->iov[i][1].iov_len = APTUS_SOCK_GRO_TRAIN_MAX;
        m->msg_iov             = gro->iov[i];
        m->msg_iovlen          = 2;
        m->msg_control         = gro->control[i];
        m->msg_controllen      = sizeof(gro->control[i]);
    }
    sock->rx_controllen = sizeof(gro->control[0]);
    sock->gro           = gro;
    ucs_debug("sock wire %s: UDP GRO on", dev_name);
    return UCS_OK;
}

void aptus_sock_gro_close(aptus_sock_dgram_t *sock)
{
    if (sock->gro != NULL) {
        ucs_free(sock->gro->area);
        ucs_free(sock->gro);
        sock->gro = NULL;
    }
}
