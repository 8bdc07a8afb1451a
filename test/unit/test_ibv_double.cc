/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the in-memory verbs double (test/verbs): that it does
 * what the verbs API says, and that each strictness rule refuses a wrong
 * use the way an HCA would (an error return, or an error completion).
 */
#include <gtest/gtest.h>

#include "ibv_double.h"

#include <poll.h>
#include <cstring>
#include <vector>

namespace
{

class ibv_double : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        ibv_double_enable(2);
        int num                  = 0;
        struct ibv_device **list = ibv_get_device_list(&num);
        ASSERT_EQ(2, num);
        for (int i = 0; i < 2; ++i) {
            m_ctx[i] = ibv_open_device(list[i]);
            ASSERT_NE(nullptr, m_ctx[i]);
            m_pd[i] = ibv_alloc_pd(m_ctx[i]);
            m_cq[i] = ibv_create_cq(m_ctx[i], 256, NULL, NULL, 0);
            ASSERT_NE(nullptr, m_pd[i]);
            ASSERT_NE(nullptr, m_cq[i]);
        }
        ibv_free_device_list(list);
    }

    void TearDown() override
    {
        for (auto *ah : m_ahs) {
            EXPECT_EQ(0, ibv_destroy_ah(ah));
        }
        for (auto *qp : m_qps) {
            EXPECT_EQ(0, ibv_destroy_qp(qp));
        }
        for (auto *srq : m_srqs) {
            EXPECT_EQ(0, ibv_destroy_srq(srq));
        }
        for (auto *mr : m_mrs) {
            EXPECT_EQ(0, ibv_dereg_mr(mr));
        }
        for (int i = 0; i < 2; ++i) {
            if (m_cq[i] != nullptr) {
                EXPECT_EQ(0, ibv_destroy_cq(m_cq[i]));
            }
            if (m_pd[i] != nullptr) {
                EXPECT_EQ(0, ibv_dealloc_pd(m_pd[i]));
            }
            if (m_ctx[i] != nullptr) {
                EXPECT_EQ(0, ibv_close_device(m_ctx[i]));
            }
        }
        EXPECT_EQ(0u, ibv_double_disable()) << "objects leaked";
    }

    struct ibv_mr *reg(int dev, void *buf, size_t len,
                       int access = IBV_ACCESS_LOCAL_WRITE)
    {
        struct ibv_mr *mr = ibv_reg_mr(m_pd[dev], buf, len, access);
        EXPECT_NE(nullptr, mr);
        if (mr != nullptr) {
            m_mrs.push_back(mr);
        }
        return mr;
    }

    /* A UD QP of four sends and receives of one piece on cq, that the
     * test destroys itself (before cq, which cannot go while it is used). */
    static struct ibv_qp *ud_qp_on(struct ibv_pd *pd, struct ibv_cq *cq)
    {
        struct ibv_qp_init_attr init;
        memset(&init, 0, sizeof(init));
        init.send_cq          = cq;
        init.recv_cq          = cq;
        init.qp_type          = IBV_QPT_UD;
        init.cap.max_send_wr  = 4;
        init.cap.max_recv_wr  = 4;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        return ibv_create_qp(pd, &init);
    }

    struct ibv_qp *create_qp(int dev, enum ibv_qp_type type,
                             struct ibv_srq *srq = NULL, unsigned send_wr = 16,
                             unsigned recv_wr = 16)
    {
        struct ibv_qp_init_attr init;
        memset(&init, 0, sizeof(init));
        init.send_cq             = m_cq[dev];
        init.recv_cq             = m_cq[dev];
        init.srq                 = srq;
        init.qp_type             = type;
        init.cap.max_send_wr     = send_wr;
        init.cap.max_recv_wr     = (srq != NULL) ? 0 : recv_wr;
        init.cap.max_send_sge    = 2;
        init.cap.max_recv_sge    = 2;
        init.cap.max_inline_data = 64;
        struct ibv_qp *qp        = ibv_create_qp(m_pd[dev], &init);
        EXPECT_NE(nullptr, qp);
        if (qp != nullptr) {
            m_qps.push_back(qp);
        }
        return qp;
    }

    static int to_init(struct ibv_qp *qp, int access = 0)
    {
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof(a));
        a.qp_state        = IBV_QPS_INIT;
        a.port_num        = 1;
        a.qkey            = QKEY;
        a.qp_access_flags = access;
        return ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                 ((qp->qp_type == IBV_QPT_UD)
                                      ? IBV_QP_QKEY
                                      : IBV_QP_ACCESS_FLAGS));
    }

    static void ud_up(struct ibv_qp *qp)
    {
        struct ibv_qp_attr a;
        ASSERT_EQ(0, to_init(qp));
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTR;
        ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE));
        a.qp_state = IBV_QPS_RTS;
        ASSERT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
    }

    static int rc_rtr(struct ibv_qp *qp, uint16_t dlid, uint32_t dqpn)
    {
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof(a));
        a.qp_state           = IBV_QPS_RTR;
        a.path_mtu           = IBV_MTU_4096;
        a.dest_qp_num        = dqpn;
        a.ah_attr.dlid       = dlid;
        a.ah_attr.port_num   = 1;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer      = 1;
        return ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC |
                                 IBV_QP_MIN_RNR_TIMER);
    }

    static int rc_rts(struct ibv_qp *qp)
    {
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof(a));
        a.qp_state      = IBV_QPS_RTS;
        a.timeout       = 14;
        a.retry_cnt     = 7;
        a.rnr_retry     = 7;
        a.max_rd_atomic = 1;
        return ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC);
    }

    /* an RC pair, a on device 0 and b on device 1, connected */
    void rc_pair(struct ibv_qp **a, struct ibv_qp **b,
                 struct ibv_srq *srq_b = NULL,
                 int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
    {
        *a = create_qp(0, IBV_QPT_RC);
        *b = create_qp(1, IBV_QPT_RC, srq_b);
        ASSERT_TRUE((*a != nullptr) && (*b != nullptr));
        ASSERT_EQ(0, to_init(*a, access));
        ASSERT_EQ(0, to_init(*b, access));
        ASSERT_EQ(0, rc_rtr(*a, ibv_double_lid(1), (*b)->qp_num));
        ASSERT_EQ(0, rc_rtr(*b, ibv_double_lid(0), (*a)->qp_num));
        ASSERT_EQ(0, rc_rts(*a));
        ASSERT_EQ(0, rc_rts(*b));
    }

    struct ibv_ah *ah_to(int from, int to)
    {
        struct ibv_ah_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.dlid         = ibv_double_lid(to);
        attr.port_num     = 1;
        struct ibv_ah *ah = ibv_create_ah(m_pd[from], &attr);
        EXPECT_NE(nullptr, ah);
        if (ah != nullptr) {
            m_ahs.push_back(ah);
        }
        return ah;
    }

    static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, void *buf,
                         size_t len, uint64_t id = 1)
    {
        struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)len, mr->lkey };
        struct ibv_recv_wr wr, *bad;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id   = id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        return ibv_post_recv(qp, &wr, &bad);
    }

    static int post_srq(struct ibv_srq *srq, struct ibv_mr *mr, void *buf,
                        size_t len, uint64_t id = 1)
    {
        struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)len, mr->lkey };
        struct ibv_recv_wr wr, *bad;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id   = id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        return ibv_post_srq_recv(srq, &wr, &bad);
    }

    static int ud_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn,
                       uint32_t lkey, const void *buf, size_t len,
                       uint32_t qkey = QKEY, uint64_t id = 7,
                       int flags = IBV_SEND_SIGNALED)
    {
        struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)len, lkey };
        struct ibv_send_wr wr, *bad;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id             = id;
        wr.sg_list           = &sge;
        wr.num_sge           = 1;
        wr.opcode            = IBV_WR_SEND;
        wr.send_flags        = flags;
        wr.wr.ud.ah          = ah;
        wr.wr.ud.remote_qpn  = qpn;
        wr.wr.ud.remote_qkey = qkey;
        return ibv_post_send(qp, &wr, &bad);
    }

    static int rc_post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t lkey,
                       void *buf, size_t len, uint64_t raddr = 0,
                       uint32_t rkey = 0, uint64_t id = 9)
    {
        struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)len, lkey };
        struct ibv_send_wr wr, *bad;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id               = id;
        wr.sg_list             = &sge;
        wr.num_sge             = 1;
        wr.opcode              = op;
        wr.send_flags          = IBV_SEND_SIGNALED;
        wr.imm_data            = htobe32(0xabcd);
        wr.wr.rdma.remote_addr = raddr;
        wr.wr.rdma.rkey        = rkey;
        return ibv_post_send(qp, &wr, &bad);
    }

    /* the completions of qp in cq, in order */
    static std::vector<struct ibv_wc> poll(struct ibv_cq *cq, uint32_t qpn)
    {
        std::vector<struct ibv_wc> out;
        struct ibv_wc wc[16];
        int n;
        while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
            for (int i = 0; i < n; ++i) {
                if (wc[i].qp_num == qpn) {
                    out.push_back(wc[i]);
                }
            }
        }
        return out;
    }

    static constexpr uint32_t QKEY = 0x11223344;

    struct ibv_context *m_ctx[2] = {};
    struct ibv_pd *m_pd[2]       = {};
    struct ibv_cq *m_cq[2]       = {};
    std::vector<struct ibv_qp *> m_qps;
    std::vector<struct ibv_mr *> m_mrs;
    std::vector<struct ibv_ah *> m_ahs;
    std::vector<struct ibv_srq *> m_srqs;
};

