/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire, datagram part (see verbs_dgram.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_addr.h"
#include "verbs_dgram_int.h"
#include "base/aptus_numa.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a datagram held back for reordering waits at most. */
#define APTUS_VERBS_REORDER_US 1000

/* "mlx5_0:1" -> "mlx5_0", 1 */
static ucs_status_t aptus_verbs_dev_parse(const char *dev_name, char *name,
                                          size_t max, uint8_t *port_p)
{
    const char *colon = strrchr(dev_name, ':');
    size_t len =
        (colon != NULL) ? (size_t)(colon - dev_name) : strlen(dev_name);
    char *end;
    long port = 1;

    if ((len == 0) || (len >= max)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (colon != NULL) {
        port = strtol(colon + 1, &end, 10);
        if ((*end != '\0') || (port < 1) || (port > 255)) {
            return UCS_ERR_INVALID_PARAM;
        }
    }
    memcpy(name, dev_name, len);
    name[len] = '\0';
    *port_p   = (uint8_t)port;
    return UCS_OK;
}

/* Open the HCA port dev_name names, active (the HCA shared, see
 * verbs_hca.h); its attributes in *attr. */
static ucs_status_t aptus_verbs_port_open(const char *dev_name,
                                          aptus_verbs_hca_t **hca_p,
                                          uint8_t *port_p,
                                          struct ibv_port_attr *attr)
{
    aptus_verbs_hca_t *hca;
    ucs_status_t status;
    char name[64];
    int ret;

    if (aptus_verbs_dev_parse(dev_name, name, sizeof(name), port_p) != UCS_OK) {
        ucs_error("verbs wire: bad device name '%s' (want <hca>:<port>)",
                  dev_name);
        return UCS_ERR_INVALID_PARAM;
    }
    status = aptus_verbs_hca_get(name, &hca);
    if (status != UCS_OK) {
        return status;
    }

    ret = ibv_query_port(hca->ctx, *port_p, attr);
    if ((ret != 0) || (attr->state != IBV_PORT_ACTIVE)) {
        ucs_debug("verbs wire: %s is not an active port", dev_name);
        aptus_verbs_hca_put(hca);
        return UCS_ERR_NO_DEVICE;
    }
    *hca_p = hca;
    return UCS_OK;
}

int aptus_verbs_numa_node(const char *dev_name)
{
    char hca[64];
    size_t len = strcspn(dev_name, ":");

    if (len >= sizeof(hca)) {
        return -1;
    }
    memcpy(hca, dev_name, len);
    hca[len] = '\0';
    return aptus_numa_node_of("infiniband", hca);
}

int aptus_verbs_port_query(const char *dev_name, struct ibv_port_attr *attr)
{
    aptus_verbs_hca_t *hca;
    uint8_t port;

    if (aptus_verbs_port_open(dev_name, &hca, &port, attr) != UCS_OK) {
        return 0;
    }
    aptus_verbs_hca_put(hca);
    return 1;
}

size_t aptus_verbs_dgram_port_mtu(const char *dev_name)
{
    struct ibv_port_attr attr;

    if (!aptus_verbs_port_query(dev_name, &attr)) {
        return 0;
    }
    return (size_t)1 << (attr.active_mtu + 7); /* IBV_MTU_256 is 1 */
}

/* Completions of sends: their buffers are free again. A send that failed
 * put a UD QP's send queue in error (SQE), which RTS takes back. */
static void aptus_verbs_poll_send(aptus_verbs_dgram_t *v)
{
    struct ibv_wc wc[APTUS_VERBS_BATCH];
    struct ibv_qp_attr attr;
    int i, n, failed = 0;

    do {
        n = ibv_poll_cq(v->send_cq, APTUS_VERBS_BATCH, wc);
        for (i = 0; i < n; ++i) {
            v->tx_free[v->tx_num_free++] = (unsigned)wc[i].wr_id;
            if (wc[i].status != IBV_WC_SUCCESS) {
                ucs_debug("verbs wire: send failed: %s",
                          ibv_wc_status_str(wc[i].status));
                v->tx_cq_errors++;
                v->super.stats.tx_errors++;
                failed = 1;
            }
        }
    } while (n == APTUS_VERBS_BATCH);
    if (n < 0) {
        ucs_error("verbs wire: polling the send CQ failed");
    }
    if (failed && !v->ud.broken) {
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = IBV_QPS_RTS;
        (void)ibv_modify_qp(v->ud.qp, &attr, IBV_QP_STATE);
    }
}

/* The wire's QP out of the error state, once its receives came back and
 * its sends completed (a datagram held by the fault injector is not
 * posted yet). */
static void aptus_verbs_dgram_recover(aptus_verbs_dgram_t *v)
{
    aptus_verbs_ud_recover(&v->ud, v->port, v->tx_num_free == v->tx_count);
}

/* Post the datagram in send buffer slot; a datagram the HCA refuses is
 * lost, as on the sock wire. */
static void aptus_verbs_post(aptus_verbs_dgram_t *v, unsigned slot,
                             size_t length, const aptus_wire_addr_t *dst)
{
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;
    struct ibv_ah *ah;
    int ret;

    ah = aptus_verbs_ah_get(&v->ahs, dst);
    if (ah == NULL) {
        v->super.stats.tx_errors++;
        v->tx_free[v->tx_num_free++] = slot;
        return;
    }
    sge.addr   = (uintptr_t)(v->tx_buf + (size_t)slot * v->tx_stride);
    sge.length = (uint32_t)length;
    sge.lkey   = v->ud.mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id             = slot;
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_SIGNALED;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = aptus_verbs_addr_qpn(dst);
    wr.wr.ud.remote_qkey = aptus_verbs_addr_qkey(dst);
    ret                  = ibv_post_send(v->ud.qp, &wr, &bad);
    if (ret != 0) {
        ucs_debug("verbs wire: ibv_post_send failed: %s", strerror(ret));
        v->super.stats.tx_errors++;
        v->tx_free[v->tx_num_free++] = slot;
        return;
    }
    v->super.stats.tx_dgrams++;
    v->super.stats.tx_bytes += length;
}

static void aptus_verbs_release_held(aptus_verbs_dgram_t *v, int after_send)
{
    aptus_verbs_held_t *h;
    unsigned i = 0;

    while (i < v->num_held) {
        h = &v->held[i];
        if (!((after_send && h->after_next) || (h->release_us <= v->now_us))) {
            ++i;
            continue;
        }
        aptus_verbs_post(v, h->slot, h->length, &h->dst);
        *h = v->held[--v->num_held];
    }
}

/* The fault injector's verdict on the datagram in slot; returns whether
 * it is still to be posted. */
static int aptus_verbs_fault(aptus_verbs_dgram_t *v, unsigned slot,
                             size_t length, const aptus_wire_addr_t *dst)
{
    aptus_fault_action_t action = aptus_fault_decide(&v->fault);
    aptus_verbs_held_t *h;
    unsigned dup;

    switch (action) {
    case APTUS_FAULT_DROP:
        v->super.stats.fault_drop++;
        v->tx_free[v->tx_num_free++] = slot;
        return 0;
    case APTUS_FAULT_DUPLICATE:
        if (v->tx_num_free > 0) {
            dup = v->tx_free[--v->tx_num_free];
            memcpy(v->tx_buf + (size_t)dup * v->tx_stride,
                   v->tx_buf + (size_t)slot * v->tx_stride, length);
            aptus_verbs_post(v, dup, length, dst);
            v->super.stats.fault_dup++;
        }
        return 1;
    case APTUS_FAULT_REORDER:
    case APTUS_FAULT_DELAY:
        if (v->num_held == APTUS_VERBS_HELD_MAX) {
            return 1; /* cannot hold more: let it pass */
        }
        h             = &v->held[v->num_held++];
        h->slot       = slot;
        h->length     = length;
        h->dst        = *dst;
        h->after_next = (action == APTUS_FAULT_REORDER);
        h->release_us = v->now_us + (h->after_next ? APTUS_VERBS_REORDER_US
                                                   : v->fault.config.delay_us);
        if (h->after_next) {
            v->super.stats.fault_reorder++;
        } else {
            v->super.stats.fault_delay++;
        }
        return 0;
    default:
        return 1;
    }
}

static ucs_status_t aptus_verbs_dgram_send(aptus_dgram_wire_t *wire,
                                           const aptus_dgram_tx_t *tx,
                                           unsigned count, unsigned *sent_p)
{
    aptus_verbs_dgram_t *v = ucs_derived_of(wire, aptus_verbs_dgram_t);
    unsigned i, k, slot;
    size_t length;
    uint8_t *p;

    aptus_verbs_poll_send(v);
    for (i = 0; i < count; ++i) {
        length = 0;
        for (k = 0; k < tx[i].iovcnt; ++k) {
            length += tx[i].iov[k].iov_len;
        }
        if (length > wire->mtu) {
            wire->stats.tx_errors++; /* no UD QP carries it: lost */
            continue;
        }
        if (v->tx_num_free == 0) {
            aptus_verbs_poll_send(v);
            if (v->tx_num_free == 0) {
                break;
            }
        }
        slot = v->tx_free[--v->tx_num_free];
        p    = v->tx_buf + (size_t)slot * v->tx_stride;
        for (k = 0; k < tx[i].iovcnt; ++k) {
            memcpy(p, tx[i].iov[k].iov_base, tx[i].iov[k].iov_len);
            p += tx[i].iov[k].iov_len;
        }
        if (ucs_unlikely(aptus_fault_enabled(&v->fault)) &&
            !aptus_verbs_fault(v, slot, length, tx[i].dst)) {
            continue;
        }
        aptus_verbs_post(v, slot, length, tx[i].dst);
        if (ucs_unlikely(v->num_held > 0)) {
            aptus_verbs_release_held(v, 1);
        }
    }
    *sent_p = i;
    return (i == count) ? UCS_OK : UCS_ERR_NO_RESOURCE;
}

/* Take the completion channel's events: each must be acknowledged (a CQ
 * with events not acknowledged cannot be destroyed), and the CQ armed
 * again before the next wait. */
static void aptus_verbs_take_events(aptus_verbs_dgram_t *v)
{
    struct ibv_cq *cq;
    void *cq_context;

    if (v->channel == NULL) {
        return;
    }
    while (ibv_get_cq_event(v->channel, &cq, &cq_context) == 0) {
        ibv_ack_cq_events(cq, 1);
        v->armed = 0;
    }
}

static unsigned aptus_verbs_dgram_recv(aptus_dgram_wire_t *wire,
                                       aptus_dgram_rx_t *rx, unsigned count)
{
    aptus_verbs_dgram_t *v = ucs_derived_of(wire, aptus_verbs_dgram_t);
    struct ibv_wc wc[APTUS_VERBS_BATCH];
    aptus_verbs_repost_t repost;
    unsigned filled = 0;
    const uint8_t *buf;
    size_t length;
    int i, n;

    aptus_verbs_take_events(v);
    count = ucs_min(count, APTUS_VERBS_BATCH);
    n     = ibv_poll_cq(v->ud.recv_cq, (int)count, wc);
    if ((n == 0) && (v->channel != NULL) && !v->armed) {
        /* arm, then look again: a datagram may have come in between */
        if (ibv_req_notify_cq(v->recv_cq, 0) == 0) {
            v->armed = 1;
        }
        n = ibv_poll_cq(v->ud.recv_cq, (int)count, wc);
    }
    if (n < 0) {
        ucs_error("verbs wire: polling the receive CQ failed");
        return 0;
    }

    repost.count = 0;
    for (i = 0; i < n; ++i) {
        --v->ud.rx_posted;
        if (wc[i].status != IBV_WC_SUCCESS) {
            /* the QP is in the error state now: its buffers come back
             * flushed and are not posted again */
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
                ucs_error("verbs wire: receive failed: %s",
                          ibv_wc_status_str(wc[i].status));
            }
            v->rx_errors++;
            v->ud.broken = 1;
            continue;
        }
        buf    = v->ud.buf + wc[i].wr_id * v->ud.rx_stride;
        length = wc[i].byte_len - APTUS_VERBS_GRH_LEN;
        if ((wc[i].byte_len < APTUS_VERBS_GRH_LEN) || (length > wire->mtu)) {
            /* a peer with a larger MTU: dropped, as the sock wire does */
            wire->stats.rx_truncated++;
        } else {
            memcpy(rx[filled].buf, buf + APTUS_VERBS_GRH_LEN, length);
            rx[filled].length = length;
            aptus_verbs_ud_src(v, &wc[i], buf, &rx[filled].src);
            wire->stats.rx_dgrams++;
            wire->stats.rx_bytes += length;
            ++filled;
        }
        aptus_verbs_ud_repost_add(&v->ud, &repost, (unsigned)wc[i].wr_id);
    }
    if (ucs_likely(!v->ud.broken)) {
        aptus_verbs_ud_repost_flush(&v->ud, &repost);
    } else {
        /* every buffer is posted again once the QP is back */
        aptus_verbs_dgram_recover(v);
    }
    return filled;
}

static unsigned aptus_verbs_dgram_progress(aptus_dgram_wire_t *wire,
                                           uint64_t now_us)
{
    aptus_verbs_dgram_t *v = ucs_derived_of(wire, aptus_verbs_dgram_t);
    unsigned before        = v->num_held;

    v->now_us = now_us;
    aptus_verbs_poll_send(v);
    if (ucs_unlikely(v->ud.broken)) {
        aptus_verbs_dgram_recover(v);
    }
    if (before == 0) {
        return 0;
    }
    aptus_verbs_release_held(v, 0);
    return before - v->num_held;
}

static int aptus_verbs_dgram_event_fd(aptus_dgram_wire_t *wire)
{
    aptus_verbs_dgram_t *v = ucs_derived_of(wire, aptus_verbs_dgram_t);

    return (v->channel != NULL) ? v->channel->fd : -1;
}

static void aptus_verbs_dgram_close(aptus_dgram_wire_t *wire)
{
    aptus_verbs_dgram_t *v = ucs_derived_of(wire, aptus_verbs_dgram_t);

    aptus_verbs_ud_close(&v->ud);
    aptus_verbs_ah_cache_cleanup(&v->ahs);
    aptus_verbs_take_events(v);
    if ((v->recv_cq != NULL) && ibv_destroy_cq(v->recv_cq)) {
        ucs_warn("verbs wire: ibv_destroy_cq failed");
    }
    if ((v->send_cq != NULL) && ibv_destroy_cq(v->send_cq)) {
        ucs_warn("verbs wire: ibv_destroy_cq failed");
    }
    if ((v->channel != NULL) && ibv_destroy_comp_channel(v->channel)) {
        ucs_warn("verbs wire: ibv_destroy_comp_channel failed");
    }
    if (v->hca != NULL) {
        aptus_verbs_hca_put(v->hca);
    }
    ucs_free(v->tx_free);
    ucs_free(v);
}

/* What the wire holds of the HCA: QPs, registered bytes, receives posted
 * and address handles. */
static unsigned aptus_verbs_dgram_stats(aptus_dgram_wire_t *wire,
                                        aptus_stat_t *stats, unsigned max)
{
    aptus_verbs_dgram_t *v   = ucs_derived_of(wire, aptus_verbs_dgram_t);
    const aptus_stat_t all[] = {
        { "verbs_qps", 1 + wire->stats.rxqs_opened },
        { "verbs_reg_bytes", (uint64_t)v->ud.mr->length },
        { "verbs_rx_posted", v->ud.rx_posted },
        { "verbs_ahs", v->ahs.count },
        { "verbs_port_mtu", v->port_mtu },
        { "verbs_rx_errors", v->rx_errors },
        { "verbs_qp_rebuilds", v->ud.rebuilds },
    };
    unsigned n = ucs_min(max, ucs_static_array_size(all));

    memcpy(stats, all, n * sizeof(*stats));
    return n;
}

static const aptus_dgram_wire_ops_t aptus_verbs_dgram_ops = {
    .send      = aptus_verbs_dgram_send,
    .recv      = aptus_verbs_dgram_recv,
    .send_seg  = NULL,
    .progress  = aptus_verbs_dgram_progress,
    .addr_str  = aptus_verbs_addr_str,
    .event_fd  = aptus_verbs_dgram_event_fd,
    .rxq_open  = aptus_verbs_rxq_open,
    .rxq_recv  = aptus_verbs_rxq_recv,
    .rxq_drain = aptus_verbs_rxq_drain,
    .rxq_close = aptus_verbs_rxq_close,
    .close     = aptus_verbs_dgram_close,
    .same_node = aptus_verbs_addr_same_node,
    .stats     = aptus_verbs_dgram_stats,
};

/* The completion channel behind event_fd; without one the wire is polled
 * only. */
static void aptus_verbs_channel_open(aptus_verbs_dgram_t *v)
{
    int flags;

    v->channel = ibv_create_comp_channel(v->ctx);
    if (v->channel == NULL) {
        ucs_debug("verbs wire: no completion channel: %m");
        return;
    }
    flags = fcntl(v->channel->fd, F_GETFL);
    if ((flags < 0) ||
        (fcntl(v->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
        ibv_destroy_comp_channel(v->channel);
        v->channel = NULL;
    }
}

ucs_status_t aptus_verbs_dgram_open(const char *dev_name,
                                    const aptus_dgram_wire_config_t *config,
                                    aptus_dgram_wire_t **wire_p)
{
    struct ibv_device_attr dev_attr;
    struct ibv_port_attr port_attr;
    aptus_verbs_dgram_t *v;
    unsigned rx_count, i;
    ucs_status_t status;
    const char *bad;

    bad = aptus_fault_config_check(&config->fault);
    if (bad != NULL) {
        ucs_error("verbs wire: invalid fault injector setting %s", bad);
        return UCS_ERR_INVALID_PARAM;
    }
    v = ucs_calloc(1, sizeof(*v), "aptus_verbs_dgram");
    if (v == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    v->super.ops = &aptus_verbs_dgram_ops;
    v->numa_node = config->numa_node;
    aptus_fault_init(&v->fault, &config->fault);

    status = aptus_verbs_port_open(dev_name, &v->hca, &v->port, &port_attr);
    if (status != UCS_OK) {
        ucs_free(v);
        return status;
    }
    v->ctx       = v->hca->ctx;
    v->pd        = v->hca->pd;
    v->port_mtu  = (size_t)1 << (port_attr.active_mtu + 7);
    v->super.mtu = (config->mtu == 0) ? v->port_mtu : config->mtu;
    if ((v->super.mtu < APTUS_VERBS_DGRAM_MTU_MIN) ||
        (v->super.mtu > v->port_mtu)) {
        ucs_error("verbs wire: MTU %zu is out of range [%d, %zu] on %s",
                  v->super.mtu, APTUS_VERBS_DGRAM_MTU_MIN, v->port_mtu,
                  dev_name);
        status = UCS_ERR_INVALID_PARAM;
        goto err;
    }
    if (ibv_query_device(v->ctx, &dev_attr) != 0) {
        status = UCS_ERR_IO_ERROR;
        goto err;
    }
    rx_count =
        ucs_min(ucs_max(config->rx_queue_len, 1), (unsigned)dev_attr.max_qp_wr);
    v->tx_count =
        ucs_min(ucs_max(config->tx_queue_len, 1), (unsigned)dev_attr.max_qp_wr);

    v->global = (port_attr.link_layer == IBV_LINK_LAYER_ETHERNET);
    if (v->global && ibv_query_gid(v->ctx, v->port, 0, &v->gid)) {
        ucs_error("verbs wire: no GID on %s", dev_name);
        status = UCS_ERR_NO_DEVICE;
        goto err;
    }
    v->lid = port_attr.lid;

    aptus_verbs_channel_open(v);
    v->send_cq = ibv_create_cq(v->ctx, (int)v->tx_count, NULL, NULL, 0);
    v->recv_cq = ibv_create_cq(v->ctx, (int)rx_count, NULL, v->channel, 0);
    if ((v->send_cq == NULL) || (v->recv_cq == NULL)) {
        ucs_error("verbs wire: ibv_create_cq failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err;
    }
    aptus_verbs_ah_cache_init(&v->ahs, v->pd, v->port);

    v->tx_stride = ucs_align_up(v->super.mtu, 64);
    v->tx_free =
        ucs_malloc(v->tx_count * sizeof(*v->tx_free), "aptus_verbs_tx_free");
    if (v->tx_free == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto err;
    }
    for (i = 0; i < v->tx_count; ++i) {
        v->tx_free[i] = v->tx_count - 1 - i;
    }
    v->tx_num_free = v->tx_count;

    status =
        aptus_verbs_ud_open(v, &v->ud, rx_count, v->tx_count * v->tx_stride,
                            v->tx_count, v->recv_cq);
    if (status != UCS_OK) {
        goto err;
    }
    v->tx_buf = v->ud.buf + (size_t)rx_count * v->ud.rx_stride;
    aptus_verbs_addr_pack(v->ud.qp->qp_num, v->lid, APTUS_VERBS_QKEY,
                          v->global ? &v->gid : NULL, &v->super.addr);
    *wire_p = &v->super;
    return UCS_OK;

err:
    aptus_verbs_dgram_close(&v->super);
    return status;
}
