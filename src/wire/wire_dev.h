/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: a wire's devices and addresses.
 *
 * What a transport asks of the wire before and beside its datagrams and
 * connections: which devices exist and how fast they are, how to open a
 * datagram or a connection wire on one, and the device address it
 * publishes and reads back from a peer. Every wire (sock, verbs) exports
 * one table; the memory domain picks it, and the transports reach the
 * wire only through it and the wire.h and conn.h tables, so a second wire
 * adds files and edits none of them.
 */
#ifndef APTUS_WIRE_DEV_H_
#define APTUS_WIRE_DEV_H_

#include "wire/conn.h"
#include "wire/wire.h"

#include <uct/base/uct_iface.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_wire_dev_ops {
    const char *name; /* in messages: "sock", "verbs" */

    /* The devices this wire opens, as UCT lists them (ucs_malloc'ed). */
    ucs_status_t (*query_devices)(uct_tl_device_resource_t **devices_p,
                                  unsigned *num_devices_p);

    /* Figures for UCT's performance estimates: one-way latency (seconds)
     * and the bandwidth (bytes/second) of messages copied through the
     * wire; zcopy_bw, that of bulk data moved by zero copy, given the
     * first. */
    void (*caps)(const char *dev_name, double *latency_p, double *bandwidth_p);
    double (*zcopy_bw)(const char *dev_name, double copy_bw);

    /* Every peer reached through dev_name is on this host (a loopback). */
    int (*is_local)(const char *dev_name);

    /* The NUMA node of dev_name (the NIC, the HCA), -1 when it has none:
     * where its receive pools and fast-path blocks belong. */
    int (*numa_node)(const char *dev_name);

    /* Datagram sizes: the one to use when the user leaves it to the wire
     * (never fragmented on the way), and the range a user may ask for. */
    size_t (*dgram_mtu_auto)(const char *dev_name);
    size_t dgram_mtu_min;
    size_t dgram_mtu_max;

    ucs_status_t (*dgram_open)(const char *dev_name,
                               const aptus_dgram_wire_config_t *config,
                               aptus_dgram_wire_t **wire_p);
    ucs_status_t (*conn_open)(const char *dev_name,
                              const aptus_conn_wire_config_t *config,
                              aptus_conn_wire_t **wire_p);
    /* A connection's messages: the bytes of the wire's own header before
     * each one in a receive area (where rx_align_offset counts from), and
     * the largest payload (max_frame) a connection carries. */
    size_t conn_rx_hdr_len;
    size_t conn_max_msg;
    /* Whether a connection's one-sided operations take the keys the
     * memory domain makes itself (sock: the target checks the token against
     * the domain's registrations). A wire whose connections need keys of
     * its own registration (verbs: an rkey of the HCA's protection domain)
     * says 0 and registers through mem_open (the one-sided domain's
     * registrations then come from the wire); without either, transports
     * that carry one-sided operations over connections list no device. */
    int conn_md_keys;
    /* The wire's registrar for a memory domain, or NULL. mem_open: for
     * every device the wire lists (UCS_ERR_UNSUPPORTED, said in one line,
     * where one registration cannot serve them all); mem_reg: memory that
     * peers reach through the wire's connections, its key's token and
     * host_id (what conn.h's key_check compares) and the handle to give
     * back to mem_dereg. */
    ucs_status_t (*mem_open)(void **ctx_p);
    void (*mem_close)(void *ctx);
    ucs_status_t (*mem_reg)(void *ctx, void *address, size_t length,
                            uint64_t *token_p, uint64_t *host_id_p,
                            void **memh_p);
    void (*mem_dereg)(void *ctx, void *memh);

    /* The device address a transport publishes for a wire whose own
     * address is local, and whether a peer's one is reachable from it. */
    size_t (*dev_addr_len)(const aptus_wire_addr_t *local);
    void (*dev_addr_pack)(const aptus_wire_addr_t *local, void *dev_addr);
    int (*dev_addr_reachable)(const aptus_wire_addr_t *local,
                              const void *remote_dev_addr);

    /* A port: the part of a wire address that differs between the
     * interfaces of one device (sock: the UDP/TCP port, verbs: the 24-bit
     * QP number), an opaque host-order value. Whoever carries one to a
     * peer (interface addresses, protocol messages) writes it as 4 bytes
     * little-endian. A port the wire cannot have (from a lying peer) gives
     * an address that is refused or unreachable, never an error here.
     * addr_make: a peer's wire address from its device address and the
     * port its interface address names; addr_port: the port of an
     * address of ours. */
    void (*addr_make)(const void *remote_dev_addr, uint32_t port,
                      aptus_wire_addr_t *addr);
    uint32_t (*addr_port)(const aptus_wire_addr_t *addr);
    /* The same device as addr, another port (out may be addr). */
    void (*addr_with_port)(const aptus_wire_addr_t *addr, uint32_t port,
                           aptus_wire_addr_t *out);
} aptus_wire_dev_ops_t;

/* The sock wire's (UDP, TCP and process_vm_readv/writev). */
extern const aptus_wire_dev_ops_t aptus_sock_wire_dev;

/* The verbs wire's (UD and RC queue pairs on HCA ports), where configure
 * found rdma-core (APTUS_HAVE_VERBS). */
extern const aptus_wire_dev_ops_t aptus_verbs_wire_dev;

#ifdef __cplusplus
}
#endif

#endif
