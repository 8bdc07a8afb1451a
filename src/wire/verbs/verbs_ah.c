/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's address handle cache (see verbs_ah.h): open
 * addressing with linear probing, grown to keep it at most half full.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_ah.h"
#include "verbs_addr.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>

#include <string.h>

#define APTUS_VERBS_AH_CACHE_MIN 16

void aptus_verbs_ah_cache_init(aptus_verbs_ah_cache_t *cache, struct ibv_pd *pd,
                               uint8_t port)
{
    memset(cache, 0, sizeof(*cache));
    cache->pd   = pd;
    cache->port = port;
}

static unsigned aptus_verbs_ah_hash(const aptus_wire_addr_t *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    unsigned i;

    for (i = 0; i < sizeof(key->raw); ++i) {
        h = (h ^ key->raw[i]) * 16777619u;
    }
    return h;
}

static aptus_verbs_ah_entry_t *
aptus_verbs_ah_slot(aptus_verbs_ah_entry_t *entries, unsigned capacity,
                    const aptus_wire_addr_t *key)
{
    unsigned i = aptus_verbs_ah_hash(key) & (capacity - 1);

    while ((entries[i].ah != NULL) &&
           memcmp(&entries[i].key, key, sizeof(*key))) {
        i = (i + 1) & (capacity - 1);
    }
    return &entries[i];
}

static ucs_status_t aptus_verbs_ah_grow(aptus_verbs_ah_cache_t *cache)
{
    unsigned capacity =
        cache->capacity ? cache->capacity * 2 : APTUS_VERBS_AH_CACHE_MIN;
    aptus_verbs_ah_entry_t *entries, *e;
    unsigned i;

    entries = ucs_calloc(capacity, sizeof(*entries), "aptus_verbs_ahs");
    if (entries == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < cache->capacity; ++i) {
        if (cache->entries[i].ah != NULL) {
            e  = aptus_verbs_ah_slot(entries, capacity, &cache->entries[i].key);
            *e = cache->entries[i];
        }
    }
    ucs_free(cache->entries);
    cache->entries  = entries;
    cache->capacity = capacity;
    return UCS_OK;
}

struct ibv_ah *aptus_verbs_ah_get(aptus_verbs_ah_cache_t *cache,
                                  const aptus_wire_addr_t *dst)
{
    aptus_verbs_addr_t *k;
    aptus_wire_addr_t key = *dst;
    struct ibv_ah_attr attr;
    aptus_verbs_ah_entry_t *e;

    k = (aptus_verbs_addr_t *)key.raw;
    memset(k->qpn, 0, sizeof(k->qpn));
    if (cache->capacity > 0) {
        e = aptus_verbs_ah_slot(cache->entries, cache->capacity, &key);
        if (e->ah != NULL) {
            return e->ah;
        }
    }
    if (((cache->count + 1) * 2 > cache->capacity) &&
        (aptus_verbs_ah_grow(cache) != UCS_OK)) {
        return NULL;
    }

    aptus_verbs_addr_ah_attr(dst, cache->port, &attr);
    e     = aptus_verbs_ah_slot(cache->entries, cache->capacity, &key);
    e->ah = ibv_create_ah(cache->pd, &attr);
    if (e->ah == NULL) {
        ucs_debug("verbs wire: ibv_create_ah failed: %m");
        return NULL;
    }
    e->key = key;
    ++cache->count;
    return e->ah;
}

void aptus_verbs_ah_cache_cleanup(aptus_verbs_ah_cache_t *cache)
{
    unsigned i;

    for (i = 0; i < cache->capacity; ++i) {
        if ((cache->entries[i].ah != NULL) &&
            ibv_destroy_ah(cache->entries[i].ah)) {
            ucs_warn("verbs wire: ibv_destroy_ah failed");
        }
    }
    ucs_free(cache->entries);
    cache->entries  = NULL;
    cache->capacity = 0;
    cache->count    = 0;
}
