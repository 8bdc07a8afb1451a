/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus unit tests: the multicast broadcast over the verbs wire
 * (src/bcast/bcast_net_verbs.c) against the verbs double and its rdma_cm:
 * the open, join and close (nothing leaked), the datagrams, the wait's
 * wake-up through the completion channel, and the broadcast engine of
 * several ranks, one double device each, with and without loss.
 */
#include <gtest/gtest.h>

extern "C" {
#include "bcast/bcast_engine.h"
#include "bcast/bcast_net.h"
#include "proto/mcast_proto.h"
}

#include "ibv_double.h"

#include <arpa/inet.h>
#include <poll.h>

#include <cstring>
#include <string>
#include <vector>

namespace
{

class bcast_verbs : public testing::Test
{
  protected:
    static constexpr unsigned N = 4;

    void SetUp() override
    {
        ibv_double_enable(N);
        for (unsigned i = 0; i < N; ++i) {
            ibv_double_cm_addr(i, ip_of(i));
        }
        aptus_bc_group_of_key(0x1234, &m_group);
    }

    void TearDown() override
    {
        ibv_double_cm_join_error(0);
        EXPECT_EQ(0u, ibv_double_disable()) << "verbs objects leaked";
    }

    /* 10.77.0.1, .2, ...: the netdev of device i */
    static uint32_t ip_of(unsigned i)
    {
        return htonl(0x0a4d0001u + i);
    }

    int open(unsigned i, aptus_bc_net_t *net, std::string *why,
             unsigned ifmtu = 2044)
    {
        struct in_addr a;
        char err[256] = "";

        a.s_addr = ip_of(i);
        int rc =
            aptus_bc_net_open_verbs(net, &m_group, a, ifmtu, err, sizeof(err));
        if (why != nullptr) {
            *why = err;
        }
        return rc;
    }

    struct sockaddr_in m_group;
};

std::vector<uint8_t> pattern(size_t len, unsigned seed)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = (uint8_t)(i * 7 + seed * 13 + 1);
    }
    return v;
}

} // namespace

TEST_F(bcast_verbs, opens_on_the_hca_behind_the_interface)
{
    aptus_bc_net_t net;
    std::string why;

    ASSERT_EQ(0, open(2, &net, &why)) << why;
    EXPECT_EQ(APTUS_BC_WIRE_VERBS, net.wire);
    EXPECT_STREQ("dbl2:1", net.where);
    EXPECT_EQ(ibv_double_lid(2), net.self.lid);
    EXPECT_NE(0u, net.self.qpn);
    EXPECT_EQ(0u, net.self.ip);
    /* IPoIB's 2044-byte interface: a 2048-byte group under a 4096 port */
    EXPECT_EQ(2048u, net.room);
    EXPECT_GE(net.mfd, 0) << "the completion channel to wait on";
    EXPECT_EQ(-1, net.ufd);
    aptus_bc_net_close(&net);
    EXPECT_EQ(-1, net.mfd);

    /* a connected-mode interface: the port's MTU */
    ASSERT_EQ(0, open(2, &net, &why, 65520)) << why;
    EXPECT_EQ(4096u, net.room);
    aptus_bc_net_close(&net);
}

TEST_F(bcast_verbs, an_interface_without_an_hca_is_refused_cleanly)
{
    aptus_bc_net_t net;
    struct in_addr a;
    char err[256] = "", note[256] = "";

    a.s_addr = htonl(0x0a4d00feu);
    EXPECT_EQ(-ENODEV, aptus_bc_net_open_verbs(&net, &m_group, a, 1500, err,
                                               sizeof(err)));
    EXPECT_NE(nullptr, strstr(err, "no RDMA device behind 10.77.0.254")) << err;

    /* asked for verbs on an interface with none: an error, not sock */
    EXPECT_GT(0, aptus_bc_net_open(&net, APTUS_BC_WIRE_VERBS, &m_group,
                                   "127.0.0.1", 1 << 20, err, sizeof(err), note,
                                   sizeof(note)));
    EXPECT_NE(nullptr, strstr(err, "no RDMA device")) << err;

    /* auto: says why not verbs, then tries sock (whatever lo allows) */
    int rc = aptus_bc_net_open(&net, APTUS_BC_WIRE_AUTO, &m_group, "127.0.0.1",
                               1 << 20, err, sizeof(err), note, sizeof(note));
    EXPECT_NE(nullptr, strstr(note, "verbs: no RDMA device")) << note;
    if (rc == 0) {
        EXPECT_EQ(APTUS_BC_WIRE_SOCK, net.wire);
        aptus_bc_net_close(&net);
    }
}