constexpr uint32_t ibv_double::QKEY;

} // namespace

TEST(ibv_double_devices, none_until_enabled)
{
    int num                  = -1;
    struct ibv_device **list = ibv_get_device_list(&num);
    ASSERT_NE(nullptr, list);
    EXPECT_EQ(0, num);
    EXPECT_EQ(nullptr, list[0]);
    ibv_free_device_list(list);
}

TEST_F(ibv_double, devices_and_ports)
{
    int num                  = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    ASSERT_EQ(2, num);
    EXPECT_STREQ("dbl0", ibv_get_device_name(list[0]));
    EXPECT_STREQ("dbl1", ibv_get_device_name(list[1]));
    ibv_free_device_list(list);

    struct ibv_port_attr attr;
    ASSERT_EQ(0, ibv_query_port(m_ctx[1], 1, &attr));
    EXPECT_EQ(IBV_PORT_ACTIVE, attr.state);
    EXPECT_EQ(IBV_MTU_4096, attr.active_mtu);
    EXPECT_EQ(ibv_double_lid(1), attr.lid);
    EXPECT_EQ(IBV_LINK_LAYER_INFINIBAND, attr.link_layer);
    EXPECT_NE(0, ibv_query_port(m_ctx[1], 2, &attr)); /* one port */

    struct ibv_device_attr dattr;
    ASSERT_EQ(0, ibv_query_device(m_ctx[0], &dattr));
    EXPECT_EQ(1, dattr.phys_port_cnt);
    EXPECT_GT(dattr.max_qp_wr, 0);
}

