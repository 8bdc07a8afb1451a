/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the sock wire's datagram part (src/wire/sock/sock_dgram.c)
 * used directly: two wires on "lo" in one process. The receive side of UDP
 * GRO is what they look at: a train of datagrams sent in one call arrives
 * in the socket as one, and the wire hands it out datagram by datagram,
 * in order, into the caller's buffers, however few the caller posts.
 */
#include "test_util.h"

#include <gtest/gtest.h>

extern "C" {
#include "wire/sock/sock_dgram.h"
#include "wire/sock/sock_netif.h"
#include "wire/wire_dev.h"
#include <ucs/time/time.h> /* first: it brings UCX's config.h */
}

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace
{

class sock_dgram : public ::testing::Test
{
  protected:
    void TearDown() override
    {
        for (auto *w : m_wires) {
            w->ops->close(w);
        }
        for (auto *b : m_bufs) {
            delete[] b;
        }
    }

    aptus_dgram_wire_t *open(size_t mtu)
    {
        aptus_dgram_wire_config_t config;
        aptus_dgram_wire_t *w = NULL;

        memset(&config, 0, sizeof(config));
        config.mtu          = mtu;
        config.rx_queue_len = 4096;
        config.tx_queue_len = 1024;
        config.force_bufs   = 1; /* root: past rmem_max, so no burst is lost */
        config.numa_node    = -1;
        EXPECT_EQ(UCS_OK, aptus_sock_dgram_open("lo", &config, &w));
        if (w != NULL) {
            m_wires.push_back(w);
        }
        return w;
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

    /* datagram i's bytes: its number and length, then a pattern of both */
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

    /* A train of count datagrams of seg bytes (the last last bytes), the
     * first numbered first, in one call. */
    void send_train(aptus_dgram_wire_t *from, aptus_dgram_wire_t *to,
                    uint32_t first, unsigned count, size_t seg, size_t last,
                    std::vector<std::vector<uint8_t>> *expect)
    {
        std::vector<uint8_t> all;
        for (unsigned k = 0; k < count; ++k) {
            auto d = dgram(first + k, (k + 1 == count) ? last : seg);
            all.insert(all.end(), d.begin(), d.end());
            expect->push_back(d);
        }
        struct iovec iov = { all.data(), all.size() };
        ASSERT_EQ(UCS_OK, from->ops->send_seg(from, &to->addr, &iov, 1, seg));
    }

    void send_one(aptus_dgram_wire_t *from, aptus_dgram_wire_t *to, uint32_t i,
                  size_t len, std::vector<std::vector<uint8_t>> *expect)
    {
        auto d              = dgram(i, len);
        struct iovec iov    = { d.data(), d.size() };
        aptus_dgram_tx_t tx = { &to->addr, &iov, 1 };
        unsigned sent       = 0;
        ASSERT_EQ(UCS_OK, from->ops->send(from, &tx, 1, &sent));
        ASSERT_EQ(1u, sent);
        if (expect != NULL) {
            expect->push_back(d);
        }
    }

    /* Posted buffers of the receiving wire's MTU, as a transport keeps
     * them: refilled in the slots a call filled. */
    struct poster {
        std::vector<aptus_dgram_rx_t> slots;
        std::set<void *> owned;
    };

    void post(poster &p, aptus_dgram_wire_t *w, unsigned count)
    {
        while (p.slots.size() < count) {
            aptus_dgram_rx_t rx;
            memset(&rx, 0, sizeof(rx));
            rx.buf = new_buf(w->mtu);
            p.owned.insert(rx.buf);
            p.slots.push_back(rx);
        }
    }

    /* Receive with count slots per call until want datagrams came or 10 s
     * passed; checks the buffers handed back are the ones posted. */
    std::vector<std::vector<uint8_t>> receive(aptus_dgram_wire_t *w, poster &p,
                                              unsigned count, size_t want,
                                              aptus_wire_addr_t *src = NULL)
    {
        std::vector<std::vector<uint8_t>> got;
        ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(10);

        post(p, w, count);
        while ((got.size() < want) && (ucs_get_time() < deadline)) {
            unsigned n = w->ops->recv(w, p.slots.data(), count);
            EXPECT_LE(n, count);
            std::set<void *> seen;
            for (unsigned i = 0; i < count; ++i) {
                EXPECT_EQ(1u, p.owned.count(p.slots[i].buf)) << i;
                EXPECT_TRUE(seen.insert(p.slots[i].buf).second) << i;
            }
            for (unsigned i = 0; i < n; ++i) {
                EXPECT_LE(p.slots[i].length, w->mtu);
                const uint8_t *b = (const uint8_t *)p.slots[i].buf;
                got.emplace_back(b, b + p.slots[i].length);
                if (src != NULL) {
                    EXPECT_EQ(0, memcmp(src, &p.slots[i].src, sizeof(*src)));
                }
                /* the caller's part: a fresh buffer where one was filled */
                p.owned.erase(p.slots[i].buf);
                delete_buf(p.slots[i].buf);
                p.slots[i].buf = new_buf(w->mtu);
                p.owned.insert(p.slots[i].buf);
            }
        }
        return got;
    }

    /* Every datagram of expect arrives at w, whole and in order, taken
     * count buffers a call, from src. */
    void receive_all(aptus_dgram_wire_t *w, unsigned count,
                     const std::vector<std::vector<uint8_t>> &expect,
                     aptus_wire_addr_t *src)
    {
        poster p;
        auto got = receive(w, p, count, expect.size(), src);
        ASSERT_EQ(expect.size(), got.size());
        for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(expect[i], got[i]) << i;
        }
    }

    void *new_buf(size_t size)
    {
        uint8_t *b = new uint8_t[size];
        m_bufs.insert(b);
        return b;
    }

    void delete_buf(void *b)
    {
        m_bufs.erase((uint8_t *)b);
        delete[](uint8_t *) b;
    }

    std::vector<aptus_dgram_wire_t *> m_wires;
    std::set<uint8_t *> m_bufs;
};

} // namespace

