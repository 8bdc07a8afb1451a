/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire, datagram part (UDP).
 *
 * Devices are network interfaces, as for UCX's tcp. Datagrams are UDP and
 * really unreliable; the receive socket buffer is sized from the receive
 * queue length so overload drops like a UD QP without posted buffers.
 */
#ifndef APTUS_SOCK_DGRAM_H_
#define APTUS_SOCK_DGRAM_H_

#include "wire/wire.h"
#include "proto/fault.h"

#include <netinet/in.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_SOCK_DGRAM_MTU_MIN 512
/* A UDP datagram carries at most 65507 bytes over IPv4 */
#define APTUS_SOCK_DGRAM_MTU_MAX 65024
/* The automatic datagram size: the link's MTU less the largest IP and UDP
 * headers (IPv6, 48 bytes), so that a datagram is never IP-fragmented (and
 * UDP GSO trains stay legal). The transport caps it at what its largest
 * message needs: on the loopback (64 KiB MTU) one datagram then carries
 * any active message, a 4 KiB one included, without segmentation or
 * reassembly (tag_bw 64 KB: 2 KiB datagrams ~1.0, 16 KiB ~2.7, 32 KiB
 * ~3.5 GB/s on the machine of contrib/bench/results). */
#define APTUS_SOCK_DGRAM_IP_UDP_HDR 48

/* The datagram size for dev_name when the user leaves it to us (the
 * link's, less APTUS_SOCK_DGRAM_IP_UDP_HDR, at most
 * APTUS_SOCK_DGRAM_MTU_MAX); 2048 when the link MTU is unknown. */
size_t aptus_sock_dgram_auto_mtu(const char *dev_name);

/* Layout of an aptus_wire_addr_t on the sock wire. */
typedef struct aptus_sock_addr {
    uint16_t family; /* AF_INET or AF_INET6 */
    uint16_t port;   /* network byte order */
    uint8_t ip[16];  /* 4 bytes used for AF_INET, rest zero */
} aptus_sock_addr_t;

/* Open a UDP socket on the first address of network interface dev_name. */
ucs_status_t aptus_sock_dgram_open(const char *dev_name,
                                   const aptus_dgram_wire_config_t *config,
                                   aptus_dgram_wire_t **wire_p);

/* Set a socket buffer (SO_RCVBUF or SO_SNDBUF) to want bytes, past the
 * system's limit only with force; returns what the kernel granted (the
 * kernel doubles the value it is given), or -1. */
int aptus_sock_set_buf(int fd, int opt, int want, int force);

/* Whether the wire was opened with force_bufs. */
int aptus_sock_dgram_force_bufs(aptus_dgram_wire_t *wire);

/* Effective kernel socket buffer sizes, for statistics and checks. */
void aptus_sock_dgram_bufsizes(aptus_dgram_wire_t *wire, int *rcvbuf_p,
                               int *sndbuf_p);

void aptus_sock_addr_to_wire(const struct sockaddr *sa,
                             aptus_wire_addr_t *addr);
void aptus_sock_addr_from_wire(const aptus_wire_addr_t *addr,
                               struct sockaddr_storage *ss, socklen_t *len_p);
const char *aptus_sock_addr_str(const aptus_wire_addr_t *addr, char *buf,
                                size_t max);

/* Receive queues (sock_rxq.c). */
ucs_status_t aptus_sock_rxq_open(aptus_dgram_wire_t *wire, unsigned depth,
                                 aptus_dgram_rxq_t **rxq_p);
unsigned aptus_sock_rxq_recv(aptus_dgram_rxq_t *rxq, aptus_dgram_rxv_t *rx,
                             unsigned count);
void aptus_sock_rxq_drain(aptus_dgram_rxq_t *rxq);
void aptus_sock_rxq_close(aptus_dgram_rxq_t *rxq);

#ifdef __cplusplus
}
#endif

#endif
