/*
 * UCX-Aptus: the "aptus" UCT component and its memory domain.
 *
 * One component, one memory domain, several transports (ud_sr, later rc_sr,
 * rc_fp and aptus), all registered when the module is loaded into a process.
 */
#ifndef UCT_APTUS_MD_H_
#define UCT_APTUS_MD_H_

#include <uct/base/uct_md.h>

#define UCT_APTUS_COMPONENT_NAME "aptus"

typedef struct uct_aptus_md_config {
    uct_md_config_t super;
    char *stats; /* where interfaces print their statistics */
} uct_aptus_md_config_t;

typedef struct uct_aptus_md {
    uct_md_t super;
    char *stats; /* copy of the STATS setting, "" when off */
} uct_aptus_md_t;

extern uct_component_t uct_aptus_component;

/* Dummy registration handle: the sock wire moves data with system calls,
 * so memory needs no pinning for send and receive. */
#define UCT_APTUS_MEMH_DUMMY ((uct_mem_h)0x1)

#endif