TEST_F(sock_dgram, gro_is_on_at_an_ethernet_mtu_and_off_above)
{
    aptus_dgram_wire_t *small = open(1452), *large = open(32768);
    ASSERT_TRUE((small != NULL) && (large != NULL));
    EXPECT_EQ(1u, stat(small, "sock_gro"));
    EXPECT_EQ(0u, stat(large, "sock_gro"));
}

/* 45 datagrams of 1452 bytes in one call come out one by one, in order,
 * with the sender's address, to a caller that posts 4 buffers a call. */
TEST_F(sock_dgram, a_train_comes_out_as_its_datagrams)
{
    aptus_dgram_wire_t *a = open(1452), *b = open(1452);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::vector<std::vector<uint8_t>> expect;
    send_train(a, b, 0, 45, 1452, 700, &expect);
    receive_all(b, 4, expect, &a->addr);
    /* it came up the stack as one train, not 45 datagrams */
    EXPECT_EQ(1u, b->stats.rx_trains);
    EXPECT_EQ(45u, b->stats.rx_dgrams);
    EXPECT_EQ(0u, b->stats.rx_truncated);
}

/* After a first train, trains of datagrams of the receiver's MTU land one
 * datagram a buffer with no copy (rx_trains_copied stays), also after a
 * lone datagram; a train longer than the buffers a call posts, and one of
 * smaller datagrams, are cut out of the staging area (counted); lone
 * datagrams in a row turn batches back on. */