/* A UD datagram lands behind the 40 bytes of the GRH, with the sender's
 * QP number and LID; without a GRH those bytes are not the payload. */
TEST_F(ibv_double, ud_datagram_lands_after_the_grh)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    std::vector<uint8_t> out(100), in(IBV_DOUBLE_GRH_LEN + 100, 0);
    for (size_t i = 0; i < out.size(); ++i) {
        out[i] = (uint8_t)(i * 3 + 1);
    }
    struct ibv_mr *mo = reg(0, out.data(), out.size());
    struct ibv_mr *mi = reg(1, in.data(), in.size());
    ASSERT_EQ(0, post_recv(b, mi, in.data(), in.size(), 42));
    ASSERT_EQ(0, ud_send(a, ah_to(0, 1), b->qp_num, mo->lkey, out.data(),
                         out.size()));

    auto sc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(1u, sc.size());
    EXPECT_EQ(IBV_WC_SUCCESS, sc[0].status);
    EXPECT_EQ(7u, sc[0].wr_id);
    auto rc = poll(m_cq[1], b->qp_num);
    ASSERT_EQ(1u, rc.size());
    EXPECT_EQ(IBV_WC_SUCCESS, rc[0].status);
    EXPECT_EQ(42u, rc[0].wr_id);
    EXPECT_EQ(IBV_WC_RECV, rc[0].opcode);
    EXPECT_EQ(IBV_DOUBLE_GRH_LEN + 100u, rc[0].byte_len);
    EXPECT_EQ(a->qp_num, rc[0].src_qp);
    EXPECT_EQ(ibv_double_lid(0), rc[0].slid);
    EXPECT_FALSE(rc[0].wc_flags & IBV_WC_GRH);
    EXPECT_EQ(0, memcmp(in.data() + IBV_DOUBLE_GRH_LEN, out.data(), 100));
    EXPECT_NE(0, memcmp(in.data(), out.data(), IBV_DOUBLE_GRH_LEN));
}

TEST_F(ibv_double, modify_qp_follows_the_state_machine)
{
    struct ibv_qp *qp = create_qp(0, IBV_QPT_UD);
    struct ibv_qp_attr a;
    ASSERT_NE(nullptr, qp);
    memset(&a, 0, sizeof(a));

    /* RESET -> RTR skips INIT */
    a.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, IBV_QP_STATE));
    /* RESET -> INIT without the Q_Key a UD QP needs */
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ(
        EINVAL,
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT));
    /* ... or with an attribute a UD QP does not take */
    EXPECT_EQ(EINVAL,
              ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS));
    /* ... or on a port that does not exist */
    a.port_num = 2;
    EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a,
                                    IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                        IBV_QP_PORT | IBV_QP_QKEY));
    EXPECT_EQ(IBV_QPS_RESET, qp->state);
    ud_up(qp);
    EXPECT_EQ(IBV_QPS_RTS, qp->state);
    /* RTS -> INIT is not a transition */
    a.qp_state = IBV_QPS_INIT;
    EXPECT_EQ(EINVAL, ibv_modify_qp(qp, &a, IBV_QP_STATE));
    /* any state -> RESET is */
    a.qp_state = IBV_QPS_RESET;
    EXPECT_EQ(0, ibv_modify_qp(qp, &a, IBV_QP_STATE));

    /* RC: INIT -> RTR needs the path (destination, MTU, PSN...) */
    struct ibv_qp *rc = create_qp(0, IBV_QPT_RC);
    ASSERT_EQ(0, to_init(rc));
    a.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(EINVAL, ibv_modify_qp(rc, &a, IBV_QP_STATE));
    EXPECT_EQ(EINVAL, rc_rts(rc)); /* INIT -> RTS skips RTR */
}

TEST_F(ibv_double, posting_in_the_wrong_state_fails)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    uint8_t buf[64]   = {};
    struct ibv_mr *mr = reg(0, buf, sizeof(buf));
    struct ibv_ah *ah = ah_to(0, 1);
    struct ibv_qp_attr at;
    ASSERT_TRUE(a && b && mr && ah);

    /* RESET takes no receive; INIT takes receives but no send */
    EXPECT_EQ(EINVAL, post_recv(a, mr, buf, sizeof(buf)));
    EXPECT_EQ(EINVAL, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    ASSERT_EQ(0, to_init(a));
    EXPECT_EQ(0, post_recv(a, mr, buf, sizeof(buf)));
    EXPECT_EQ(EINVAL, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    memset(&at, 0, sizeof(at));
    at.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(0, ibv_modify_qp(a, &at, IBV_QP_STATE));
    EXPECT_EQ(EINVAL, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    at.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(0, ibv_modify_qp(a, &at, IBV_QP_STATE | IBV_QP_SQ_PSN));
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));

    /* in the error state everything posted is flushed */
    at.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(0, ibv_modify_qp(a, &at, IBV_QP_STATE));
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8, QKEY, 99));
    auto wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(3u, wc.size()); /* the send, the flushed receive, the flush */
    EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[1].status);
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[2].status);
    EXPECT_EQ(99u, wc[2].wr_id);
}

