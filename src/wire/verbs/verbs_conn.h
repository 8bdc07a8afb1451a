/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire, connection part (RC queue pairs, one SRQ).
 *
 * aptus_conn_wire_ops_t (wire/conn.h) over reliable-connected QPs of one
 * HCA port. Connections are set up by datagrams between the wires' setup
 * UD QPs (the listening address); every connection of a wire receives into
 * one shared receive queue of registered buffers, paced by credits the
 * receiver writes into the sender's memory by RDMA, so that a sender never
 * finds the SRQ empty. One-sided operations are RDMA writes and reads with
 * the rkey a peer's registration (aptus_verbs_conn_mem_reg) put in its key.
 * Design and figures: docs/verbs.md.
 *
 * Only ever run against the in-memory verbs double (test/verbs): this
 * code has not run on real InfiniBand or RoCE hardware.
 */
#ifndef APTUS_VERBS_CONN_H_
#define APTUS_VERBS_CONN_H_

#include "wire/conn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open a connection wire on dev_name ("<device>:<port>", port 1 when left
 * out); its listening address is the setup UD QP's. */
ucs_status_t aptus_verbs_conn_open(const char *dev_name,
                                   const aptus_conn_wire_config_t *config,
                                   aptus_conn_wire_t **wire_p);

/* A memory registration that peers reach by RDMA through this wire's
 * connections: *key names it (token: the rkey, host_id: the wire's fabric)
 * and *memh is to be given back to aptus_verbs_conn_mem_dereg. */
ucs_status_t aptus_verbs_conn_mem_reg(aptus_conn_wire_t *wire, void *address,
                                      size_t length, aptus_mem_key_t *key,
                                      void **memh_p);
void aptus_verbs_conn_mem_dereg(aptus_conn_wire_t *wire, void *memh);

/* Tests only: send without looking at credits, to show that the verbs
 * double fails an unpaced sender (RNR) and so that the credit tests prove
 * something. */
void aptus_verbs_conn_set_unpaced(aptus_conn_wire_t *wire, int unpaced);

/* Tests only: read the time (microseconds) from *now_us instead of the
 * clock, so that setup retransmissions happen at the same points of a
 * test every run (NULL: the clock again). */
void aptus_verbs_conn_set_test_clock(aptus_conn_wire_t *wire,
                                     const uint64_t *now_us);

#ifdef __cplusplus
}
#endif

#endif
