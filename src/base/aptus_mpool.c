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
