/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: statistics output (see aptus_stats.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_stats.h"

#include <ucs/debug/log.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void uct_aptus_stats_path(const char *tmpl, char *path, size_t max)
{
    size_t len = 0;
    const char *p;

    for (p = tmpl; (*p != '\0') && (len + 1 < max); ++p) {
        if ((p[0] == '%') && (p[1] == 'p')) {
            len += snprintf(path + len, max - len, "%d", getpid());
            ++p;
        } else if ((p[0] == '%') && (p[1] == 'h')) {
            len += snprintf(path + len, max - len, "%s", ucs_get_host_name());
            ++p;
        } else {
            path[len++] = *p;
        }
        if (len >= max) {
            len = max - 1;
        }
    }
    path[len] = '\0';
}

static int uct_aptus_stats_is_csv(const char *path)
{
    size_t len = strlen(path);

    return (len > 4) && !strcmp(path + len - 4, ".csv");
}

/* One destination: a stream, or a file appended to (CSV when its name ends
 * in .csv: one row per counter, the header when the file is new). */
static void uct_aptus_stats_print_one(const char *dest, const char *tl_name,
                                      const char *dev_name,
                                      const uct_aptus_stat_t *stats,
                                      unsigned count)
{
    char path[1024];
    FILE *stream;
    unsigned i;
    int close_it = 0;

    if (!strcmp(dest, "stdout")) {
        stream = stdout;
    } else if (!strcmp(dest, "stderr")) {
        stream = stderr;
    } else {
        uct_aptus_stats_path(dest, path, sizeof(path));
        stream = fopen(path, "a");
        if (stream == NULL) {
            ucs_warn("UCX_APTUS_STATS: cannot open %s: %m", path);
            return;
        }
        close_it = 1;
        if (uct_aptus_stats_is_csv(path)) {
            if (ftell(stream) == 0) {
                fputs("host,pid,record,object,counter,value\n", stream);
            }
            for (i = 0; i < count; ++i) {
                fprintf(stream, "%s,%d,%s,%s,%s,%llu\n", ucs_get_host_name(),
                        getpid(), tl_name, dev_name, stats[i].name,
                        (unsigned long long)stats[i].value);
            }
            fclose(stream);
            return;
        }
    }

    fprintf(stream, "aptus-stats %s/%s host=%s pid=%d", tl_name, dev_name,
            ucs_get_host_name(), getpid());
    for (i = 0; i < count; ++i) {
        fprintf(stream, " %s=%llu", stats[i].name,
                (unsigned long long)stats[i].value);
    }
    fputc('\n', stream);
    if (close_it) {
        fclose(stream);
    } else {
        fflush(stream);
    }
}

void uct_aptus_stats_print(const char *dest, const char *tl_name,
                           const char *dev_name, const uct_aptus_stat_t *stats,
                           unsigned count)
{
    char one[1024];
    const char *p, *end;
    size_t len;

    if (dest == NULL) {
        return;
    }
    for (p = dest; *p != '\0'; p = (*end == ',') ? end + 1 : end) {
        end = strchr(p, ',');
        if (end == NULL) {
            end = p + strlen(p);
        }
        len = ucs_min((size_t)(end - p), sizeof(one) - 1);
        memcpy(one, p, len);
        one[len] = '\0';
        if (len > 0) {
            uct_aptus_stats_print_one(one, tl_name, dev_name, stats, count);
        }
    }
}
