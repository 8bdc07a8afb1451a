/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus tests: the verbs double's queue pairs (see ibv_double.h): the
 * state machine, posting, and carrying out a send the moment it is posted
 * (UD datagrams, RC sends, RDMA writes and reads).
 */
#include "ibv_double_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- creation and the state machine ---- */

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
    struct ibv_qp_cap *cap = &init->cap;
    unsigned num_qps       = 0;
    dbl_qp_t *qp;

    for (qp = dbl_g.qps; qp != NULL; qp = qp->next) {
        ++num_qps;
    }
    if ((init->qp_type != IBV_QPT_UD) && (init->qp_type != IBV_QPT_RC)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if ((init->send_cq == NULL) || (init->recv_cq == NULL) ||
        (cap->max_send_wr < 1) || (cap->max_send_wr > DBL_MAX_WR) ||
        (cap->max_recv_wr > DBL_MAX_WR) ||
        ((init->srq == NULL) && (cap->max_recv_wr < 1)) ||
        (cap->max_send_sge > DBL_MAX_SGE) ||
        (cap->max_recv_sge > DBL_MAX_SGE) ||
        (cap->max_inline_data > IBV_DOUBLE_MAX_INLINE) ||
        (num_qps >= DBL_MAX_QP)) {
        errno = EINVAL;
        return NULL;
    }
    qp = dbl_alloc(sizeof(*qp));
    if ((qp == NULL) ||
        ((init->srq == NULL) &&
         dbl_rq_init(&qp->rq, cap->max_recv_wr, cap->max_recv_sge))) {
        dbl_free(qp);
        errno = ENOMEM;
        return NULL;
    }
    qp->qp.context    = pd->context;
    qp->qp.qp_context = init->qp_context;
    qp->qp.pd         = pd;
    qp->qp.send_cq    = init->send_cq;
    qp->qp.recv_cq    = init->recv_cq;
    qp->qp.srq        = init->srq;
    qp->qp.qp_num     = dbl_g.next_qpn++ & 0xffffff;
    qp->qp.state      = IBV_QPS_RESET;
    qp->qp.qp_type    = init->qp_type;
    qp->cap           = *cap;
    qp->sq_sig_all    = init->sq_sig_all;
    qp->next          = dbl_g.qps;
    dbl_g.qps         = qp;
    ++((dbl_pd_t *)pd)->refs;
    ++((dbl_cq_t *)init->send_cq)->refs;
    ++((dbl_cq_t *)init->recv_cq)->refs;
    if (init->srq != NULL) {
        ++((dbl_srq_t *)init->srq)->refs;
    }
    return &qp->qp;
}

/* Flush what the receive queue holds, as a QP entering the error state
 * does. */
static void dbl_qp_flush_rq(dbl_qp_t *qp)
{
    struct ibv_wc wc;

    if (qp->qp.srq != NULL) {
        return;
    }
    while (qp->rq.count > 0) {
        memset(&wc, 0, sizeof(wc));
        wc.wr_id  = qp->rq.ring[qp->rq.head].wr_id;
        wc.status = IBV_WC_WR_FLUSH_ERR;
        wc.opcode = IBV_WC_RECV;
        wc.qp_num = qp->qp.qp_num;
        dbl_cq_push(qp->qp.recv_cq, &wc, NULL, 0);
        qp->rq.head = (qp->rq.head + 1) % qp->rq.size;
        --qp->rq.count;
    }
}

static void dbl_qp_error(dbl_qp_t *qp)
{
    qp->qp.state = IBV_QPS_ERR;
    dbl_qp_flush_rq(qp);
}

static void dbl_held_free(dbl_qp_t *qp)
{
    if (qp->held != NULL) {
        free(qp->held->data);
        free(qp->held);
        qp->held = NULL;
    }
}

