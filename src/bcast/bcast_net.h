/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the reliable broadcast's multicast, over one of two wires.
 *
 * sock: two UDP sockets per communicator and rank: one bound to the
 * communicator's IP multicast group and port, joined on one interface,
 * that receives the multicast data; and one bound to the interface's
 * address and a port of its own, that sends the multicast and carries the
 * point-to-point traffic (repairs, ACKs, reports, polls) in both
 * directions.
 *
 * verbs (bcast_net_verbs.c): one UD queue pair on the HCA port behind the
 * chosen interface (IPoIB or RoCE), attached to the InfiniBand multicast
 * group that librdmacm joins for the communicator's IP group (the subnet
 * manager's join, or IGMP on RoCE); the same QP sends to the group and to
 * each rank through an address handle per rank. Its completion channel is
 * what a wait sleeps on.
 *
 * Free of MPI and of UCX: the MPI binding (bcast_mpi.c) opens it, and the
 * engine (bcast_engine.c) moves datagrams through it. The point-to-point
 * path is an unreliable datagram on purpose: the protocol already repairs
 * until every rank acknowledges (a lost repair or ACK is sent again), so it
 * needs no reliable channel under it, and a progress thread that must
 * never call MPI (the application may be MPI_THREAD_SINGLE) can serve
 * repairs while the application computes.
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

/* Which wire carries the broadcast (APTUS_BCAST_WIRE). */
typedef enum {
    APTUS_BC_WIRE_AUTO = 0, /* verbs where the interface is an HCA's */
    APTUS_BC_WIRE_SOCK,
    APTUS_BC_WIRE_VERBS
} aptus_bc_wire_t;

/* A rank's point-to-point address, exchanged with PMPI_Allgather as bytes.
 * sock: ip and port (network byte order); verbs: the port's LID, the UD
 * QP's number and the port's GID. Fields of the other wire are zero. */
typedef struct aptus_bc_addr {
    uint32_t ip;
    uint16_t port;
    uint16_t lid;
    uint32_t qpn;
    uint8_t gid[16];
} aptus_bc_addr_t;

struct aptus_bc_verbs;

typedef struct aptus_bc_net {
    aptus_bc_wire_t wire;     /* SOCK or VERBS once open */
    int mfd;                  /* sock: the group member; verbs: the
                                 completion channel (poll it) */
    int ufd;                  /* sock: sends the multicast, point-to-point;
                                 verbs: -1 */
    struct sockaddr_in group; /* the communicator's group and port */
    struct in_addr ifaddr;    /* the interface it joined on */
    aptus_bc_addr_t self;     /* my point-to-point address */
    unsigned room;            /* bytes of one datagram's payload */
    char where[40];           /* "10.0.0.1" or "mlx5_0:1", for the log */
    aptus_bc_addr_t *peers;   /* every rank's (aptus_bc_net_connect) */
    uint32_t npeers;
    struct aptus_bc_verbs *verbs; /* the verbs wire's state */
    uint64_t tx_errors;           /* sends refused (a full queue is loss,
                                     as on UD) */
    uint64_t rx_errors;           /* receive completions in error */
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

/* Open the multicast for group on the interface (see pick_if) over wire:
 * AUTO tries verbs and takes sock where the interface has no HCA behind
 * it (why in note, when not NULL). rcvbuf: the socket receive buffer to
 * ask for (bytes; the kernel may give less). Returns 0, or -errno with a
 * message in err (nothing stays open). */
int aptus_bc_net_open(aptus_bc_net_t *net, aptus_bc_wire_t wire,
                      const struct sockaddr_in *group, const char *ifspec,
                      int rcvbuf, char *err, size_t errlen, char *note,
                      size_t notelen);

/* The wires themselves, on an interface already picked (mtu: its MTU). */
int aptus_bc_net_open_sock(aptus_bc_net_t *net, const struct sockaddr_in *group,
                           struct in_addr ifaddr, unsigned mtu, int rcvbuf,
                           char *err, size_t errlen);
int aptus_bc_net_open_verbs(aptus_bc_net_t *net,
                            const struct sockaddr_in *group,
                            struct in_addr ifaddr, unsigned mtu, char *err,
                            size_t errlen);

/* Whether this build has the verbs wire. */
int aptus_bc_net_have_verbs(void);

/* Learn every rank's address (n of them, mine included): after this,
 * aptus_bc_net_send reaches rank r. 0 or -errno. */
int aptus_bc_net_connect(aptus_bc_net_t *net, const aptus_bc_addr_t *peers,
                         uint32_t n);

void aptus_bc_net_close(aptus_bc_net_t *net);

/* Send one datagram to the group / to one rank. Returns 0 or -errno
 * (counted in tx_errors). */
int aptus_bc_net_mcast(aptus_bc_net_t *net, const struct iovec *iov,
                       unsigned iovcnt);
int aptus_bc_net_send(aptus_bc_net_t *net, uint32_t rank,
                      const struct iovec *iov, unsigned iovcnt);

/* Receive one datagram, multicast or point-to-point, without waiting: its
 * length, 0 when nothing is waiting, -1 for a datagram that did not fit
 * (dropped, *truncated set). After a 0, mfd and ufd become readable when
 * the next one arrives (verbs: the completion queue is armed). */
long aptus_bc_net_recv(aptus_bc_net_t *net, void *buf, size_t len,
                       int *truncated);

/* "a.b.c.d:port", or "lid 0x1a qp 0x123" */
const char *aptus_bc_addr_str(const aptus_bc_addr_t *addr, char *buf,
                              size_t max);

/* The verbs wire's side of the dispatch (bcast_net_verbs.c). */
int aptus_bc_verbs_connect(aptus_bc_net_t *net);
int aptus_bc_verbs_mcast(aptus_bc_net_t *net, const struct iovec *iov,
                         unsigned iovcnt);
int aptus_bc_verbs_send(aptus_bc_net_t *net, uint32_t rank,
                        const struct iovec *iov, unsigned iovcnt);
long aptus_bc_verbs_recv(aptus_bc_net_t *net, void *buf, size_t len,
                         int *truncated);
void aptus_bc_verbs_close(aptus_bc_net_t *net);

#ifdef __cplusplus
}
#endif

#endif
