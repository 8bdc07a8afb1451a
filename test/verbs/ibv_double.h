/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus tests: an in-memory double of libibverbs.
 *
 * Linked into a test program, it defines the ibv_* entry points the verbs
 * wire uses (and fills the context's ops table for the inline ones:
 * ibv_post_send, ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq,
 * ibv_req_notify_cq), so the program's and the module's calls land here
 * instead of in rdma-core. Queue pairs of one process talk to each other:
 * a send is carried out when it is posted, synchronously.
 *
 * Strict where hardware is: posting in the wrong QP state, a bad lkey or
 * rkey, an access outside a registered region or without the access flag,
 * a full send or receive queue, a UD message above the port MTU, a receive
 * buffer too small, an RC send with no receive posted (RNR) all fail as a
 * real HCA fails them (an error return, or an error completion and the QP
 * in the error state). Nothing here proves anything about real hardware.
 *
 * Single-threaded: the calls take no locks.
 */
#ifndef APTUS_IBV_DOUBLE_H_
#define APTUS_IBV_DOUBLE_H_

#include <infiniband/verbs.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the Global Routing Header at the head of every UD receive. */
#define IBV_DOUBLE_GRH_LEN 40

/* The port MTU of every device (IBV_MTU_4096). */
#define IBV_DOUBLE_PORT_MTU 4096

/* Largest inline send. */
#define IBV_DOUBLE_MAX_INLINE 256

/* Make num_devices devices "dbl0".. appear, one port each (port 1), LIDs
 * from ibv_double_lid(). Until then ibv_get_device_list lists none, so a
 * program that links the double but does not enable it (or UCX's own ib
 * module loaded in it) sees a machine without HCAs, as this one is. */
void ibv_double_enable(unsigned num_devices);

/* Make the devices disappear. Returns how many objects (contexts, PDs,
 * MRs, CQs, QPs, SRQs, AHs, channels) are still alive: leaks. */
unsigned ibv_double_disable(void);

/* Objects alive now. */
unsigned ibv_double_live(void);

/* LID of device index's port 1. */
uint16_t ibv_double_lid(unsigned dev_index);

/* UD faults, decided per datagram by a generator seeded with seed: drop a
 * datagram, or hold it back and deliver it after the sending QP's next
 * one (reorder). Probabilities in [0, 1]; zeroes turn it off. */
void ibv_double_ud_fault(double drop, double reorder, uint64_t seed);

/* Put the QP qp_num of the port with this LID in the error state, as a
 * fatal asynchronous event would (its posted receives complete flushed).
 * 0, or ENOENT when there is no such QP. */
int ibv_double_qp_error(uint16_t lid, uint32_t qp_num);

/* Multicast: a UD send to a LID of 0xc000..0xfffe and QP number 0xffffff
 * reaches every UD QP attached (ibv_attach_mcast) to that group on any
 * device, the sender's own included; the drop fault is decided per
 * receiver, as a switch's replication loses one copy, not all. A QP
 * attached to a group cannot be destroyed (EBUSY), as the kernel refuses
 * it. */
#define IBV_DOUBLE_MCAST_QPN 0xffffffu

/* rdma_cm (test/verbs/rdma_cm_double.c): give device dev_index's port a
 * netdev holding IPv4 address ip (network order; 0 removes it), which
 * rdma_bind_addr finds it by. rdma_join_multicast then answers with a
 * RDMA_CM_EVENT_MULTICAST_JOIN whose address handle names the group's
 * MGID (the IPoIB mapping of the IPv4 group) and a multicast LID, Q_Key
 * RDMA_UDP_QKEY; with a join error set (ibv_double_cm_join_error), a
 * RDMA_CM_EVENT_MULTICAST_ERROR with that status instead. */
void ibv_double_cm_addr(unsigned dev_index, uint32_t ip);
void ibv_double_cm_join_error(int status);

/* Deliver any datagram held back for reordering now. */
void ibv_double_flush(void);

typedef struct ibv_double_stats {
    uint64_t ud_sent;      /* UD sends carried out */
    uint64_t ud_delivered; /* landed in a receive buffer */
    uint64_t ud_no_recv;   /* dropped: no receive posted */
    uint64_t ud_bad_qkey;  /* dropped: Q_Key mismatch */
    uint64_t ud_no_dest;   /* dropped: no such QP in RTR or RTS */
    uint64_t ud_fault_drop;
    uint64_t ud_fault_reorder;
    uint64_t rc_rnr;        /* RC sends that found no receive posted */
    uint64_t rdma_writes;   /* RDMA writes carried out */
    uint64_t rdma_reads;    /* RDMA reads carried out */
    uint64_t rdma_bad_rkey; /* refused: no such rkey in the target's PD,
                               or out of its bounds or rights */
} ibv_double_stats_t;

void ibv_double_get_stats(ibv_double_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif
