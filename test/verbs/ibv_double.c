/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus tests: the verbs double's devices, protection domains, memory
 * registrations, completion queues and channels, address handles and
 * shared receive queues (queue pairs: ibv_double_qp.c).
 */
#include "ibv_double_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dbl_global_t dbl_g = { .next_qpn = 0x100, .next_key = 0x1000 };

void *dbl_alloc(size_t size)
{
    void *p = calloc(1, size);

    if (p != NULL) {
        ++dbl_g.live;
    }
    return p;
}

void dbl_free(void *p)
{
    if (p != NULL) {
        --dbl_g.live;
        free(p);
    }
}

/* splitmix64: the same sequence for the same seed */
double dbl_random(void)
{
    uint64_t z = (dbl_g.rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / (double)(1ull << 53);
}

void ibv_double_enable(unsigned num_devices)
{
    unsigned i;

    free(dbl_g.devs);
    dbl_g.devs     = calloc(num_devices, sizeof(*dbl_g.devs));
    dbl_g.num_devs = (dbl_g.devs != NULL) ? num_devices : 0;
    for (i = 0; i < dbl_g.num_devs; ++i) {
        dbl_dev_t *d          = &dbl_g.devs[i];
        d->index              = i;
        d->dev.node_type      = IBV_NODE_CA;
        d->dev.transport_type = IBV_TRANSPORT_IB;
        snprintf(d->dev.name, sizeof(d->dev.name), "dbl%u", i);
        snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%u", i);
    }
    memset(&dbl_g.stats, 0, sizeof(dbl_g.stats));
    ibv_double_ud_fault(0, 0, 0);
}

unsigned ibv_double_disable(void)
{
    free(dbl_g.devs);
    dbl_g.devs     = NULL;
    dbl_g.num_devs = 0;
    return dbl_g.live;
}

unsigned ibv_double_live(void)
{
    return dbl_g.live;
}

uint16_t ibv_double_lid(unsigned dev_index)
{
    return DBL_LID_BASE + dev_index;
}

void ibv_double_ud_fault(double drop, double reorder, uint64_t seed)
{
    dbl_g.drop    = drop;
    dbl_g.reorder = reorder;
    dbl_g.rng     = seed;
}

void ibv_double_get_stats(ibv_double_stats_t *stats)
{
    *stats = dbl_g.stats;
}

uint16_t dbl_dev_lid(const dbl_dev_t *dev)
{
    return ibv_double_lid(dev->index);
}

void dbl_dev_gid(const dbl_dev_t *dev, union ibv_gid *gid)
{
    /* link-local prefix, an EUI-64 made of the device's index */
    memset(gid, 0, sizeof(*gid));
    gid->raw[0]  = 0xfe;
    gid->raw[1]  = 0x80;
    gid->raw[8]  = 0x02;
    gid->raw[11] = 0xff;
    gid->raw[12] = 0xfe;
    gid->raw[15] = (uint8_t)dev->index;
    gid->raw[14] = (uint8_t)(dev->index >> 8);
}

dbl_dev_t *dbl_dev_by_ip(uint32_t ip)
{
    unsigned i;

    for (i = 0; (ip != 0) && (i < dbl_g.num_devs); ++i) {
        if (dbl_g.devs[i].ip == ip) {
            return &dbl_g.devs[i];
        }
    }
    return NULL;
}

void ibv_double_cm_addr(unsigned dev_index, uint32_t ip)
{
    if (dev_index < dbl_g.num_devs) {
        dbl_g.devs[dev_index].ip = ip;
    }
}

dbl_dev_t *dbl_dev_by_lid(uint16_t lid)
{
    unsigned i;

    for (i = 0; i < dbl_g.num_devs; ++i) {
        if (dbl_dev_lid(&dbl_g.devs[i]) == lid) {
            return &dbl_g.devs[i];
        }
    }
    return NULL;
}

dbl_dev_t *dbl_ctx_dev(struct ibv_context *ctx)
{
    return ((dbl_ctx_t *)ctx)->dev;
}

/* ---- devices and contexts ---- */

struct ibv_device **ibv_get_device_list(int *num_devices)
{
    struct ibv_device **list;
    unsigned i;

    list = calloc(dbl_g.num_devs + 1, sizeof(*list));
    if (list == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    for (i = 0; i < dbl_g.num_devs; ++i) {
        list[i] = &dbl_g.devs[i].dev;
    }
    if (num_devices != NULL) {
        *num_devices = (int)dbl_g.num_devs;
    }
    return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
    free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
    return device->name;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
    return htobe64(0x0002c9fffe000000ull + ((dbl_dev_t *)device)->index);
}

int dbl_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int dbl_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int dbl_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                      struct ibv_recv_wr **bad_wr);
int dbl_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
                  struct ibv_send_wr **bad_wr);
