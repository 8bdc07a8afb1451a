/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's datagram socket, inside: its state, shared by
 * sock_dgram.c (sending, the fault injector, plain receives) and
 * sock_dgram_gro.c (trains received as one, UDP GRO).
 */
#ifndef APTUS_SOCK_DGRAM_INT_H_
#define APTUS_SOCK_DGRAM_INT_H_

#include "sock_dgram.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

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
/* Lone datagrams in a row that end train mode (see aptus_sock_gro_t). */
#define APTUS_SOCK_LONE_RUN 4

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
 * Once a train came, the next call reads one message into the caller's
 * buffers laid end to end (train_mode): a train of datagrams of the
 * buffers' size lands one datagram a buffer, with no copy, until
 * APTUS_SOCK_LONE_RUN lone datagrams in a row turn batches of slots back
 * on (one lone datagram, an ACK or a small message between a message's
 * trains, does not). The staging areas are malloc'ed once and touched
 * only by trains. */
typedef struct aptus_sock_gro {
    size_t stride; /* per slot: the mtu bytes of its head, then the rest */
    uint8_t *area;
    struct iovec iov[APTUS_SOCK_BATCH][2];
    char control[APTUS_SOCK_BATCH][CMSG_SPACE(sizeof(int))];
    aptus_sock_gro_rest_t rest[APTUS_SOCK_BATCH];
    unsigned rest_first, rest_count;
    int train_mode;
    unsigned lone_run; /* lone datagrams in a row, in train mode */
    struct msghdr train_msg;
    struct iovec train_iov[APTUS_SOCK_BATCH + 1];
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

/* UDP GRO on sock's socket where its MTU is an Ethernet frame's: the
 * staging areas and headers (sock->gro; left NULL where the socket does
 * not take GRO). */
ucs_status_t aptus_sock_gro_open(aptus_sock_dgram_t *sock, const char *dev_name,
                                 int numa_node);
void aptus_sock_gro_close(aptus_sock_dgram_t *sock);

/* Hand out the rest of a train into rx[0..count); how many were filled. */
unsigned aptus_sock_gro_rest(aptus_sock_dgram_t *sock, aptus_dgram_rx_t *rx,
                             unsigned count);

/* A receive in train mode (sock->gro->train_mode). */
unsigned aptus_sock_dgram_recv_train(aptus_sock_dgram_t *sock,
                                     aptus_dgram_rx_t *rx, unsigned count);

/* What recvmmsg filled from slot first on is not only lone datagrams of
 * at most the MTU (got: slots filled). */
unsigned aptus_sock_dgram_recv_odd(aptus_sock_dgram_t *sock,
                                   aptus_dgram_rx_t *rx, unsigned count,
                                   unsigned first, unsigned got);

#endif