TEST_F(bcast_verbs, a_refused_join_is_reported)
{
    aptus_bc_net_t net;
    std::string why;

    ibv_double_cm_join_error(-ENETUNREACH);
    EXPECT_GT(0, open(0, &net, &why));
    EXPECT_NE(std::string::npos, why.find("multicast group")) << why;
}

/* The group reaches every member, the sender too; a rank's address
 * reaches that rank only; a datagram above the buffer is dropped whole. */
TEST_F(bcast_verbs, datagrams_to_the_group_and_to_one_rank)
{
    aptus_bc_net_t net[3];
    std::string why;
    for (unsigned i = 0; i < 3; ++i) {
        ASSERT_EQ(0, open(i, &net[i], &why)) << why;
    }
    aptus_bc_addr_t peers[3] = { net[0].self, net[1].self, net[2].self };
    for (auto &n : net) {
        ASSERT_EQ(0, aptus_bc_net_connect(&n, peers, 3));
    }

    auto msg         = pattern(1500, 1);
    struct iovec iov = { msg.data(), msg.size() };
    std::vector<uint8_t> buf(4096);
    int trunc = 0;

    ASSERT_EQ(0, aptus_bc_net_mcast(&net[0], &iov, 1));
    for (auto &n : net) {
        ASSERT_EQ((long)msg.size(),
                  aptus_bc_net_recv(&n, buf.data(), buf.size(), &trunc));
        EXPECT_EQ(0, memcmp(buf.data(), msg.data(), msg.size()));
        EXPECT_EQ(0, aptus_bc_net_recv(&n, buf.data(), buf.size(), &trunc));
    }

    ASSERT_EQ(0, aptus_bc_net_send(&net[0], 2, &iov, 1));
    EXPECT_EQ(0, aptus_bc_net_recv(&net[1], buf.data(), buf.size(), &trunc));
    EXPECT_EQ((long)msg.size(),
              aptus_bc_net_recv(&net[2], buf.data(), buf.size(), &trunc));
    EXPECT_EQ(-EINVAL, aptus_bc_net_send(&net[0], 3, &iov, 1));

    ASSERT_EQ(0, aptus_bc_net_send(&net[0], 1, &iov, 1));
    EXPECT_EQ(-1, aptus_bc_net_recv(&net[1], buf.data(), 100, &trunc));
    EXPECT_EQ(1, trunc);
    EXPECT_EQ(0, aptus_bc_net_recv(&net[1], buf.data(), buf.size(), &trunc));

    /* above the group's MTU: refused here, never cut by the fabric */
    auto big             = pattern(net[0].room + 1, 2);
    struct iovec big_iov = { big.data(), big.size() };
    uint64_t tx_errors   = net[0].tx_errors;
    EXPECT_EQ(-EMSGSIZE, aptus_bc_net_mcast(&net[0], &big_iov, 1));
    EXPECT_EQ(tx_errors + 1, net[0].tx_errors);

    for (auto &n : net) {
        aptus_bc_net_close(&n);
    }
}

/* A wait sleeps on mfd: once the receive side is drained the completion
 * queue is armed, and a datagram makes mfd readable, once. */
TEST_F(bcast_verbs, a_datagram_wakes_the_wait)
{
    aptus_bc_net_t a, b;
    std::string why;
    ASSERT_EQ(0, open(0, &a, &why)) << why;
    ASSERT_EQ(0, open(1, &b, &why)) << why;
    aptus_bc_addr_t peers[2] = { a.self, b.self };
    ASSERT_EQ(0, aptus_bc_net_connect(&a, peers, 2));
    ASSERT_EQ(0, aptus_bc_net_connect(&b, peers, 2));

    std::vector<uint8_t> buf(4096);
    uint8_t byte     = 9;
    struct iovec iov = { &byte, 1 };
    struct pollfd pfd;
    int trunc = 0;

    auto readable = [&]() {
        pfd = { b.mfd, POLLIN, 0 };
        return poll(&pfd, 1, 0);
    };
    EXPECT_EQ(0, aptus_bc_net_recv(&b, buf.data(), buf.size(), &trunc));
    EXPECT_EQ(0, readable());
    ASSERT_EQ(0, aptus_bc_net_send(&a, 1, &iov, 1));
    EXPECT_EQ(1, readable());
    EXPECT_EQ(1, aptus_bc_net_recv(&b, buf.data(), buf.size(), &trunc));
    EXPECT_EQ(0, aptus_bc_net_recv(&b, buf.data(), buf.size(), &trunc));
    EXPECT_EQ(0, readable()) << "the event was taken and the CQ armed again";
    ASSERT_EQ(0, aptus_bc_net_mcast(&a, &iov, 1));
    EXPECT_EQ(1, readable());

    aptus_bc_net_close(&a);
    aptus_bc_net_close(&b); /* with an event unread: nothing leaks */
}

