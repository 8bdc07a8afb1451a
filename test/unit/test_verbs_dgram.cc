/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the verbs wire's datagram part (src/wire/verbs) over the
 * in-memory verbs double (test/verbs): wires on the double's HCA ports in
 * one process. What they prove is the wire's use of the verbs API against
 * a strict double, not that it runs on an HCA.
 */
#include "test_util.h"

#include <gtest/gtest.h>

extern "C" {
#include "wire/verbs/verbs_addr.h"
#include "wire/verbs/verbs_dgram.h"
#include <ucs/time/time.h> /* first: it brings UCX's config.h */
}

#include "ibv_double.h"
#include "numa_fake.h"

#include <poll.h>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace
{

class verbs_dgram : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        ibv_double_enable(2);
    }

    void TearDown() override
    {
        for (auto *q : m_rxqs) {
            q->wire->ops->rxq_close(q);
        }
        for (auto *w : m_wires) {
            w->ops->close(w);
        }
        EXPECT_EQ(0u, ibv_double_disable()) << "verbs objects leaked";
    }

    static aptus_dgram_wire_config_t config(size_t mtu, unsigned rx = 256,
                                            unsigned tx = 64)
    {
        aptus_dgram_wire_config_t c;
        memset(&c, 0, sizeof(c));
        c.mtu          = mtu;
        c.rx_queue_len = rx;
        c.numa_node    = -1;
        c.tx_queue_len = tx;
        return c;
    }

    aptus_dgram_wire_t *open(const char *dev,
                             const aptus_dgram_wire_config_t &c)
    {
        aptus_dgram_wire_t *w = NULL;
        EXPECT_EQ(UCS_OK, aptus_verbs_dgram_open(dev, &c, &w));
        if (w != NULL) {
            m_wires.push_back(w);
        }
        return w;
    }

    aptus_dgram_wire_t *open(const char *dev, size_t mtu, unsigned rx = 256)
    {
        return open(dev, config(mtu, rx));
    }

    static uint64_t stat(aptus_dgram_wire_t *w, const std::string &name)
    {
        aptus_stat_t s[16];
        unsigned n = w->ops->stats(w, s, 16);
        for (unsigned i = 0; i < n; ++i) {
            if (name == s[i].name) {
                return s[i].value;
            }
        }
        ADD_FAILURE() << "no statistic " << name;
        return 0;
    }

    /* datagram i's bytes: its number, then a pattern of number and length */
    static std::vector<uint8_t> dgram(uint32_t i, size_t len)
    {
        std::vector<uint8_t> d(len);
        for (size_t k = 0; k < len; ++k) {
            d[k] = (uint8_t)(i * 131 + k * 7 + (k >> 8));
        }
        if (len >= 4) {
            memcpy(d.data(), &i, 4);
        }
        return d;
    }

    /* one datagram, in up to three pieces */
    static void send_one(aptus_dgram_wire_t *from, const aptus_wire_addr_t *to,
                         const std::vector<uint8_t> &d)
    {
        size_t cut1 = d.size() / 3, cut2 = (2 * d.size()) / 3;
        struct iovec iov[3] = {
            { (void *)d.data(), cut1 },
            { (void *)(d.data() + cut1), cut2 - cut1 },
            { (void *)(d.data() + cut2), d.size() - cut2 },
        };
        aptus_dgram_tx_t tx = { to, iov, 3 };
        unsigned sent       = 0;
        ASSERT_EQ(UCS_OK, from->ops->send(from, &tx, 1, &sent));
        ASSERT_EQ(1u, sent);
    }

    /* Receive up to want datagrams, count buffers a call, until a call
     * brings nothing. */
    static std::vector<std::vector<uint8_t>>
    receive(aptus_dgram_wire_t *w, unsigned count, size_t want,
            const aptus_wire_addr_t *src = NULL)
    {
        std::vector<std::vector<uint8_t>> bufs(count,
                                               std::vector<uint8_t>(w->mtu));
        std::vector<aptus_dgram_rx_t> rx(count);
        std::vector<std::vector<uint8_t>> got;
        unsigned n;

        for (unsigned i = 0; i < count; ++i) {
            memset(&rx[i], 0, sizeof(rx[i]));
            rx[i].buf = bufs[i].data();
        }
        do {
            n = w->ops->recv(w, rx.data(), count);
            EXPECT_LE(n, count);
            for (unsigned i = 0; i < n; ++i) {
                EXPECT_LE(rx[i].length, w->mtu);
                const uint8_t *b = (const uint8_t *)rx[i].buf;
                got.emplace_back(b, b + rx[i].length);
                if (src != NULL) {
                    EXPECT_EQ(0, memcmp(src, &rx[i].src, sizeof(*src)));
                }
            }
        } while ((n > 0) && (got.size() < want));
        return got;
    }

    std::vector<aptus_dgram_wire_t *> m_wires;
    std::vector<aptus_dgram_rxq_t *> m_rxqs;
};

} // namespace

