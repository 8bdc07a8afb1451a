/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire, datagram part (see sock_dgram.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_dgram.h"
#include "sock_netif.h"
#include "sock_sys.h"
#include "base/aptus_numa.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sock.h>

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define APTUS_SOCK_BATCH    64  /* recvmmsg/sendmmsg batch */
#define APTUS_SOCK_HELD_MAX 128 /* datagrams the fault injector may hold */
#define APTUS_SOCK_REORDER_US                                                  \
    1000 /* a reordered datagram waits at most this                            \
          */
/* UDP GRO on the main socket: only where a datagram is an Ethernet frame's
 * size; a larger one (the loopback's) already carries a message whole. */
#define APTUS_SOCK_GRO_MTU_MAX 16384
/* A GRO train is at most one IP packet's payload. */
#define APTUS_SOCK_GRO_TRAIN_MAX 65536

typedef struct aptus_sock_held {
    uint64_t release_us;
    int after_next; /* reorder: goes out after the next one */
    aptus_wire_addr_t dst;
    size_t length;
    uint8_t *data;
} aptus_sock_held_t;

/* A train (UDP GRO) not yet handed out whole: its datagrams from off to
 * end, in the staging area of the receive slot it came in. */
typedef struct aptus_sock_gro_rest {
    unsigned slot;
    size_t seg;
    size_t off;
    size_t end;
    aptus_wire_addr_t src;
} aptus_sock_gro_rest_t;

/* The receive side of UDP GRO: each receive slot reads a datagram into the
 * caller's buffer and the rest of a train into a staging area of its own,
 * where the train's datagrams are cut out into the caller's other buffers.
 * The staging areas are malloc'ed once and touched only by trains. */
typedef struct aptus_sock_gro {
    size_t stride; /* per slot: the mtu bytes of its head, then the rest */
    uint8_t *area;
    struct iovec iov[APTUS_SOCK_BATCH][2];
    char control[APTUS_SOCK_BATCH][CMSG_SPACE(sizeof(int))];
    aptus_sock_gro_rest_t rest[APTUS_SOCK_BATCH];
    unsigned rest_first, rest_count;
} aptus_sock_gro_t;

typedef struct aptus_sock_dgram {
    aptus_dgram_wire_t super;
    int fd;
    int rcvbuf;
    int sndbuf;
    int force_bufs;
    uint64_t now_us; /* as of the last progress call */
    aptus_fault_t fault;
    aptus_sock_held_t *held; /* fault injector's held datagrams */
    unsigned num_held;
    struct mmsghdr msgs[APTUS_SOCK_BATCH]; /* send */
    struct sockaddr_storage names[APTUS_SOCK_BATCH];
    /* receive: headers built once; a call rewrites only the buffers the
     * caller changed and the fields the kernel wrote in the last call */
    struct mmsghdr rx_msgs[APTUS_SOCK_BATCH];
    struct sockaddr_storage rx_names[APTUS_SOCK_BATCH];
    struct iovec rx_iov[APTUS_SOCK_BATCH];
    unsigned rx_written;   /* headers the last recvmmsg filled */
    unsigned rx_count;     /* slots the last call was given */
    size_t rx_controllen;  /* room for control messages: GRO's or none */
    aptus_sock_gro_t *gro; /* NULL: datagrams arrive one by one */
} aptus_sock_dgram_t;

void aptus_sock_addr_to_wire(const struct sockaddr *sa, aptus_wire_addr_t *addr)
{
    aptus_sock_addr_t *a = (aptus_sock_addr_t *)addr->raw;

    memset(addr, 0, sizeof(*addr));
    a->family = sa->sa_family;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        a->port                       = sin->sin_port;
        memcpy(a->ip, &sin->sin_addr, sizeof(sin->sin_addr));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        a->port                         = sin6->sin6_port;
        memcpy(a->ip, &sin6->sin6_addr, sizeof(sin6->sin6_addr));
    }
}

