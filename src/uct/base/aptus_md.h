/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the "aptus" UCT component and its memory domain.
 *
 * One component, one memory domain, several transports (ud_sr, later rc_sr,
 * rc_fp and aptus), all registered when the module is loaded into a process.
 *
 * Registration records a region [address, address + length) under a random
 * 64-bit token (cached with ucs_rcache unless turned off). The packed remote
 * key carries the region's bounds, the token and the owner's process and
 * host: a peer may only ask for, or reach, memory inside a region its owner
 * registered and whose key it was given.
 */
#ifndef UCT_APTUS_MD_H_
#define UCT_APTUS_MD_H_

#include "channel/chan.h"
#include "wire/wire_dev.h"

#include <uct/base/uct_md.h>
#include <ucs/datastruct/khash.h>
#include <ucs/memory/rcache.h>
#include <ucs/type/spinlock.h>

#define UCT_APTUS_COMPONENT_NAME "aptus"
/* Two memory domains: "aptus" keys are served by their owner (UD-ZCopy);
 * "aptus_rc" keys name memory that peers reach one-sided: directly from
 * the owner's host, over the connection from another (the wire decides
 * per peer; keys unpack anywhere). */
#define UCT_APTUS_MD_NAME    "aptus"
#define UCT_APTUS_RC_MD_NAME "aptus_rc"
/* "aptus" over the verbs wire: HCA ports for devices, listed only where
 * libibverbs finds an active one (built where configure found rdma-core). */
#define UCT_APTUS_VERBS_MD_NAME "aptus_verbs"
/* "aptus_rc" over the verbs wire: its registrations are the HCA's (an rkey
 * of the protection domain the connections' QPs are in). */
#define UCT_APTUS_VERBS_RC_MD_NAME "aptus_verbs_rc"

#define UCT_APTUS_RKEY_FLAG_SAME_HOST 1u
/* wire_token and wire_host_id name the region for connections */
#define UCT_APTUS_RKEY_FLAG_WIRE 2u

typedef struct uct_aptus_md_config {
    uct_md_config_t super;
    char *stats; /* where interfaces print statistics */
    ucs_ternary_auto_value_t rcache_enable;
    uct_md_rcache_config_t rcache;
    int numa; /* place memory on the device's NUMA node */
} uct_aptus_md_config_t;

/* A registered region (also an rcache region when the cache is on). */
typedef struct uct_aptus_region {
    ucs_rcache_region_t super; /* only with the cache */
    uint64_t address;
    uint64_t length;
    uint64_t token;        /* the domain's own (0: it keeps none) */
    uint64_t wire_token;   /* the wire's registration's (an rkey) */
    uint64_t wire_host_id; /* the host or fabric the wire's key names */
    void *wire_memh;       /* the wire's registration (mem_reg), or NULL */
    int cached;
} uct_aptus_region_t;

KHASH_MAP_INIT_INT64(uct_aptus_tokens, uct_aptus_region_t *)

typedef struct uct_aptus_md {
    uct_md_t super;
    char *stats;
    ucs_rcache_t *rcache;             /* NULL: no registration cache */
    ucs_spinlock_t lock;              /* protects tokens and counters */
    khash_t(uct_aptus_tokens) tokens; /* live registrations */
    uint64_t reg_calls;               /* mem_reg requests */
    uint64_t registrations;           /* regions actually created */
    int one_sided;                    /* the "aptus_rc" domain */
    int numa;                         /* UCX_APTUS_NUMA */
    const aptus_wire_dev_ops_t *wire; /* the wire its transports use */
    void *wire_mem; /* the wire's registrar (mem_open), or NULL */
    int use_tokens; /* registrations get a token of the domain's */
    int conn_keys;  /* connections take this domain's keys */
} uct_aptus_md_t;

/* The packed remote key. */
typedef struct uct_aptus_rkey {
    uint64_t address; /* region start */
    uint64_t length;
    uint64_t token;
    uint64_t host_id;      /* aptus_conn_reach_id() of the owner: host and PID
                              namespace */
    uint32_t pid;          /* the owner process */
    uint32_t flags;        /* UCT_APTUS_RKEY_FLAG_* */
    uint64_t wire_token;   /* with FLAG_WIRE: the key for connections (the */
    uint64_t wire_host_id; /* wire's registration: verbs' rkey, fabric) */
} UCS_S_PACKED uct_aptus_rkey_t;

extern uct_component_t uct_aptus_component;

/* The wire under a transport opened on this domain. */
static inline const aptus_wire_dev_ops_t *uct_aptus_md_wire(uct_md_h md)
{
    return ucs_derived_of(md, uct_aptus_md_t)->wire;
}

/* Whether a transport belongs on this domain (one_sided: rc_sr, rc_fp). */
static inline int uct_aptus_md_is_one_sided(uct_md_h md)
{
    return ucs_derived_of(md, uct_aptus_md_t)->one_sided;
}

/* Whether the one-sided operations of connections on this domain's wire
 * take its keys (aptus_wire_dev_ops_t::conn_md_keys, or the wire registers
 * for the domain): transports that need that list no device otherwise. */
static inline int uct_aptus_md_conn_keys(uct_md_h md)
{
    return ucs_derived_of(md, uct_aptus_md_t)->conn_keys;
}

/* The NUMA node an interface on dev_name places its receive pools,
 * fast-path blocks and UD-ZCopy contexts on: the device's, or -1 (none
 * known, or UCX_APTUS_NUMA=n). */
static inline int uct_aptus_md_numa_node(uct_md_h md, const char *dev_name)
{
    const uct_aptus_md_t *amd = ucs_derived_of(md, uct_aptus_md_t);

    if (!amd->numa || (amd->wire->numa_node == NULL)) {
        return -1;
    }
    return amd->wire->numa_node(dev_name);
}

/* Whether [address, address + length) lies inside a live registration with
 * this token (for requests that arrive from the network). */
int uct_aptus_md_check_region(uct_aptus_md_t *md, uint64_t token,
                              uint64_t address, uint64_t length);

/* The same with the domain as a callback's argument (what UD-ZCopy and the
 * sock wire's one-sided operations over a connection take). */
int uct_aptus_md_check_region_cb(void *md, uint64_t token, uint64_t address,
                                 uint64_t length);

/* Whether [address, address + length) lies inside the unpacked key's
 * region (checked by the initiator before it asks). */
static inline int uct_aptus_rkey_covers(const uct_aptus_rkey_t *rkey,
                                        uint64_t address, uint64_t length)
{
    return (address >= rkey->address) && (length <= rkey->length) &&
           (address - rkey->address <= rkey->length - length);
}

/* The remote key as the channels take it: the region for one-sided
 * operations over connections (the wire's key where its registrar made
 * one), the owner's token for UD-ZCopy. */
static inline void uct_aptus_rkey_to_chan_key(const uct_aptus_rkey_t *rkey,
                                              aptus_chan_key_t *key)
{
    int wire = !!(rkey->flags & UCT_APTUS_RKEY_FLAG_WIRE);

    key->mem.address = rkey->address;
    key->mem.length  = rkey->length;
    key->mem.host_id = wire ? rkey->wire_host_id : rkey->host_id;
    key->mem.token   = wire ? rkey->wire_token : rkey->token;
    key->mem.pid     = rkey->pid;
    key->token       = rkey->token;
}

#endif