TEST_F(verbs_dgram, opens_on_an_active_port_with_its_mtu)
{
    aptus_dgram_wire_t *w = open("dbl1:1", 0);
    ASSERT_NE(nullptr, w);
    EXPECT_EQ((size_t)IBV_DOUBLE_PORT_MTU, w->mtu);
    EXPECT_EQ((size_t)IBV_DOUBLE_PORT_MTU, aptus_verbs_dgram_port_mtu("dbl1"));
    char s[64];
    w->ops->addr_str(&w->addr, s, sizeof(s));
    char lid[16];
    snprintf(lid, sizeof(lid), "lid 0x%x ", ibv_double_lid(1));
    EXPECT_EQ(0, strncmp(s, lid, strlen(lid))) << s;
    EXPECT_GE(w->ops->event_fd(w), 0);
    EXPECT_EQ(256u, stat(w, "verbs_rx_posted"));
    EXPECT_EQ(1u, stat(w, "verbs_qps"));

    aptus_dgram_wire_t *x             = NULL;
    aptus_dgram_wire_config_t too_big = config(IBV_DOUBLE_PORT_MTU + 1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              aptus_verbs_dgram_open("dbl0:1", &too_big, &x));
    aptus_dgram_wire_config_t c = config(0);
    EXPECT_EQ(UCS_ERR_NO_DEVICE, aptus_verbs_dgram_open("dbl0:2", &c, &x));
    EXPECT_EQ(UCS_ERR_NO_DEVICE, aptus_verbs_dgram_open("mlx5_0:1", &c, &x));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, aptus_verbs_dgram_open(":1", &c, &x));
    EXPECT_EQ(nullptr, x);
}

/* The registered buffers go on the HCA's NUMA node (a fake sysfs gives
 * dbl1 node 1; the binding call records), bound before registration, and
 * the wire works from them; no node, nothing bound. */
TEST_F(verbs_dgram, registered_buffers_go_on_the_hcas_node)
{
    numa_fake fake;
    fake.set("infiniband", "dbl1", "1");
    EXPECT_EQ(1, aptus_verbs_numa_node("dbl1:1"));
    EXPECT_EQ(-1, aptus_verbs_numa_node("dbl0:1"));

    aptus_dgram_wire_config_t c = config(0);
    c.numa_node                 = aptus_verbs_numa_node("dbl1:1");
    aptus_dgram_wire_t *w       = open("dbl1:1", c);
    ASSERT_NE(nullptr, w);
    unsigned others = 0;
    EXPECT_GE(fake.bytes_on(1, &others),
              stat(w, "verbs_reg_bytes") - sysconf(_SC_PAGESIZE));
    EXPECT_EQ(0u, others);

    numa_fake_calls().clear();
    c.numa_node           = aptus_verbs_numa_node("dbl0:1");
    aptus_dgram_wire_t *x = open("dbl0:1", c);
    ASSERT_NE(nullptr, x);
    EXPECT_TRUE(numa_fake_calls().empty());

    /* and the placed buffers carry datagrams both ways */
    std::vector<uint8_t> d = pattern(5, 1000);
    struct iovec iov       = { d.data(), d.size() };
    aptus_dgram_tx_t tx    = { &x->addr, &iov, 1 };
    unsigned sent          = 0;
    ASSERT_EQ(UCS_OK, w->ops->send(w, &tx, 1, &sent));
    ASSERT_EQ(1u, sent);
    std::vector<uint8_t> buf(x->mtu);
    aptus_dgram_rx_t rx = {};
    rx.buf              = buf.data();
    ASSERT_EQ(1u, x->ops->recv(x, &rx, 1));
    EXPECT_EQ(d, std::vector<uint8_t>(buf.begin(), buf.begin() + rx.length));
}