void aptus_sock_addr_from_wire(const aptus_wire_addr_t *addr,
                               struct sockaddr_storage *ss, socklen_t *len_p)
{
    const aptus_sock_addr_t *a = (const aptus_sock_addr_t *)addr->raw;

    /* the kernel reads the family's own size: zero only that */
    if (a->family == AF_INET6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
        memset(sin6, 0, sizeof(*sin6));
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port   = a->port;
        memcpy(&sin6->sin6_addr, a->ip, sizeof(sin6->sin6_addr));
        *len_p = sizeof(*sin6);
    } else {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;
        memset(sin, 0, sizeof(*sin));
        sin->sin_family = AF_INET;
        sin->sin_port   = a->port;
        memcpy(&sin->sin_addr, a->ip, sizeof(sin->sin_addr));
        *len_p = sizeof(*sin);
    }
}

const char *aptus_sock_addr_str(const aptus_wire_addr_t *addr, char *buf,
                                size_t max)
{
    const aptus_sock_addr_t *a = (const aptus_sock_addr_t *)addr->raw;
    char ip[INET6_ADDRSTRLEN];

    if (inet_ntop(a->family, a->ip, ip, sizeof(ip)) == NULL) {
        snprintf(ip, sizeof(ip), "<af %u>", a->family);
    }
    snprintf(buf, max, (a->family == AF_INET6) ? "[%s]:%u" : "%s:%u", ip,
             ntohs(a->port));
    return buf;
}

/* Send one datagram now; returns 1 if the wire took it (even if lost). */
static int aptus_sock_dgram_send_one(aptus_sock_dgram_t *sock,
                                     const aptus_wire_addr_t *dst,
                                     const struct iovec *iov, unsigned iovcnt,
                                     ucs_status_t *status_p)
{
    struct sockaddr_storage ss;
    struct msghdr msg;
    ssize_t ret;

    memset(&msg, 0, sizeof(msg));
    aptus_sock_addr_from_wire(dst, &ss, &msg.msg_namelen);
    msg.msg_name   = &ss;
    msg.msg_iov    = (struct iovec *)iov;
    msg.msg_iovlen = iovcnt;

    ret = aptus_sock_sendmsg(sock->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (ret >= 0) {
        sock->super.stats.tx_dgrams++;
        sock->super.stats.tx_bytes += ret;
        return 1;
    }
    if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == ENOBUFS)) {
        *status_p = UCS_ERR_NO_RESOURCE;
        return 0;
    }
    /* EPERM from a firewall, an unreachable route...: the datagram is gone,
     * which reliability above handles like any loss. */
    sock->super.stats.tx_errors++;
    ucs_debug("sock wire: sendmsg failed: %m");
    return 1;
}

static void aptus_sock_release_held(aptus_sock_dgram_t *sock, int after_send,
                                    uint64_t now_us)
{
    aptus_sock_held_t *h;
    struct iovec iov;
    ucs_status_t status;
    unsigned i = 0;

    while (i < sock->num_held) {
        h = &sock->held[i];
        if (!((after_send && h->after_next) || (h->release_us <= now_us))) {
            ++i;
            continue;
        }
        iov.iov_base = h->data;
        iov.iov_len  = h->length;
        if (!aptus_sock_dgram_send_one(sock, &h->dst, &iov, 1, &status)) {
            ++i; /* socket full: try again on the next progress */
            continue;
        }
        /* keep the array dense: move the last entry here */
        --sock->num_held;
        if (i != sock->num_held) {
            uint8_t *data                   = h->data;
            *h                              = sock->held[sock->num_held];
            sock->held[sock->num_held].data = data;
        }
    }
}

