/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC settings shared by rc_sr, rc_fp and aptus.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_params.h"
#include "uct/base/aptus_iface.h"
#include "proto/rc_sr_proto.h"

#include <ucs/sys/math.h>

/* The largest UCT header of an active message, and its 64-bit header */
#define UCT_RC_PARAMS_MAX_AM_HDR   256
#define UCT_RC_PARAMS_RX_QUEUE_MAX 1048576
/* below a few frames a connection would send one message at a time */
#define UCT_RC_PARAMS_TX_BACKLOG_MIN 4096

/* rc_sr's names and defaults: what the documentation tests read. */
ucs_config_field_t uct_rc_params_table[] = {
    UCT_RC_PARAMS_FIELDS("", 0, "8k", "1024"), { NULL }
};

ucs_status_t uct_rc_params_check(const uct_rc_params_t *params,
                                 const char *tl_name, const char *prefix,
                                 size_t trailer_len, size_t conn_max_msg)
{
    const uct_aptus_range_t ranges[] = {
        { "SEG_SIZE", uct_aptus_bytes(params->seg_size),
          UCT_RC_PARAMS_MAX_AM_HDR + sizeof(uint64_t) + trailer_len,
          conn_max_msg - APTUS_RC_HDR_LEN - trailer_len },
        { "CREDITS", uct_aptus_uint(params->credits), 1, APTUS_RC_MAX_CREDITS },
        { "RX_QUEUE_LEN", uct_aptus_uint(params->rx_queue_len), 1,
          UCT_RC_PARAMS_RX_QUEUE_MAX },
        { "TX_BACKLOG", uct_aptus_bytes(params->tx_backlog),
          UCT_RC_PARAMS_TX_BACKLOG_MIN, UCS_GBYTE },
    };

    if (!uct_aptus_ranges_check(tl_name, prefix, ranges,
                                ucs_static_array_size(ranges))) {
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}
