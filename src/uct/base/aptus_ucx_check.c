/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: is the UCX in this process the one the module was built for?
 *
 * The module uses UCX's internal structures (uct_base_iface_t, ucs_mpool,
 * ...), whose layout changes between versions and build configurations
 * (debug, statistics, assertions). Loaded into another build of libucs or
 * libuct it would corrupt memory silently. configure records the GNU build
 * ID of the libucs and libuct it compiles against; before registering,
 * the module reads the build ID of the ones in the process from their
 * program headers (dl_iterate_phdr) and refuses, with one line, when they
 * differ.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "aptus_config.h"

#include "aptus_ucx_check.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *prefix; /* "libucs.so" */
    char *hex;
    size_t max;
    int found;
} uct_aptus_bid_search_t;

/* The NT_GNU_BUILD_ID note among one PT_NOTE segment's notes, as hex. */
static int uct_aptus_note_build_id(const uint8_t *p, size_t size, char *hex,
                                   size_t max)
{
    const ElfW(Nhdr) * note;
    const uint8_t *desc;
    size_t off = 0, i;

    while (off + sizeof(*note) <= size) {
        note = (const ElfW(Nhdr) *)(p + off);
        off += sizeof(*note);
        desc = p + off + ((note->n_namesz + 3) & ~3u);
        if ((note->n_type == NT_GNU_BUILD_ID) && (note->n_namesz == 4) &&
            !memcmp(p + off, "GNU", 4) && (desc + note->n_descsz <= p + size) &&
            (2 * note->n_descsz < max)) {
            for (i = 0; i < note->n_descsz; ++i) {
                snprintf(hex + 2 * i, 3, "%02x", desc[i]);
            }
            return 1;
        }
        off += ((note->n_namesz + 3) & ~3u) + ((note->n_descsz + 3) & ~3u);
    }
    return 0;
}

static int uct_aptus_bid_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    uct_aptus_bid_search_t *s = arg;
    const char *base;
    int i;

    base = strrchr(info->dlpi_name, '/');
    base = (base == NULL) ? info->dlpi_name : base + 1;
    if (strncmp(base, s->prefix, strlen(s->prefix))) {
        return 0;
    }
    for (i = 0; i < info->dlpi_phnum; ++i) {
        if ((info->dlpi_phdr[i].p_type == PT_NOTE) &&
            uct_aptus_note_build_id(
                (const uint8_t *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
                info->dlpi_phdr[i].p_memsz, s->hex, s->max)) {
            s->found = 1;
            return 1;
        }
    }
    return 0;
}

int uct_aptus_loaded_build_id(const char *soname_prefix, char *hex, size_t max)
{
    uct_aptus_bid_search_t s = { soname_prefix, hex, max, 0 };

    hex[0] = '\0';
    dl_iterate_phdr(uct_aptus_bid_cb, &s);
    return s.found;
}

int uct_aptus_ucx_check_one(const char *lib, const char *expected, char *why,
                            size_t max)
{
    char prefix[32], loaded[UCT_APTUS_BUILD_ID_MAX];

    if ((expected == NULL) || (expected[0] == '\0')) {
        return 0; /* built without a build ID to compare */
    }
    snprintf(prefix, sizeof(prefix), "lib%s.so", lib);
    if (!uct_aptus_loaded_build_id(prefix, loaded, sizeof(loaded))) {
        return 0; /* not loaded, or stripped of its note: nothing to say */
    }
    if (strcmp(loaded, expected)) {
        snprintf(why, max,
                 "UCX-Aptus: not loaded: it was built against lib%s build %s, "
                 "but this process has lib%s build %s (another UCX build); "
                 "rebuild the module against the UCX in use",
                 lib, expected, lib, loaded);
        return -1;
    }
    return 0;
}

int uct_aptus_ucx_check(char *why, size_t max)
{
    if ((uct_aptus_ucx_check_one("ucs", APTUS_UCS_BUILD_ID, why, max) != 0) ||
        (uct_aptus_ucx_check_one("uct", APTUS_UCT_BUILD_ID, why, max) != 0)) {
        return -1;
    }
    return 0;
}