/* Datagrams of every size up to the MTU, gathered from pieces, arrive
 * whole and in order with the sender's address, however few buffers the
 * caller posts a call. */
TEST_F(verbs_dgram, datagrams_arrive_whole_and_in_order)
{
    aptus_dgram_wire_t *a = open("dbl0:1", 2048), *b = open("dbl1:1", 2048);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::mt19937 rng(4242);
    uint32_t next = 0;

    for (unsigned round = 0; round < 50; ++round) {
        std::vector<std::vector<uint8_t>> expect;
        unsigned burst = 1 + rng() % 100;
        for (unsigned k = 0; k < burst; ++k) {
            expect.push_back(dgram(next++, 1 + rng() % 2048));
            send_one(a, &b->addr, expect.back());
        }
        auto got = receive(b, 1 + rng() % 64, expect.size(), &a->addr);
        ASSERT_EQ(expect.size(), got.size()) << "round " << round;
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(expect[i], got[i]) << "round " << round << " dgram " << i;
        }
    }
    EXPECT_EQ(next, b->stats.rx_dgrams);
    EXPECT_EQ(next, a->stats.tx_dgrams);
    EXPECT_EQ(0u, b->stats.rx_truncated);
    /* every receive is posted again */
    EXPECT_EQ(256u, stat(b, "verbs_rx_posted"));
}

/* A peer with a larger MTU: what is above this side's MTU is dropped and
 * counted, what follows arrives. */
TEST_F(verbs_dgram, datagrams_above_the_mtu_are_dropped_and_counted)
{
    aptus_dgram_wire_t *a = open("dbl0:1", 4096), *b = open("dbl1:1", 1024);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::vector<std::vector<uint8_t>> expect;
    send_one(a, &b->addr, dgram(0, 3000));
    send_one(a, &b->addr, dgram(1, 1025));
    expect.push_back(dgram(2, 1024));
    send_one(a, &b->addr, expect.back());
    expect.push_back(dgram(3, 10));
    send_one(a, &b->addr, expect.back());
    auto got = receive(b, 8, 10, &a->addr);
    EXPECT_EQ(expect, got);
    EXPECT_EQ(2u, b->stats.rx_truncated);

    /* and this side does not send above its own MTU */
    auto big            = dgram(4, 1025);
    struct iovec iov    = { big.data(), big.size() };
    aptus_dgram_tx_t tx = { &a->addr, &iov, 1 };
    unsigned sent       = 0;
    EXPECT_EQ(UCS_OK, b->ops->send(b, &tx, 1, &sent));
    EXPECT_EQ(1u, b->stats.tx_errors);
    EXPECT_TRUE(receive(a, 8, 1).empty());
}

/* A receiver that does not keep up loses what finds no buffer posted, as
 * UD does; the send buffers of the sender recycle through its CQ. */
TEST_F(verbs_dgram, overload_drops_what_finds_no_receive)
{
    aptus_dgram_wire_t *a = open("dbl0:1", config(512, 16, 4));
    aptus_dgram_wire_t *b = open("dbl1:1", config(512, 8, 4));
    ASSERT_TRUE((a != NULL) && (b != NULL));
    for (uint32_t i = 0; i < 20; ++i) {
        send_one(a, &b->addr, dgram(i, 100));
    }
    auto got = receive(b, 64, 100);
    ASSERT_EQ(8u, got.size());
    for (uint32_t i = 0; i < 8; ++i) {
        EXPECT_EQ(dgram(i, 100), got[i]);
    }
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(12u, st.ud_no_recv);
    /* the buffers are posted again: the next ones arrive */
    send_one(a, &b->addr, dgram(20, 100));
    got = receive(b, 64, 100);
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(dgram(20, 100), got[0]);
}

/* Loss and reordering on the way (the double's), and the wire's own
 * fault injector: what arrives is whole, and each loss is counted. */
