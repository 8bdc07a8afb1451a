/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: one named counter, as every floor reports them (a wire its
 * own figures, a transport its statistics line).
 */
#ifndef APTUS_STAT_H_
#define APTUS_STAT_H_

#include <stdint.h>

typedef struct aptus_stat {
    const char *name;
    uint64_t value;
} aptus_stat_t;

#endif
