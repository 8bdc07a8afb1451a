/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the memory domain (see aptus_md.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_md.h"
#include "proto/random.h"
#include "wire/conn.h"

#include <ucm/api/ucm.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <ucs/sys/uid.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static ucs_config_field_t uct_aptus_md_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_aptus_md_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_md_config_table) },

    { "STATS", "",
      "Print UCX-Aptus statistics when an interface closes: empty (off), or a\n"
      "comma-separated list of 'stdout', 'stderr' and file names in which %h\n"
      "and %p become the host name and the process id (files are appended\n"
      "to; a name ending in .csv gets CSV rows: host, pid, record, object,\n"
      "counter, value; contrib/aptus_stats_plot.py draws them).",
      ucs_offsetof(uct_aptus_md_config_t, stats), UCS_CONFIG_TYPE_STRING },

    { "RCACHE", "try",
      "Cache memory registrations (ucs_rcache): yes, no, or try (use it when\n"
      "memory events are available).",
      ucs_offsetof(uct_aptus_md_config_t, rcache_enable),
      UCS_CONFIG_TYPE_TERNARY },

    { "", "", NULL, ucs_offsetof(uct_aptus_md_config_t, rcache),
      UCS_CONFIG_TYPE_TABLE(uct_md_config_rcache_table) },

    { "NUMA", "y",
      "Place receive pools, fast-path blocks and UD-ZCopy contexts on the "
      "NUMA\n"
      "node of the device they serve (from sysfs; nothing is placed for a\n"
      "device without a node, such as lo).",
      ucs_offsetof(uct_aptus_md_config_t, numa), UCS_CONFIG_TYPE_BOOL },

    { NULL }
};

/* 64 bits from the OS CSPRNG (0: none to give): what a remote key's
 * holder must show to have the region served over UD. */
static uint64_t uct_aptus_md_new_token(void)
{
    return aptus_random64();
}

/* Record a region under a fresh token. */
/* The domain's token: random, unique among its registrations. */
static ucs_status_t uct_aptus_md_token_add(uct_aptus_md_t *md,
                                           uct_aptus_region_t *region)
{
    khiter_t iter;
    int ret;

    ucs_spin_lock(&md->lock);
    do {
        region->token = uct_aptus_md_new_token();
        if (region->token == 0) {
            ucs_spin_unlock(&md->lock);
            ucs_error("aptus md: the OS gives no randomness for a "
                      "registration token (getrandom: %m)");
            return UCS_ERR_IO_ERROR;
        }
        iter = kh_put(uct_aptus_tokens, &md->tokens, region->token, &ret);
    } while (ret == UCS_KH_PUT_KEY_PRESENT);
    if (ret == UCS_KH_PUT_FAILED) {
        ucs_spin_unlock(&md->lock);
        return UCS_ERR_NO_MEMORY;
    }
    kh_value(&md->tokens, iter) = region;
    ucs_spin_unlock(&md->lock);
    return UCS_OK;
}

static void uct_aptus_md_token_del(uct_aptus_md_t *md,
                                   uct_aptus_region_t *region)
{
    khiter_t iter;

    ucs_spin_lock(&md->lock);
    iter = kh_get(uct_aptus_tokens, &md->tokens, region->token);
    if (iter != kh_end(&md->tokens)) {
        kh_del(uct_aptus_tokens, &md->tokens, iter);
    }
    ucs_spin_unlock(&md->lock);
}

/* A region: the domain's token (UD-ZCopy's, and the sock wire's
 * connections'), the wire's registration (what its connections' hardware
 * checks), or both. */
static ucs_status_t uct_aptus_md_region_add(uct_aptus_md_t *md,
                                            uct_aptus_region_t *region,
                                            uint64_t address, uint64_t length)
{
    ucs_status_t status;

    region->address   = address;
    region->length    = length;
    region->token     = 0;
    region->wire_memh = NULL;
    if (md->use_tokens) {
        status = uct_aptus_md_token_add(md, region);
        if (status != UCS_OK) {
            return status;
        }
    }
    if (md->wire_mem != NULL) {
        status = md->wire->mem_reg(md->wire_mem, (void *)(uintptr_t)address,
                                   length, &region->wire_token,
                                   &region->wire_host_id, &region->wire_memh);
        if (status != UCS_OK) {
            if (md->use_tokens) {
                uct_aptus_md_token_del(md, region);
            }
            return status;
        }
    }
    ucs_spin_lock(&md->lock);
    md->registrations++;
    ucs_spin_unlock(&md->lock);
    return UCS_OK;
}