TEST_F(verbs_dgram, loss_and_reordering_injected)
{
    aptus_dgram_wire_t *a = open("dbl0:1", 1024), *b = open("dbl1:1", 1024);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    ibv_double_ud_fault(0.1, 0.1, 99);
    std::set<std::vector<uint8_t>> sent;
    for (uint32_t i = 0; i < 200; ++i) {
        sent.insert(dgram(i, 64 + i));
        send_one(a, &b->addr, dgram(i, 64 + i));
    }
    ibv_double_flush();
    auto got = receive(b, 32, 1000);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(200u - st.ud_fault_drop, got.size());
    EXPECT_GT(st.ud_fault_reorder, 0u);
    bool reordered = false;
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(1u, sent.count(got[i]));
        if (i > 0) {
            reordered |= got[i].size() < got[i - 1].size();
        }
    }
    EXPECT_TRUE(reordered);
    ibv_double_ud_fault(0, 0, 0);

    aptus_dgram_wire_config_t c = config(1024);
    c.fault.drop                = 0.2;
    c.fault.reorder             = 0.1;
    c.fault.seed                = 5;
    aptus_dgram_wire_t *f       = open("dbl0:1", c);
    ASSERT_NE(nullptr, f);
    for (uint32_t i = 0; i < 200; ++i) {
        send_one(f, &b->addr, dgram(i, 100));
    }
    f->ops->progress(f, 10 * 1000 * 1000); /* releases what it held */
    got = receive(b, 32, 1000);
    EXPECT_GT(f->stats.fault_drop, 0u);
    EXPECT_GT(f->stats.fault_reorder, 0u);
    EXPECT_EQ(200u - f->stats.fault_drop, got.size());
}

/* The event fd (a completion channel) becomes readable when a datagram
 * arrives at a wire whose last receive call found nothing. */
TEST_F(verbs_dgram, event_fd_wakes_on_arrival)
{
    aptus_dgram_wire_t *a = open("dbl0:1", 1024), *b = open("dbl1:1", 1024);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    struct pollfd pfd = { b->ops->event_fd(b), POLLIN, 0 };
    EXPECT_TRUE(receive(b, 4, 1).empty()); /* arms */
    EXPECT_EQ(0, ::poll(&pfd, 1, 0));
    send_one(a, &b->addr, dgram(1, 10));
    EXPECT_EQ(1, ::poll(&pfd, 1, 0));
    EXPECT_EQ(1u, receive(b, 4, 1).size());
    EXPECT_TRUE(receive(b, 4, 1).empty()); /* takes the event, arms again */
    EXPECT_EQ(0, ::poll(&pfd, 1, 0));
    send_one(a, &b->addr, dgram(2, 10));
    EXPECT_EQ(1, ::poll(&pfd, 1, 0));
}

/* One address handle per peer port, however many QPs there. */
TEST_F(verbs_dgram, address_handles_are_cached_per_peer_port)
{
    aptus_dgram_wire_t *a = open("dbl0:1", 1024);
    aptus_dgram_wire_t *b = open("dbl1:1", 1024), *c = open("dbl1:1", 1024);
    aptus_dgram_wire_t *d = open("dbl0:1", 1024);
    ASSERT_TRUE(a && b && c && d);
    for (int i = 0; i < 10; ++i) {
        send_one(a, &b->addr, dgram(i, 8));
        send_one(a, &c->addr, dgram(i, 8));
    }
    EXPECT_EQ(1u, stat(a, "verbs_ahs"));
    send_one(a, &d->addr, dgram(0, 8));
    EXPECT_EQ(2u, stat(a, "verbs_ahs"));
    EXPECT_EQ(10u, receive(b, 16, 100).size());
    EXPECT_EQ(10u, receive(c, 16, 100).size());
    EXPECT_EQ(1u, receive(d, 16, 100).size());
    EXPECT_TRUE(a->ops->same_node(&a->addr, &d->addr));
    EXPECT_FALSE(a->ops->same_node(&a->addr, &b->addr));
}

/* A receive queue has an address (a QP) of its own; what arrives there is
 * scattered into the caller's pieces, cut short and flagged when they are
 * too small. */
