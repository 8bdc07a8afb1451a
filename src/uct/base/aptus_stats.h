/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: statistics output.
 *
 * UCX's own statistics are compiled out of the distribution builds, so the
 * transports keep plain counters and print them here, one line per
 * interface: "aptus-stats <tl>/<dev> pid=<pid> name=value ...". The line is
 * both the user's report and what contrib/ scripts parse into tables.
 */
#ifndef UCT_APTUS_STATS_H_
#define UCT_APTUS_STATS_H_

#include "base/aptus_stat.h"

#include <ucs/type/status.h>

#include <stddef.h>
#include <stdint.h>

typedef aptus_stat_t uct_aptus_stat_t;

/* dest: a comma-separated list of "stdout", "stderr", or file names (%h
 * host, %p pid); a file whose name ends in ".csv" gets CSV rows (host, pid,
 * record, object, counter, value) instead of the line; "" is off. */
void uct_aptus_stats_print(const char *dest, const char *tl_name,
                           const char *dev_name, const uct_aptus_stat_t *stats,
                           unsigned count);

#endif