static void uct_aptus_md_region_del(uct_aptus_md_t *md,
                                    uct_aptus_region_t *region)
{
    if (region->wire_memh != NULL) {
        md->wire->mem_dereg(md->wire_mem, region->wire_memh);
        region->wire_memh = NULL;
    }
    if (md->use_tokens) {
        uct_aptus_md_token_del(md, region);
    }
}

int uct_aptus_md_check_region(uct_aptus_md_t *md, uint64_t token,
                              uint64_t address, uint64_t length)
{
    uct_aptus_region_t *region;
    khiter_t iter;
    int ok = 0;

    ucs_spin_lock(&md->lock);
    iter = kh_get(uct_aptus_tokens, &md->tokens, token);
    if (iter != kh_end(&md->tokens)) {
        region = kh_value(&md->tokens, iter);
        ok     = (address >= region->address) && (length <= region->length) &&
             (address - region->address <= region->length - length);
    }
    ucs_spin_unlock(&md->lock);
    return ok;
}

int uct_aptus_md_check_region_cb(void *md, uint64_t token, uint64_t address,
                                 uint64_t length)
{
    return uct_aptus_md_check_region(md, token, address, length);
}

/* rcache callbacks: a region enters or leaves the cache */
static ucs_status_t uct_aptus_rcache_mem_reg(void *context,
                                             ucs_rcache_t *rcache, void *arg,
                                             ucs_rcache_region_t *rregion,
                                             uint16_t flags)
{
    uct_aptus_region_t *region = ucs_derived_of(rregion, uct_aptus_region_t);

    region->cached = 1;
    return uct_aptus_md_region_add(context, region, rregion->super.start,
                                   rregion->super.end - rregion->super.start);
}

static void uct_aptus_rcache_mem_dereg(void *context, ucs_rcache_t *rcache,
                                       ucs_rcache_region_t *rregion)
{
    uct_aptus_md_region_del(context,
                            ucs_derived_of(rregion, uct_aptus_region_t));
}

static void uct_aptus_rcache_dump(void *context, ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *rregion, char *buf,
                                  size_t max)
{
    uct_aptus_region_t *region = ucs_derived_of(rregion, uct_aptus_region_t);

    snprintf(buf, max, "token 0x%016llx", (unsigned long long)region->token);
}

static const ucs_rcache_ops_t uct_aptus_rcache_ops = {
    .mem_reg     = uct_aptus_rcache_mem_reg,
    .mem_dereg   = uct_aptus_rcache_mem_dereg,
    .dump_region = uct_aptus_rcache_dump
};