int dbl_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                  struct ibv_recv_wr **bad_wr);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    dbl_ctx_t *ctx;

    if ((dbl_g.num_devs == 0) || (device < &dbl_g.devs[0].dev) ||
        (device > &dbl_g.devs[dbl_g.num_devs - 1].dev)) {
        errno = ENODEV;
        return NULL;
    }
    ctx = dbl_alloc(sizeof(*ctx));
    if (ctx == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    ctx->dev                  = (dbl_dev_t *)device;
    ctx->ctx.device           = device;
    ctx->ctx.cmd_fd           = -1;
    ctx->ctx.async_fd         = -1;
    ctx->ctx.num_comp_vectors = 1;
    ctx->ctx.abi_compat       = NULL; /* not extended: inline wrappers fall
                                         back to the exported calls */
    ctx->ctx.ops.poll_cq       = dbl_poll_cq;
    ctx->ctx.ops.req_notify_cq = dbl_req_notify_cq;
    ctx->ctx.ops.post_srq_recv = dbl_post_srq_recv;
    ctx->ctx.ops.post_send     = dbl_post_send;
    ctx->ctx.ops.post_recv     = dbl_post_recv;
    pthread_mutex_init(&ctx->ctx.mutex, NULL);
    return &ctx->ctx;
}

int ibv_close_device(struct ibv_context *context)
{
    dbl_ctx_t *ctx = (dbl_ctx_t *)context;

    if (ctx->refs != 0) {
        return EBUSY; /* the kernel would clean up; a test should not need it */
    }
    pthread_mutex_destroy(&ctx->ctx.mutex);
    dbl_free(ctx);
    return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
    dbl_dev_t *dev = dbl_ctx_dev(context);

    memset(attr, 0, sizeof(*attr));
    snprintf(attr->fw_ver, sizeof(attr->fw_ver), "0.0.0-double");
    attr->node_guid           = ibv_get_device_guid(&dev->dev);
    attr->sys_image_guid      = attr->node_guid;
    attr->max_mr_size         = UINT64_MAX;
    attr->page_size_cap       = 4096;
    attr->vendor_id           = 0xd0b1e;
    attr->max_qp              = DBL_MAX_QP;
    attr->max_qp_wr           = DBL_MAX_WR;
    attr->max_sge             = DBL_MAX_SGE;
    attr->max_sge_rd          = DBL_MAX_SGE;
    attr->max_cq              = DBL_MAX_QP;
    attr->max_cqe             = DBL_MAX_CQE;
    attr->max_mr              = 1 << 20;
    attr->max_pd              = 1 << 16;
    attr->max_qp_rd_atom      = 16;
    attr->max_qp_init_rd_atom = 16;
    attr->max_ah              = 1 << 20;
    attr->max_srq             = DBL_MAX_QP;
    attr->max_srq_wr          = DBL_MAX_WR;
    attr->max_srq_sge         = DBL_MAX_SGE;
    attr->max_pkeys           = 1;
    attr->phys_port_cnt       = 1;
    return 0;
}

/* The exported (compat) call the inline ibv_query_port falls back to; it
 * has cleared the whole structure. */
