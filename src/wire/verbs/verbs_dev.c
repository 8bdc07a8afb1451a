/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's device table (see wire/wire_dev.h).
 *
 * Devices are the active ports of the HCAs libibverbs lists, named as UCX
 * names them ("mlx5_0:1"). A device address is how a peer's port is
 * routed: its LID on InfiniBand, its GID where packets carry a GRH (RoCE);
 * the port of a wire address is its QP number. Only ever run against the
 * in-memory verbs double (test/verbs), never on an HCA.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wire/wire_dev.h"
#include "wire/verbs/verbs_addr.h"
#include "wire/verbs/verbs_conn.h"
#include "wire/verbs/verbs_dgram.h"
#include "wire/verbs/verbs_dgram_int.h"
#include "wire/verbs/verbs_hca.h"

#include <ucs/datastruct/array.inl>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>

#include <stdlib.h>
#include <string.h>

/* Largest message of a connection: what aptus_verbs_conn_open accepts as
 * max_frame (one SRQ buffer each; the transports' settings pick less). */
#define APTUS_VERBS_CONN_MAX_MSG (1ul << 30)

/* The largest UD payload any port has (IBV_MTU_4096). */
#define APTUS_VERBS_DGRAM_MTU_MAX 4096

/* A device address: flags (APTUS_VERBS_ADDR_F_GLOBAL), then the route:
 * the 2-byte LID, or the 16-byte GID, as in a wire address. */
#define APTUS_VERBS_DEV_ADDR_LID_LEN 3
#define APTUS_VERBS_DEV_ADDR_GID_LEN 17

UCS_ARRAY_DEFINE_INLINE(aptus_verbs_devices, unsigned, uct_tl_device_resource_t)
typedef ucs_array_t(aptus_verbs_devices) aptus_verbs_devices_t;

/* The active ports of one HCA, appended. */
static ucs_status_t aptus_verbs_dev_ports(struct ibv_device *dev,
                                          aptus_verbs_devices_t *devices)
{
    const char *hca = ibv_get_device_name(dev);
    uct_tl_device_resource_t *device;
    struct ibv_device_attr dev_attr;
    struct ibv_port_attr port_attr;
    struct ibv_context *ctx;
    ucs_status_t status = UCS_OK;
    unsigned port;

    ctx = ibv_open_device(dev);
    if (ctx == NULL) {
        ucs_debug("verbs wire: cannot open %s: %m", hca);
        return UCS_OK; /* another HCA may do */
    }
    if (ibv_query_device(ctx, &dev_attr) != 0) {
        ucs_debug("verbs wire: cannot query %s: %m", hca);
        goto out;
    }
    for (port = 1; port <= dev_attr.phys_port_cnt; ++port) {
        if ((ibv_query_port(ctx, (uint8_t)port, &port_attr) != 0) ||
            (port_attr.state != IBV_PORT_ACTIVE)) {
            continue;
        }
        status = ucs_array_append(aptus_verbs_devices, devices);
        if (status != UCS_OK) {
            break;
        }
        device = ucs_array_last(devices);
        memset(device, 0, sizeof(*device));
        ucs_snprintf_zero(device->name, sizeof(device->name), "%s:%u", hca,
                          port);
        device->type       = UCT_DEVICE_TYPE_NET;
        device->sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    }
out:
    ibv_close_device(ctx);
    return status;
}

static ucs_status_t
aptus_verbs_query_devices(uct_tl_device_resource_t **devices_p,
                          unsigned *num_devices_p)
{
    aptus_verbs_devices_t devices = UCS_ARRAY_DYNAMIC_INITIALIZER;
    struct ibv_device **list;
    ucs_status_t status = UCS_OK;
    int i, num_hcas = 0;

    list = ibv_get_device_list(&num_hcas);
    if (list == NULL) {
        ucs_debug("verbs wire: no devices: ibv_get_device_list: %m");
        num_hcas = 0;
    }
    for (i = 0; (i < num_hcas) && (status == UCS_OK); ++i) {
        status = aptus_verbs_dev_ports(list[i], &devices);
    }
    if (list != NULL) {
        ibv_free_device_list(list);
    }
    if (status != UCS_OK) {
        ucs_array_cleanup_dynamic(&devices);
        return status;
    }
    if (ucs_array_is_empty(&devices)) {
        /* the one line that says why no transport is listed on verbs */
        ucs_diag("verbs wire: no transports on InfiniBand or RoCE: %s",
                 (num_hcas == 0) ? "libibverbs lists no HCA"
                                 : "no HCA has an active port");
    }
    /* the caller frees the buffer with ucs_free, as UCT does */
    *num_devices_p = ucs_array_length(&devices);
    *devices_p     = ucs_array_extract_buffer(aptus_verbs_devices, &devices);
    return UCS_OK;
}