/* The attributes a transition requires and those it may take. */
static int dbl_qp_masks(enum ibv_qp_type type, enum ibv_qp_state cur,
                        enum ibv_qp_state next, int *req_p, int *opt_p)
{
    const int ud = (type == IBV_QPT_UD);

    *req_p = IBV_QP_STATE;
    *opt_p = IBV_QP_CUR_STATE;
    if ((next == IBV_QPS_RESET) || (next == IBV_QPS_ERR)) {
        return 0;
    }
    if ((cur == IBV_QPS_RESET) && (next == IBV_QPS_INIT)) {
        *req_p |= IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    } else if ((cur == IBV_QPS_INIT) && (next == IBV_QPS_INIT)) {
        *opt_p |= IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    } else if ((cur == IBV_QPS_INIT) && (next == IBV_QPS_RTR)) {
        if (!ud) {
            *req_p |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                      IBV_QP_MIN_RNR_TIMER;
        }
        *opt_p |= IBV_QP_PKEY_INDEX | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    } else if ((cur == IBV_QPS_RTR) && (next == IBV_QPS_RTS)) {
        *req_p |= IBV_QP_SQ_PSN;
        if (!ud) {
            *req_p |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_MAX_QP_RD_ATOMIC;
        }
        *opt_p |=
            ud ? IBV_QP_QKEY : (IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER);
    } else if (((cur == IBV_QPS_RTS) || (ud && (cur == IBV_QPS_SQE))) &&
               (next == IBV_QPS_RTS)) {
        *opt_p |=
            ud ? IBV_QP_QKEY : (IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER);
    } else {
        return EINVAL;
    }
    return 0;
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
    dbl_qp_t *qp           = (dbl_qp_t *)ibqp;
    enum ibv_qp_state cur  = ibqp->state;
    enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
    int req, opt;

    if (dbl_qp_masks(ibqp->qp_type, cur, next, &req, &opt) ||
        ((mask & req) != req) || (mask & ~(req | opt))) {
        return EINVAL;
    }
    if ((mask & IBV_QP_CUR_STATE) && (attr->cur_qp_state != cur)) {
        return EINVAL;
    }
    if (((mask & IBV_QP_PORT) && (attr->port_num != 1)) ||
        ((mask & IBV_QP_PKEY_INDEX) && (attr->pkey_index != 0)) ||
        ((mask & IBV_QP_AV) &&
         ((attr->ah_attr.dlid == 0) || (attr->ah_attr.port_num != 1))) ||
        ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu > IBV_MTU_4096))) {
        return EINVAL;
    }

    if (mask & IBV_QP_PORT) {
        qp->port = attr->port_num;
    }
    if (mask & IBV_QP_QKEY) {
        qp->qkey = attr->qkey;
    }
    if (mask & IBV_QP_ACCESS_FLAGS) {
        qp->access = attr->qp_access_flags;
    }
    if (mask & IBV_QP_AV) {
        qp->dlid = attr->ah_attr.dlid;
    }
    if (mask & IBV_QP_DEST_QPN) {
        qp->dest_qpn = attr->dest_qp_num;
    }

    if (next == IBV_QPS_RESET) {
        /* back to the start: queues empty, nothing held */
        qp->rq.count = 0;
        qp->sq_done  = qp->sq_posted;
        dbl_held_free(qp);
    }
    if ((next == IBV_QPS_ERR) && (cur != IBV_QPS_ERR)) {
        dbl_qp_error(qp);
    }
    ibqp->state = next;
    return 0;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
                 struct ibv_qp_init_attr *init)
{
    dbl_qp_t *qp = (dbl_qp_t *)ibqp;