TEST_F(ibv_double, memory_registration_checks_its_access_flags)
{
    static uint8_t buf[64];
    /* remote write needs local write, as the spec says */
    EXPECT_EQ(nullptr,
              ibv_reg_mr(m_pd[0], buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE));
    EXPECT_EQ(nullptr, ibv_reg_mr(m_pd[0], buf, 0, IBV_ACCESS_LOCAL_WRITE));
    struct ibv_mr *mr = reg(0, buf, sizeof(buf),
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(nullptr, mr);
    EXPECT_NE(mr->lkey, mr->rkey);
    /* a PD with a registration in it stays */
    EXPECT_EQ(EBUSY, ibv_dealloc_pd(m_pd[0]));
}

/* A send whose lkey is wrong, or whose buffer runs past its region,
 * completes in error and puts the UD send queue in error (SQE). */
TEST_F(ibv_double, wrong_lkey_and_out_of_bounds_send_fail)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    uint8_t buf[64] = {};
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    struct ibv_mr *mr = reg(0, buf, 32);
    struct ibv_ah *ah = ah_to(0, 1);

    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey + 1, buf, 8));
    auto wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_LOC_PROT_ERR, wc[0].status);
    EXPECT_EQ(IBV_QPS_SQE, a->state);

    struct ibv_qp_attr at;
    memset(&at, 0, sizeof(at));
    at.qp_state = IBV_QPS_RTS; /* SQE -> RTS recovers a UD QP */
    ASSERT_EQ(0, ibv_modify_qp(a, &at, IBV_QP_STATE));
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf + 16, 32));
    wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_LOC_PROT_ERR, wc[0].status);
}

TEST_F(ibv_double, ud_message_above_the_mtu_fails)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    std::vector<uint8_t> buf(IBV_DOUBLE_PORT_MTU + 1);
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    struct ibv_mr *mr = reg(0, buf.data(), buf.size());
    EXPECT_EQ(0, ud_send(a, ah_to(0, 1), b->qp_num, mr->lkey, buf.data(),
                         buf.size()));
    auto wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_LOC_LEN_ERR, wc[0].status);
}

/* UD loses silently what finds no receive, a wrong Q_Key, no such QP. */
TEST_F(ibv_double, ud_drops_silently)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    uint8_t buf[64] = {}, in[128];
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    struct ibv_mr *mr = reg(0, buf, sizeof(buf));
    struct ibv_mr *mi = reg(1, in, sizeof(in));
    struct ibv_ah *ah = ah_to(0, 1);

    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    ASSERT_EQ(0, post_recv(b, mi, in, sizeof(in)));
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8, QKEY + 1));
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num + 100, mr->lkey, buf, 8));
    auto wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(3u, wc.size());
    for (auto &w : wc) {
        EXPECT_EQ(IBV_WC_SUCCESS, w.status); /* the sender cannot tell */
    }
    EXPECT_TRUE(poll(m_cq[1], b->qp_num).empty());
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(1u, st.ud_no_recv);
    EXPECT_EQ(1u, st.ud_bad_qkey);
    EXPECT_EQ(1u, st.ud_no_dest);
}

/* A receive too small for the GRH and the payload fails, and the QP with
 * it. */
TEST_F(ibv_double, ud_receive_too_small_fails)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    uint8_t buf[64] = {}, in[256];
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    struct ibv_mr *mr = reg(0, buf, sizeof(buf));
    struct ibv_mr *mi = reg(1, in, sizeof(in));
    ASSERT_EQ(0, post_recv(b, mi, in, 64, 1)); /* < 40 + 64 */
    ASSERT_EQ(0, post_recv(b, mi, in + 64, 128, 2));
    EXPECT_EQ(0, ud_send(a, ah_to(0, 1), b->qp_num, mr->lkey, buf, 64));
    auto wc = poll(m_cq[1], b->qp_num);
    ASSERT_EQ(2u, wc.size());
    EXPECT_EQ(IBV_WC_LOC_LEN_ERR, wc[0].status);
    EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[1].status);
    EXPECT_EQ(IBV_QPS_ERR, b->state);
}

TEST_F(ibv_double, full_queues_and_bad_lists_are_refused)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD, NULL, 2, 2);
    struct ibv_qp *b = create_qp(1, IBV_QPT_UD);
    uint8_t buf[512] = {};
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    struct ibv_mr *mr = reg(0, buf, sizeof(buf));
    struct ibv_ah *ah = ah_to(0, 1);

    EXPECT_EQ(0, post_recv(a, mr, buf, 64));
    EXPECT_EQ(0, post_recv(a, mr, buf, 64));
    EXPECT_EQ(ENOMEM, post_recv(a, mr, buf, 64));

    /* the send queue frees only as its completions are polled */
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    EXPECT_EQ(ENOMEM, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    EXPECT_EQ(2u, poll(m_cq[0], a->qp_num).size());
    /* unsignaled sends hold their slots until a later signaled one is
     * polled */
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8, QKEY, 1, 0));
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8, QKEY, 2));
    EXPECT_EQ(ENOMEM, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    EXPECT_EQ(1u, poll(m_cq[0], a->qp_num).size());
    EXPECT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));

    /* more gather entries than the QP was made for; inline past its max;
     * an RDMA write on UD */
    struct ibv_sge sge[3] = { { (uintptr_t)buf, 1, mr->lkey },
                              { (uintptr_t)buf, 1, mr->lkey },
                              { (uintptr_t)buf, 1, mr->lkey } };
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list           = sge;
    wr.num_sge           = 3;
    wr.opcode            = IBV_WR_SEND;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = b->qp_num;
    wr.wr.ud.remote_qkey = QKEY;
    poll(m_cq[0], a->qp_num);
    EXPECT_EQ(EINVAL, ibv_post_send(a, &wr, &bad));
    EXPECT_EQ(&wr, bad);
    wr.num_sge    = 1;
    sge[0].length = 65;
    wr.send_flags = IBV_SEND_INLINE;
    EXPECT_EQ(EINVAL, ibv_post_send(a, &wr, &bad));
    sge[0].length = 64;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    EXPECT_EQ(0, ibv_post_send(a, &wr, &bad));
    wr.opcode = IBV_WR_RDMA_WRITE;
    EXPECT_EQ(EINVAL, ibv_post_send(a, &wr, &bad));
    poll(m_cq[0], a->qp_num);
}