static int aptus_sock_hold(aptus_sock_dgram_t *sock, const aptus_dgram_tx_t *tx,
                           aptus_fault_action_t action)
{
    aptus_sock_held_t *h;
    size_t off = 0;
    unsigned i;

    if (sock->num_held >= APTUS_SOCK_HELD_MAX) {
        return 0; /* cannot hold more: let it pass */
    }

    h = &sock->held[sock->num_held];
    for (i = 0; i < tx->iovcnt; ++i) {
        memcpy(h->data + off, tx->iov[i].iov_base, tx->iov[i].iov_len);
        off += tx->iov[i].iov_len;
    }
    h->length     = off;
    h->dst        = *tx->dst;
    h->after_next = (action == APTUS_FAULT_REORDER);
    h->release_us = sock->now_us + ((action == APTUS_FAULT_REORDER)
                                        ? APTUS_SOCK_REORDER_US
                                        : sock->fault.config.delay_us);
    ++sock->num_held;
    return 1;
}

/* Send path with the fault injector in the way: one datagram at a time. */
static ucs_status_t aptus_sock_send_faulty(aptus_sock_dgram_t *sock,
                                           const aptus_dgram_tx_t *tx,
                                           unsigned count, unsigned *sent_p)
{
    ucs_status_t status = UCS_OK;
    aptus_fault_action_t action;
    unsigned i;

    for (i = 0; i < count; ++i) {
        action = aptus_fault_decide(&sock->fault);
        switch (action) {
        case APTUS_FAULT_DROP:
            sock->super.stats.fault_drop++;
            continue;
        case APTUS_FAULT_REORDER:
        case APTUS_FAULT_DELAY:
            if (aptus_sock_hold(sock, &tx[i], action)) {
                if (action == APTUS_FAULT_REORDER) {
                    sock->super.stats.fault_reorder++;
                } else {
                    sock->super.stats.fault_delay++;
                }
                continue;
            }
            break;
        case APTUS_FAULT_DUPLICATE:
            if (aptus_sock_dgram_send_one(sock, tx[i].dst, tx[i].iov,
                                          tx[i].iovcnt, &status)) {
                sock->super.stats.fault_dup++;
            }
            break;
        default:
            break;
        }

        if (!aptus_sock_dgram_send_one(sock, tx[i].dst, tx[i].iov, tx[i].iovcnt,
                                       &status)) {
            break;
        }
        aptus_sock_release_held(sock, 1, sock->now_us);
    }

    *sent_p = i;
    return (i == count) ? UCS_OK : status;
}

static ucs_status_t aptus_sock_dgram_send(aptus_dgram_wire_t *wire,
                                          const aptus_dgram_tx_t *tx,
                                          unsigned count, unsigned *sent_p)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);
    unsigned i, n, done = 0;
    ucs_status_t status;
    int ret;

    if (ucs_unlikely(aptus_fault_enabled(&sock->fault))) {
        return aptus_sock_send_faulty(sock, tx, count, sent_p);
    }

    if (count == 1) {
        status  = UCS_OK;
        *sent_p = aptus_sock_dgram_send_one(sock, tx->dst, tx->iov, tx->iovcnt,
                                            &status);
        return status;
    }

    while (done < count) {
        n = ucs_min(count - done, APTUS_SOCK_BATCH);
        for (i = 0; i < n; ++i) {
            struct msghdr *m = &sock->msgs[i].msg_hdr;
            memset(m, 0, sizeof(*m));
            aptus_sock_addr_from_wire(tx[done + i].dst, &sock->names[i],
                                      &m->msg_namelen);
            m->msg_name   = &sock->names[i];
            m->msg_iov    = (struct iovec *)tx[done + i].iov;
            m->msg_iovlen = tx[done + i].iovcnt;
        }

        ret = aptus_sock_sendmmsg(sock->fd, sock->msgs, n,
                                  MSG_DONTWAIT | MSG_NOSIGNAL);
        if (ret < 0) {
            if ((errno == EAGAIN) || (errno == EWOULDBLOCK) ||
                (errno == ENOBUFS)) {
                *sent_p = done;
                return UCS_ERR_NO_RESOURCE;
            }
            /* the first datagram failed for good: count it lost, go on */
            sock->super.stats.tx_errors++;
            ucs_debug("sock wire: sendmmsg failed: %m");
            ++done;
            continue;
        }
        for (i = 0; i < (unsigned)ret; ++i) {
            sock->super.stats.tx_dgrams++;
            sock->super.stats.tx_bytes += sock->msgs[i].msg_len;
        }
        done += ret;
    }

    *sent_p = done;
    return UCS_OK;
}