    memset(attr, 0, sizeof(*attr));
    memset(init, 0, sizeof(*init));
    attr->qp_state        = ibqp->state;
    attr->cur_qp_state    = ibqp->state;
    attr->qkey            = qp->qkey;
    attr->qp_access_flags = qp->access;
    attr->dest_qp_num     = qp->dest_qpn;
    attr->port_num        = qp->port;
    attr->cap             = qp->cap;
    init->cap             = qp->cap;
    init->qp_type         = ibqp->qp_type;
    init->send_cq         = ibqp->send_cq;
    init->recv_cq         = ibqp->recv_cq;
    init->srq             = ibqp->srq;
    init->sq_sig_all      = qp->sq_sig_all;
    return 0;
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
    dbl_qp_t *qp = (dbl_qp_t *)ibqp, **p;

    for (p = &dbl_g.qps; (*p != NULL) && (*p != qp); p = &(*p)->next) {
    }
    if (*p == NULL) {
        return EINVAL;
    }
    if (qp->mcast != NULL) {
        return EBUSY; /* still attached to a multicast group */
    }
    *p = qp->next;
    --((dbl_pd_t *)ibqp->pd)->refs;
    --((dbl_cq_t *)ibqp->send_cq)->refs;
    --((dbl_cq_t *)ibqp->recv_cq)->refs;
    if (ibqp->srq != NULL) {
        --((dbl_srq_t *)ibqp->srq)->refs;
    }
    /* its completions stay in the CQ, but no longer free its queue */
    dbl_cq_forget(ibqp->send_cq, qp);
    dbl_held_free(qp);
    free(qp->rq.ring);
    dbl_free(qp);
    return 0;
}

/* ---- multicast ---- */

static int dbl_is_mcast_lid(uint16_t lid)
{
    return (lid >= 0xc000) && (lid != 0xffff);
}

int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
                     uint16_t lid)
{
    dbl_qp_t *qp = (dbl_qp_t *)ibqp;
    dbl_mcast_t *m;

    /* only UD QPs join groups, and only multicast GIDs (ff..) */
    if ((ibqp->qp_type != IBV_QPT_UD) || (gid->raw[0] != 0xff) ||
        !dbl_is_mcast_lid(lid)) {
        return EINVAL;
    }
    for (m = qp->mcast; m != NULL; m = m->next) {
        if ((m->lid == lid) && !memcmp(&m->gid, gid, sizeof(*gid))) {
            return 0; /* attaching twice is harmless */
        }
    }
    m = dbl_alloc(sizeof(*m));
    if (m == NULL) {
        return ENOMEM;
    }
    m->gid    = *gid;
    m->lid    = lid;
    m->next   = qp->mcast;
    qp->mcast = m;
    return 0;
}

int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
                     uint16_t lid)
{
    dbl_qp_t *qp = (dbl_qp_t *)ibqp;
    dbl_mcast_t **p, *m;

    for (p = &qp->mcast; (m = *p) != NULL; p = &m->next) {
        if ((m->lid == lid) && !memcmp(&m->gid, gid, sizeof(*gid))) {
            *p = m->next;
            dbl_free(m);
            return 0;
        }
    }
    return EINVAL;
}

static int dbl_qp_in_group(const dbl_qp_t *qp, const union ibv_gid *gid,
                           uint16_t lid)
{
    const dbl_mcast_t *m;

    for (m = qp->mcast; m != NULL; m = m->next) {
        if ((m->lid == lid) && !memcmp(&m->gid, gid, sizeof(*gid))) {
            return 1;
        }
    }
    return 0;
}

/* ---- receive side ---- */

int dbl_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
                  struct ibv_recv_wr **bad_wr)
{
    dbl_qp_t *qp = (dbl_qp_t *)ibqp;
    int ret;

    /* a QP on an SRQ has no receive queue of its own; in RESET the
     * hardware takes no work requests */
    if ((ibqp->srq != NULL) || (ibqp->state == IBV_QPS_RESET)) {
        *bad_wr = wr;
        return EINVAL;
    }
    ret = dbl_rq_post(&qp->rq, wr, bad_wr);
    if ((ret == 0) && (ibqp->state == IBV_QPS_ERR)) {
        dbl_qp_flush_rq(qp);
    }
    return ret;
}