#undef ibv_query_port
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *compat)
{
    struct ibv_port_attr *attr = (struct ibv_port_attr *)compat;
    dbl_dev_t *dev             = dbl_ctx_dev(context);

    if (port_num != 1) {
        return EINVAL;
    }
    attr->state        = IBV_PORT_ACTIVE;
    attr->max_mtu      = IBV_MTU_4096;
    attr->active_mtu   = IBV_MTU_4096;
    attr->gid_tbl_len  = 1;
    attr->max_msg_sz   = DBL_MAX_RC_MSG;
    attr->pkey_tbl_len = 1;
    attr->lid          = dbl_dev_lid(dev);
    attr->sm_lid       = DBL_LID_BASE;
    attr->active_width = 2;  /* 4x */
    attr->active_speed = 32; /* EDR */
    attr->phys_state   = 5;  /* LinkUp */
    attr->link_layer   = IBV_LINK_LAYER_INFINIBAND;
    return 0;
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
                  union ibv_gid *gid)
{
    if ((port_num != 1) || (index != 0)) {
        return -1;
    }
    dbl_dev_gid(dbl_ctx_dev(context), gid);
    return 0;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
                   __be16 *pkey)
{
    if ((port_num != 1) || (index != 0)) {
        return -1;
    }
    *pkey = htobe16(0xffff);
    return 0;
}

/* ---- protection domains and memory registrations ---- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
    dbl_pd_t *pd = dbl_alloc(sizeof(*pd));

    if (pd == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    pd->pd.context = context;
    pd->pd.handle  = dbl_g.next_key++;
    ++((dbl_ctx_t *)context)->refs;
    return &pd->pd;
}

int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
    dbl_pd_t *pd = (dbl_pd_t *)ibpd;

    if (pd->refs != 0) {
        return EBUSY;
    }
    --((dbl_ctx_t *)ibpd->context)->refs;
    dbl_free(pd);
    return 0;
}

static struct ibv_mr *dbl_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
                                 uint64_t iova, unsigned access)
{
    const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                           IBV_ACCESS_RELAXED_ORDERING;
    dbl_mr_t *mr;

    /* remote write or atomic access needs local write (IB spec 10.6.3.1) */
    if ((access & ~known) || (length == 0) || (addr == NULL) ||
        ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
         !(access & IBV_ACCESS_LOCAL_WRITE)) ||
        (iova != (uintptr_t)addr)) {
        errno = EINVAL;
        return NULL;
    }
    mr = dbl_alloc(sizeof(*mr));
    if (mr == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    mr->mr.context = pd->context;
    mr->mr.pd      = pd;
    mr->mr.addr    = addr;
    mr->mr.length  = length;
    mr->mr.handle  = dbl_g.next_key;
    /* keys never come back, so a stale key fails */
    mr->mr.lkey = (dbl_g.next_key << 8) | 0x11;
    mr->mr.rkey = (dbl_g.next_key << 8) | 0x22;
    ++dbl_g.next_key;
    mr->access = (int)access;
    mr->next   = dbl_g.mrs;
    dbl_g.mrs  = mr;
    ++((dbl_pd_t *)pd)->refs;
    return &mr->mr;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
                          int access)
{
    return dbl_reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                uint64_t iova, unsigned int access)
{
    return dbl_reg_mr(pd, addr, length, iova, access);
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
    dbl_mr_t **p;

    for (p = &dbl_g.mrs; *p != NULL; p = &(*p)->next) {
        if (&(*p)->mr == ibmr) {
            *p = (*p)->next;
            --((dbl_pd_t *)ibmr->pd)->refs;
            dbl_free(ibmr);
            return 0;
        }
    }
    return EINVAL;
}

dbl_mr_t *dbl_mr_check(struct ibv_pd *pd, uint32_t key, int is_rkey,
                       uint64_t addr, size_t len, int access)
{
    dbl_mr_t *mr;
    uint64_t start;

    for (mr = dbl_g.mrs; mr != NULL; mr = mr->next) {
        if ((is_rkey ? mr->mr.rkey : mr->mr.lkey) == key) {
            break;
        }
    }
    if ((mr == NULL) || (mr->mr.pd != pd) ||
        ((mr->access & access) != access)) {
        return NULL;
    }
    start = (uintptr_t)mr->mr.addr;
    if ((addr < start) || (len > mr->mr.length) ||
        (addr - start > mr->mr.length - len)) {
        return NULL;
    }
    return mr;
}