/* ibv_port_attr's active_width and active_speed (bits) as lanes and
 * data rate per lane in Gb/s, after line encoding. */
static const struct {
    uint8_t bit;
    double value;
} aptus_verbs_widths[] = { { 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 } },
  aptus_verbs_speeds[] = {
      { 1, 2.0 },    /* SDR */
      { 2, 4.0 },    /* DDR */
      { 4, 8.0 },    /* QDR */
      { 8, 10.0 },   /* FDR10 */
      { 16, 13.64 }, /* FDR */
      { 32, 25.0 },  /* EDR */
      { 64, 50.0 },  /* HDR */
      { 128, 100.0 } /* NDR */
  };

/* Data rate of a port in bytes per second (4x QDR when it says nothing
 * this table knows). */
static double aptus_verbs_port_bw(const struct ibv_port_attr *attr)
{
    double lanes = 4, gbps = 8.0;
    unsigned i;

    for (i = 0; i < ucs_static_array_size(aptus_verbs_widths); ++i) {
        if (aptus_verbs_widths[i].bit == attr->active_width) {
            lanes = aptus_verbs_widths[i].value;
        }
    }
    for (i = 0; i < ucs_static_array_size(aptus_verbs_speeds); ++i) {
        if (aptus_verbs_speeds[i].bit == attr->active_speed) {
            gbps = aptus_verbs_speeds[i].value;
        }
    }
    return lanes * gbps * 1e9 / 8;
}

static void aptus_verbs_dev_caps(const char *dev_name, double *latency_p,
                                 double *bandwidth_p)
{
    struct ibv_port_attr attr;

    *latency_p   = 1e-6; /* a switch hop and the HCAs' own */
    *bandwidth_p = aptus_verbs_port_query(dev_name, &attr)
                       ? aptus_verbs_port_bw(&attr)
                       : 4e9; /* unknown: a 4x QDR port's */
}

/* The HCA moves bulk data without copies at the rate of the link. */
static double aptus_verbs_dev_zcopy_bw(const char *dev_name, double copy_bw)
{
    return copy_bw;
}

/* Peers behind an HCA port are anywhere on the fabric. */
static int aptus_verbs_dev_is_local(const char *dev_name)
{
    return 0;
}

static size_t aptus_verbs_dev_mtu_auto(const char *dev_name)
{
    size_t mtu = aptus_verbs_dgram_port_mtu(dev_name);

    return (mtu == 0) ? APTUS_VERBS_DGRAM_MTU_MIN : mtu;
}

static size_t aptus_verbs_dev_addr_len(const aptus_wire_addr_t *local)
{
    const aptus_verbs_addr_t *a = (const aptus_verbs_addr_t *)local->raw;

    return (a->flags & APTUS_VERBS_ADDR_F_GLOBAL)
               ? APTUS_VERBS_DEV_ADDR_GID_LEN
               : APTUS_VERBS_DEV_ADDR_LID_LEN;
}

static void aptus_verbs_dev_addr_pack(const aptus_wire_addr_t *local,
                                      void *dev_addr)
{
    const aptus_verbs_addr_t *a = (const aptus_verbs_addr_t *)local->raw;
    uint8_t *p                  = dev_addr;

    p[0] = a->flags;
    memcpy(p + 1, a->route, aptus_verbs_dev_addr_len(local) - 1);
}

/* Ports of one fabric reach each other: LID to LID (InfiniBand), GID to
 * GID (RoCE, routed); an address with flags this wire does not know, or
 * of the other kind, is another fabric's. */