/* Take the next receive of qp (its own queue or its SRQ); 0 when none. */
static int dbl_take_rwqe(dbl_qp_t *qp, dbl_rwqe_t *e)
{
    dbl_rq_t *rq =
        (qp->qp.srq != NULL) ? &((dbl_srq_t *)qp->qp.srq)->rq : &qp->rq;

    if (rq->count == 0) {
        return 0;
    }
    *e       = rq->ring[rq->head];
    rq->head = (rq->head + 1) % rq->size;
    --rq->count;
    return 1;
}

/* Scatter hdr and data into a receive's buffers, each checked against its
 * registration. */
static enum ibv_wc_status dbl_scatter(struct ibv_pd *pd, const dbl_rwqe_t *e,
                                      const uint8_t *hdr, size_t hdr_len,
                                      const uint8_t *data, size_t len)
{
    size_t room = 0, done = 0, n, k;
    int i;

    for (i = 0; i < e->num_sge; ++i) {
        room += e->sg[i].length;
        if (dbl_mr_check(pd, e->sg[i].lkey, 0, e->sg[i].addr, e->sg[i].length,
                         IBV_ACCESS_LOCAL_WRITE) == NULL) {
            return IBV_WC_LOC_PROT_ERR;
        }
    }
    if (room < hdr_len + len) {
        return IBV_WC_LOC_LEN_ERR;
    }
    for (i = 0; (i < e->num_sge) && (done < hdr_len + len); ++i) {
        uint8_t *dst = (uint8_t *)(uintptr_t)e->sg[i].addr;
        n            = e->sg[i].length;
        for (k = 0; (k < n) && (done < hdr_len + len); ++k, ++done) {
            dst[k] = (done < hdr_len) ? hdr[done] : data[done - hdr_len];
        }
    }
    return IBV_WC_SUCCESS;
}

/* ---- send side ---- */

/* A send's bytes, gathered from its list (checked against the lkeys unless
 * inline) into a buffer the caller frees. */
static enum ibv_wc_status dbl_gather(dbl_qp_t *qp, const struct ibv_send_wr *wr,
                                     uint8_t **data_p, size_t *len_p)
{
    size_t len = 0;
    uint8_t *data;
    int i;

    for (i = 0; i < wr->num_sge; ++i) {
        len += wr->sg_list[i].length;
    }
    data = malloc(len + 1);
    if (data == NULL) {
        return IBV_WC_GENERAL_ERR;
    }
    len = 0;
    for (i = 0; i < wr->num_sge; ++i) {
        const struct ibv_sge *sg = &wr->sg_list[i];
        if (!(wr->send_flags & IBV_SEND_INLINE) &&
            (dbl_mr_check(qp->qp.pd, sg->lkey, 0, sg->addr, sg->length, 0) ==
             NULL)) {
            free(data);
            return IBV_WC_LOC_PROT_ERR;
        }
        memcpy(data + len, (void *)(uintptr_t)sg->addr, sg->length);
        len += sg->length;
    }
    *data_p = data;
    *len_p  = len;
    return IBV_WC_SUCCESS;
}

static dbl_qp_t *dbl_find_qp(uint16_t lid, uint32_t qpn, enum ibv_qp_type type)
{
    dbl_dev_t *dev = dbl_dev_by_lid(lid);
    dbl_qp_t *qp;

    for (qp = dbl_g.qps; (dev != NULL) && (qp != NULL); qp = qp->next) {
        if ((qp->qp.qp_num == qpn) && (qp->qp.qp_type == type) &&
            (dbl_ctx_dev(qp->qp.context) == dev)) {
            return qp;
        }
    }
    return NULL;
}

static int dbl_can_receive(const dbl_qp_t *qp)
{
    return (qp->qp.state == IBV_QPS_RTR) || (qp->qp.state == IBV_QPS_RTS) ||
           (qp->qp.state == IBV_QPS_SQD) || (qp->qp.state == IBV_QPS_SQE);
}

