/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: memory-pool operations shared by every layer.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_mpool.h"

ucs_mpool_ops_t aptus_mpool_plain_ops = { .chunk_alloc = ucs_mpool_chunk_malloc,
                                          .chunk_release = ucs_mpool_chunk_free,
                                          .obj_init      = NULL,
                                          .obj_cleanup   = NULL,
                                          .obj_str       = NULL };

size_t aptus_mpool_bytes(const ucs_mpool_t *mp)
{
    const ucs_mpool_chunk_t *chunk;
    size_t elems = 0;

    for (chunk = mp->data->chunks; chunk != NULL; chunk = chunk->next) {
        elems += chunk->num_elems;
    }
    return elems * mp->data->elem_size;
}
