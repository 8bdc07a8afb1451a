/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD queue pairs under the verbs wire and its receive
 * queues: registered receive buffers, kept posted (see verbs_dgram_int.h).
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

#include <string.h>

/* RESET -> INIT -> RTR -> RTS: the attributes a UD QP needs for each. */
static ucs_status_t aptus_verbs_ud_connect(struct ibv_qp *qp, uint8_t port)
{
    struct ibv_qp_attr attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state   = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = port;
    attr.qkey       = APTUS_VERBS_QKEY;
    ret             = ibv_modify_qp(qp, &attr,
                                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_QKEY);
    if (ret == 0) {
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = IBV_QPS_RTR;
        ret           = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    }
    if (ret == 0) {
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn   = 0;
        ret           = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (ret != 0) {
        ucs_error("verbs wire: ibv_modify_qp failed: %s", strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

void aptus_verbs_ud_repost_add(aptus_verbs_ud_t *ud, aptus_verbs_repost_t *r,
                               unsigned slot)
{
    struct ibv_recv_wr *wr;
    struct ibv_sge *sge;

    if (r->count == APTUS_VERBS_BATCH) {
        aptus_verbs_ud_repost_flush(ud, r);
    }
    wr          = &r->wr[r->count];
    sge         = &r->sge[r->count];
    sge->addr   = (uintptr_t)(ud->buf + (size_t)slot * ud->rx_stride);
    sge->length = (uint32_t)ud->rx_stride;
    sge->lkey   = ud->mr->lkey;
    wr->wr_id   = slot;
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->next    = NULL;
    if (r->count > 0) {
        r->wr[r->count - 1].next = wr;
    }
    ++r->count;
}

void aptus_verbs_ud_repost_flush(aptus_verbs_ud_t *ud, aptus_verbs_repost_t *r)
{
    struct ibv_recv_wr *bad;
    int ret;

    if (r->count == 0) {
        return;
    }
    ret = ibv_post_recv(ud->qp, &r->wr[0], &bad);
    if (ret != 0) {
        /* the queue is sized for every buffer, so only a QP in the wrong
         * state refuses: the buffers not posted are out of service */
        ucs_error("verbs wire: ibv_post_recv failed: %s", strerror(ret));
        ud->rx_posted += (unsigned)(bad - &r->wr[0]);
    } else {
        ud->rx_posted += r->count;
    }
    r->count = 0;
}

ucs_status_t aptus_verbs_ud_open(aptus_verbs_dgram_t *v, aptus_verbs_ud_t *ud,
                                 unsigned rx_count, size_t extra,
                                 unsigned max_send_wr, struct ibv_cq *recv_cq)
{
    struct ibv_qp_init_attr init;
    aptus_verbs_repost_t repost;
    ucs_status_t status;
    size_t size;
    void *buf;
    unsigned i;

    memset(ud, 0, sizeof(*ud));
    ud->recv_cq   = recv_cq;
    ud->rx_count  = rx_count;
    ud->rx_stride = ucs_align_up(APTUS_VERBS_GRH_LEN + v->port_mtu, 64);
    size          = ud->rx_stride * rx_count + extra;
    /* the HCA writes them, the polling CPU reads them: on the HCA's node
     * (pages, as registration likes them, either way) */
    if (v->numa_node >= 0) {
        buf = aptus_numa_alloc(&size, v->numa_node, "aptus_verbs_bufs");
        if (buf == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
    } else if (ucs_posix_memalign(&buf, 4096, size, "aptus_verbs_bufs") != 0) {
        return UCS_ERR_NO_MEMORY;
    }
    ud->buf = buf;
    ud->mr  = ibv_reg_mr(v->pd, buf, size, IBV_ACCESS_LOCAL_WRITE);
    if (ud->mr == NULL) {
        ucs_error("verbs wire: ibv_reg_mr of %zu bytes failed: %m", size);
        status = UCS_ERR_IO_ERROR;
        goto err;
    }

    memset(&init, 0, sizeof(init));
    init.send_cq          = v->send_cq;
    init.recv_cq          = recv_cq;
    init.qp_type          = IBV_QPT_UD;
    init.cap.max_send_wr  = max_send_wr;
    init.cap.max_recv_wr  = rx_count;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    ud->qp                = ibv_create_qp(v->pd, &init);
    if (ud->qp == NULL) {
        ucs_error("verbs wire: ibv_create_qp(UD) failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err;
    }
    status = aptus_verbs_ud_connect(ud->qp, v->port);
    if (status != UCS_OK) {
        goto err;
    }

    repost.count = 0;
    for (i = 0; i < rx_count; ++i) {
        aptus_verbs_ud_repost_add(ud, &repost, i);
    }
    aptus_verbs_ud_repost_flush(ud, &repost);
    return UCS_OK;

err:
    aptus_verbs_ud_close(ud);
    return status;
}

int aptus_verbs_ud_recover(aptus_verbs_ud_t *ud, uint8_t port, int idle_sends)
{
    aptus_verbs_repost_t repost;
    struct ibv_qp_attr attr;
    unsigned i;
    int ret;

    if (ucs_likely(!ud->broken) || ud->dead || (ud->rx_posted > 0) ||
        !idle_sends) {
        return 0;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RESET;
    ret           = ibv_modify_qp(ud->qp, &attr, IBV_QP_STATE);
    if ((ret != 0) || (aptus_verbs_ud_connect(ud->qp, port) != UCS_OK)) {
        ucs_error("verbs wire: UD QP 0x%x cannot be taken back from the "
                  "error state: out of service",
                  ud->qp->qp_num);
        ud->dead = 1;
        return 0;
    }
    ucs_debug("verbs wire: UD QP 0x%x taken back from the error state",
              ud->qp->qp_num);
    repost.count = 0;
    for (i = 0; i < ud->rx_count; ++i) {
        aptus_verbs_ud_repost_add(ud, &repost, i);
    }
    aptus_verbs_ud_repost_flush(ud, &repost);
    ud->broken = 0;
    ++ud->rebuilds;
    return 1;
}

void aptus_verbs_ud_close(aptus_verbs_ud_t *ud)
{
    if ((ud->qp != NULL) && ibv_destroy_qp(ud->qp)) {
        ucs_warn("verbs wire: ibv_destroy_qp failed");
    }
    if ((ud->mr != NULL) && ibv_dereg_mr(ud->mr)) {
        ucs_warn("verbs wire: ibv_dereg_mr failed");
    }
    ucs_free(ud->buf);
    memset(ud, 0, sizeof(*ud));
}

void aptus_verbs_ud_src(aptus_verbs_dgram_t *v, const struct ibv_wc *wc,
                        const uint8_t *buf, aptus_wire_addr_t *src)
{
    const struct ibv_grh *grh = (const struct ibv_grh *)buf;

    if (v->global && (wc->wc_flags & IBV_WC_GRH)) {
        aptus_verbs_addr_pack(wc->src_qp, 0, 0, &grh->sgid, src);
    } else {
        aptus_verbs_addr_pack(wc->src_qp, wc->slid, APTUS_VERBS_QKEY, NULL,
                              src);
    }
}
