/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's devices (network interfaces) and the device
 * address a transport publishes for them.
 */
#ifndef APTUS_SOCK_NETIF_H_
#define APTUS_SOCK_NETIF_H_

#include "wire/wire.h"

#include <uct/base/uct_iface.h>

#include <arpa/inet.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Network interfaces that are up and have an IPv4 or IPv6 address. */
ucs_status_t aptus_sock_query_devices(uct_tl_device_resource_t **devices_p,
                                      unsigned *num_devices_p);

/* Link figures for performance estimates: one-way latency (seconds) and
 * bandwidth (bytes/second); loopback gets memory-copy figures. */
/* Whether dev_name is a loopback device: every peer is on this host. */
int aptus_sock_netif_is_loopback(const char *dev_name);

void aptus_sock_netif_caps(const char *dev_name, double *latency_p,
                           double *bandwidth_p);

/* The link MTU of dev_name in bytes (IP packet), 0 when it cannot be read. */
size_t aptus_sock_netif_mtu(const char *dev_name);

/* Bulk data by zero copy on dev_name (UD-ZCopy into receive queues, a
 * one-sided copy): on loopback the measured figure, well above what
 * copy_bw (active messages, a system call per datagram and a copy on each
 * side) moves; on a link, the link's, as copy_bw. */
double aptus_sock_netif_zcopy_bw(const char *dev_name, double copy_bw);

/* Device address: family, flags, IP address, and for loopback the host and
 * network namespace so that only processes that share them match. */
size_t aptus_sock_dev_addr_len(const aptus_wire_addr_t *local);
void aptus_sock_dev_addr_pack(const aptus_wire_addr_t *local, void *buf);
int aptus_sock_dev_addr_reachable(const aptus_wire_addr_t *local,
                                  const void *remote_dev_addr);

/* The wire address of a remote interface from its device address and its
 * UDP/TCP port (host byte order, as wire_dev.h's ports). A port above
 * 0xffff (a lying peer) becomes port 0, which nobody listens on: datagrams
 * to it are lost, a connection to it is refused. */
void aptus_sock_wire_addr_make(const void *remote_dev_addr, uint32_t port,
                               aptus_wire_addr_t *addr);

/* The same host as addr, another port (the same rule for a bad one). */
void aptus_sock_wire_addr_with_port(const aptus_wire_addr_t *addr,
                                    uint32_t port, aptus_wire_addr_t *out);

/* A non-blocking socket of type (SOCK_DGRAM, SOCK_STREAM) bound to the
 * first address of network interface dev_name, listening when backlog > 0;
 * its address in addr. */
ucs_status_t aptus_sock_open_bound(const char *dev_name, int type, int backlog,
                                   int *fd_p, aptus_wire_addr_t *addr);

/* The port of a sock wire address, in host byte order. */
static inline uint32_t aptus_sock_wire_addr_port(const aptus_wire_addr_t *addr)
{
    uint16_t port;

    memcpy(&port, addr->raw + 2, sizeof(port)); /* aptus_sock_addr_t.port */
    return ntohs(port);
}

#ifdef __cplusplus
}
#endif

#endif