/* A UD datagram arrives (or not) at dst. */
static void dbl_ud_deliver_to(dbl_qp_t *src, dbl_qp_t *dst, const dbl_held_t *d)
{
    dbl_dev_t *sdev = dbl_ctx_dev(src->qp.context);
    uint8_t grh[IBV_DOUBLE_GRH_LEN];
    struct ibv_grh *g = (struct ibv_grh *)grh;
    struct ibv_wc wc;
    dbl_rwqe_t e;

    if ((dst == NULL) || !dbl_can_receive(dst)) {
        dbl_g.stats.ud_no_dest++;
        return;
    }
    if (dst->qkey != d->qkey) {
        dbl_g.stats.ud_bad_qkey++;
        return;
    }
    if (!dbl_take_rwqe(dst, &e)) {
        dbl_g.stats.ud_no_recv++; /* UD: silently gone */
        return;
    }

    /* the GRH's 40 bytes lead every UD receive; without one they are
     * undefined (here: a pattern a careless reader would notice) */
    memset(grh, 0xa5, sizeof(grh));
    if (d->global) {
        memset(grh, 0, sizeof(grh));
        g->version_tclass_flow = htobe32(6u << 28);
        g->paylen              = htobe16((uint16_t)(d->len + 8));
        g->next_hdr            = 0x1b;
        g->hop_limit           = 64;
        dbl_dev_gid(sdev, &g->sgid);
        g->dgid = d->dgid;
    }

    memset(&wc, 0, sizeof(wc));
    wc.wr_id  = e.wr_id;
    wc.status = dbl_scatter(dst->qp.pd, &e, grh, sizeof(grh), d->data, d->len);
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = dst->qp.qp_num;
    if (wc.status == IBV_WC_SUCCESS) {
        wc.byte_len = (uint32_t)(sizeof(grh) + d->len);
        wc.src_qp   = src->qp.qp_num;
        wc.slid     = dbl_dev_lid(sdev);
        wc.wc_flags =
            (d->global ? IBV_WC_GRH : 0) | (d->with_imm ? IBV_WC_WITH_IMM : 0);
        wc.imm_data = d->imm;
        dbl_g.stats.ud_delivered++;
    }
    dbl_cq_push(dst->qp.recv_cq, &wc, NULL, 0);
    if (wc.status != IBV_WC_SUCCESS) {
        dbl_qp_error(dst);
    }
}

/* A multicast datagram reaches every QP attached to its group; each copy
 * may be lost on its own. */
static void dbl_ud_deliver_mcast(dbl_qp_t *src, const dbl_held_t *d)
{
    dbl_qp_t *qp;

    for (qp = dbl_g.qps; qp != NULL; qp = qp->next) {
        if ((qp->qp.qp_type != IBV_QPT_UD) ||
            !dbl_qp_in_group(qp, &d->dgid, d->dlid)) {
            continue;
        }
        if ((dbl_g.drop > 0) && (dbl_random() < dbl_g.drop)) {
            dbl_g.stats.ud_fault_drop++;
            continue;
        }
        dbl_ud_deliver_to(src, qp, d);
    }
}

/* A UD datagram arrives (or not) at its destination. */
static void dbl_ud_deliver(dbl_qp_t *src, const dbl_held_t *d)
{
    if (dbl_is_mcast_lid(d->dlid)) {
        if ((d->dqpn == IBV_DOUBLE_MCAST_QPN) && d->global) {
            dbl_ud_deliver_mcast(src, d);
        } else {
            dbl_g.stats.ud_no_dest++; /* a group is reached by MGID only */
        }
        return;
    }
    dbl_ud_deliver_to(src, dbl_find_qp(d->dlid, d->dqpn, IBV_QPT_UD), d);
}

