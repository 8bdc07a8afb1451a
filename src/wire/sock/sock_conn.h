/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire, connection part (TCP, process_vm_writev/readv).
 */
#ifndef APTUS_SOCK_CONN_H_
#define APTUS_SOCK_CONN_H_

#include "wire/conn.h"
#include "sock_frame.h" /* a frame header precedes each message received */

#ifdef __cplusplus
extern "C" {
#endif

/* Listen on the first address of network interface dev_name. */
ucs_status_t aptus_sock_conn_open(const char *dev_name,
                                  const aptus_conn_wire_config_t *config,
                                  aptus_conn_wire_t **wire_p);

#ifdef __cplusplus
}
#endif

#endif
