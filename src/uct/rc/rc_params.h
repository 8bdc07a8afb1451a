/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the settings of an RC-SR channel with RC-RDMA and its
 * connection wire, shared by the transports that carry one (rc_sr and its
 * flavour rc_fp under their own prefixes, aptus under APTUS_RC_): one
 * configuration table, one check.
 */
#ifndef UCT_RC_PARAMS_H_
#define UCT_RC_PARAMS_H_

#include <ucs/config/parser.h>
#include <ucs/type/status.h>

#include <stddef.h>

typedef struct uct_rc_params {
    size_t seg_size;
    unsigned credits;
    unsigned rx_queue_len;
    size_t tx_backlog;
    int rma;
} uct_rc_params_t;

/*
 * The settings' entries, for a transport's configuration table: names
 * after _prefix (rc_sr and rc_fp: none; aptus: "RC_"), the struct at
 * _offset in the transport's configuration, and the defaults that differ
 * between transports. Entries, not a nested table: UCX reads a nested
 * table's fields under the transport's prefix alone (its name is another
 * prefix, shared across transports), which would make aptus's RC_SEG_SIZE
 * its UD SEG_SIZE.
 */
#define UCT_RC_PARAMS_FIELDS(_prefix, _offset, _seg_size, _rx_queue_len)       \
    { _prefix "SEG_SIZE", _seg_size,                                           \
      "Largest active message over a connection, UCT header included, and\n"   \
      "the size of one buffer of the receive pool all connections share\n"     \
      "(rc_sr: the papers' 8 KB eager buffers; aptus, whose larger messages\n" \
      "go over UD: 32k). 264 bytes (aptus: 272) to just under 16m.",           \
      (_offset) + ucs_offsetof(uct_rc_params_t, seg_size),                     \
      UCS_CONFIG_TYPE_MEMUNITS },                                              \
        { _prefix "CREDITS", "32",                                             \
          "Messages a sender may have in flight on one connection before "     \
          "the\n"                                                              \
          "receiver returns credits (1 to 65535). Beyond that sends wait on "  \
          "the\n"                                                              \
          "pending queue; nothing is dropped.",                                \
          (_offset) + ucs_offsetof(uct_rc_params_t, credits),                  \
          UCS_CONFIG_TYPE_UINT },                                              \
        { _prefix "RX_QUEUE_LEN", _rx_queue_len,                               \
          "Receive buffers the pool shared by every connection of the "        \
          "interface\n"                                                        \
          "(the shared receive queue) is expected to need; it allocates them " \
          "as\n"                                                               \
          "connections need them (1 to 1048576). rc_sr's grows beyond while "  \
          "the\n"                                                              \
          "application holds received messages, up to RX_MAX_BUFS; aptus\n"    \
          "delivers in place and holds none, so its pool stays at this.",      \
          (_offset) + ucs_offsetof(uct_rc_params_t, rx_queue_len),             \
          UCS_CONFIG_TYPE_UINT },                                              \
        { _prefix "TX_BACKLOG", "256k",                                        \
          "Bytes a connection may queue when the network does not take them "  \
          "at\n"                                                               \
          "once; further sends wait on the pending queue (4k to 1g).",         \
          (_offset) + ucs_offsetof(uct_rc_params_t, tx_backlog),               \
          UCS_CONFIG_TYPE_MEMUNITS },                                          \
    {                                                                          \
        _prefix "RMA", "y",                                                    \
            "RC-RDMA: one-sided put and get over the connections, by a "       \
            "direct\n"                                                         \
            "copy to peers on this host. rc_sr offers put and get to UCP\n"    \
            "(rendezvous and RMA; 'n' leaves active messages only); aptus "    \
            "moves\n"                                                          \
            "rendezvous data over it where the peer has a connection ('n', "   \
            "or\n"                                                             \
            "none: UD-ZCopy).",                                                \
            (_offset) + ucs_offsetof(uct_rc_params_t, rma),                    \
            UCS_CONFIG_TYPE_BOOL                                               \
    }

/* The entries alone, with rc_sr's names and defaults. */
extern ucs_config_field_t uct_rc_params_table[];

/* Refuse a setting out of range with an error naming the variable as the
 * user types it (UCX_<prefix><NAME>) and tl_name. trailer_len: bytes the
 * transport adds to every message of SEG_SIZE; conn_max_msg: the largest
 * message the wire's connections carry (what must still hold it). */
ucs_status_t uct_rc_params_check(const uct_rc_params_t *params,
                                 const char *tl_name, const char *prefix,
                                 size_t trailer_len, size_t conn_max_msg);

#endif
