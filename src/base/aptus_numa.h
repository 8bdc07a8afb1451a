/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: memory placed on the NUMA node of the device it serves.
 *
 * Receive pools, fast-path blocks and UD-ZCopy contexts are written by the
 * device (the NIC's DMA, the HCA) and read by the CPU that polls it: on a
 * machine with several nodes they belong on the device's node, not on the
 * node of whichever thread touched them first. The node comes from sysfs
 * (the device's numa_node); the pages are bound with mbind(MPOL_PREFERRED)
 * before they are touched, so a full node falls back to another rather
 * than failing. A device without a node (lo, a virtual NIC, one-node
 * machines) places nothing.
 */
#ifndef APTUS_NUMA_H_
#define APTUS_NUMA_H_

#include <ucs/datastruct/mpool.h>
#include <ucs/type/status.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The NUMA node of a device under /sys/class/<sysfs_class> ("net" for a
 * network interface, "infiniband" for an HCA), or -1 when it has none, the
 * file is missing or unreadable, or the name is not a plain device name. */
int aptus_numa_node_of(const char *sysfs_class, const char *dev_name);

/* Bind the pages of [addr, addr + length), page-aligned, to node (a no-op
 * for node < 0). UCS_ERR_UNSUPPORTED where the build has no libnuma or the
 * kernel no NUMA; UCS_ERR_INVALID_PARAM for a node that does not exist. */
ucs_status_t aptus_numa_place(void *addr, size_t length, int node);

/* Page-aligned memory of at least *length_p bytes (rounded up to pages),
 * bound to node when node >= 0 (a failed binding is not an error: the
 * memory is as good as any, just not placed). Released with ucs_free. */
void *aptus_numa_alloc(size_t *length_p, int node, const char *name);

/* ucs_malloc when node < 0, else aptus_numa_alloc: freed with ucs_free. */
void *aptus_numa_malloc(size_t length, int node, const char *name);

/* Pools whose chunks go on a node: the pool's private area starts with the
 * node (an int; aptus_numa_mpool_priv_len bytes). */
extern ucs_mpool_ops_t aptus_numa_mpool_ops;
#define APTUS_NUMA_MPOOL_PRIV_LEN sizeof(int)
static inline void aptus_numa_mpool_set_node(ucs_mpool_t *mp, int node)
{
    *(int *)ucs_mpool_priv(mp) = node;
}

/* A pool chunk on node: for chunk_alloc operations of pools whose private
 * area holds something else. */
ucs_status_t aptus_numa_chunk_alloc(int node, size_t *size_p, void **chunk_p);
void aptus_numa_chunk_release(ucs_mpool_t *mp, void *chunk);

/* Tests: where sysfs is (NULL: /sys), and a function called instead of
 * mbind (NULL: mbind). */
typedef int (*aptus_numa_bind_fn_t)(void *addr, size_t length, int node);
void aptus_numa_set_sysfs_root(const char *root);
void aptus_numa_set_bind(aptus_numa_bind_fn_t bind);

#ifdef __cplusplus
}
#endif

#endif
