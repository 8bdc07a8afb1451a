/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire, datagram part (see sock_dgram.h): sending, the
 * fault injector, batches of lone datagrams; trains received as one are
 * sock_dgram_gro.c's.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_dgram_int.h"
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

static unsigned aptus_sock_dgram_recv(aptus_dgram_wire_t *wire,
                                      aptus_dgram_rx_t *rx, unsigned count)
{
    aptus_sock_dgram_t *sock = ucs_derived_of(wire, aptus_sock_dgram_t);
    unsigned i, n;
    int ret;

    count = ucs_min(count, APTUS_SOCK_BATCH);
    if (ucs_unlikely((sock->gro != NULL) && (sock->gro->rest_count > 0))) {
        /* a train's rest first; the staging areas are busy until it is out */
        n                = aptus_sock_gro_rest(sock, rx, count);
        sock->rx_written = ucs_max(sock->rx_written, n);
        if (sock->gro->rest_count == 0) {
            sock->gro->rest_first = 0;
        }
        return n;
    }
    if ((sock->gro != NULL) && sock->gro->train_mode && (count >= 2)) {
        return aptus_sock_dgram_recv_train(sock, rx, count);
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
    aptus_sock_gro_close(sock);
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
