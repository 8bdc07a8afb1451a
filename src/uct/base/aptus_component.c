/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the module constructor that makes every transport visible to
 * UCX.
 *
 * UCX 1.13 loads only the modules compiled into it, so this library
 * registers itself from an ELF constructor: once it is in the process (by
 * LD_PRELOAD, by linking, or by dlopen before ucp_init) uct_query_components
 * lists it. It must never be unloaded: UCX keeps pointers into it. It
 * registers nothing when the libucs or libuct in the process is not the
 * build it was compiled against (aptus_ucx_check.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_md.h"
#include "aptus_ucx_check.h"

#include <uct/base/uct_iface.h>

#include <stdio.h>

/* Transports of this module (defined with UCT_TL_DEFINE_ENTRY). */
extern uct_tl_t UCT_TL_NAME(ud_sr);
extern uct_tl_t UCT_TL_NAME(rc_sr);
extern uct_tl_t UCT_TL_NAME(rc_fp);
extern uct_tl_t UCT_TL_NAME(aptus);

/* The only entry point UCX needs: register the component, then its
 * transports, once, when the library is loaded. */
static void UCS_F_CTOR uct_aptus_module_init(void)
{
    char why[512];

    /* another build of UCX would have other struct layouts: say so once
     * and stay out (stderr: the mismatched libucs may not log right) */
    if (uct_aptus_ucx_check(why, sizeof(why)) != 0) {
        fprintf(stderr, "%s\n", why);
        return;
    }
    uct_component_register(&uct_aptus_component);
    uct_tl_register(&uct_aptus_component, &UCT_TL_NAME(ud_sr));
    uct_tl_register(&uct_aptus_component, &UCT_TL_NAME(rc_sr));
    uct_tl_register(&uct_aptus_component, &UCT_TL_NAME(rc_fp));
    uct_tl_register(&uct_aptus_component, &UCT_TL_NAME(aptus));
}