/* UDP segmentation offload: one system call, one skb through the stack,
 * seg_size-byte datagrams on the wire (or delivered whole to a UDP_GRO
 * socket over loopback). */
static ucs_status_t aptus_sock_dgram_send_seg(aptus_dgram_wire_t *wire,
                                              const aptus_wire_addr_t *dst,
                                              const struct iovec *iov,
                                              unsigned iovcnt, size_t seg_size)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);
    char control[CMSG_SPACE(sizeof(uint16_t))];
    struct sockaddr_storage ss;
    struct cmsghdr *cmsg;
    struct msghdr msg;
    uint16_t gso = (uint16_t)seg_size;
    ssize_t ret;
    size_t total = 0;
    unsigned i;

    if (wire->seg_max_bytes == 0) {
        return UCS_ERR_UNSUPPORTED;
    }
    memset(&msg, 0, sizeof(msg));
    memset(control, 0, sizeof(control));
    aptus_sock_addr_from_wire(dst, &ss, &msg.msg_namelen);
    msg.msg_name       = &ss;
    msg.msg_iov        = (struct iovec *)iov;
    msg.msg_iovlen     = iovcnt;
    msg.msg_control    = control;
    msg.msg_controllen = sizeof(control);
    cmsg               = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level   = SOL_UDP;
    cmsg->cmsg_type    = UDP_SEGMENT;
    cmsg->cmsg_len     = CMSG_LEN(sizeof(gso));
    memcpy(CMSG_DATA(cmsg), &gso, sizeof(gso));

    ret = aptus_sock_sendmsg(sock->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (ret >= 0) {
        for (i = 0; i < iovcnt; ++i) {
            total += iov[i].iov_len;
        }
        wire->stats.tx_dgrams += (total + seg_size - 1) / seg_size;
        wire->stats.tx_bytes += ret;
        return UCS_OK;
    }
    if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == ENOBUFS)) {
        return UCS_ERR_NO_RESOURCE;
    }
    if ((errno == EINVAL) || (errno == EIO) || (errno == EOPNOTSUPP) ||
        (errno == EMSGSIZE)) {
        /* the path cannot take it (e.g. datagrams above the link MTU): send
         * datagram by datagram from now on */
        ucs_debug(
            "sock wire: UDP segmentation refused (%m), not used any more");
        wire->seg_max_bytes = 0;
        return UCS_ERR_UNSUPPORTED;
    }
    wire->stats.tx_errors++;
    return UCS_OK; /* lost, as far as the caller is concerned */
}

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
static unsigned aptus_sock_gro_give(aptus_sock_dgram_t *sock,
                                    aptus_dgram_rx_t *rx, unsigned count)
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
static unsigned aptus_sock_dgram_recv_odd(aptus_sock_dgram_t *sock,
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

static unsigned aptus_sock_dgram_recv(aptus_dgram_wire_t *wire,
                                      aptus_dgram_rx_t *rx, unsigned count)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);
    unsigned i, n;
    int ret;

    count = ucs_min(count, APTUS_SOCK_BATCH);
    if (ucs_unlikely((sock->gro != NULL) && (sock->gro->rest_count > 0))) {
        /* a train's rest first; the staging areas are busy until it is out */
        n                = aptus_sock_gro_give(sock, rx, count);
        sock->rx_written = ucs_max(sock->rx_written, n);
        if (sock->gro->rest_count == 0) {
            sock->gro->rest_first = 0;
        }
        return n;
    }

    /* only the slots the last call filled may hold new buffers, unless the
     * caller posts more (wire.h): an empty poll rebuilds nothing */
    n = ucs_min(sock->rx_written, count);
    for (i = 0; i < n; ++i) {
        sock->rx_msgs[i].msg_hdr.msg_namelen       = sizeof(sock->rx_names[i]);
        sock->rx_msgs[i].msg_hdr.msg_controllen    = sock->rx_controllen;
        sock->rx_msgs[i].msg_hdr.msg_iov->iov_base = rx[i].buf;
    }
    if (ucs_unlikely(count > sock->rx_count)) {
        /* slots past the last count may hold what an earlier call wrote */
        for (i = n; i < count; ++i) {
            sock->rx_msgs[i].msg_hdr.msg_namelen    = sizeof(sock->rx_names[i]);
            sock->rx_msgs[i].msg_hdr.msg_controllen = sock->rx_controllen;
            sock->rx_msgs[i].msg_hdr.msg_iov->iov_base = rx[i].buf;
        }
    }
    sock->rx_count   = count;
    sock->rx_written = 0;

    ret = aptus_sock_recvmmsg(sock->fd, sock->rx_msgs, count, MSG_DONTWAIT);
    if (ret <= 0) {
        if ((ret < 0) && (errno != EAGAIN) && (errno != EWOULDBLOCK) &&
            (errno != EINTR)) {
            ucs_debug("sock wire: recvmmsg failed: %m");
        }
        return 0;
    }

    sock->rx_written = ret;
    for (i = 0; i < (unsigned)ret; ++i) {
        if (ucs_unlikely((sock->rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ||
                         (sock->rx_msgs[i].msg_hdr.msg_controllen != 0) ||
                         (sock->rx_msgs[i].msg_len > wire->mtu))) {
            return aptus_sock_dgram_recv_odd(sock, rx, count, i, ret);
        }
        wire->stats.rx_dgrams++;
        wire->stats.rx_bytes += sock->rx_msgs[i].msg_len;
        rx[i].length = sock->rx_msgs[i].msg_len;
        aptus_sock_addr_to_wire((struct sockaddr *)&sock->rx_names[i],
                                &rx[i].src);
    }
    return ret;
}

