/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the run-time check that the libucs and libuct in the process
 * are the builds the module was compiled against (aptus_ucx_check.c).
 */
#ifndef UCT_APTUS_UCX_CHECK_H_
#define UCT_APTUS_UCX_CHECK_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UCT_APTUS_BUILD_ID_MAX 129 /* hex of up to 64 bytes, and a NUL */

/* The GNU build ID, as hex, of the first loaded object whose file name
 * starts with soname_prefix ("libucs.so"); 1 if found, else 0. */
int uct_aptus_loaded_build_id(const char *soname_prefix, char *hex, size_t max);

/* 0 when lib ("ucs", "uct") in the process has the build ID expected (or
 * either is unknown); -1 with one line in why when it differs. */
int uct_aptus_ucx_check_one(const char *lib, const char *expected, char *why,
                            size_t max);

/* Both libraries against the IDs configure recorded. */
int uct_aptus_ucx_check(char *why, size_t max);

#ifdef __cplusplus
}
#endif

#endif
