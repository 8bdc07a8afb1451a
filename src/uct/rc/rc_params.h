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

/* Defaults are rc_sr's; a transport embeds the table with its own (UCX's
 * "NAME=value;..." in the embedding entry). */
extern ucs_config_field_t uct_rc_params_table[];

/* Refuse a setting out of range with an error naming the variable as the
 * user types it (UCX_<prefix><NAME>) and tl_name. trailer_len: bytes the
 * transport adds to every message of SEG_SIZE; conn_max_msg: the largest
 * message the wire's connections carry (what must still hold it). */
ucs_status_t uct_rc_params_check(const uct_rc_params_t *params,
                                 const char *tl_name, const char *prefix,
                                 size_t trailer_len, size_t conn_max_msg);

#endif