static ucs_status_t uct_aptus_md_query(uct_md_h md, uct_md_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    attr->cap.flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = ULONG_MAX;
    attr->cap.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->cap.alloc_mem_types  = 0;
    attr->rkey_packed_size     = sizeof(uct_aptus_rkey_t);
    /* no pinning: a table entry, or a cache lookup; the wire's registrar
     * pins and maps every page (the figures UCX's ib domain assumes) */
    attr->reg_cost = (ucs_derived_of(md, uct_aptus_md_t)->wire_mem != NULL)
                         ? ucs_linear_func_make(16e-6, 0.06e-9)
                         : ucs_linear_func_make(200e-9, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_aptus_md_mem_reg(uct_md_h uct_md, void *address,
                                         size_t length, unsigned flags,
                                         uct_mem_h *memh_p)
{
    uct_aptus_md_t *md = ucs_derived_of(uct_md, uct_aptus_md_t);
    ucs_rcache_region_t *rregion;
    uct_aptus_region_t *region;
    ucs_status_t status;

    if (length == 0) {
        *memh_p = UCT_MEM_HANDLE_NULL;
        return UCS_OK;
    }

    ucs_spin_lock(&md->lock);
    md->reg_calls++;
    ucs_spin_unlock(&md->lock);

    if (md->rcache != NULL) {
        status = ucs_rcache_get(md->rcache, address, length,
                                PROT_READ | PROT_WRITE, NULL, &rregion);
        if (status != UCS_OK) {
            return status;
        }
        *memh_p = ucs_derived_of(rregion, uct_aptus_region_t);
        return UCS_OK;
    }

    region = ucs_calloc(1, sizeof(*region), "uct_aptus_region");
    if (region == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    status = uct_aptus_md_region_add(md, region, (uintptr_t)address, length);
    if (status != UCS_OK) {
        ucs_free(region);
        return status;
    }
    *memh_p = region;
    return UCS_OK;
}

static ucs_status_t
uct_aptus_md_mem_dereg(uct_md_h uct_md, const uct_md_mem_dereg_params_t *params)
{
    uct_aptus_md_t *md = ucs_derived_of(uct_md, uct_aptus_md_t);
    uct_aptus_region_t *region;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);
    region = params->memh;
    if (region == UCT_MEM_HANDLE_NULL) {
        return UCS_OK;
    }
    if (region->cached) {
        ucs_rcache_region_put(md->rcache, &region->super);
    } else {
        uct_aptus_md_region_del(md, region);
        ucs_free(region);
    }
    return UCS_OK;
}

static ucs_status_t
uct_aptus_md_mkey_pack(uct_md_h md, uct_mem_h memh,
                       const uct_md_mkey_pack_params_t *params,
                       void *rkey_buffer)
{
    const uct_aptus_region_t *region = memh;
    uct_aptus_rkey_t rkey;

    memset(&rkey, 0, sizeof(rkey));
    if (region != UCT_MEM_HANDLE_NULL) {
        rkey.address = region->address;
        rkey.length  = region->length;
        rkey.token   = region->token;
    }
    rkey.host_id = aptus_conn_reach_id(); /* host and PID namespace */
    rkey.pid     = aptus_conn_pid();
    rkey.flags   = ucs_derived_of(md, uct_aptus_md_t)->one_sided
                       ? UCT_APTUS_RKEY_FLAG_SAME_HOST
                       : 0;
    if ((region != UCT_MEM_HANDLE_NULL) && (region->wire_memh != NULL)) {
        rkey.flags |= UCT_APTUS_RKEY_FLAG_WIRE;
        rkey.wire_token   = region->wire_token;
        rkey.wire_host_id = region->wire_host_id;
    }
    memcpy(rkey_buffer, &rkey, sizeof(rkey));
    return UCS_OK;
}

static void uct_aptus_md_close(uct_md_h uct_md)
{
    uct_aptus_md_t *md = ucs_derived_of(uct_md, uct_aptus_md_t);

    if (md->rcache != NULL) {
        ucs_rcache_destroy(md->rcache);
    }
    if (md->wire_mem != NULL) {
        md->wire->mem_close(md->wire_mem);
    }
    kh_destroy_inplace(uct_aptus_tokens, &md->tokens);
    ucs_spinlock_destroy(&md->lock);
    ucs_free(md->stats);
    ucs_free(md);
}

/* Every operation is set: UCX calls some of them without looking at the
 * capability flags first (uct_md_is_sockaddr_accessible). The domain neither
 * allocates memory nor accepts connections by socket address. */
static uct_md_ops_t uct_aptus_md_ops = {
    .close     = uct_aptus_md_close,
    .query     = uct_aptus_md_query,
    .mem_alloc = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free  = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise =
        (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg   = uct_aptus_md_mem_reg,
    .mem_dereg = uct_aptus_md_mem_dereg,
    .mem_query = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack = uct_aptus_md_mkey_pack,
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)
        ucs_empty_function_return_zero_int,
    .detect_memory_type =
        (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported,
};

static ucs_status_t uct_aptus_md_open(uct_component_t *component,
                                      const char *md_name,
                                      const uct_md_config_t *uct_md_config,
                                      uct_md_h *md_p)
{
    const uct_aptus_md_config_t *config =
        ucs_derived_of(uct_md_config, uct_aptus_md_config_t);
    ucs_rcache_params_t rcache_params;
    uct_aptus_md_t *md;
    ucs_status_t status;

    md = ucs_calloc(1, sizeof(*md), "uct_aptus_md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    md->super.ops       = &uct_aptus_md_ops;
    md->super.component = &uct_aptus_component;
    md->one_sided       = !strcmp(md_name, UCT_APTUS_RC_MD_NAME) ||
                    !strcmp(md_name, UCT_APTUS_VERBS_RC_MD_NAME);
    md->wire = &aptus_sock_wire_dev;
    if (!strcmp(md_name, UCT_APTUS_VERBS_MD_NAME) ||
        !strcmp(md_name, UCT_APTUS_VERBS_RC_MD_NAME)) {
#ifdef APTUS_HAVE_VERBS
        md->wire = &aptus_verbs_wire_dev;
#else
        ucs_error("aptus md: %s: built without rdma-core", md_name);
        ucs_free(md);
        return UCS_ERR_UNSUPPORTED;
#endif
    }
    if (!md->wire->conn_md_keys && (md->wire->mem_open != NULL)) {
        /* without it (said why) no transport that carries one-sided
         * operations over connections is listed on the domain */
        status = md->wire->mem_open(&md->wire_mem);
        if (status != UCS_OK) {
            ucs_debug("aptus md: %s: no registrar on the %s wire: %s", md_name,
                      md->wire->name, ucs_status_string(status));
            md->wire_mem = NULL;
        }
    }
    md->conn_keys = md->wire->conn_md_keys || (md->wire_mem != NULL);
    /* a one-sided domain whose keys the wire makes needs no token: its
     * transports use connections only */
    md->use_tokens = !md->one_sided || (md->wire_mem == NULL);
    md->numa       = config->numa;
    md->stats      = ucs_strdup(config->stats, "uct_aptus_md_stats");
    if (md->stats == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto err_free;
    }
    ucs_spinlock_init(&md->lock, 0);
    kh_init_inplace(uct_aptus_tokens, &md->tokens);

    if (config->rcache_enable != UCS_NO) {
        memset(&rcache_params, 0, sizeof(rcache_params));
        uct_md_set_rcache_params(&rcache_params, &config->rcache);
        rcache_params.region_struct_size = sizeof(uct_aptus_region_t);
        rcache_params.max_alignment      = ucs_get_page_size();
        rcache_params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
        rcache_params.context            = md;
        rcache_params.ops                = &uct_aptus_rcache_ops;
        status = ucs_rcache_create(&rcache_params, "aptus", NULL, &md->rcache);
        if (status != UCS_OK) {
            md->rcache = NULL;
            if (config->rcache_enable == UCS_YES) {
                ucs_error("UCX_APTUS_RCACHE=yes, but the registration cache "
                          "cannot be created: %s",
                          ucs_status_string(status));
                goto err_tokens;
            }
            ucs_debug("aptus md: no registration cache: %s",
                      ucs_status_string(status));
        }
    }

    *md_p = &md->super;
    return UCS_OK;

err_tokens:
    kh_destroy_inplace(uct_aptus_tokens, &md->tokens);
    ucs_spinlock_destroy(&md->lock);
    ucs_free(md->stats);
err_free:
    if (md->wire_mem != NULL) {
        md->wire->mem_close(md->wire_mem);
    }
    ucs_free(md);
    return status;
}

static ucs_status_t uct_aptus_rkey_unpack(uct_component_t *component,
                                          const void *rkey_buffer,
                                          uct_rkey_t *rkey_p, void **handle_p)
{
    uct_aptus_rkey_t *rkey;
    uct_aptus_rkey_t packed;

    /* a key of another host unpacks too: whether an operation reaches the
     * memory directly or over the connection is the wire's answer for the
     * peer it goes to */
    memcpy(&packed, rkey_buffer, sizeof(packed));
    rkey = ucs_malloc(sizeof(*rkey), "uct_aptus_rkey");
    if (rkey == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    *rkey     = packed;
    *rkey_p   = (uintptr_t)rkey;
    *handle_p = NULL;
    return UCS_OK;
}

static ucs_status_t uct_aptus_rkey_release(uct_component_t *component,
                                           uct_rkey_t rkey, void *handle)
{
    ucs_free((void *)rkey);
    return UCS_OK;
}

/* Whether the verbs wire has a device (an active HCA port) here. */
static int uct_aptus_md_verbs_present(void)
{
#ifdef APTUS_HAVE_VERBS
    uct_tl_device_resource_t *devices;
    unsigned num = 0;

    if (aptus_verbs_wire_dev.query_devices(&devices, &num) != UCS_OK) {
        return 0;
    }
    ucs_free(devices);
    return num > 0;
#else
    ucs_debug("aptus md: built without rdma-core: no verbs domain");
    return 0;
#endif
}

static ucs_status_t
uct_aptus_query_md_resources(uct_component_t *component,
                             uct_md_resource_desc_t **resources_p,
                             unsigned *num_resources_p)
{
    static const char *names[] = { UCT_APTUS_MD_NAME, UCT_APTUS_RC_MD_NAME,
                                   UCT_APTUS_VERBS_MD_NAME,
                                   UCT_APTUS_VERBS_RC_MD_NAME };
    unsigned num               = uct_aptus_md_verbs_present() ? 4 : 2;
    uct_md_resource_desc_t *resources;
    unsigned i;

    resources = ucs_calloc(num, sizeof(*resources), "uct_aptus_md_resources");
    if (resources == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < num; ++i) {
        ucs_strncpy_zero(resources[i].md_name, names[i],
                         sizeof(resources[i].md_name));
    }
    *resources_p     = resources;
    *num_resources_p = num;
    return UCS_OK;
}

uct_component_t uct_aptus_component = {
    .query_md_resources = uct_aptus_query_md_resources,
    .md_open            = uct_aptus_md_open,
    .cm_open            = ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_aptus_rkey_unpack,
    .rkey_ptr           = ucs_empty_function_return_unsupported,
    .rkey_release       = uct_aptus_rkey_release,
    .name               = UCT_APTUS_COMPONENT_NAME,
    .md_config          = {
        .name           = "UCX-Aptus memory domain",
        .prefix         = "APTUS_",
        .table          = uct_aptus_md_config_table,
        .size           = sizeof(uct_aptus_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_aptus_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};
