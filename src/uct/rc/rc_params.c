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

ucs_config_field_t uct_rc_params_table[] = {
    { "SEG_SIZE", "8k",
      "Largest active message over a connection, UCT header included, and\n"
      "the size of one buffer of the receive pool all connections share (the\n"
      "papers' 8 KB eager buffers for rc_sr; aptus, whose larger messages go\n"
      "over UD, takes 32k). 264 bytes (aptus: 272) to just under 16m.",
      ucs_offsetof(uct_rc_params_t, seg_size), UCS_CONFIG_TYPE_MEMUNITS },

    { "CREDITS", "32",
      "Messages a sender may have in flight on one connection before the\n"
      "receiver returns credits (1 to 65535). Beyond that sends wait on the\n"
      "pending queue; nothing is dropped.",
      ucs_offsetof(uct_rc_params_t, credits), UCS_CONFIG_TYPE_UINT },

    { "RX_QUEUE_LEN", "1024",
      "Receive buffers the pool shared by every connection of the interface\n"
      "(the shared receive queue) is expected to need; it allocates them as\n"
      "connections need them (1 to 1048576). rc_sr's grows beyond while the\n"
      "application holds received messages, up to RX_MAX_BUFS; aptus (256)\n"
      "delivers in place and holds none, so its pool stays at this.",
      ucs_offsetof(uct_rc_params_t, rx_queue_len), UCS_CONFIG_TYPE_UINT },

    { "TX_BACKLOG", "256k",
      "Bytes a connection may queue when the network does not take them at\n"
      "once; further sends wait on the pending queue (4k to 1g).",
      ucs_offsetof(uct_rc_params_t, tx_backlog), UCS_CONFIG_TYPE_MEMUNITS },

    { "RMA", "y",
      "RC-RDMA: one-sided put and get over the connections, by a direct\n"
      "copy to peers on this host. rc_sr offers put and get to UCP\n"
      "(rendezvous and RMA; 'n' leaves active messages only); aptus moves\n"
      "rendezvous data over it where the peer has a connection ('n', or\n"
      "none: UD-ZCopy).",
      ucs_offsetof(uct_rc_params_t, rma), UCS_CONFIG_TYPE_BOOL },

    { NULL }
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
