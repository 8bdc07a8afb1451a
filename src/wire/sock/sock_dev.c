/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's device table (see wire/wire_dev.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "base/aptus_numa.h"
#include "wire/wire_dev.h"
#include "wire/sock/sock_conn.h"
#include "wire/sock/sock_dgram.h"
#include "wire/sock/sock_netif.h"

/* A network interface's node (none for lo and virtual interfaces). */
static int aptus_sock_dev_numa_node(const char *dev_name)
{
    return aptus_numa_node_of("net", dev_name);
}

static uint32_t aptus_sock_dev_addr_port(const aptus_wire_addr_t *addr)
{
    return aptus_sock_wire_addr_port(addr);
}

const aptus_wire_dev_ops_t aptus_sock_wire_dev = {
    .name               = "sock",
    .query_devices      = aptus_sock_query_devices,
    .caps               = aptus_sock_netif_caps,
    .zcopy_bw           = aptus_sock_netif_zcopy_bw,
    .is_local           = aptus_sock_netif_is_loopback,
    .numa_node          = aptus_sock_dev_numa_node,
    .dgram_mtu_auto     = aptus_sock_dgram_auto_mtu,
    .dgram_mtu_min      = APTUS_SOCK_DGRAM_MTU_MIN,
    .dgram_mtu_max      = APTUS_SOCK_DGRAM_MTU_MAX,
    .dgram_open         = aptus_sock_dgram_open,
    .conn_open          = aptus_sock_conn_open,
    .conn_rx_hdr_len    = APTUS_FRAME_HDR_LEN,
    .conn_max_msg       = APTUS_FRAME_MAX_LEN,
    .conn_md_keys       = 1,
    .dev_addr_len       = aptus_sock_dev_addr_len,
    .dev_addr_pack      = aptus_sock_dev_addr_pack,
    .dev_addr_reachable = aptus_sock_dev_addr_reachable,
    .addr_make          = aptus_sock_wire_addr_make,
    .addr_port          = aptus_sock_dev_addr_port,
    .addr_with_port     = aptus_sock_wire_addr_with_port,
};