static int aptus_verbs_dev_addr_reachable(const aptus_wire_addr_t *local,
                                          const void *remote_dev_addr)
{
    const aptus_verbs_addr_t *a = (const aptus_verbs_addr_t *)local->raw;
    uint8_t flags               = *(const uint8_t *)remote_dev_addr;

    return (flags & ~APTUS_VERBS_ADDR_F_GLOBAL) == 0 && (flags == a->flags);
}

static void aptus_verbs_dev_addr_make(const void *remote_dev_addr,
                                      uint32_t port, aptus_wire_addr_t *addr)
{
    const uint8_t *p = remote_dev_addr;
    union ibv_gid gid;
    uint16_t lid;

    /* a port above 24 bits is no QP: QP 0, which no UD datagram reaches */
    if (port > 0xffffffu) {
        port = 0;
    }
    if (p[0] & APTUS_VERBS_ADDR_F_GLOBAL) {
        memcpy(gid.raw, p + 1, sizeof(gid.raw));
        aptus_verbs_addr_pack(port, 0, APTUS_VERBS_QKEY, &gid, addr);
    } else {
        lid = (uint16_t)((p[1] << 8) | p[2]);
        aptus_verbs_addr_pack(port, lid, APTUS_VERBS_QKEY, NULL, addr);
    }
}

static uint32_t aptus_verbs_dev_addr_port(const aptus_wire_addr_t *addr)
{
    return aptus_verbs_addr_qpn(addr);
}

static void aptus_verbs_dev_addr_with_port(const aptus_wire_addr_t *addr,
                                           uint32_t port,
                                           aptus_wire_addr_t *out)
{
    aptus_verbs_addr_t *a;

    if (out != addr) {
        *out = *addr;
    }
    if (port > 0xffffffu) {
        port = 0;
    }
    a         = (aptus_verbs_addr_t *)out->raw;
    a->qpn[0] = (uint8_t)(port >> 16);
    a->qpn[1] = (uint8_t)(port >> 8);
    a->qpn[2] = (uint8_t)port;
}

/* The registrar of the verbs domains: the HCA's protection domain, so
 * that a connection on any of its ports reaches what the domain
 * registers. One HCA only: a key carries one rkey, and an rkey is good in
 * the PD it was made in (a domain per HCA, as UCX's ib has, would lift
 * this). */
typedef struct aptus_verbs_mem {
    aptus_verbs_hca_t *hca;
    uint16_t lid;       /* of the first active port: for logs */
    uint64_t fabric_id; /* what its connections' key_check compares */
} aptus_verbs_mem_t;

/* The one HCA with active ports: its name in hca, the first of them in
 * *port_p. UCS_ERR_UNSUPPORTED with more than one, UCS_ERR_NO_DEVICE with
 * none. */