TEST_F(verbs_dgram, receive_queue_scatters_into_the_callers_pieces)
{
    aptus_dgram_wire_t *a = open("dbl0:1", 2048), *b = open("dbl1:1", 2048);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    aptus_dgram_rxq_t *q = NULL;
    ASSERT_EQ(UCS_OK, b->ops->rxq_open(b, 16, &q));
    m_rxqs.push_back(q);
    EXPECT_NE(0, memcmp(&q->addr, &b->addr, sizeof(q->addr)));
    EXPECT_EQ(2u, stat(b, "verbs_qps"));

    auto d1 = dgram(1, 1500), d2 = dgram(2, 300);
    send_one(a, &q->addr, d1);
    send_one(a, &q->addr, d2);
    std::vector<uint8_t> p1(1000), p2(1000), p3(100);
    struct iovec v1[2] = { { p1.data(), 1000 }, { p2.data(), 1000 } };
    struct iovec v2[1] = { { p3.data(), 100 } };
    aptus_dgram_rxv_t rx[2];
    memset(rx, 0, sizeof(rx));
    rx[0].iov    = v1;
    rx[0].iovcnt = 2;
    rx[1].iov    = v2;
    rx[1].iovcnt = 1;
    ASSERT_EQ(2u, b->ops->rxq_recv(q, rx, 2));
    EXPECT_EQ(1500u, rx[0].length);
    EXPECT_FALSE(rx[0].truncated);
    EXPECT_EQ(0, memcmp(p1.data(), d1.data(), 1000));
    EXPECT_EQ(0, memcmp(p2.data(), d1.data() + 1000, 500));
    EXPECT_TRUE(rx[1].truncated);
    EXPECT_EQ(0, memcmp(p3.data(), d2.data(), 100));
    EXPECT_TRUE(receive(b, 4, 1).empty()); /* nothing on the main QP */

    send_one(a, &q->addr, d2);
    b->ops->rxq_drain(q);
    EXPECT_EQ(0u, b->ops->rxq_recv(q, rx, 2));
}

/* A QP that went to the error state (an HCA's answer to a receive it
 * could not place, or to a fatal port event) is taken back through RESET
 * once its receives came back flushed and its sends completed: same QP
 * number, so the peers' addresses of it still reach it. */
TEST_F(verbs_dgram, a_qp_in_the_error_state_is_taken_back)
{
    aptus_dgram_wire_t *a = open("dbl0:1", 2048), *b = open("dbl1:1", 2048);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    const aptus_wire_addr_t b_addr = b->addr;
    auto to_error = [](unsigned dev, const aptus_wire_addr_t &addr) {
        ASSERT_EQ(0, ibv_double_qp_error(ibv_double_lid(dev),
                                         aptus_verbs_addr_qpn(&addr)));
    };

    auto d1 = dgram(1, 1000), d2 = dgram(2, 2000), d3 = dgram(3, 10);
    send_one(a, &b->addr, d1);
    ASSERT_EQ(1u, receive(b, 8, 1).size());

    /* the receiver */
    to_error(1, b->addr);
    send_one(a, &b_addr, d2); /* no QP ready to take it: lost, as on UD */
    /* the flushed receives come back 8 a call, nothing filled */
    for (int i = 0; (i < 100) && (stat(b, "verbs_qp_rebuilds") == 0); ++i) {
        EXPECT_TRUE(receive(b, 8, 1).empty());
    }
    EXPECT_EQ(1u, stat(b, "verbs_qp_rebuilds"));
    EXPECT_EQ(256u, stat(b, "verbs_rx_errors")); /* every buffer, flushed */
    EXPECT_EQ(256u, stat(b, "verbs_rx_posted"));
    EXPECT_EQ(0, memcmp(&b_addr, &b->addr, sizeof(b_addr)));
    send_one(a, &b_addr, d3);
    auto got = receive(b, 8, 1, &a->addr);
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(d3, got[0]);

    /* the sender: a send in the error state fails; once it completed and
     * the receives came back, the QP is back and sends again */
    to_error(0, a->addr);
    aptus_dgram_tx_t tx;
    struct iovec iov = { d1.data(), d1.size() };
    unsigned sent    = 0;
    tx.dst           = &b_addr;
    tx.iov           = &iov;
    tx.iovcnt        = 1;
    EXPECT_EQ(UCS_OK, a->ops->send(a, &tx, 1, &sent));
    for (int i = 0; (i < 100) && (stat(a, "verbs_qp_rebuilds") == 0); ++i) {
        a->ops->progress(a, 0);
        EXPECT_TRUE(receive(a, 64, 1).empty());
    }
    EXPECT_EQ(1u, stat(a, "verbs_qp_rebuilds"));
    EXPECT_EQ(1u, a->stats.tx_errors);
    EXPECT_TRUE(receive(b, 8, 1).empty());
    send_one(a, &b_addr, d2);
    got = receive(b, 8, 1);
    ASSERT_EQ(1u, got.size());
    EXPECT_EQ(d2, got[0]);

    /* a receive queue of UD-ZCopy: the same */
    aptus_dgram_rxq_t *q = NULL;
    ASSERT_EQ(UCS_OK, b->ops->rxq_open(b, 16, &q));
    m_rxqs.push_back(q);
    const aptus_wire_addr_t q_addr = q->addr;
    to_error(1, q->addr);
    std::vector<uint8_t> piece(2048);
    struct iovec piov = { piece.data(), piece.size() };
    aptus_dgram_rxv_t rxv;
    memset(&rxv, 0, sizeof(rxv));
    rxv.iov    = &piov;
    rxv.iovcnt = 1;
    for (int i = 0; i < 20; ++i) {
        EXPECT_EQ(0u, b->ops->rxq_recv(q, &rxv, 1)); /* flushed ones */
    }
    EXPECT_EQ(0, memcmp(&q_addr, &q->addr, sizeof(q_addr)));
    send_one(a, &q_addr, d1);
    ASSERT_EQ(1u, b->ops->rxq_recv(q, &rxv, 1));
    EXPECT_EQ(d1.size(), rxv.length);
    EXPECT_EQ(0, memcmp(piece.data(), d1.data(), d1.size()));
}