TEST_F(ibv_double, rc_send_write_read_between_connected_qps)
{
    struct ibv_qp *a, *b;
    rc_pair(&a, &b);
    std::vector<uint8_t> la(4096), lb(4096, 0);
    for (size_t i = 0; i < la.size(); ++i) {
        la[i] = (uint8_t)(i * 7);
    }
    int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
             IBV_ACCESS_REMOTE_READ;
    struct ibv_mr *ma = reg(0, la.data(), la.size(), rw);
    struct ibv_mr *mb = reg(1, lb.data(), lb.size(), rw);

    /* a send into a posted receive */
    ASSERT_EQ(0, post_recv(b, mb, lb.data(), 1024, 5));
    ASSERT_EQ(0, rc_post(a, IBV_WR_SEND, ma->lkey, la.data(), 1000));
    auto rwc = poll(m_cq[1], b->qp_num);
    ASSERT_EQ(1u, rwc.size());
    EXPECT_EQ(IBV_WC_SUCCESS, rwc[0].status);
    EXPECT_EQ(1000u, rwc[0].byte_len);
    EXPECT_EQ(0, memcmp(lb.data(), la.data(), 1000));

    /* an RDMA write, then one with immediate data */
    ASSERT_EQ(0, rc_post(a, IBV_WR_RDMA_WRITE, ma->lkey, la.data() + 100, 500,
                         (uintptr_t)lb.data() + 2000, mb->rkey));
    EXPECT_EQ(0, memcmp(lb.data() + 2000, la.data() + 100, 500));
    EXPECT_TRUE(poll(m_cq[1], b->qp_num).empty()); /* silent at b */
    ASSERT_EQ(0, post_recv(b, mb, lb.data(), 0, 6));
    ASSERT_EQ(0, rc_post(a, IBV_WR_RDMA_WRITE_WITH_IMM, ma->lkey, la.data(), 16,
                         (uintptr_t)lb.data() + 3000, mb->rkey));
    rwc = poll(m_cq[1], b->qp_num);
    ASSERT_EQ(1u, rwc.size());
    EXPECT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, rwc[0].opcode);
    EXPECT_EQ(htobe32(0xabcd), rwc[0].imm_data);
    EXPECT_EQ(6u, rwc[0].wr_id);

    /* an RDMA read */
    ASSERT_EQ(0, rc_post(a, IBV_WR_RDMA_READ, ma->lkey, la.data() + 3500, 64,
                         (uintptr_t)lb.data() + 2000, mb->rkey));
    EXPECT_EQ(0, memcmp(la.data() + 3500, la.data() + 100, 64));
    auto swc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(4u, swc.size());
    EXPECT_EQ(IBV_WC_SEND, swc[0].opcode);
    EXPECT_EQ(IBV_WC_RDMA_WRITE, swc[1].opcode);
    EXPECT_EQ(IBV_WC_RDMA_READ, swc[3].opcode);
    for (auto &w : swc) {
        EXPECT_EQ(IBV_WC_SUCCESS, w.status);
    }
}

/* A wrong rkey, a range past the region, a region or a QP without remote
 * access: each fails the requester with a remote access error, and its QP
 * goes to the error state. */
TEST_F(ibv_double, rc_remote_access_is_checked)
{
    int rw         = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    uint8_t la[64] = {}, lb[64] = {};
    struct ibv_mr *ma  = reg(0, la, sizeof(la), rw);
    struct ibv_mr *mb  = reg(1, lb, sizeof(lb), rw);
    struct ibv_mr *mro = reg(1, lb, sizeof(lb), IBV_ACCESS_LOCAL_WRITE);
    struct {
        uint64_t addr;
        uint32_t rkey;
        enum ibv_wr_opcode op;
        int qp_access;
    } cases[] = {
        { (uintptr_t)lb, mb->rkey + 1, IBV_WR_RDMA_WRITE,
          IBV_ACCESS_REMOTE_WRITE },
        { (uintptr_t)lb + 60, mb->rkey, IBV_WR_RDMA_WRITE,
          IBV_ACCESS_REMOTE_WRITE },
        { (uintptr_t)lb - 1, mb->rkey, IBV_WR_RDMA_WRITE,
          IBV_ACCESS_REMOTE_WRITE },
        { (uintptr_t)lb, mro->rkey, IBV_WR_RDMA_WRITE,
          IBV_ACCESS_REMOTE_WRITE },
        { (uintptr_t)lb, mb->rkey, IBV_WR_RDMA_READ,
          IBV_ACCESS_REMOTE_WRITE }, /* the region has no remote read */
        { (uintptr_t)lb, mb->rkey, IBV_WR_RDMA_WRITE, 0 }, /* nor the QP */
    };
    for (auto &c : cases) {
        struct ibv_qp *a, *b;
        rc_pair(&a, &b, NULL, c.qp_access);
        ASSERT_EQ(0, rc_post(a, c.op, ma->lkey, la, 8, c.addr, c.rkey));
        auto wc = poll(m_cq[0], a->qp_num);
        ASSERT_EQ(1u, wc.size());
        EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc[0].status);
        EXPECT_EQ(IBV_QPS_ERR, a->state);
        ASSERT_EQ(0, rc_post(a, IBV_WR_RDMA_WRITE, ma->lkey, la, 8,
                             (uintptr_t)lb, mb->rkey));
        wc = poll(m_cq[0], a->qp_num);
        ASSERT_EQ(1u, wc.size());
        EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[0].status);
    }
    EXPECT_EQ(0u, lb[0] + lb[63]);
}