/* ---- completion queues and channels ---- */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
    dbl_channel_t *ch = dbl_alloc(sizeof(*ch));
    int fds[2];

    if (ch == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    /* a pipe: each event is the CQ's address, read back by get_cq_event */
    if (pipe2(fds, O_CLOEXEC) < 0) {
        dbl_free(ch);
        return NULL;
    }
    ch->ch.context = context;
    ch->ch.fd      = fds[0];
    ch->wfd        = fds[1];
    ++((dbl_ctx_t *)context)->refs;
    return &ch->ch;
}

static int dbl_channel_users(struct ibv_comp_channel *ch);

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
    if (dbl_channel_users(ch) != 0) {
        return EBUSY;
    }
    close(ch->fd);
    close(((dbl_channel_t *)ch)->wfd);
    --((dbl_ctx_t *)ch->context)->refs;
    dbl_free(ch);
    return 0;
}

/* CQs by channel, to refuse destroying a channel in use */
static dbl_cq_t *dbl_cqs[DBL_MAX_QP];

static int dbl_channel_users(struct ibv_comp_channel *ch)
{
    int i, n = 0;

    for (i = 0; i < DBL_MAX_QP; ++i) {
        n += (dbl_cqs[i] != NULL) && (dbl_cqs[i]->cq.channel == ch);
    }
    return n;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
                             void *cq_context, struct ibv_comp_channel *channel,
                             int comp_vector)
{
    dbl_cq_t *cq;
    int i;

    if ((cqe < 1) || (cqe > DBL_MAX_CQE) || (comp_vector != 0)) {
        errno = EINVAL;
        return NULL;
    }
    for (i = 0; (i < DBL_MAX_QP) && (dbl_cqs[i] != NULL); ++i) {
    }
    cq = (i < DBL_MAX_QP) ? dbl_alloc(sizeof(*cq)) : NULL;
    if (cq == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    cq->ring = calloc(cqe, sizeof(*cq->ring));
    if (cq->ring == NULL) {
        dbl_free(cq);
        errno = ENOMEM;
        return NULL;
    }
    cq->size          = cqe;
    cq->cq.context    = context;
    cq->cq.channel    = channel;
    cq->cq.cq_context = cq_context;
    cq->cq.cqe        = cqe;
    cq->cq.handle     = i;
    dbl_cqs[i]        = cq;
    ++((dbl_ctx_t *)context)->refs;
    return &cq->cq;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
    dbl_cq_t *cq = (dbl_cq_t *)ibcq;

    /* QPs still on it, or events not acknowledged (real: blocks) */
    if ((cq->refs != 0) || (cq->events_sent != ibcq->comp_events_completed)) {
        return EBUSY;
    }
    dbl_cqs[ibcq->handle] = NULL;
    --((dbl_ctx_t *)ibcq->context)->refs;
    free(cq->ring);
    dbl_free(cq);
    return 0;
}

void dbl_cq_push(struct ibv_cq *ibcq, const struct ibv_wc *wc, dbl_qp_t *qp,
                 uint64_t sq_seq)
{
    dbl_cq_t *cq = (dbl_cq_t *)ibcq;
    dbl_wc_t *e;
    void *addr = ibcq;

    if (cq->count == cq->size) {
        cq->overrun = 1;
        return;
    }
    e         = &cq->ring[(cq->head + cq->count++) % cq->size];
    e->wc     = *wc;
    e->qp     = qp;
    e->sq_seq = sq_seq;
    if (cq->armed && (ibcq->channel != NULL)) {
        cq->armed = 0;
        ++cq->events_sent;
        if (write(((dbl_channel_t *)ibcq->channel)->wfd, &addr, sizeof(addr)) !=
            sizeof(addr)) {
            abort();
        }
    }
}

void dbl_cq_forget(struct ibv_cq *ibcq, dbl_qp_t *qp)
{
    dbl_cq_t *cq = (dbl_cq_t *)ibcq;
    int i;

    for (i = 0; i < cq->count; ++i) {
        if (cq->ring[(cq->head + i) % cq->size].qp == qp) {
            cq->ring[(cq->head + i) % cq->size].qp = NULL;
        }
    }
}

int dbl_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
    dbl_cq_t *cq = (dbl_cq_t *)ibcq;
    dbl_wc_t *e;
    int n;

    if (cq->overrun) {
        return -1;
    }
    for (n = 0; (n < num_entries) && (cq->count > 0); ++n) {
        e     = &cq->ring[cq->head];
        wc[n] = e->wc;
        if (e->qp != NULL) {
            /* a polled send completion frees its WQE and the unsignaled
             * ones before it */
            e->qp->sq_done = e->sq_seq;
        }
        cq->head = (cq->head + 1) % cq->size;
        --cq->count;
    }
    return n;
}