static unsigned aptus_sock_dgram_progress(aptus_dgram_wire_t *wire,
                                          uint64_t now_us)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);
    unsigned before          = sock->num_held;

    sock->now_us = now_us;
    if (before == 0) {
        return 0;
    }
    aptus_sock_release_held(sock, 0, now_us);
    return before - sock->num_held;
}

static int aptus_sock_dgram_event_fd(aptus_dgram_wire_t *wire)
{
    return ucs_derived_of(wire, aptus_sock_dgram_t)->fd;
}

static void aptus_sock_dgram_close(aptus_dgram_wire_t *wire)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);
    unsigned i;

    close(sock->fd);
    if (sock->gro != NULL) {
        ucs_free(sock->gro->area);
        ucs_free(sock->gro);
    }
    if (sock->held != NULL) {
        for (i = 0; i < APTUS_SOCK_HELD_MAX; ++i) {
            ucs_free(sock->held[i].data);
        }
        ucs_free(sock->held);
    }
    ucs_free(sock);
}

static int aptus_sock_same_node(const aptus_wire_addr_t *a,
                                const aptus_wire_addr_t *b)
{
    const aptus_sock_addr_t *x = (const aptus_sock_addr_t *)a->raw;
    const aptus_sock_addr_t *y = (const aptus_sock_addr_t *)b->raw;

    return (x->family == y->family) && !memcmp(x->ip, y->ip, sizeof(x->ip));
}

/* What the wire holds of the kernel: its socket and a socket per receive
 * queue opened so far, and the buffer bytes the kernel granted the first. */