namespace
{

std::vector<aptus_bc_engine_t *> g_engines;

/* While one rank waits, the others run (one thread plays every rank). */
void bcast_verbs_run_others(void *arg)
{
    for (auto *e : g_engines) {
        if (e != arg) {
            pthread_mutex_lock(&e->lock);
            (void)aptus_bc_engine_progress(e, aptus_bc_now_us());
            pthread_mutex_unlock(&e->lock);
        }
    }
}

class bcast_verbs_engine : public bcast_verbs
{
  protected:
    void start()
    {
        aptus_bc_net_t net[N];
        aptus_bc_addr_t peers[N];
        std::string why;
        aptus_mc_config_t mc;

        for (unsigned i = 0; i < N; ++i) {
            ASSERT_EQ(0, open(i, &net[i], &why)) << why;
            peers[i] = net[i].self;
        }
        aptus_mc_config_default(&mc);
        mc.frag_size = net[0].room - APTUS_MC_HDR_LEN;
        mc.max_msg   = 4 * mc.frag_size;
        ASSERT_EQ(nullptr, aptus_mc_config_check(&mc, N));
        for (unsigned i = 0; i < N; ++i) {
            ASSERT_EQ(APTUS_BC_OK,
                      aptus_bc_engine_init(&m_e[i], &mc, N, i, 0x77, &net[i],
                                           peers, 30000000));
            m_e[i].idle_cb  = bcast_verbs_run_others;
            m_e[i].idle_arg = &m_e[i];
            g_engines.push_back(&m_e[i]);
        }
        m_max_msg = mc.max_msg;
    }

    void TearDown() override
    {
        for (auto *e : g_engines) {
            aptus_bc_engine_cleanup(e);
        }
        g_engines.clear();
        bcast_verbs::TearDown();
    }

    /* message k from root k % N: every rank gets every byte */
    void run(unsigned count)
    {
        std::vector<uint8_t> buf(m_max_msg);
        for (unsigned k = 0; k < count; ++k) {
            unsigned root = k % N;
            size_t len    = 1 + (k * 997) % m_max_msg;
            auto msg      = pattern(len, k);
            ASSERT_EQ(APTUS_BC_OK, aptus_bc_engine_bcast(&m_e[root], msg.data(),
                                                         (uint32_t)len))
                << "message " << k;
            for (unsigned r = 0; r < N; ++r) {
                if (r == root) {
                    continue;
                }
                uint32_t got = 0;
                ASSERT_EQ(APTUS_BC_OK,
                          aptus_bc_engine_recv(&m_e[r], root, buf.data(),
                                               (uint32_t)buf.size(), &got))
                    << "message " << k << " at rank " << r << ": "
                    << m_e[r].why;
                ASSERT_EQ(len, got) << "message " << k << " at rank " << r;
                ASSERT_EQ(0, memcmp(buf.data(), msg.data(), len))
                    << "message " << k << " at rank " << r;
            }
        }
        /* and every rank learns that every rank has everything */
        uint64_t deadline = aptus_bc_now_us() + 20000000;
        bool busy         = true;
        while (busy && (aptus_bc_now_us() < deadline)) {
            busy = false;
            for (auto *e : g_engines) {
                pthread_mutex_lock(&e->lock);
                (void)aptus_bc_engine_progress(e, aptus_bc_now_us());
                busy = busy || aptus_bc_engine_busy(e);
                pthread_mutex_unlock(&e->lock);
            }
        }
        EXPECT_FALSE(busy) << "ACKs never settled";
        for (auto *e : g_engines) {
            EXPECT_EQ(0, e->failed) << e->why;
            EXPECT_EQ(0u, e->stats.bad);
        }
    }

    aptus_bc_engine_t m_e[N];
    uint32_t m_max_msg = 0;
};

} // namespace

TEST_F(bcast_verbs_engine, every_rank_gets_every_byte)
{
    start();
    ASSERT_FALSE(HasFatalFailure());
    run(200);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_GT(st.ud_delivered, 200u * (N - 1)) << "multicast delivered";
}

TEST_F(bcast_verbs_engine, every_byte_arrives_through_loss)
{
    ibv_double_ud_fault(0.05, 0, 42);
    start();
    ASSERT_FALSE(HasFatalFailure());
    run(200);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_GT(st.ud_fault_drop, 0u) << "the loss happened";
}
