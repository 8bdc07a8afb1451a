/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the broadcast's multicast over verbs (see bcast_net.h): one UD
 * queue pair attached to the InfiniBand multicast group that librdmacm
 * joins for the communicator's IP group on the HCA behind the interface.
 *
 * Tested against the in-memory verbs double (test/verbs); nothing here has
 * run on an HCA.
 */
#include "bcast_net.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APTUS_BC_VERBS_RX      256 /* receive buffers posted */
#define APTUS_BC_VERBS_TX      64  /* send slots in flight */
#define APTUS_BC_VERBS_POLL    16  /* completions taken per poll */
#define APTUS_BC_VERBS_GRH     40  /* leads every UD receive */
#define APTUS_BC_VERBS_JOIN_MS 10000

struct aptus_bc_verbs {
    struct rdma_event_channel *cm_ch;
    struct rdma_cm_id *id; /* bound to the interface; owns the context */
    int joined;
    struct ibv_pd *pd;
    struct ibv_comp_channel *comp;
    struct ibv_cq *rx_cq;
    struct ibv_cq *tx_cq;
    struct ibv_qp *qp;
    int attached;
    struct ibv_mr *mr;
    uint8_t *mem; /* receive buffers, then send slots */
    size_t slot;  /* bytes of one: GRH and a datagram */
    unsigned tx_free, tx_next;
    struct ibv_ah_attr group_attr; /* from the join */
    struct ibv_ah *group_ah;
    uint32_t group_qpn, qkey;
    uint8_t port;
    int global;         /* RoCE: every address handle routes by GID */
    struct ibv_ah **ah; /* per rank */
    uint32_t nah;
    int armed; /* the receive CQ will raise an event */
    struct ibv_wc wc[APTUS_BC_VERBS_POLL];
    unsigned wc_n, wc_i; /* taken from the CQ, not yet handed out */
};

static int aptus_bc_verbs_fail(char *err, size_t errlen, const char *what,
                               int e)
{
    snprintf(err, errlen, "%s: %s", what, strerror(e));
    return -e;
}

/* The largest InfiniBand MTU not above bytes (256 at least). */
static unsigned aptus_bc_verbs_mtu_floor(unsigned bytes)
{
    unsigned mtu = 4096;

    while ((mtu > 256) && (mtu > bytes)) {
        mtu /= 2;
    }
    return mtu;
}

static unsigned aptus_bc_verbs_mtu_bytes(enum ibv_mtu mtu)
{
    return ((mtu >= IBV_MTU_256) && (mtu <= IBV_MTU_4096)) ? (128u << mtu)
                                                           : 256u;
}

static uint8_t *aptus_bc_verbs_buf(struct aptus_bc_verbs *v, unsigned i)
{
    return v->mem + (size_t)i * v->slot;
}

static int aptus_bc_verbs_post_rx(struct aptus_bc_verbs *v, unsigned i)
{
    struct ibv_sge sge = { (uintptr_t)aptus_bc_verbs_buf(v, i),
                           (uint32_t)v->slot, v->mr->lkey };
    struct ibv_recv_wr wr, *bad;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id   = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(v->qp, &wr, &bad);
}

/* Join the group with the subnet manager (or IGMP on RoCE): the answer
 * names the group's address handle and Q_Key. */
static int aptus_bc_verbs_join(struct aptus_bc_verbs *v,
                               const struct sockaddr_in *group, char *err,
                               size_t errlen)
{
    struct rdma_cm_event *ev;
    struct pollfd pfd = { v->cm_ch->fd, POLLIN, 0 };
    int rc;

    if (rdma_join_multicast(v->id, (struct sockaddr *)group, NULL) != 0) {
        return aptus_bc_verbs_fail(err, errlen, "rdma_join_multicast", errno);
    }
    v->joined = 1;
    rc        = poll(&pfd, 1, APTUS_BC_VERBS_JOIN_MS);
    if (rc <= 0) {
        snprintf(err, errlen,
                 "joining the InfiniBand multicast group: no answer in %d s "
                 "(is a subnet manager running?)",
                 APTUS_BC_VERBS_JOIN_MS / 1000);
        return -ETIMEDOUT;
    }
    if (rdma_get_cm_event(v->cm_ch, &ev) != 0) {
        return aptus_bc_verbs_fail(err, errlen, "rdma_get_cm_event", errno);
    }
    rc = 0;
    if (ev->event == RDMA_CM_EVENT_MULTICAST_JOIN) {
        v->group_attr = ev->param.ud.ah_attr;
        v->group_qpn  = ev->param.ud.qp_num;
        v->qkey       = ev->param.ud.qkey;
    } else {
        snprintf(err, errlen,
                 "joining the InfiniBand multicast group: %s "
                 "(status %d)",
                 rdma_event_str(ev->event), ev->status);
        rc = -EADDRNOTAVAIL;
    }
    rdma_ack_cm_event(ev);
    return rc;
}

