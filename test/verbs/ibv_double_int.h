/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus tests: the verbs double's objects (see ibv_double.h). Each
 * wraps the libibverbs structure it hands out, first, so that a pointer to
 * one is a pointer to the other.
 */
#ifndef APTUS_IBV_DOUBLE_INT_H_
#define APTUS_IBV_DOUBLE_INT_H_

#include "ibv_double.h"

#define DBL_MAX_SGE    16
#define DBL_MAX_WR     16384
#define DBL_MAX_CQE    65536
#define DBL_MAX_QP     4096
#define DBL_LID_BASE   0x10
#define DBL_MAX_RC_MSG (1u << 31)
#define DBL_HELD_MAX   DBL_MAX_WR

typedef struct dbl_dev {
    struct ibv_device dev;
    unsigned index;
    uint32_t ip; /* IPv4 address of its port's netdev (rdma_cm), or 0 */
} dbl_dev_t;

typedef struct dbl_ctx {
    struct ibv_context ctx;
    dbl_dev_t *dev;
    unsigned refs; /* PDs, CQs, channels */
} dbl_ctx_t;

typedef struct dbl_pd {
    struct ibv_pd pd;
    unsigned refs; /* MRs, QPs, SRQs, AHs */
} dbl_pd_t;

typedef struct dbl_mr {
    struct ibv_mr mr;
    int access;
    struct dbl_mr *next;
} dbl_mr_t;

typedef struct dbl_channel {
    struct ibv_comp_channel ch;
    int wfd; /* the pipe's write end */
} dbl_channel_t;

typedef struct dbl_qp dbl_qp_t;

typedef struct dbl_wc {
    struct ibv_wc wc;
    dbl_qp_t *qp;    /* a send completion's QP: frees its send queue */
    uint64_t sq_seq; /* the send's sequence on that QP */
} dbl_wc_t;

typedef struct dbl_cq {
    struct ibv_cq cq;
    dbl_wc_t *ring;
    int size, head, count;
    int overrun; /* a completion found it full: broken, as on hardware */
    int armed;
    unsigned events_sent;
    unsigned refs; /* QPs */
} dbl_cq_t;

typedef struct dbl_rwqe {
    uint64_t wr_id;
    int num_sge;
    struct ibv_sge sg[DBL_MAX_SGE];
} dbl_rwqe_t;

typedef struct dbl_rq {
    dbl_rwqe_t *ring;
    unsigned size, head, count, max_sge;
} dbl_rq_t;

typedef struct dbl_srq {
    struct ibv_srq srq;
    dbl_rq_t rq;
    unsigned refs; /* QPs */
} dbl_srq_t;

typedef struct dbl_ah {
    struct ibv_ah ah;
    struct ibv_ah_attr attr;
} dbl_ah_t;

/* A UD datagram held back to be delivered after the next one. */
typedef struct dbl_held {
    uint16_t dlid;
    uint32_t dqpn, qkey;
    int global;
    union ibv_gid dgid;
    int with_imm;
    uint32_t imm;
    size_t len;
    uint8_t *data;
} dbl_held_t;

/* A multicast group a UD QP is attached to. */
typedef struct dbl_mcast {
    struct dbl_mcast *next;
    union ibv_gid gid;
    uint16_t lid;
} dbl_mcast_t;

struct dbl_qp {
    struct ibv_qp qp;
    dbl_mcast_t *mcast; /* groups attached */
    dbl_qp_t *next;
    struct ibv_qp_cap cap;
    int sq_sig_all;
    dbl_rq_t rq; /* unused with an SRQ */
    uint8_t port;
    uint32_t qkey;
    int access;
    uint32_t dest_qpn;
    uint16_t dlid;
    uint64_t sq_posted, sq_done; /* send sequences: posted, freed */
    dbl_held_t *held;            /* reordered datagram, or NULL */
};

typedef struct dbl_global {
    unsigned num_devs;
    dbl_dev_t *devs;
    dbl_qp_t *qps;
    dbl_mr_t *mrs;
    uint32_t next_qpn;
    uint32_t next_key;
    unsigned live;
    double drop, reorder;
    uint64_t rng;
    ibv_double_stats_t stats;
} dbl_global_t;

extern dbl_global_t dbl_g;

void *dbl_alloc(size_t size);
void dbl_free(void *p);

/* the device of a context, and its port's LID */
dbl_dev_t *dbl_ctx_dev(struct ibv_context *ctx);
uint16_t dbl_dev_lid(const dbl_dev_t *dev);
void dbl_dev_gid(const dbl_dev_t *dev, union ibv_gid *gid);
dbl_dev_t *dbl_dev_by_lid(uint16_t lid);

/* the registration behind key (an lkey or rkey) covering [addr, addr+len)
 * with access, in pd; NULL when none */
dbl_mr_t *dbl_mr_check(struct ibv_pd *pd, uint32_t key, int is_rkey,
                       uint64_t addr, size_t len, int access);

/* add a completion; with qp and sq_seq, a send's */
void dbl_cq_push(struct ibv_cq *cq, const struct ibv_wc *wc, dbl_qp_t *qp,
                 uint64_t sq_seq);

/* forget qp in the completions cq holds (the QP is going away) */
void dbl_cq_forget(struct ibv_cq *cq, dbl_qp_t *qp);

int dbl_rq_init(dbl_rq_t *rq, unsigned size, unsigned max_sge);
int dbl_rq_post(dbl_rq_t *rq, struct ibv_recv_wr *wr,
                struct ibv_recv_wr **bad_wr);

/* the device whose netdev holds IPv4 address ip (network order), or NULL */
dbl_dev_t *dbl_dev_by_ip(uint32_t ip);

/* a number in [0, 1) from the fault generator */
double dbl_random(void);

#endif
