/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: memory-pool operations shared by every layer.
 */
#ifndef APTUS_MPOOL_H_
#define APTUS_MPOOL_H_

#include <ucs/datastruct/mpool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pools of plain objects: chunks from malloc, no per-object set-up. */
extern ucs_mpool_ops_t aptus_mpool_plain_ops;

/* Bytes of the elements a pool has allocated (they are kept until the pool
 * goes: this is also its peak), chunk padding aside. */
size_t aptus_mpool_bytes(const ucs_mpool_t *mp);

#ifdef __cplusplus
}
#endif

#endif
