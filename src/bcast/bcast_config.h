/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the broadcast library's settings, from the environment.
 *
 * APTUS_BCAST              y (default) / n: serve MPI_Bcast by multicast
 * APTUS_BCAST_IF           interface name or IPv4 address (default: the
 *                          one the routing table picks for the group)
 * APTUS_BCAST_WIRE         auto (default) / sock / verbs: the wire under
 *                          the multicast; auto takes verbs where the
 *                          interface is an HCA's (IPoIB, RoCE) and the
 *                          build has it, sock otherwise
 * APTUS_BCAST_GROUP        a.b.c.d:port: one fixed group for every
 *                          communicator (default: derived from a random
 *                          key per communicator)
 * APTUS_BCAST_WINDOW       message slots per communicator (64)
 * APTUS_BCAST_ACK_EVERY    a leaf acknowledges every M messages (8)
 * APTUS_BCAST_GROUP_SIZE   ranks per co-root's group (0: sqrt(N*M))
 * APTUS_BCAST_FRAG_SIZE    payload bytes per datagram (0: from the
 *                          interface MTU, at most 8192)
 * APTUS_BCAST_MAX_MSG      larger broadcasts use PMPI_Bcast (32768)
 * APTUS_BCAST_ACK_DELAY_US a lazy ACK waits at most this long (200)
 * APTUS_BCAST_RTO_MIN_US, APTUS_BCAST_RTO_MAX_US  repair timeout bounds
 *                          (200, 100000)
 * APTUS_BCAST_PEER_TIMEOUT seconds a rank may leave repairs unanswered
 *                          before the broadcast fails (30; 0: never)
 * APTUS_BCAST_RCVBUF       socket receive buffer, bytes (4194304)
 * APTUS_BCAST_STATS        at exit, one line per communicator: "stderr",
 *                          or a file name (%p: pid, %r: world rank)
 * APTUS_BCAST_VERBOSE      y: one line per communicator set-up
 *
 * A malformed value is reported once, naming the variable, and the
 * library then leaves every broadcast to the MPI library.
 */
#ifndef APTUS_BCAST_CONFIG_H_
#define APTUS_BCAST_CONFIG_H_

#include "bcast_net.h"
#include "proto/mcast_window.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_bc_config {
    int enable;
    int verbose;
    aptus_mc_config_t mc;     /* frag_size 0: from the MTU */
    uint64_t peer_timeout_us; /* 0: never */
    int rcvbuf;
    char ifspec[64];
    aptus_bc_wire_t wire;
    int fixed_group;
    struct sockaddr_in group;
    char stats[256];
} aptus_bc_config_t;

/* Read the environment (getenv: env may be NULL). Returns 0, or -1 with
 * a message naming the variable in err. */
int aptus_bc_config_read(aptus_bc_config_t *cfg,
                         const char *(*env)(const char *name), char *err,
                         size_t errlen);

/* The MPI families whose ABIs differ: the library is built once for each,
 * and one built for the other passes handles the running MPI cannot read
 * (every rank aborted with "Invalid datatype"). */
typedef enum aptus_bc_mpi {
    APTUS_BC_MPI_OPEN_MPI,
    APTUS_BC_MPI_MPICH /* MPICH and those built on it, which share its ABI */
} aptus_bc_mpi_t;

/* The family of a library version string (MPI_Get_library_version). */
aptus_bc_mpi_t aptus_bc_mpi_family(const char *version);

/* The family's name, and the library built for it. */
const char *aptus_bc_mpi_name(aptus_bc_mpi_t mpi);
const char *aptus_bc_mpi_library(aptus_bc_mpi_t mpi);

#ifdef __cplusplus
}
#endif

#endif
