/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's IP multicast, for the reliable broadcast.
 *
 * Two UDP sockets per communicator and rank: one bound to the
 * communicator's multicast group and port, joined on one interface, that
 * receives the multicast data; and one bound to the interface's address
 * and a port of its own, that sends the multicast and carries the
 * point-to-point traffic (repairs, ACKs, reports, polls) in both
 * directions. Free of MPI and of UCX: the MPI binding (bcast_mpi.c) opens
 * it, and the engine (bcast_engine.c) moves datagrams through it.
 *
 * The point-to-point path is plain UDP on purpose: the protocol already
 * repairs until every rank acknowledges (a lost repair or ACK is sent
 * again), so it needs no reliable channel under it, and a progress thread
 * that must never call MPI (the application may be MPI_THREAD_SINGLE) can
 * serve repairs while the application computes.
 */
#ifndef APTUS_BCAST_NET_H_
#define APTUS_BCAST_NET_H_

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IPv4 and UDP headers: what a datagram costs of the interface MTU. */
#define APTUS_BC_IP_UDP_HDR 28u

/* A rank's point-to-point address; network byte order. Exchanged with
 * PMPI_Allgather as bytes. */
typedef struct aptus_bc_addr {
    uint32_t ip;
    uint16_t port;
    uint16_t reserved; /* zero */
} aptus_bc_addr_t;

typedef struct aptus_bc_net {
    int mfd;                  /* group member: receives the multicast */
    int ufd;                  /* sends the multicast; point-to-point */
    struct sockaddr_in group; /* the communicator's group and port */
    struct in_addr ifaddr;    /* the interface it joined on */
    aptus_bc_addr_t self;     /* ufd's address */
    unsigned mtu;             /* the interface's MTU */
    uint64_t tx_errors;       /* sends the kernel refused */
} aptus_bc_net_t;

/* The group and port of a communicator key: 239.0.0.0/8 (administratively
 * scoped), second octet never 0 or 128 (those share their Ethernet address
 * with the link-local 224.0.0.x groups that every host receives), port in
 * 10000..59999. Distinct keys rarely collide; a collision is harmless (the
 * key in every header sorts the datagrams), it only costs filtering. */
void aptus_bc_group_of_key(uint64_t key, struct sockaddr_in *group);

/* Which interface to use: spec is an IPv4 address or an interface name
 * (APTUS_BCAST_IF), or NULL/empty for the one the routing table gives
 * the group. Fills *ifaddr and *mtu; on failure returns -errno and writes
 * a message to err. */
int aptus_bc_net_pick_if(const char *spec, const struct sockaddr_in *group,
                         struct in_addr *ifaddr, unsigned *mtu, char *err,
                         size_t errlen);

/* Open both sockets for group on the interface (see pick_if). rcvbuf: the
 * receive buffer to ask for (bytes; the kernel may give less). Returns 0,
 * or -errno with a message in err (nothing stays open). */
int aptus_bc_net_open(aptus_bc_net_t *net, const struct sockaddr_in *group,
                      const char *ifspec, int rcvbuf, char *err, size_t errlen);

void aptus_bc_net_close(aptus_bc_net_t *net);

/* Send one datagram to the group / to one rank. Returns 0 or -errno
 * (counted in tx_errors; a full socket buffer is loss, as on UD). */
int aptus_bc_net_mcast(aptus_bc_net_t *net, const struct iovec *iov,
                       unsigned iovcnt);
int aptus_bc_net_send(aptus_bc_net_t *net, const aptus_bc_addr_t *dst,
                      const struct iovec *iov, unsigned iovcnt);

/* Receive one datagram from fd (mfd or ufd) without waiting: its length,
 * 0 when nothing is waiting, -1 for a datagram that did not fit (dropped,
 * *truncated set). The sender's address in *src when not NULL. */
long aptus_bc_net_recv(int fd, void *buf, size_t len, aptus_bc_addr_t *src,
                       int *truncated);

/* "a.b.c.d:port" */
const char *aptus_bc_addr_str(const aptus_bc_addr_t *addr, char *buf,
                              size_t max);

#ifdef __cplusplus
}
#endif

#endif
