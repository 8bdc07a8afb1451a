/*
 * UCX-Aptus: what every transport's interface does alike.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_iface.h"

#include <ucs/sys/math.h>
#include <ucs/debug/log.h>

ucs_status_t uct_aptus_iface_am_alignment(const char *tl_name,
                                          const uct_iface_params_t *params,
                                          size_t *alignment_p,
                                          size_t *offset_p)
{
    uint64_t mask    = params->field_mask;
    size_t alignment = 1, offset = 0;

    if (mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) {
        alignment = params->am_alignment;
        if (!ucs_is_pow2(alignment)) { /* 0 is not one either */
            ucs_error("%s: am_alignment %zu is not a power of 2", tl_name,
                      alignment);
            return UCS_ERR_INVALID_PARAM;
        }
    }
    if (mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
        if (!(mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT)) {
            ucs_error("%s: am_align_offset is given without am_alignment",
                      tl_name);
            return UCS_ERR_INVALID_PARAM;
        }
        offset = params->am_align_offset;
        if (offset >= alignment) {
            ucs_error("%s: am_align_offset %zu is not less than "
                      "am_alignment %zu",
                      tl_name, offset, alignment);
            return UCS_ERR_INVALID_PARAM;
        }
    }
    *alignment_p = alignment;
    *offset_p    = offset;
    return UCS_OK;
}