static int aptus_bc_verbs_qp(struct aptus_bc_verbs *v, char *err, size_t errlen)
{
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;

    memset(&init, 0, sizeof(init));
    init.send_cq          = v->tx_cq;
    init.recv_cq          = v->rx_cq;
    init.qp_type          = IBV_QPT_UD;
    init.cap.max_send_wr  = APTUS_BC_VERBS_TX;
    init.cap.max_recv_wr  = APTUS_BC_VERBS_RX;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    v->qp                 = ibv_create_qp(v->pd, &init);
    if (v->qp == NULL) {
        return aptus_bc_verbs_fail(err, errlen, "ibv_create_qp", errno);
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state   = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = v->port;
    attr.qkey       = v->qkey; /* the group's: unicast uses it too */
    if (ibv_modify_qp(v->qp, &attr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                          IBV_QP_QKEY) != 0) {
        return aptus_bc_verbs_fail(err, errlen, "QP to INIT", errno);
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(v->qp, &attr, IBV_QP_STATE) != 0) {
        return aptus_bc_verbs_fail(err, errlen, "QP to RTR", errno);
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn   = 0;
    if (ibv_modify_qp(v->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
        return aptus_bc_verbs_fail(err, errlen, "QP to RTS", errno);
    }
    return 0;
}

int aptus_bc_net_open_verbs(aptus_bc_net_t *net,
                            const struct sockaddr_in *group,
                            struct in_addr ifaddr, unsigned mtu, char *err,
                            size_t errlen)
{
    struct aptus_bc_verbs *v;
    struct sockaddr_in local;
    struct ibv_port_attr port;
    union ibv_gid gid;
    unsigned i, nbufs = APTUS_BC_VERBS_RX + APTUS_BC_VERBS_TX;
    int rc;

    memset(net, 0, sizeof(*net));
    net->wire   = APTUS_BC_WIRE_VERBS;
    net->mfd    = -1;
    net->ufd    = -1;
    net->group  = *group;
    net->ifaddr = ifaddr;
    v = net->verbs = calloc(1, sizeof(*v));
    if (v == NULL) {
        return aptus_bc_verbs_fail(err, errlen, "calloc", ENOMEM);
    }

    v->cm_ch = rdma_create_event_channel();
    if ((v->cm_ch == NULL) ||
        (rdma_create_id(v->cm_ch, &v->id, NULL, RDMA_PS_UDP) != 0)) {
        rc = aptus_bc_verbs_fail(err, errlen, "rdma_cm (no RDMA device here?)",
                                 errno);
        goto fail;
    }
    memset(&local, 0, sizeof(local));
    local.sin_family = AF_INET;
    local.sin_addr   = ifaddr;
    if ((rdma_bind_addr(v->id, (struct sockaddr *)&local) != 0) ||
        (v->id->verbs == NULL)) {
        snprintf(err, errlen, "no RDMA device behind %s (%s)",
                 inet_ntoa(ifaddr), strerror(errno));
        rc = -ENODEV;
        goto fail;
    }
    v->port = v->id->port_num;
    if (ibv_query_port(v->id->verbs, v->port, &port) != 0) {
        rc = aptus_bc_verbs_fail(err, errlen, "ibv_query_port", errno);
        goto fail;
    }
    if (port.state != IBV_PORT_ACTIVE) {
        snprintf(err, errlen, "%s:%u is not active",
                 ibv_get_device_name(v->id->verbs->device), v->port);
        rc = -ENETDOWN;
        goto fail;
    }
    v->global = (port.link_layer == IBV_LINK_LAYER_ETHERNET);

    rc = aptus_bc_verbs_join(v, group, err, errlen);
    if (rc < 0) {
        goto fail;
    }

    /* a datagram is at most the port's MTU and the group's (IPoIB's
     * interface MTU is the group's less its 4-byte header) */
    net->room = aptus_bc_verbs_mtu_bytes(port.active_mtu);
    if ((mtu > 0) && (aptus_bc_verbs_mtu_floor(mtu + 4) < net->room)) {
        net->room = aptus_bc_verbs_mtu_floor(mtu + 4);
    }
    v->slot = (APTUS_BC_VERBS_GRH + net->room + 63) & ~(size_t)63;

    v->pd   = ibv_alloc_pd(v->id->verbs);
    v->comp = (v->pd != NULL) ? ibv_create_comp_channel(v->id->verbs) : NULL;
    if (v->comp == NULL) {
        rc = aptus_bc_verbs_fail(err, errlen, "ibv_alloc_pd", errno);
        goto fail;
    }
    if (fcntl(v->comp->fd, F_SETFL, fcntl(v->comp->fd, F_GETFL) | O_NONBLOCK) !=
        0) {
        rc = aptus_bc_verbs_fail(err, errlen, "O_NONBLOCK", errno);
        goto fail;
    }
    v->rx_cq = ibv_create_cq(v->id->verbs, APTUS_BC_VERBS_RX, NULL, v->comp, 0);
    v->tx_cq = ibv_create_cq(v->id->verbs, APTUS_BC_VERBS_TX, NULL, NULL, 0);
    if ((v->rx_cq == NULL) || (v->tx_cq == NULL)) {
        rc = aptus_bc_verbs_fail(err, errlen, "ibv_create_cq", errno);
        goto fail;
    }
    rc = aptus_bc_verbs_qp(v, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    if (posix_memalign((void **)&v->mem, 4096, nbufs * v->slot) != 0) {
        rc = aptus_bc_verbs_fail(err, errlen, "memory", ENOMEM);
        goto fail;
    }
    v->mr = ibv_reg_mr(v->pd, v->mem, nbufs * v->slot, IBV_ACCESS_LOCAL_WRITE);
    if (v->mr == NULL) {
        rc = aptus_bc_verbs_fail(err, errlen, "ibv_reg_mr", errno);
        goto fail;
    }
    for (i = 0; i < APTUS_BC_VERBS_RX; ++i) {
        if (aptus_bc_verbs_post_rx(v, i) != 0) {
            rc = aptus_bc_verbs_fail(err, errlen, "ibv_post_recv", EIO);
            goto fail;
        }
    }
    v->tx_free = APTUS_BC_VERBS_TX;

    rc = ibv_attach_mcast(v->qp, &v->group_attr.grh.dgid, v->group_attr.dlid);
    if (rc != 0) {
        rc = aptus_bc_verbs_fail(err, errlen, "ibv_attach_mcast", rc);
        goto fail;
    }
    v->attached = 1;
    v->group_ah = ibv_create_ah(v->pd, &v->group_attr);
    if (v->group_ah == NULL) {
        rc = aptus_bc_verbs_fail(err, errlen, "the group's address handle",
                                 errno);
        goto fail;
    }
    if (ibv_req_notify_cq(v->rx_cq, 0) != 0) {
        rc = aptus_bc_verbs_fail(err, errlen, "ibv_req_notify_cq", EIO);
        goto fail;
    }
    v->armed = 1;

    if (ibv_query_gid(v->id->verbs, v->port, v->group_attr.grh.sgid_index,
                      &gid) != 0) {
        memset(&gid, 0, sizeof(gid));
    }
    net->self.lid = port.lid;
    net->self.qpn = v->qp->qp_num;
    memcpy(net->self.gid, gid.raw, sizeof(net->self.gid));
    net->mfd = v->comp->fd;
    snprintf(net->where, sizeof(net->where), "%s:%u",
             ibv_get_device_name(v->id->verbs->device), v->port);
    return 0;

fail:
    aptus_bc_verbs_close(net);
    return rc;
}

int aptus_bc_verbs_connect(aptus_bc_net_t *net)
{
    struct aptus_bc_verbs *v = net->verbs;
    struct ibv_ah_attr attr;
    uint32_t r;

    v->ah = calloc(net->npeers, sizeof(*v->ah));
    if (v->ah == NULL) {
        return -ENOMEM;
    }
    for (r = 0; r < net->npeers; ++r) {
        memset(&attr, 0, sizeof(attr));
        attr.dlid     = net->peers[r].lid;
        attr.port_num = v->port;
        if (v->global || (attr.dlid == 0)) {
            attr.is_global      = 1;
            attr.grh.sgid_index = v->group_attr.grh.sgid_index;
            attr.grh.hop_limit  = 64;
            memcpy(attr.grh.dgid.raw, net->peers[r].gid,
                   sizeof(attr.grh.dgid.raw));
        }
        v->ah[r] = ibv_create_ah(v->pd, &attr);
        if (v->ah[r] == NULL) {
            return -errno;
        }
        v->nah = r + 1;
    }
    return 0;
}

/* Send completions give their slots back (they complete in order). */
static void aptus_bc_verbs_reap_tx(aptus_bc_net_t *net)
{
    struct aptus_bc_verbs *v = net->verbs;
    struct ibv_wc wc[APTUS_BC_VERBS_POLL];
    int n, i;

    while ((n = ibv_poll_cq(v->tx_cq, APTUS_BC_VERBS_POLL, wc)) > 0) {
        for (i = 0; i < n; ++i) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                net->tx_errors++;
            }
        }
        v->tx_free += (unsigned)n;
    }
}

static int aptus_bc_verbs_post(aptus_bc_net_t *net, struct ibv_ah *ah,
                               uint32_t qpn, const struct iovec *iov,
                               unsigned iovcnt)
{
    struct aptus_bc_verbs *v = net->verbs;
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;
    unsigned i, slot;
    uint8_t *p;
    size_t len = 0;

    for (i = 0; i < iovcnt; ++i) {
        len += iov[i].iov_len;
    }
    if (len > net->room) {
        net->tx_errors++;
        return -EMSGSIZE;
    }
    if (v->tx_free == 0) {
        aptus_bc_verbs_reap_tx(net);
        if (v->tx_free == 0) {
            net->tx_errors++; /* a full send queue: loss, repaired */
            return -EAGAIN;
        }
    }
    slot = APTUS_BC_VERBS_RX + v->tx_next;
    p    = aptus_bc_verbs_buf(v, slot);
    for (i = 0; i < iovcnt; ++i) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    sge.addr   = (uintptr_t)aptus_bc_verbs_buf(v, slot);
    sge.length = (uint32_t)len;
    sge.lkey   = v->mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id             = slot;
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_SIGNALED;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = qpn;
    wr.wr.ud.remote_qkey = v->qkey;
    if (ibv_post_send(v->qp, &wr, &bad) != 0) {
        net->tx_errors++;
        return -EIO;
    }
    v->tx_free--;
    v->tx_next = (v->tx_next + 1) % APTUS_BC_VERBS_TX;
    return 0;
}

int aptus_bc_verbs_mcast(aptus_bc_net_t *net, const struct iovec *iov,
                         unsigned iovcnt)
{
    return aptus_bc_verbs_post(net, net->verbs->group_ah, net->verbs->group_qpn,
                               iov, iovcnt);
}

int aptus_bc_verbs_send(aptus_bc_net_t *net, uint32_t rank,
                        const struct iovec *iov, unsigned iovcnt)
{
    struct aptus_bc_verbs *v = net->verbs;

    if (rank >= v->nah) {
        return -EINVAL;
    }
    return aptus_bc_verbs_post(net, v->ah[rank], net->peers[rank].qpn, iov,
                               iovcnt);
}

/* The next receive completion: 1, or 0 when the CQ is empty. */
static int aptus_bc_verbs_next_wc(struct aptus_bc_verbs *v, struct ibv_wc *wc)
{
    int n;

    if (v->wc_i == v->wc_n) {
        n = ibv_poll_cq(v->rx_cq, APTUS_BC_VERBS_POLL, v->wc);
        if (n <= 0) {
            return 0;
        }
        v->wc_n = (unsigned)n;
        v->wc_i = 0;
    }
    *wc = v->wc[v->wc_i++];
    return 1;
}

long aptus_bc_verbs_recv(aptus_bc_net_t *net, void *buf, size_t len,
                         int *truncated)
{
    struct aptus_bc_verbs *v = net->verbs;
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    struct ibv_wc wc;
    size_t n;
    long ret;

    if (v->armed && (ibv_get_cq_event(v->comp, &ev_cq, &ev_ctx) == 0)) {
        ibv_ack_cq_events(ev_cq, 1); /* the event fired: no longer armed */
        v->armed = 0;
    }
    for (;;) {
        if (!aptus_bc_verbs_next_wc(v, &wc)) {
            if (v->armed) {
                return 0;
            }
            /* arm, then look once more: a completion that came in
             * between raises no event */
            if (ibv_req_notify_cq(v->rx_cq, 0) != 0) {
                return 0;
            }
            v->armed = 1;
            if (!aptus_bc_verbs_next_wc(v, &wc)) {
                return 0;
            }
        }
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {
            net->rx_errors++; /* the QP is in error: nothing comes again */
            continue;
        }
        if ((wc.status != IBV_WC_SUCCESS) ||
            (wc.byte_len < APTUS_BC_VERBS_GRH)) {
            net->rx_errors++;
            (void)aptus_bc_verbs_post_rx(v, (unsigned)wc.wr_id);
            continue;
        }
        break;
    }
    n = wc.byte_len - APTUS_BC_VERBS_GRH;
    if (n > len) {
        *truncated = 1;
        ret        = -1;
    } else {
        memcpy(buf,
               aptus_bc_verbs_buf(v, (unsigned)wc.wr_id) + APTUS_BC_VERBS_GRH,
               n);
        ret = (long)n;
    }
    if (aptus_bc_verbs_post_rx(v, (unsigned)wc.wr_id) != 0) {
        net->rx_errors++;
    }
    return ret;
}

void aptus_bc_verbs_close(aptus_bc_net_t *net)
{
    struct aptus_bc_verbs *v = net->verbs;
    uint32_t r;

    if (v == NULL) {
        return;
    }
    for (r = 0; r < v->nah; ++r) {
        ibv_destroy_ah(v->ah[r]);
    }
    free(v->ah);
    if (v->group_ah != NULL) {
        ibv_destroy_ah(v->group_ah);
    }
    if (v->attached) {
        ibv_detach_mcast(v->qp, &v->group_attr.grh.dgid, v->group_attr.dlid);
    }
    if (v->qp != NULL) {
        ibv_destroy_qp(v->qp);
    }
    if (v->mr != NULL) {
        ibv_dereg_mr(v->mr);
    }
    free(v->mem);
    if (v->rx_cq != NULL) {
        if (v->armed && (v->comp != NULL)) {
            /* an event that fired and was never read holds the CQ */
            struct ibv_cq *cq;
            void *ctx;

            if (ibv_get_cq_event(v->comp, &cq, &ctx) == 0) {
                ibv_ack_cq_events(cq, 1);
            }
        }
        ibv_destroy_cq(v->rx_cq);
    }
    if (v->tx_cq != NULL) {
        ibv_destroy_cq(v->tx_cq);
    }
    if (v->comp != NULL) {
        ibv_destroy_comp_channel(v->comp);
    }
    if (v->pd != NULL) {
        ibv_dealloc_pd(v->pd);
    }
    if (v->joined) {
        rdma_leave_multicast(v->id, (struct sockaddr *)&net->group);
    }
    if (v->id != NULL) {
        rdma_destroy_id(v->id);
    }
    if (v->cm_ch != NULL) {
        rdma_destroy_event_channel(v->cm_ch);
    }
    free(v);
    net->verbs = NULL;
    net->mfd   = -1; /* was the completion channel's */
}