static ucs_status_t aptus_verbs_mem_hca(char *hca, size_t max, unsigned *port_p)
{
    uct_tl_device_resource_t *devices;
    unsigned i, num = 0, num_hcas = 0;
    size_t len, prev_len = 0;
    ucs_status_t status;

    status = aptus_verbs_query_devices(&devices, &num);
    if (status != UCS_OK) {
        return status;
    }
    for (i = 0; i < num; ++i) {
        /* the ports of an HCA are listed together */
        len = strcspn(devices[i].name, ":");
        if ((i > 0) && (len == prev_len) &&
            !strncmp(devices[i].name, devices[i - 1].name, len)) {
            continue;
        }
        prev_len = len;
        if ((++num_hcas == 1) && (len < max)) {
            memcpy(hca, devices[i].name, len);
            hca[len] = '\0';
            *port_p  = (unsigned)strtoul(devices[i].name + len + 1, NULL, 10);
        }
    }
    len = (num > 0) ? strcspn(devices[0].name, ":") : 0;
    ucs_free(devices);
    if ((num_hcas == 0) || (len >= max)) {
        return UCS_ERR_NO_DEVICE;
    }
    if (num_hcas > 1) {
        ucs_diag("verbs wire: no transports with RDMA over connections "
                 "(rc_sr, rc_fp, aptus) on InfiniBand or RoCE: %u HCAs have "
                 "active ports, and one memory domain serves one HCA's "
                 "protection domain",
                 num_hcas);
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}

static ucs_status_t aptus_verbs_mem_open(void **ctx_p)
{
    struct ibv_port_attr attr;
    aptus_verbs_mem_t *mem;
    union ibv_gid gid;
    ucs_status_t status;
    unsigned port = 1;
    char hca[64];

    status = aptus_verbs_mem_hca(hca, sizeof(hca), &port);
    if (status != UCS_OK) {
        return status;
    }
    mem = ucs_calloc(1, sizeof(*mem), "aptus_verbs_mem");
    if (mem == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    status = aptus_verbs_hca_get(hca, &mem->hca);
    if (status != UCS_OK) {
        goto err_free;
    }
    memset(&gid, 0, sizeof(gid));
    if (ibv_query_port(mem->hca->ctx, (uint8_t)port, &attr) != 0) {
        status = UCS_ERR_NO_DEVICE;
        goto err_put;
    }
    /* as the port's wires name the fabric: by the GID where packets carry
     * one (RoCE), else by LID alone */
    if ((attr.link_layer == IBV_LINK_LAYER_ETHERNET) &&
        ibv_query_gid(mem->hca->ctx, (uint8_t)port, 0, &gid)) {
        status = UCS_ERR_NO_DEVICE;
        goto err_put;
    }
    mem->lid       = attr.lid;
    mem->fabric_id = aptus_verbs_fabric_id(&gid);
    *ctx_p         = mem;
    return UCS_OK;

err_put:
    aptus_verbs_hca_put(mem->hca);
err_free:
    ucs_free(mem);
    return status;
}

static void aptus_verbs_mem_close(void *ctx)
{
    aptus_verbs_mem_t *mem = ctx;

    aptus_verbs_hca_put(mem->hca);
    ucs_free(mem);
}

static ucs_status_t aptus_verbs_mem_reg(void *ctx, void *address, size_t length,
                                        uint64_t *token_p, uint64_t *host_id_p,
                                        void **memh_p)
{
    aptus_verbs_mem_t *mem = ctx;
    struct ibv_mr *mr;

    mr = aptus_verbs_hca_reg(mem->hca, address, length, mem->lid, token_p);
    if (mr == NULL) {
        return UCS_ERR_IO_ERROR;
    }
    *host_id_p = mem->fabric_id;
    *memh_p    = mr;
    return UCS_OK;
}

static void aptus_verbs_mem_dereg(void *ctx, void *memh)
{
    if (ibv_dereg_mr((struct ibv_mr *)memh)) {
        ucs_warn("verbs wire: ibv_dereg_mr failed");
    }
}

const aptus_wire_dev_ops_t aptus_verbs_wire_dev = {
    .name               = "verbs",
    .query_devices      = aptus_verbs_query_devices,
    .caps               = aptus_verbs_dev_caps,
    .zcopy_bw           = aptus_verbs_dev_zcopy_bw,
    .is_local           = aptus_verbs_dev_is_local,
    .numa_node          = aptus_verbs_numa_node,
    .dgram_mtu_auto     = aptus_verbs_dev_mtu_auto,
    .dgram_mtu_min      = APTUS_VERBS_DGRAM_MTU_MIN,
    .dgram_mtu_max      = APTUS_VERBS_DGRAM_MTU_MAX,
    .dgram_open         = aptus_verbs_dgram_open,
    .conn_open          = aptus_verbs_conn_open,
    .conn_rx_hdr_len    = 0, /* a message lands alone in its SRQ buffer */
    .conn_max_msg       = APTUS_VERBS_CONN_MAX_MSG,
    .conn_md_keys       = 0, /* rkeys of the HCA's PD: mem_reg's */
    .mem_open           = aptus_verbs_mem_open,
    .mem_close          = aptus_verbs_mem_close,
    .mem_reg            = aptus_verbs_mem_reg,
    .mem_dereg          = aptus_verbs_mem_dereg,
    .dev_addr_len       = aptus_verbs_dev_addr_len,
    .dev_addr_pack      = aptus_verbs_dev_addr_pack,
    .dev_addr_reachable = aptus_verbs_dev_addr_reachable,
    .addr_make          = aptus_verbs_dev_addr_make,
    .addr_port          = aptus_verbs_dev_addr_port,
    .addr_with_port     = aptus_verbs_dev_addr_with_port,
};