int dbl_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
    dbl_cq_t *cq = (dbl_cq_t *)ibcq;

    if (ibcq->channel == NULL) {
        return EINVAL;
    }
    /* solicited_only is taken as any: every completion wakes */
    cq->armed = 1;
    return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
                     void **cq_context)
{
    void *addr;

    if (read(channel->fd, &addr, sizeof(addr)) != sizeof(addr)) {
        return -1;
    }
    *cq         = addr;
    *cq_context = (*cq)->cq_context;
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
    cq->comp_events_completed += nevents;
}

/* ---- address handles ---- */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    dbl_ah_t *ah;

    /* an IB port routes by LID: 0 is no destination */
    if ((attr->port_num != 1) || (attr->dlid == 0) ||
        (attr->is_global && (attr->grh.sgid_index != 0))) {
        errno = EINVAL;
        return NULL;
    }
    ah = dbl_alloc(sizeof(*ah));
    if (ah == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    ah->ah.context = pd->context;
    ah->ah.pd      = pd;
    ah->attr       = *attr;
    ++((dbl_pd_t *)pd)->refs;
    return &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
    --((dbl_pd_t *)ah->pd)->refs;
    dbl_free(ah);
    return 0;
}

/* ---- receive queues: a QP's own, or shared ---- */

int dbl_rq_init(dbl_rq_t *rq, unsigned size, unsigned max_sge)
{
    rq->ring    = calloc(size ? size : 1, sizeof(*rq->ring));
    rq->size    = size;
    rq->head    = 0;
    rq->count   = 0;
    rq->max_sge = max_sge;
    return (rq->ring != NULL) ? 0 : ENOMEM;
}

int dbl_rq_post(dbl_rq_t *rq, struct ibv_recv_wr *wr,
                struct ibv_recv_wr **bad_wr)
{
    dbl_rwqe_t *e;
    int i;

    for (; wr != NULL; wr = wr->next) {
        if ((wr->num_sge < 0) || ((unsigned)wr->num_sge > rq->max_sge)) {
            *bad_wr = wr;
            return EINVAL;
        }
        if (rq->count == rq->size) {
            *bad_wr = wr;
            return ENOMEM;
        }
        e          = &rq->ring[(rq->head + rq->count++) % rq->size];
        e->wr_id   = wr->wr_id;
        e->num_sge = wr->num_sge;
        for (i = 0; i < wr->num_sge; ++i) {
            e->sg[i] = wr->sg_list[i];
        }
    }
    return 0;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
                               struct ibv_srq_init_attr *init)
{
    dbl_srq_t *srq;

    if ((init->attr.max_wr < 1) || (init->attr.max_wr > DBL_MAX_WR) ||
        (init->attr.max_sge < 1) || (init->attr.max_sge > DBL_MAX_SGE)) {
        errno = EINVAL;
        return NULL;
    }
    srq = dbl_alloc(sizeof(*srq));
    if ((srq == NULL) ||
        dbl_rq_init(&srq->rq, init->attr.max_wr, init->attr.max_sge)) {
        dbl_free(srq);
        errno = ENOMEM;
        return NULL;
    }
    srq->srq.context     = pd->context;
    srq->srq.srq_context = init->srq_context;
    srq->srq.pd          = pd;
    ++((dbl_pd_t *)pd)->refs;
    return &srq->srq;
}

int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
    dbl_srq_t *srq = (dbl_srq_t *)ibsrq;

    if (srq->refs != 0) {
        return EBUSY;
    }
    --((dbl_pd_t *)ibsrq->pd)->refs;
    free(srq->rq.ring);
    dbl_free(srq);
    return 0;
}

int dbl_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                      struct ibv_recv_wr **bad_wr)
{
    return dbl_rq_post(&((dbl_srq_t *)srq)->rq, wr, bad_wr);
}
