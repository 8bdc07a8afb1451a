/*
 * UCX-Aptus: the "aptus" UCT component, its memory domain, and the module
 * constructor that makes every transport visible to UCX.
 *
 * UCX 1.13 loads only the modules compiled into it, so this library
 * registers itself from an ELF constructor: once it is in the process (by
 * LD_PRELOAD, by linking, or by dlopen before ucp_init) uct_query_components
 * lists it. It must never be unloaded: UCX keeps pointers into it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_md.h"

#include <uct/base/uct_iface.h>

#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>

#include <string.h>

static ucs_config_field_t uct_aptus_md_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_aptus_md_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_md_config_table) },

    { "STATS", "",
      "Print UCX-Aptus statistics when an interface closes: empty (off),\n"
      "'stdout', 'stderr', or a file name in which %h and %p become the host\n"
      "name and the process id (the file is appended to).",
      ucs_offsetof(uct_aptus_md_config_t, stats), UCS_CONFIG_TYPE_STRING },

    { NULL }
};

static ucs_status_t uct_aptus_md_query(uct_md_h md, uct_md_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    attr->cap.flags            = UCT_MD_FLAG_REG;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = ULONG_MAX;
    attr->cap.reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->cap.alloc_mem_types  = 0;
    attr->rkey_packed_size     = 0;
    attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_aptus_md_mem_reg(uct_md_h md, void *address,
                                         size_t length, unsigned flags,
                                         uct_mem_h *memh_p)
{
    *memh_p = UCT_APTUS_MEMH_DUMMY;
    return UCS_OK;
}

static ucs_status_t
uct_aptus_md_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params)
{
    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);
    return UCS_OK;
}

static ucs_status_t
uct_aptus_md_mkey_pack(uct_md_h md, uct_mem_h memh,
                       const uct_md_mkey_pack_params_t *params,
                       void *rkey_buffer)
{
    return UCS_OK;
}

static void uct_aptus_md_close(uct_md_h md)
{
    uct_aptus_md_t *amd = ucs_derived_of(md, uct_aptus_md_t);

    ucs_free(amd->stats);
    ucs_free(amd);
}

static uct_md_ops_t uct_aptus_md_ops = {
    .close              = uct_aptus_md_close,
    .query              = uct_aptus_md_query,
    .mkey_pack          = uct_aptus_md_mkey_pack,
    .mem_reg            = uct_aptus_md_mem_reg,
    .mem_dereg          = uct_aptus_md_mem_dereg,
    .detect_memory_type = ucs_empty_function_return_unsupported,
};

static ucs_status_t uct_aptus_md_open(uct_component_t *component,
                                      const char *md_name,
                                      const uct_md_config_t *uct_md_config,
                                      uct_md_h *md_p)
{
    const uct_aptus_md_config_t *config =
        ucs_derived_of(uct_md_config, uct_aptus_md_config_t);
    uct_aptus_md_t *md;

    md = ucs_calloc(1, sizeof(*md), "uct_aptus_md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    md->super.ops       = &uct_aptus_md_ops;
    md->super.component = &uct_aptus_component;
    md->stats           = ucs_strdup(config->stats, "uct_aptus_md_stats");
    if (md->stats == NULL) {
        ucs_free(md);
        return UCS_ERR_NO_MEMORY;
    }
    *md_p = &md->super;
    return UCS_OK;
}

static ucs_status_t uct_aptus_rkey_unpack(uct_component_t *component,
                                          const void *rkey_buffer,
                                          uct_rkey_t *rkey_p, void **handle_p)
{
    *rkey_p   = 0;
    *handle_p = NULL;
    return UCS_OK;
}

uct_component_t uct_aptus_component = {
    .query_md_resources = uct_md_query_single_md_resource,
    .md_open            = uct_aptus_md_open,
    .cm_open            = ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_aptus_rkey_unpack,
    .rkey_ptr           = ucs_empty_function_return_unsupported,
    .rkey_release       = ucs_empty_function_return_success,
    .name               = UCT_APTUS_COMPONENT_NAME,
    .md_config =
        {
            .name   = "UCX-Aptus memory domain",
            .prefix = "APTUS_",
            .table  = uct_aptus_md_config_table,
            .size   = sizeof(uct_aptus_md_config_t),
        },
    .cm_config   = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list     = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_aptus_component),
    .flags       = 0,
    .md_vfs_init = (uct_component_md_vfs_init_func_t)ucs_empty_function};

/* Transports of this module (defined with UCT_TL_DEFINE_ENTRY). */
extern uct_tl_t UCT_TL_NAME(ud_sr);

/* The only entry point UCX needs: register the component, then its
 * transports, once, when the library is loaded. */
static void UCS_F_CTOR uct_aptus_module_init(void)
{
    uct_component_register(&uct_aptus_component);
    uct_tl_register(&uct_aptus_component, &UCT_TL_NAME(ud_sr));
}
