/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire, datagram part (UD queue pairs).
 *
 * Devices are HCA ports as UCX names them ("mlx5_0:1"). A wire is one UD
 * QP on the port: a pool of registered receive buffers, each the GRH's 40
 * bytes plus the port MTU, kept posted; sends copied into registered send
 * buffers, freed as the send CQ reports them; an address handle per peer
 * port, cached. The caller's buffers are not registered, so a datagram is
 * copied once each way, as the kernel copies one on the sock wire.
 *
 * Only ever run against the in-memory verbs double (test/verbs): this
 * code has not run on real InfiniBand or RoCE hardware.
 */
#ifndef APTUS_VERBS_DGRAM_H_
#define APTUS_VERBS_DGRAM_H_

#include "wire/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The smallest datagram the wire takes (IBV_MTU_256). */
#define APTUS_VERBS_DGRAM_MTU_MIN 256

/* Open a UD QP on dev_name ("<device>:<port>"; port 1 when left out).
 * config->mtu 0 takes the port's active MTU; more than it is refused. */
ucs_status_t aptus_verbs_dgram_open(const char *dev_name,
                                    const aptus_dgram_wire_config_t *config,
                                    aptus_dgram_wire_t **wire_p);

/* The HCA's NUMA node (from /sys/class/infiniband/<hca>), -1 if none. */
int aptus_verbs_numa_node(const char *dev_name);

/* The port's active MTU in bytes (what a UD datagram may carry), or 0
 * when dev_name does not open. */
size_t aptus_verbs_dgram_port_mtu(const char *dev_name);

#ifdef __cplusplus
}
#endif

#endif
