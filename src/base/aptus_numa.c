/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: memory placed on the NUMA node of the device it serves.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_numa.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef APTUS_HAVE_NUMA
#include <numaif.h>
#endif

/* nodes a binding may name (the kernel's own limit is larger; a sysfs
 * value beyond this is taken as no node) */
#define APTUS_NUMA_MAX_NODES 1024

static const char *aptus_numa_sysfs = "/sys";
static aptus_numa_bind_fn_t aptus_numa_bind_hook;

void aptus_numa_set_sysfs_root(const char *root)
{
    aptus_numa_sysfs = (root != NULL) ? root : "/sys";
}

void aptus_numa_set_bind(aptus_numa_bind_fn_t bind)
{
    aptus_numa_bind_hook = bind;
}

int aptus_numa_node_of(const char *sysfs_class, const char *dev_name)
{
    char path[PATH_MAX], buf[32], *end;
    size_t len;
    long node;
    FILE *f;

    /* a device name is one path element: nothing climbs out of sysfs */
    if ((dev_name == NULL) || (dev_name[0] == '\0') || (dev_name[0] == '.') ||
        (strchr(dev_name, '/') != NULL)) {
        return -1;
    }
    if (snprintf(path, sizeof(path), "%s/class/%s/%s/device/numa_node",
                 aptus_numa_sysfs, sysfs_class,
                 dev_name) >= (int)sizeof(path)) {
        return -1;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        return -1; /* a virtual device, or no NUMA in the kernel */
    }
    len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    errno    = 0;
    node     = strtol(buf, &end, 10);
    if ((errno != 0) || (end == buf) || ((*end != '\0') && (*end != '\n')) ||
        (node < 0) || (node >= APTUS_NUMA_MAX_NODES)) {
        return -1;
    }
    return (int)node;
}

static int aptus_numa_mbind(void *addr, size_t length, int node)
{
#ifdef APTUS_HAVE_NUMA
    unsigned long mask[APTUS_NUMA_MAX_NODES / (8 * sizeof(unsigned long))];

    memset(mask, 0, sizeof(mask));
    mask[node / (8 * sizeof(unsigned long))] =
        1ul << (node % (8 * sizeof(unsigned long)));
    /* preferred, not bound: a full node lends pages rather than failing;
     * moved: pages a previous user of this memory touched follow */
    return (int)mbind(addr, length, MPOL_PREFERRED, mask, APTUS_NUMA_MAX_NODES,
                      MPOL_MF_MOVE);
#else
    errno = ENOSYS;
    return -1;
#endif
}

ucs_status_t aptus_numa_place(void *addr, size_t length, int node)
{
    size_t page = ucs_get_page_size();
    uintptr_t start, end;
    int ret;

    if (node < 0) {
        return UCS_OK;
    }
    if (node >= APTUS_NUMA_MAX_NODES) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* whole pages only: a page shared with other data is left alone */
    start = ucs_align_up((uintptr_t)addr, page);
    end   = ucs_align_down((uintptr_t)addr + length, page);
    if (end <= start) {
        return UCS_OK;
    }
    ret = (aptus_numa_bind_hook != NULL)
              ? aptus_numa_bind_hook((void *)start, end - start, node)
              : aptus_numa_mbind((void *)start, end - start, node);
    if (ret == 0) {
        return UCS_OK;
    }
    return ((errno == ENOSYS) || (errno == EPERM)) ? UCS_ERR_UNSUPPORTED
                                                   : UCS_ERR_INVALID_PARAM;
}

void *aptus_numa_alloc(size_t *length_p, int node, const char *name)
{
    size_t page   = ucs_get_page_size();
    size_t length = ucs_align_up(*length_p, page);
    ucs_status_t status;
    void *mem;

    if (ucs_posix_memalign(&mem, page, length, name) != 0) {
        return NULL;
    }
    status = aptus_numa_place(mem, length, node);
    if (status != UCS_OK) {
        /* as good as any memory: only its place is not the device's */
        ucs_debug("%s: %zu bytes not placed on NUMA node %d: %s", name, length,
                  node, ucs_status_string(status));
    }
    *length_p = length;
    return mem;
}

void *aptus_numa_malloc(size_t length, int node, const char *name)
{
    return (node < 0) ? ucs_malloc(length, name)
                      : aptus_numa_alloc(&length, node, name);
}

ucs_status_t aptus_numa_chunk_alloc(int node, size_t *size_p, void **chunk_p)
{
    if (node < 0) {
        *chunk_p = ucs_malloc(*size_p, "aptus_mpool_chunk");
    } else {
        *chunk_p = aptus_numa_alloc(size_p, node, "aptus_mpool_chunk");
    }
    return (*chunk_p == NULL) ? UCS_ERR_NO_MEMORY : UCS_OK;
}

void aptus_numa_chunk_release(ucs_mpool_t *mp, void *chunk)
{
    ucs_free(chunk);
}

static ucs_status_t aptus_numa_mpool_chunk_alloc(ucs_mpool_t *mp,
                                                 size_t *size_p, void **chunk_p)
{
    return aptus_numa_chunk_alloc(*(int *)ucs_mpool_priv(mp), size_p, chunk_p);
}

ucs_mpool_ops_t aptus_numa_mpool_ops = { .chunk_alloc =
                                             aptus_numa_mpool_chunk_alloc,
                                         .chunk_release =
                                             aptus_numa_chunk_release,
                                         .obj_init    = NULL,
                                         .obj_cleanup = NULL,
                                         .obj_str     = NULL };
