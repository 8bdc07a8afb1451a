/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's receive queues: a UDP socket of its own on the
 * wire's address, read with recvmmsg into caller-posted scatter lists.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_dgram.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sock.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <netinet/udp.h>

#define APTUS_SOCK_RXQ_BATCH 64

typedef struct aptus_sock_rxq {
    aptus_dgram_rxq_t super;
    int fd;
    struct mmsghdr msgs[APTUS_SOCK_RXQ_BATCH];
    char control[APTUS_SOCK_RXQ_BATCH][CMSG_SPACE(sizeof(int))];
} aptus_sock_rxq_t;

ucs_status_t aptus_sock_rxq_open(aptus_dgram_wire_t *wire, unsigned depth,
                                 aptus_dgram_rxq_t **rxq_p)
{
    struct sockaddr_storage ss;
    aptus_sock_rxq_t *rxq;
    socklen_t len;
    int want;

    rxq = ucs_calloc(1, sizeof(*rxq), "aptus_sock_rxq");
    if (rxq == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    rxq->super.wire = wire;

    /* the wire's address, any port */
    aptus_sock_addr_from_wire(&wire->addr, &ss, &len);
    ucs_sockaddr_set_port((struct sockaddr *)&ss, 0);

    rxq->fd =
        socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (rxq->fd < 0) {
        ucs_error("sock wire: socket() for a receive queue failed: %m");
        ucs_free(rxq);
        return UCS_ERR_IO_ERROR;
    }
    if (bind(rxq->fd, (struct sockaddr *)&ss, len) < 0) {
        ucs_error("sock wire: bind() for a receive queue failed: %m");
        goto err_close;
    }
    len = sizeof(ss);
    if (getsockname(rxq->fd, (struct sockaddr *)&ss, &len) < 0) {
        ucs_error("sock wire: getsockname() failed: %m");
        goto err_close;
    }
    aptus_sock_addr_to_wire((struct sockaddr *)&ss, &rxq->super.addr);

    /* take trains of datagrams whole (UDP GRO), where the kernel can */
    want = 1;
    (void)setsockopt(rxq->fd, SOL_UDP, UDP_GRO, &want, sizeof(want));

    /* the kernel charges about twice a datagram's size */
    want = (int)ucs_min((size_t)depth * wire->mtu * 2, (size_t)INT32_MAX);
    (void)aptus_sock_set_buf(rxq->fd, SO_RCVBUF, want,
                             aptus_sock_dgram_force_bufs(wire));

    wire->stats.rxqs_opened++;
    *rxq_p = &rxq->super;
    return UCS_OK;

err_close:
    close(rxq->fd);
    ucs_free(rxq);
    return UCS_ERR_IO_ERROR;
}

unsigned aptus_sock_rxq_recv(aptus_dgram_rxq_t *q, aptus_dgram_rxv_t *rx,
                             unsigned count)
{
    aptus_sock_rxq_t *rxq = ucs_derived_of(q, aptus_sock_rxq_t);
    struct cmsghdr *cmsg;
    unsigned i;
    int ret, gso;

    count = ucs_min(count, APTUS_SOCK_RXQ_BATCH);
    for (i = 0; i < count; ++i) {
        memset(&rxq->msgs[i].msg_hdr, 0, sizeof(rxq->msgs[i].msg_hdr));
        rxq->msgs[i].msg_hdr.msg_iov        = (struct iovec *)rx[i].iov;
        rxq->msgs[i].msg_hdr.msg_iovlen     = rx[i].iovcnt;
        rxq->msgs[i].msg_hdr.msg_control    = rxq->control[i];
        rxq->msgs[i].msg_hdr.msg_controllen = sizeof(rxq->control[i]);
    }

    ret = recvmmsg(rxq->fd, rxq->msgs, count, MSG_DONTWAIT, NULL);
    if (ret <= 0) {
        return 0;
    }
    for (i = 0; i < (unsigned)ret; ++i) {
        rx[i].length    = rxq->msgs[i].msg_len;
        rx[i].truncated = !!(rxq->msgs[i].msg_hdr.msg_flags & MSG_TRUNC);
        rx[i].seg_size  = 0;
        for (cmsg = CMSG_FIRSTHDR(&rxq->msgs[i].msg_hdr); cmsg != NULL;
             cmsg = CMSG_NXTHDR(&rxq->msgs[i].msg_hdr, cmsg)) {
            if ((cmsg->cmsg_level == SOL_UDP) && (cmsg->cmsg_type == UDP_GRO)) {
                memcpy(&gso, CMSG_DATA(cmsg), sizeof(gso));
                rx[i].seg_size = gso;
            }
        }
        q->wire->stats.rx_dgrams +=
            (rx[i].seg_size == 0)
                ? 1
                : (rx[i].length + rx[i].seg_size - 1) / rx[i].seg_size;
        q->wire->stats.rx_bytes += rx[i].length;
    }
    return ret;
}

void aptus_sock_rxq_drain(aptus_dgram_rxq_t *q)
{
    aptus_sock_rxq_t *rxq = ucs_derived_of(q, aptus_sock_rxq_t);
    char byte;

    while (recv(rxq->fd, &byte, sizeof(byte), MSG_DONTWAIT | MSG_TRUNC) >= 0) {
    }
}

void aptus_sock_rxq_close(aptus_dgram_rxq_t *q)
{
    aptus_sock_rxq_t *rxq = ucs_derived_of(q, aptus_sock_rxq_t);

    close(rxq->fd);
    ucs_free(rxq);
}