static unsigned aptus_sock_dgram_stats(aptus_dgram_wire_t *wire,
                                       aptus_stat_t *stats, unsigned max)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);
    const aptus_stat_t all[] = {
        { "sock_fds", 1 + wire->stats.rxqs_opened },
        { "sock_rcvbuf", (uint64_t)ucs_max(sock->rcvbuf, 0) },
        { "sock_sndbuf", (uint64_t)ucs_max(sock->sndbuf, 0) },
        { "sock_buf_force", (uint64_t)sock->force_bufs },
        { "sock_gro", (uint64_t)(sock->gro != NULL) },
    };
    unsigned n = ucs_min(max, ucs_static_array_size(all));

    memcpy(stats, all, n * sizeof(*stats));
    return n;
}

static const aptus_dgram_wire_ops_t aptus_sock_dgram_ops = {
    .send      = aptus_sock_dgram_send,
    .recv      = aptus_sock_dgram_recv,
    .progress  = aptus_sock_dgram_progress,
    .addr_str  = aptus_sock_addr_str,
    .send_seg  = aptus_sock_dgram_send_seg,
    .event_fd  = aptus_sock_dgram_event_fd,
    .rxq_open  = aptus_sock_rxq_open,
    .rxq_recv  = aptus_sock_rxq_recv,
    .rxq_drain = aptus_sock_rxq_drain,
    .rxq_close = aptus_sock_rxq_close,
    .close     = aptus_sock_dgram_close,
    .same_node = aptus_sock_same_node,
    .stats     = aptus_sock_dgram_stats,
};

int aptus_sock_set_buf(int fd, int opt, int want, int force)
{
    int force_opt = (opt == SO_RCVBUF) ? SO_RCVBUFFORCE : SO_SNDBUFFORCE;
    int val;
    socklen_t len = sizeof(val);

    /* The system's limits (net.core.rmem_max/wmem_max) hold unless the
     * user asked to pass them; the kernel then clamps silently, and the
     * statistics show what was granted. */
    if (!force ||
        (setsockopt(fd, SOL_SOCKET, force_opt, &want, sizeof(want)) < 0)) {
        (void)setsockopt(fd, SOL_SOCKET, opt, &want, sizeof(want));
    }
    if (getsockopt(fd, SOL_SOCKET, opt, &val, &len) < 0) {
        return -1;
    }
    return val;
}

int aptus_sock_dgram_force_bufs(aptus_dgram_wire_t *wire)
{
    return ucs_derived_of(wire, aptus_sock_dgram_t)->force_bufs;
}


size_t aptus_sock_dgram_auto_mtu(const char *dev_name)
{
    size_t link = aptus_sock_netif_mtu(dev_name);

    if (link == 0) {
        return 2048;
    }
    if (link < APTUS_SOCK_DGRAM_MTU_MIN + APTUS_SOCK_DGRAM_IP_UDP_HDR) {
        return APTUS_SOCK_DGRAM_MTU_MIN; /* IP fragments it: still works */
    }
    return ucs_min(link - APTUS_SOCK_DGRAM_IP_UDP_HDR,
                   APTUS_SOCK_DGRAM_MTU_MAX);
}

/* UDP GRO on the main socket, where the kernel has it and datagrams are
 * small enough for trains to matter: a train of a message's datagrams
 * then comes up the stack, and out of the socket, as one. */
static ucs_status_t aptus_sock_gro_open(aptus_sock_dgram_t *sock,
                                        const char *dev_name, int numa_node)
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