static void dbl_ud_release_held(dbl_qp_t *qp)
{
    dbl_held_t *h = qp->held;

    if (h != NULL) {
        qp->held = NULL;
        dbl_ud_deliver(qp, h);
        free(h->data);
        free(h);
    }
}

int ibv_double_qp_error(uint16_t lid, uint32_t qp_num)
{
    dbl_qp_t *qp = dbl_find_qp(lid, qp_num, IBV_QPT_UD);

    if (qp == NULL) {
        qp = dbl_find_qp(lid, qp_num, IBV_QPT_RC);
    }
    if (qp == NULL) {
        return ENOENT;
    }
    if (qp->qp.state != IBV_QPS_ERR) {
        dbl_qp_error(qp);
    }
    return 0;
}

void ibv_double_flush(void)
{
    dbl_qp_t *qp;

    for (qp = dbl_g.qps; qp != NULL; qp = qp->next) {
        dbl_ud_release_held(qp);
    }
}

static enum ibv_wc_status dbl_ud_send(dbl_qp_t *qp, struct ibv_send_wr *wr)
{
    const dbl_ah_t *ah = (const dbl_ah_t *)wr->wr.ud.ah;
    dbl_held_t d;
    enum ibv_wc_status status;
    double r;

    memset(&d, 0, sizeof(d));
    status = dbl_gather(qp, wr, &d.data, &d.len);
    if (status != IBV_WC_SUCCESS) {
        return status;
    }
    if (d.len > IBV_DOUBLE_PORT_MTU) {
        free(d.data);
        return IBV_WC_LOC_LEN_ERR;
    }
    d.dlid = ah->attr.dlid;
    d.dqpn = wr->wr.ud.remote_qpn;
    /* a Q_Key with its high bit set means the sending QP's own */
    d.qkey     = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->qkey
                                                       : wr->wr.ud.remote_qkey;
    d.global   = ah->attr.is_global;
    d.dgid     = ah->attr.grh.dgid;
    d.with_imm = (wr->opcode == IBV_WR_SEND_WITH_IMM);
    d.imm      = wr->imm_data;
    dbl_g.stats.ud_sent++;

    if (dbl_is_mcast_lid(d.dlid)) {
        dbl_ud_deliver(qp, &d); /* loss per receiver, no reordering */
        free(d.data);
        return IBV_WC_SUCCESS;
    }
    r = (dbl_g.drop + dbl_g.reorder > 0) ? dbl_random() : 1.0;
    if (r < dbl_g.drop) {
        dbl_g.stats.ud_fault_drop++;
    } else if ((r < dbl_g.drop + dbl_g.reorder) && (qp->held == NULL) &&
               ((qp->held = malloc(sizeof(*qp->held))) != NULL)) {
        /* held back until this QP's next datagram has gone */
        *qp->held = d;
        dbl_g.stats.ud_fault_reorder++;
        return IBV_WC_SUCCESS;
    } else {
        dbl_ud_deliver(qp, &d);
        dbl_ud_release_held(qp);
    }
    free(d.data);
    return IBV_WC_SUCCESS;
}

/* An RC operation: the peer must be the connected QP that points back. */
static enum ibv_wc_status dbl_rc_send(dbl_qp_t *qp, struct ibv_send_wr *wr,
                                      struct ibv_wc *swc)
{
    uint16_t my_lid = dbl_dev_lid(dbl_ctx_dev(qp->qp.context));
    dbl_qp_t *dst   = dbl_find_qp(qp->dlid, qp->dest_qpn, IBV_QPT_RC);
    enum ibv_wc_status status;
    struct ibv_wc wc;
    dbl_rwqe_t e;
    uint8_t *data = NULL;
    size_t len    = 0;
    dbl_mr_t *mr;
    int i;

