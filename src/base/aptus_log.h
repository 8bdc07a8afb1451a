/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the packet trace, one line per datagram and per frame at
 * UCX_LOG_LEVEL=data.
 *
 * UCX's own ucs_trace_data() is compiled out of release builds of libucs
 * (Debian's among them: its log handler drops every level above DEBUG), so
 * the trace checks the configured level itself and hands the line to the
 * log handlers as a PRINT, which they always write (to UCX_LOG_FILE, if
 * set). Each line starts with "data:".
 */
#ifndef APTUS_LOG_H_
#define APTUS_LOG_H_

#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline int aptus_log_data_enabled(void)
{
    return ucs_global_opts.log_component.log_level >= UCS_LOG_LEVEL_TRACE_DATA;
}

#define aptus_trace_data(_fmt, ...)                                            \
    do {                                                                       \
        if (ucs_unlikely(aptus_log_data_enabled())) {                          \
            ucs_log_dispatch(                                                  \
                __FILE__, __LINE__, __func__, UCS_LOG_LEVEL_PRINT,             \
                &ucs_global_opts.log_component, "data: " _fmt, ##__VA_ARGS__); \
        }                                                                      \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