ucs_status_t aptus_sock_dgram_open(const char *dev_name,
                                   const aptus_dgram_wire_config_t *config,
                                   aptus_dgram_wire_t **wire_p)
{
    aptus_sock_dgram_t *sock;
    ucs_status_t status;
    const char *bad;
    unsigned i;

    if ((config->mtu < APTUS_SOCK_DGRAM_MTU_MIN) ||
        (config->mtu > APTUS_SOCK_DGRAM_MTU_MAX)) {
        ucs_error("sock wire: MTU %zu is out of range [%d, %d]", config->mtu,
                  APTUS_SOCK_DGRAM_MTU_MIN, APTUS_SOCK_DGRAM_MTU_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    bad = aptus_fault_config_check(&config->fault);
    if (bad != NULL) {
        ucs_error("sock wire: invalid fault injector setting %s", bad);
        return UCS_ERR_INVALID_PARAM;
    }

    sock = ucs_calloc(1, sizeof(*sock), "aptus_sock_dgram");
    if (sock == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    sock->super.ops = &aptus_sock_dgram_ops;
    sock->super.mtu = config->mtu;
    /* on a loopback device every peer is on this host: what both ends
     * take crosses, and nothing needs probing */
    sock->super.flags =
        aptus_sock_netif_is_loopback(dev_name) ? APTUS_DGRAM_WIRE_F_LOCAL : 0;
    aptus_fault_init(&sock->fault, &config->fault);
    for (i = 0; i < APTUS_SOCK_BATCH; ++i) {
        struct msghdr *m        = &sock->rx_msgs[i].msg_hdr;
        sock->rx_iov[i].iov_len = config->mtu;
        m->msg_name             = &sock->rx_names[i];
        m->msg_namelen          = sizeof(sock->rx_names[i]);
        m->msg_iov              = &sock->rx_iov[i];
        m->msg_iovlen           = 1; /* control and flags: zero (calloc) */
    }

    status = aptus_sock_open_bound(dev_name, SOCK_DGRAM, 0, &sock->fd,
                                   &sock->super.addr);
    if (status != UCS_OK) {
        ucs_free(sock);
        return status;
    }

    /* The kernel charges each datagram about twice its size (skb overhead);
     * ask for that so rx_queue_len datagrams really fit. */
    sock->force_bufs = config->force_bufs;
    sock->rcvbuf     = aptus_sock_set_buf(
            sock->fd, SO_RCVBUF, (int)(config->rx_queue_len * config->mtu * 2),
            config->force_bufs);
    sock->sndbuf = aptus_sock_set_buf(
        sock->fd, SO_SNDBUF, (int)(config->tx_queue_len * config->mtu * 2),
        config->force_bufs);

    status = aptus_sock_gro_open(sock, dev_name, config->numa_node);
    if (status != UCS_OK) {
        aptus_sock_dgram_close(&sock->super);
        return status;
    }

    /* UDP segmentation offload, unless the fault injector must see every
     * datagram on its own */
    if (!aptus_fault_enabled(&sock->fault)) {
        sock->super.seg_max_bytes = 65507; /* largest UDP payload */
        sock->super.seg_max_count = 64;    /* UDP_MAX_SEGMENTS, older kernels */
    }

    if (aptus_fault_enabled(&sock->fault)) {
        sock->held = ucs_calloc(APTUS_SOCK_HELD_MAX, sizeof(*sock->held),
                                "aptus_sock_held");
        if (sock->held == NULL) {
            aptus_sock_dgram_close(&sock->super);
            return UCS_ERR_NO_MEMORY;
        }
        for (i = 0; i < APTUS_SOCK_HELD_MAX; ++i) {
            sock->held[i].data =
                ucs_malloc(config->mtu, "aptus_sock_held_data");
            if (sock->held[i].data == NULL) {
                aptus_sock_dgram_close(&sock->super);
                return UCS_ERR_NO_MEMORY;
            }
        }
    }

    *wire_p = &sock->super;
    return UCS_OK;
}

void aptus_sock_dgram_bufsizes(aptus_dgram_wire_t *wire, int *rcvbuf_p,
                               int *sndbuf_p)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);

    *rcvbuf_p = sock->rcvbuf;
    *sndbuf_p = sock->sndbuf;
}