    if ((dst == NULL) || !dbl_can_receive(dst) || (dst->dlid != my_lid) ||
        (dst->dest_qpn != qp->qp.qp_num)) {
        return IBV_WC_RETRY_EXC_ERR; /* no acknowledgement ever comes */
    }

    if (wr->opcode == IBV_WR_RDMA_READ) {
        for (i = 0; i < wr->num_sge; ++i) {
            len += wr->sg_list[i].length;
            if (dbl_mr_check(qp->qp.pd, wr->sg_list[i].lkey, 0,
                             wr->sg_list[i].addr, wr->sg_list[i].length,
                             IBV_ACCESS_LOCAL_WRITE) == NULL) {
                return IBV_WC_LOC_PROT_ERR;
            }
        }
        mr = dbl_mr_check(dst->qp.pd, wr->wr.rdma.rkey, 1,
                          wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_READ);
        if ((mr == NULL) || !(dst->access & IBV_ACCESS_REMOTE_READ)) {
            dbl_g.stats.rdma_bad_rkey++;
            return IBV_WC_REM_ACCESS_ERR;
        }
        dbl_g.stats.rdma_reads++;
        data = (uint8_t *)(uintptr_t)wr->wr.rdma.remote_addr;
        for (i = 0; i < wr->num_sge; ++i) {
            memmove((void *)(uintptr_t)wr->sg_list[i].addr, data,
                    wr->sg_list[i].length);
            data += wr->sg_list[i].length;
        }
        swc->opcode   = IBV_WC_RDMA_READ;
        swc->byte_len = (uint32_t)len;
        return IBV_WC_SUCCESS;
    }

    status = dbl_gather(qp, wr, &data, &len);
    if (status != IBV_WC_SUCCESS) {
        return status;
    }
    swc->byte_len = (uint32_t)len;
    memset(&wc, 0, sizeof(wc));
    wc.qp_num = dst->qp.qp_num;
    wc.src_qp = qp->qp.qp_num;
    wc.slid   = my_lid;

    if ((wr->opcode == IBV_WR_RDMA_WRITE) ||
        (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
        swc->opcode = IBV_WC_RDMA_WRITE;
        mr =
            dbl_mr_check(dst->qp.pd, wr->wr.rdma.rkey, 1,
                         wr->wr.rdma.remote_addr, len, IBV_ACCESS_REMOTE_WRITE);
        if ((mr == NULL) || !(dst->access & IBV_ACCESS_REMOTE_WRITE)) {
            dbl_g.stats.rdma_bad_rkey++;
            status = IBV_WC_REM_ACCESS_ERR;
        } else if ((wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
                   !dbl_take_rwqe(dst, &e)) {
            dbl_g.stats.rc_rnr++;
            status = IBV_WC_RNR_RETRY_EXC_ERR;
        } else {
            memcpy((void *)(uintptr_t)wr->wr.rdma.remote_addr, data, len);
            dbl_g.stats.rdma_writes++;
            if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
                wc.wr_id    = e.wr_id;
                wc.status   = IBV_WC_SUCCESS;
                wc.opcode   = IBV_WC_RECV_RDMA_WITH_IMM;
                wc.byte_len = (uint32_t)len;
                wc.wc_flags = IBV_WC_WITH_IMM;
                wc.imm_data = wr->imm_data;
                dbl_cq_push(dst->qp.recv_cq, &wc, NULL, 0);
            }
        }
        free(data);
        return status;
    }

    /* a send: it needs a receive posted at the other end */
    swc->opcode = IBV_WC_SEND;
    if (!dbl_take_rwqe(dst, &e)) {
        dbl_g.stats.rc_rnr++;
        free(data);
        return IBV_WC_RNR_RETRY_EXC_ERR;
    }
    wc.wr_id  = e.wr_id;
    wc.status = dbl_scatter(dst->qp.pd, &e, NULL, 0, data, len);
    wc.opcode = IBV_WC_RECV;
    free(data);
    if (wc.status != IBV_WC_SUCCESS) {
        dbl_cq_push(dst->qp.recv_cq, &wc, NULL, 0);
        dbl_qp_error(dst);
        return (wc.status == IBV_WC_LOC_LEN_ERR) ? IBV_WC_REM_INV_REQ_ERR
                                                 : IBV_WC_REM_OP_ERR;
    }
    wc.byte_len = (uint32_t)len;
    if (wr->opcode == IBV_WR_SEND_WITH_IMM) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = wr->imm_data;
    }
    dbl_cq_push(dst->qp.recv_cq, &wc, NULL, 0);
    return IBV_WC_SUCCESS;
}

