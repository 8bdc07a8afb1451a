/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's address handles, one per peer port, cached:
 * creating one is a system call on real hardware, and a UD send needs one
 * every time. Keyed by the address less its QP number, so all the QPs of
 * a peer port share one.
 */
#ifndef APTUS_VERBS_AH_H_
#define APTUS_VERBS_AH_H_

#include "wire/wire.h"

#include <infiniband/verbs.h>
#include <ucs/type/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_verbs_ah_entry {
    aptus_wire_addr_t key; /* the address, QP number zeroed */
    struct ibv_ah *ah;     /* NULL: a free entry */
} aptus_verbs_ah_entry_t;

typedef struct aptus_verbs_ah_cache {
    struct ibv_pd *pd;
    uint8_t port;
    unsigned capacity; /* a power of two; at most half full */
    unsigned count;
    aptus_verbs_ah_entry_t *entries;
} aptus_verbs_ah_cache_t;

void aptus_verbs_ah_cache_init(aptus_verbs_ah_cache_t *cache, struct ibv_pd *pd,
                               uint8_t port);

/* The address handle to dst's port, created on first use; NULL when the
 * HCA refuses one. */
struct ibv_ah *aptus_verbs_ah_get(aptus_verbs_ah_cache_t *cache,
                                  const aptus_wire_addr_t *dst);

/* Destroy them all (before the PD goes). */
void aptus_verbs_ah_cache_cleanup(aptus_verbs_ah_cache_t *cache);

#ifdef __cplusplus
}
#endif

#endif