/* Two QPs share an SRQ; once its receives are used up, the next send finds
 * none: receiver not ready, retries exhausted, the QP in error. */
TEST_F(ibv_double, rc_exhausted_srq_fails_with_rnr)
{
    struct ibv_srq_init_attr sattr;
    memset(&sattr, 0, sizeof(sattr));
    sattr.attr.max_wr   = 2;
    sattr.attr.max_sge  = 1;
    struct ibv_srq *srq = ibv_create_srq(m_pd[1], &sattr);
    ASSERT_NE(nullptr, srq);
    m_srqs.push_back(srq);
    uint8_t la[64] = {}, lb[256] = {};
    struct ibv_mr *ma = reg(0, la, sizeof(la));
    struct ibv_mr *mb = reg(1, lb, sizeof(lb));
    struct ibv_qp *a1, *b1, *a2, *b2;
    rc_pair(&a1, &b1, srq);
    rc_pair(&a2, &b2, srq);

    ASSERT_EQ(0, post_srq(srq, mb, lb, 64, 1));
    ASSERT_EQ(0, post_srq(srq, mb, lb + 64, 64, 2));
    EXPECT_EQ(ENOMEM, post_srq(srq, mb, lb + 128, 64, 3));
    EXPECT_EQ(EINVAL, post_recv(b1, mb, lb, 64)); /* it has no RQ */

    ASSERT_EQ(0, rc_post(a1, IBV_WR_SEND, ma->lkey, la, 8));
    ASSERT_EQ(0, rc_post(a2, IBV_WR_SEND, ma->lkey, la, 8));
    ASSERT_EQ(0, rc_post(a1, IBV_WR_SEND, ma->lkey, la, 8));
    std::vector<struct ibv_wc> w1, w2;
    struct ibv_wc wc[8];
    int n = ibv_poll_cq(m_cq[0], 8, wc);
    for (int i = 0; i < n; ++i) {
        ((wc[i].qp_num == a1->qp_num) ? w1 : w2).push_back(wc[i]);
    }
    ASSERT_EQ(2u, w1.size());
    ASSERT_EQ(1u, w2.size());
    EXPECT_EQ(IBV_WC_SUCCESS, w1[0].status);
    EXPECT_EQ(IBV_WC_SUCCESS, w2[0].status);
    EXPECT_EQ(IBV_WC_RNR_RETRY_EXC_ERR, w1[1].status);
    EXPECT_EQ(IBV_QPS_ERR, a1->state);
    n = ibv_poll_cq(m_cq[1], 8, wc); /* one receive each */
    ASSERT_EQ(2, n);
    EXPECT_NE(wc[0].qp_num, wc[1].qp_num);
    EXPECT_EQ(EBUSY, ibv_destroy_srq(srq)); /* QPs still on it */
}

/* An RC QP whose peer is not connected back to it gets no answer. */
TEST_F(ibv_double, rc_unconnected_peer_fails_with_retries_exceeded)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_RC), *b = create_qp(1, IBV_QPT_RC);
    uint8_t la[8]     = {};
    struct ibv_mr *ma = reg(0, la, sizeof(la));
    ASSERT_EQ(0, to_init(a));
    ASSERT_EQ(0, to_init(b));
    ASSERT_EQ(0, rc_rtr(a, ibv_double_lid(1), b->qp_num));
    ASSERT_EQ(0, rc_rts(a));
    ASSERT_EQ(0, rc_post(a, IBV_WR_SEND, ma->lkey, la, 8));
    auto wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, wc[0].status);
}

/* Loss and reordering, decided by a seeded generator: the same seed, the
 * same datagrams lost and the same order. */
TEST_F(ibv_double, ud_loss_and_reordering_are_seeded)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD, NULL, 256, 256);
    struct ibv_qp *b = create_qp(1, IBV_QPT_UD, NULL, 256, 256);
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    uint32_t out[200];
    std::vector<uint8_t> in(200 * 64);
    struct ibv_mr *mo = reg(0, out, sizeof(out));
    struct ibv_mr *mi = reg(1, in.data(), in.size());
    struct ibv_ah *ah = ah_to(0, 1);

    std::vector<uint32_t> runs[2];
    for (int run = 0; run < 2; ++run) {
        ibv_double_ud_fault(0.1, 0.1, 77);
        for (int i = 0; i < 200; ++i) {
            ASSERT_EQ(0, post_recv(b, mi, &in[i * 64], 64, i));
        }
        for (uint32_t i = 0; i < 200; ++i) {
            out[i] = i;
            ASSERT_EQ(0, ud_send(a, ah, b->qp_num, mo->lkey, &out[i], 4, QKEY,
                                 i, (i % 16 == 15) ? IBV_SEND_SIGNALED : 0));
        }
        ibv_double_flush();
        poll(m_cq[0], a->qp_num);
        for (auto &w : poll(m_cq[1], b->qp_num)) {
            uint32_t v;
            memcpy(&v, &in[w.wr_id * 64 + IBV_DOUBLE_GRH_LEN], 4);
            runs[run].push_back(v);
        }
        /* the receives not used: back to a clean queue */
        struct ibv_qp_attr at;
        memset(&at, 0, sizeof(at));
        at.qp_state = IBV_QPS_RESET;
        ASSERT_EQ(0, ibv_modify_qp(b, &at, IBV_QP_STATE));
        ud_up(b);
    }
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(runs[0], runs[1]);
    EXPECT_GT(st.ud_fault_drop, 0u);
    EXPECT_GT(st.ud_fault_reorder, 0u);
    EXPECT_LT(runs[0].size(), 200u);
    bool reordered = false;
    for (size_t i = 1; i < runs[0].size(); ++i) {
        reordered |= runs[0][i] < runs[0][i - 1];
    }
    EXPECT_TRUE(reordered);
}