TEST_F(sock_dgram, trains_of_the_mtu_land_in_place)
{
    aptus_dgram_wire_t *a = open(1452), *b = open(1452);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::vector<std::vector<uint8_t>> expect;
    send_train(a, b, 0, 3, 1452, 1452, &expect);
    receive_all(b, 8, expect, &a->addr);
    EXPECT_EQ(1u, b->stats.rx_trains_copied) << "the first, in a batch";

    expect.clear();
    send_train(a, b, 100, 40, 1452, 333, &expect);
    receive_all(b, 64, expect, &a->addr);
    EXPECT_EQ(2u, b->stats.rx_trains);
    EXPECT_EQ(1u, b->stats.rx_trains_copied) << "in place";

    expect.clear();
    send_train(a, b, 200, 30, 1452, 1, &expect);
    receive_all(b, 8, expect, &a->addr); /* 8 in place, the rest cut */
    EXPECT_EQ(3u, b->stats.rx_trains);
    EXPECT_EQ(2u, b->stats.rx_trains_copied);

    expect.clear();
    send_train(a, b, 300, 10, 1000, 500, &expect);
    send_one(a, b, 400, 77, &expect);
    send_train(a, b, 401, 5, 1452, 1452, &expect);
    receive_all(b, 16, expect, &a->addr);
    EXPECT_EQ(5u, b->stats.rx_trains);
    EXPECT_EQ(3u, b->stats.rx_trains_copied)
        << "the 1000-byte train; one lone datagram between trains (an ACK) "
           "keeps train mode on";

    /* lone datagrams in a row turn batches back on */
    expect.clear();
    for (uint32_t i = 0; i < 6; ++i) {
        send_one(a, b, 500 + i, 10 + i, &expect);
    }
    receive_all(b, 16, expect, &a->addr);
    expect.clear();
    send_train(a, b, 600, 5, 1452, 1452, &expect);
    receive_all(b, 16, expect, &a->addr);
    EXPECT_EQ(6u, b->stats.rx_trains);
    EXPECT_EQ(4u, b->stats.rx_trains_copied) << "in a batch again";
    EXPECT_EQ(0u, b->stats.rx_truncated);
}

/* Trains of random sizes and datagram sizes (below the receiver's MTU),
 * lone datagrams between them, taken with random numbers of buffers a
 * call: every datagram arrives, whole, in the order sent. */
TEST_F(sock_dgram, trains_and_lone_datagrams_keep_their_order)
{
    aptus_dgram_wire_t *a = open(1452), *b = open(1452);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::mt19937 rng(12345);
    poster p;
    uint32_t next = 0;

    for (unsigned round = 0; round < 300; ++round) {
        std::vector<std::vector<uint8_t>> expect;
        unsigned bursts = 1 + rng() % 6;
        for (unsigned k = 0; k < bursts; ++k) {
            if (rng() % 3 == 0) {
                size_t len = 1 + rng() % 1452;
                send_one(a, b, next++, len, &expect);
            } else {
                size_t seg     = 64 + rng() % (1452 - 63);
                unsigned count = 2 + rng() % 43;
                size_t last    = 1 + rng() % seg;
                send_train(a, b, next, count, seg, last, &expect);
                next += count;
            }
        }
        unsigned per_call = 1 + rng() % 64;
        auto got          = receive(b, p, per_call, expect.size(), &a->addr);
        ASSERT_EQ(expect.size(), got.size())
            << "round " << round << ", receive buffer "
            << stat(b, "sock_rcvbuf") << ", " << per_call << " buffers a call, "
            << b->stats.rx_truncated << " truncated";
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(expect[i], got[i]) << "round " << round << " dgram " << i;
        }
    }
    EXPECT_GT(b->stats.rx_trains, 0u);
    EXPECT_EQ(0u, b->stats.rx_truncated);
}

/* A peer that sends datagrams larger than this side's MTU, alone or in a
 * train, loses them (counted), and what it sends after still arrives. */
TEST_F(sock_dgram, datagrams_above_the_mtu_are_dropped_and_counted)
{
    aptus_dgram_wire_t *a = open(4000), *b = open(1452);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::vector<std::vector<uint8_t>> dropped, expect;
    send_one(a, b, 0, 3000, &dropped);
    send_train(a, b, 1, 5, 3000, 100, &dropped);
    send_one(a, b, 10, 1452, &expect);
    send_train(a, b, 11, 3, 1000, 10, &expect);
    receive_all(b, 8, expect, &a->addr);
    EXPECT_EQ(1u + 5u, b->stats.rx_truncated);
}

/* Without GRO (a wire above the GRO MTU) the same trains arrive one
 * datagram at a time from the kernel, unchanged for the caller. */