/* Whether the hardware would refuse wr at posting time: an errno. */
static int dbl_post_check(dbl_qp_t *qp, const struct ibv_send_wr *wr)
{
    const int ud = (qp->qp.qp_type == IBV_QPT_UD);
    size_t len   = 0;
    int i;

    switch (qp->qp.state) {
    case IBV_QPS_RTS:
    case IBV_QPS_SQE:
    case IBV_QPS_ERR:
        break;
    default:
        return EINVAL; /* RESET, INIT, RTR: the send queue is not on */
    }
    if ((wr->num_sge < 0) || ((unsigned)wr->num_sge > qp->cap.max_send_sge)) {
        return EINVAL;
    }
    for (i = 0; i < wr->num_sge; ++i) {
        len += wr->sg_list[i].length;
    }
    if ((wr->send_flags & IBV_SEND_INLINE) && (len > qp->cap.max_inline_data)) {
        return EINVAL;
    }
    if (ud ? ((wr->opcode != IBV_WR_SEND) &&
              (wr->opcode != IBV_WR_SEND_WITH_IMM))
           : ((wr->opcode != IBV_WR_SEND) &&
              (wr->opcode != IBV_WR_SEND_WITH_IMM) &&
              (wr->opcode != IBV_WR_RDMA_WRITE) &&
              (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) &&
              (wr->opcode != IBV_WR_RDMA_READ))) {
        return EINVAL;
    }
    if (ud && (wr->wr.ud.ah == NULL)) {
        return EINVAL;
    }
    if (qp->sq_posted - qp->sq_done >= qp->cap.max_send_wr) {
        return ENOMEM;
    }
    return 0;
}

int dbl_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
                  struct ibv_send_wr **bad_wr)
{
    dbl_qp_t *qp = (dbl_qp_t *)ibqp;
    struct ibv_wc wc;
    int ret;

    for (; wr != NULL; wr = wr->next) {
        ret = dbl_post_check(qp, wr);
        if (ret != 0) {
            *bad_wr = wr;
            return ret;
        }
        ++qp->sq_posted;
        memset(&wc, 0, sizeof(wc));
        wc.wr_id  = wr->wr_id;
        wc.qp_num = ibqp->qp_num;
        wc.opcode = IBV_WC_SEND;
        if (ibqp->state != IBV_QPS_RTS) {
            wc.status = IBV_WC_WR_FLUSH_ERR; /* the send queue is in error */
        } else if (ibqp->qp_type == IBV_QPT_UD) {
            wc.status = dbl_ud_send(qp, wr);
        } else {
            wc.status = dbl_rc_send(qp, wr, &wc);
        }

        if (wc.status != IBV_WC_SUCCESS) {
            /* errors complete whether signaled or not */
            dbl_cq_push(ibqp->send_cq, &wc, qp, qp->sq_posted);
            if (ibqp->state == IBV_QPS_RTS) {
                if (ibqp->qp_type == IBV_QPT_UD) {
                    ibqp->state = IBV_QPS_SQE; /* receives go on */
                } else {
                    dbl_qp_error(qp);
                }
            }
        } else if (qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) {
            dbl_cq_push(ibqp->send_cq, &wc, qp, qp->sq_posted);
        }
    }
    return 0;
}