/* A completion channel wakes a waiter once per arming; a CQ with events
 * not acknowledged cannot be destroyed, nor one with QPs. */
TEST_F(ibv_double, completion_channel_wakes_once_per_arming)
{
    struct ibv_comp_channel *ch = ibv_create_comp_channel(m_ctx[1]);
    ASSERT_NE(nullptr, ch);
    struct ibv_cq *cq = ibv_create_cq(m_ctx[1], 16, this, ch, 0);
    ASSERT_NE(nullptr, cq);
    struct ibv_qp *b = ud_qp_on(m_pd[1], cq);
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD);
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    uint8_t buf[8]    = {}, in[4][64];
    struct ibv_mr *mo = reg(0, buf, sizeof(buf));
    struct ibv_mr *mi = reg(1, in, sizeof(in));
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(0, post_recv(b, mi, in[i], 64, i));
    }
    struct pollfd pfd = { ch->fd, POLLIN, 0 };

    EXPECT_EQ(EBUSY, ibv_destroy_comp_channel(ch)); /* a CQ uses it */
    ASSERT_EQ(0, ud_send(a, ah_to(0, 1), b->qp_num, mo->lkey, buf, 8));
    EXPECT_EQ(0, ::poll(&pfd, 1, 0)); /* not armed: no event */
    ASSERT_EQ(0, ibv_req_notify_cq(cq, 0));
    ASSERT_EQ(0, ud_send(a, m_ahs.back(), b->qp_num, mo->lkey, buf, 8));
    ASSERT_EQ(0, ud_send(a, m_ahs.back(), b->qp_num, mo->lkey, buf, 8));
    EXPECT_EQ(1, ::poll(&pfd, 1, 0));
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    ASSERT_EQ(0, ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
    EXPECT_EQ(cq, ev_cq);
    EXPECT_EQ(this, ev_ctx);
    EXPECT_EQ(0, ::poll(&pfd, 1, 0)); /* one event per arming */
    EXPECT_EQ(3u, poll(cq, b->qp_num).size());

    EXPECT_EQ(0, ibv_destroy_qp(b));
    EXPECT_EQ(EBUSY, ibv_destroy_cq(cq)); /* the event is not acked */
    ibv_ack_cq_events(cq, 1);
    EXPECT_EQ(0, ibv_destroy_cq(cq));
    EXPECT_EQ(0, ibv_destroy_comp_channel(ch));
}

TEST_F(ibv_double, cq_with_qps_cannot_go_and_overrun_breaks_it)
{
    EXPECT_EQ(nullptr, ibv_create_cq(m_ctx[0], 0, NULL, NULL, 0));
    struct ibv_cq *small = ibv_create_cq(m_ctx[0], 1, NULL, NULL, 0);
    ASSERT_NE(nullptr, small);
    struct ibv_qp *a = ud_qp_on(m_pd[0], small);
    struct ibv_qp *b = create_qp(1, IBV_QPT_UD);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(EBUSY, ibv_destroy_cq(small));
    ud_up(a);
    ud_up(b);
    uint8_t buf[8]    = {};
    struct ibv_mr *mr = reg(0, buf, sizeof(buf));
    struct ibv_ah *ah = ah_to(0, 1);
    ASSERT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    ASSERT_EQ(0, ud_send(a, ah, b->qp_num, mr->lkey, buf, 8));
    struct ibv_wc wc;
    EXPECT_GT(0, ibv_poll_cq(small, 1, &wc)); /* overrun: the CQ is gone */
    EXPECT_EQ(0, ibv_destroy_qp(a));
    EXPECT_EQ(0, ibv_destroy_cq(small));
}

/* An RC send into a QP's own receive queue, empty: RNR, as with an SRQ. */
TEST_F(ibv_double, rc_send_to_an_empty_receive_queue_fails_with_rnr)
{
    struct ibv_qp *a, *b;
    rc_pair(&a, &b);
    uint8_t la[8]     = {};
    struct ibv_mr *ma = reg(0, la, sizeof(la));
    ASSERT_EQ(0, rc_post(a, IBV_WR_SEND, ma->lkey, la, 8));
    auto wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_RNR_RETRY_EXC_ERR, wc[0].status);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(1u, st.rc_rnr);
}

/* A key outlives nothing: once its region is deregistered it fails. */
TEST_F(ibv_double, deregistered_key_fails)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    uint8_t buf[16] = {};
    struct ibv_mr *mr =
        ibv_reg_mr(m_pd[0], buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, mr);
    uint32_t lkey = mr->lkey;
    ASSERT_EQ(0, ibv_dereg_mr(mr));
    EXPECT_EQ(0, ud_send(a, ah_to(0, 1), b->qp_num, lkey, buf, 8));
    auto wc = poll(m_cq[0], a->qp_num);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_LOC_PROT_ERR, wc[0].status);
}