/* Addresses: 20 bytes, zero padded; LID and Q_Key, or a GID (RoCE, never
 * on the double's ports, so checked here on its own). */
TEST(verbs_addr, packs_a_lid_or_a_gid)
{
    aptus_wire_addr_t a, b;
    char s[80];
    aptus_verbs_addr_pack(0xabcdef, 0x12, 0x1ee7a11, NULL, &a);
    EXPECT_EQ(0xabcdefu, aptus_verbs_addr_qpn(&a));
    EXPECT_EQ(0x1ee7a11u, aptus_verbs_addr_qkey(&a));
    for (size_t i = 10; i < sizeof(a.raw); ++i) {
        EXPECT_EQ(0, a.raw[i]) << i;
    }
    EXPECT_STREQ("lid 0x12 qpn 0xabcdef",
                 aptus_verbs_addr_str(&a, s, sizeof(s)));
    struct ibv_ah_attr attr;
    aptus_verbs_addr_ah_attr(&a, 1, &attr);
    EXPECT_EQ(0x12, attr.dlid);
    EXPECT_FALSE(attr.is_global);

    union ibv_gid gid;
    memset(&gid, 0, sizeof(gid));
    gid.raw[10] = 0xff;
    gid.raw[11] = 0xff;
    gid.raw[12] = 10;
    gid.raw[15] = 7;
    aptus_verbs_addr_pack(0x42, 0, 0, &gid, &b);
    EXPECT_EQ(0x42u, aptus_verbs_addr_qpn(&b));
    EXPECT_EQ(APTUS_VERBS_QKEY, aptus_verbs_addr_qkey(&b));
    EXPECT_STREQ("gid ::ffff:10.0.0.7 qpn 0x42",
                 aptus_verbs_addr_str(&b, s, sizeof(s)));
    aptus_verbs_addr_ah_attr(&b, 1, &attr);
    EXPECT_TRUE(attr.is_global);
    EXPECT_EQ(0, memcmp(attr.grh.dgid.raw, gid.raw, 16));
    EXPECT_FALSE(aptus_verbs_addr_same_node(&a, &b));
    aptus_wire_addr_t c;
    aptus_verbs_addr_pack(0x43, 0, 0, &gid, &c);
    EXPECT_TRUE(aptus_verbs_addr_same_node(&b, &c));
}
