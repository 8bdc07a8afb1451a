/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus benchmarks: the peak resident size of this process (VmHWM),
 * what the benchmarks report as memory per process.
 */
#ifndef APTUS_BENCH_RSS_H_
#define APTUS_BENCH_RSS_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline long bench_max_rss_kb(void)
{
    char line[256];
    long kb = 0;
    FILE *f = fopen("/proc/self/status", "r");

    while ((f != NULL) && fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "VmHWM:", 6)) {
            kb = atol(line + 6);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb;
}

#endif