/* A QP destroyed with its completions still in the CQ: they are still
 * polled, and nothing refers to the QP any more. */
TEST_F(ibv_double, completions_outlive_their_qp)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    ASSERT_TRUE(a && b);
    ud_up(a);
    ud_up(b);
    uint8_t buf[16]   = {};
    struct ibv_mr *mr = reg(0, buf, sizeof(buf));
    uint32_t qpn      = a->qp_num;
    ASSERT_EQ(0, ud_send(a, ah_to(0, 1), b->qp_num, mr->lkey, buf, 8));
    m_qps.erase(m_qps.begin());
    ASSERT_EQ(0, ibv_destroy_qp(a));
    auto wc = poll(m_cq[0], qpn);
    ASSERT_EQ(1u, wc.size());
    EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
}

/* Multicast: a send to the group's LID and GID, QP 0xffffff, reaches each
 * attached UD QP (the sender's too) and no other; only UD QPs attach, a
 * group must be a multicast GID, and an attached QP cannot be destroyed. */
TEST_F(ibv_double, ud_multicast_reaches_the_attached_qps_only)
{
    struct ibv_qp *a = create_qp(0, IBV_QPT_UD), *b = create_qp(1, IBV_QPT_UD);
    struct ibv_qp *c  = create_qp(1, IBV_QPT_UD);
    struct ibv_qp *rc = create_qp(1, IBV_QPT_RC);
    ASSERT_TRUE(a && b && c && rc);
    ud_up(a);
    ud_up(b);
    ud_up(c);
    union ibv_gid mgid, ucast;
    memset(&mgid, 0, sizeof(mgid));
    mgid.raw[0]  = 0xff;
    mgid.raw[1]  = 0x12;
    mgid.raw[15] = 7;
    memset(&ucast, 0, sizeof(ucast));
    ucast.raw[0]        = 0xfe;
    const uint16_t mlid = 0xc007;

    EXPECT_EQ(EINVAL, ibv_attach_mcast(rc, &mgid, mlid));
    EXPECT_EQ(EINVAL, ibv_attach_mcast(a, &ucast, mlid));
    EXPECT_EQ(EINVAL, ibv_attach_mcast(a, &mgid, 0x20));
    ASSERT_EQ(0, ibv_attach_mcast(a, &mgid, mlid));
    ASSERT_EQ(0, ibv_attach_mcast(b, &mgid, mlid));
    EXPECT_EQ(EBUSY, ibv_destroy_qp(b));

    std::vector<uint8_t> out(64, 0x5a), in(3 * (IBV_DOUBLE_GRH_LEN + 64), 0);
    struct ibv_mr *mo = reg(0, out.data(), out.size());
    struct ibv_mr *mi = reg(1, in.data(), in.size());
    struct ibv_mr *ma = reg(0, in.data(), in.size());
    const size_t slot = IBV_DOUBLE_GRH_LEN + 64;
    ASSERT_EQ(0, post_recv(a, ma, in.data(), slot, 1));
    ASSERT_EQ(0, post_recv(b, mi, in.data() + slot, slot, 2));
    ASSERT_EQ(0, post_recv(c, mi, in.data() + 2 * slot, slot, 3));

    struct ibv_ah_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.dlid         = mlid;
    attr.port_num     = 1;
    attr.is_global    = 1;
    attr.grh.dgid     = mgid;
    struct ibv_ah *ah = ibv_create_ah(m_pd[0], &attr);
    ASSERT_NE(nullptr, ah);
    m_ahs.push_back(ah);
    /* a group is not a QP: a send to another QP number reaches nobody */
    ASSERT_EQ(0, ud_send(a, ah, 0x1234, mo->lkey, out.data(), out.size()));
    ASSERT_EQ(0, ud_send(a, ah, IBV_DOUBLE_MCAST_QPN, mo->lkey, out.data(),
                         out.size()));
    auto recvs = [](struct ibv_cq *cq, uint32_t qpn) {
        std::vector<struct ibv_wc> out;
        struct ibv_wc wc;
        while (ibv_poll_cq(cq, 1, &wc) > 0) {
            if ((wc.qp_num == qpn) && (wc.opcode == IBV_WC_RECV)) {
                out.push_back(wc);
            }
        }
        return out;
    };
    auto got_a = recvs(m_cq[0], a->qp_num);
    EXPECT_EQ(1u, got_a.size()) << "the sender is a member too";
    std::vector<struct ibv_wc> got_b, got_c;
    struct ibv_wc wc;
    while (ibv_poll_cq(m_cq[1], 1, &wc) > 0) {
        (wc.qp_num == b->qp_num ? got_b : got_c).push_back(wc);
    }
    ASSERT_EQ(1u, got_b.size());
    EXPECT_EQ(IBV_WC_SUCCESS, got_b[0].status);
    EXPECT_TRUE(got_b[0].wc_flags & IBV_WC_GRH);
    EXPECT_EQ(0, memcmp(in.data() + slot + IBV_DOUBLE_GRH_LEN, out.data(), 64));
    EXPECT_EQ(0u, got_c.size()) << "not attached";

    EXPECT_EQ(EINVAL, ibv_detach_mcast(c, &mgid, mlid));
    EXPECT_EQ(0, ibv_detach_mcast(a, &mgid, mlid));
    EXPECT_EQ(0, ibv_detach_mcast(b, &mgid, mlid));
}
