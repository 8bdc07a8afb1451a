/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the HCAs this process has open, one context and one protection
 * domain each, shared by every wire on the HCA and by the memory domain.
 * An RDMA access is checked against the protection domain of the QP it
 * arrives on: memory the domain registers is reachable through a
 * connection only when both use the same PD, as on UCX's own ib domain.
 */
#ifndef APTUS_VERBS_HCA_H_
#define APTUS_VERBS_HCA_H_

#include <infiniband/verbs.h>
#include <ucs/datastruct/list.h>
#include <ucs/type/status.h>

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_verbs_hca {
    ucs_list_link_t list;
    char name[64];
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    unsigned refs;
} aptus_verbs_hca_t;

/* The open HCA called hca_name ("mlx5_0"), opened on first use; every get
 * is matched by a put. UCS_ERR_NO_DEVICE: libibverbs has no such HCA. */
ucs_status_t aptus_verbs_hca_get(const char *hca_name,
                                 aptus_verbs_hca_t **hca_p);
void aptus_verbs_hca_put(aptus_verbs_hca_t *hca);

/* The fabric a port is on, as wires and keys name it (aptus_mem_key_t's
 * host_id): every port of one subnet (its GID prefix) reaches every other
 * port's registered memory by RDMA. */
uint64_t aptus_verbs_fabric_id(const union ibv_gid *gid);

/* Register [address, address + length) on the HCA's PD for local and
 * remote access; *token_p: the rkey, with the port's LID above it (for
 * logs: the HCA checks the rkey). */
struct ibv_mr *aptus_verbs_hca_reg(aptus_verbs_hca_t *hca, void *address,
                                   size_t length, uint16_t lid,
                                   uint64_t *token_p);

#ifdef __cplusplus
}
#endif

#endif