TEST_F(sock_dgram, without_gro_trains_arrive_datagram_by_datagram)
{
    aptus_dgram_wire_t *a = open(32768), *b = open(32768);
    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::vector<std::vector<uint8_t>> expect;
    send_train(a, b, 0, 20, 3000, 5, &expect);
    receive_all(b, 8, expect, &a->addr);
    EXPECT_EQ(0u, b->stats.rx_trains);
    EXPECT_EQ(20u, b->stats.rx_dgrams);
}

/* The device table's ports (wire_dev.h) on the sock wire: host order, an
 * address made from a device address and a port, or from another address
 * and a port, is the wire's own again. A port no UDP/TCP port can be (a
 * lying peer's, above 0xffff) must reach nobody: not the 16-bit port it
 * would truncate to. */
TEST_F(sock_dgram, wire_dev_ports_round_trip_and_a_wide_one_reaches_nobody)
{
    const aptus_wire_dev_ops_t *dev = &aptus_sock_wire_dev;
    aptus_dgram_wire_t *a = open(1452), *b = open(1452);
    ASSERT_TRUE((a != NULL) && (b != NULL));

    struct sockaddr_storage ss;
    socklen_t len;
    aptus_sock_addr_from_wire(&b->addr, &ss, &len);
    uint32_t port = dev->addr_port(&b->addr);
    EXPECT_EQ(ntohs(((struct sockaddr_in *)&ss)->sin_port), port);
    ASSERT_NE(0u, port);

    std::vector<uint8_t> dev_addr(dev->dev_addr_len(&b->addr));
    dev->dev_addr_pack(&b->addr, dev_addr.data());
    ASSERT_TRUE(dev->dev_addr_reachable(&a->addr, dev_addr.data()));
    aptus_wire_addr_t x;
    dev->addr_make(dev_addr.data(), port, &x);
    EXPECT_EQ(0, memcmp(&x, &b->addr, sizeof(x)));

    /* another port of the same device, then back, in place too */
    dev->addr_with_port(&b->addr, 4242, &x);
    EXPECT_EQ(4242u, dev->addr_port(&x));
    dev->addr_with_port(&x, port, &x);
    EXPECT_EQ(0, memcmp(&x, &b->addr, sizeof(x)));

    for (uint32_t wide : { port | 0x10000u, 0xabcdefu, 0xffffffffu }) {
        aptus_wire_addr_t y;
        dev->addr_make(dev_addr.data(), wide, &x);
        dev->addr_with_port(&b->addr, wide, &y);
        EXPECT_EQ(0, memcmp(&x, &y, sizeof(x))) << wide;
        EXPECT_EQ(0u, dev->addr_port(&x)) << wide;
        EXPECT_NE(0, memcmp(&x, &b->addr, sizeof(x))) << wide;
    }

    /* a datagram to port | 0x10000 is lost (counted), not delivered to
     * port; the next one to the right address arrives alone */
    dev->addr_make(dev_addr.data(), port | 0x10000u, &x);
    uint64_t tx_errors  = a->stats.tx_errors;
    auto lost           = dgram(1, 100);
    struct iovec iov    = { lost.data(), lost.size() };
    aptus_dgram_tx_t tx = { &x, &iov, 1 };
    unsigned sent       = 0;
    ASSERT_EQ(UCS_OK, a->ops->send(a, &tx, 1, &sent));
    EXPECT_EQ(1u, sent);
    EXPECT_EQ(tx_errors + 1, a->stats.tx_errors);
    std::vector<std::vector<uint8_t>> expect;
    send_one(a, b, 2, 100, &expect);
    receive_all(b, 8, expect, &a->addr);

    /* a connection to it is refused, even with a listener on port */
    int l = socket(ss.ss_family, SOCK_STREAM, 0);
    ASSERT_LE(0, l);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if ((bind(l, (struct sockaddr *)&ss, len) == 0) && (listen(l, 4) == 0)) {
        aptus_sock_addr_from_wire(&x, &ss, &len);
        int c = socket(ss.ss_family, SOCK_STREAM, 0);
        ASSERT_LE(0, c);
        EXPECT_EQ(-1, connect(c, (struct sockaddr *)&ss, len));
        EXPECT_EQ(ECONNREFUSED, errno);
        close(c);
    }
    close(l);
}
