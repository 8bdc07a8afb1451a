/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the UD-SR channel (src/channel) on the deterministic fake
 * wire: segmentation, loss, duplication, reordering, ACK loss, window full
 * and pending queues, flush, peer failure, forged datagrams, deferred
 * delivery from async context, receive-pool exhaustion, endpoint destroy.
 */
#include "fake_wire.h"
#include "test_util.h"

#include <gtest/gtest.h>

extern "C" {
#include "channel/ud_sr_chan.h"
#include "channel/ud_sr_chan_int.h"
#include <uct/api/uct.h>
}

#include <algorithm>
#include <functional>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace
{

const size_t RX_HEADROOM = 24;

struct message {
    uint8_t am_id;
    std::vector<uint8_t> data;
    bool operator==(const message &o) const
    {
        return (am_id == o.am_id) && (data == o.data);
    }
};

struct side {
    aptus_ud_chan_t chan;
    fake_wire *wire = nullptr;
    uint32_t key    = 0;
    std::vector<message> rx;
    std::vector<std::pair<aptus_ud_peer_t *, ucs_status_t>> failed;
    bool async_busy = false; /* handlers are sync-only */
    bool keep       = false; /* keep the descriptors */
    std::vector<void *> kept;
    unsigned async_delivered = 0;
    aptus_ud_peer_t *from    = nullptr; /* of the last message delivered */
};

ucs_status_t deliver_cb(void *arg, aptus_ud_peer_t *peer, uint8_t am_id,
                        void *data, size_t length, unsigned flags, int is_async)
{
    side *s = static_cast<side *>(arg);
    if (is_async && s->async_busy) {
        return UCS_ERR_BUSY;
    }
    EXPECT_TRUE(flags & UCT_CB_PARAM_FLAG_DESC);
    s->async_delivered += is_async;
    s->from = peer;
    /* the headroom before the payload belongs to the receiver */
    memset(UCS_PTR_BYTE_OFFSET(data, -(ptrdiff_t)RX_HEADROOM), 0xcc,
           RX_HEADROOM);
    const uint8_t *p = static_cast<const uint8_t *>(data);
    s->rx.push_back(message{ am_id, std::vector<uint8_t>(p, p + length) });
    if (s->keep) {
        s->kept.push_back(UCS_PTR_BYTE_OFFSET(data, -(ptrdiff_t)RX_HEADROOM));
        return UCS_INPROGRESS;
    }
    return UCS_OK;
}

void failed_cb(void *arg, aptus_ud_peer_t *peer, ucs_status_t status)
{
    static_cast<side *>(arg)->failed.push_back({ peer, status });
}

const aptus_ud_chan_ops_t chan_ops = { deliver_cb, failed_cb };

struct pack_arg {
    const std::vector<uint8_t> *data;
};

size_t pack_cb(void *dest, void *arg)
{
    const std::vector<uint8_t> *v = static_cast<pack_arg *>(arg)->data;
    if (!v->empty()) {
        memcpy(dest, v->data(), v->size());
    }
    return v->size();
}

class ud_chan : public ::testing::Test
{
  public:
    void SetUp() override
    {
        m_cfg = fake_chan_config(RX_HEADROOM);
    }

    void TearDown() override
    {
        fini(m_a);
        fini(m_b);
    }

    void init(side &s, uint32_t key, size_t mtu = 1024)
    {
        s.wire = m_net.create(mtu, m_seg);
        s.key  = key;
        ASSERT_EQ(UCS_OK,
                  aptus_ud_chan_init(&s.chan, &m_cfg, &s.wire->super, NULL,
                                     &chan_ops, &s, fake_net::clock, key));
    }

    void init_both()
    {
        init(m_a, 0xaaaa0001);
        init(m_b, 0xbbbb0002);
    }

    void fini(side &s)
    {
        if (s.wire == nullptr) {
            return;
        }
        for (void *d : s.kept) {
            uct_iface_release_desc(d);
        }
        s.kept.clear();
        aptus_dgram_wire_t *w = &s.wire->super;
        aptus_ud_chan_cleanup(&s.chan);
        w->ops->close(w);
        s.wire = nullptr;
    }

    aptus_ud_peer_t *connect(side &from, side &to)
    {
        aptus_ud_peer_t *peer = nullptr;
        EXPECT_EQ(UCS_OK, aptus_ud_chan_peer_connect(
                              &from.chan, &to.wire->super.addr, to.key,
                              to.wire->super.mtu, &peer));
        return peer;
    }

    /* A stream from one side to the other, opened: the handshake done
     * (a reliable no-op), nothing delivered. */
    aptus_ud_peer_t *open_stream(side &from, side &to)
    {
        aptus_ud_peer_t *peer = connect(from, to);
        EXPECT_EQ(UCS_OK, aptus_ud_chan_check(&from.chan, peer));
        EXPECT_TRUE(run_until([&] {
            return (peer->flags & APTUS_UD_PEER_HEARD) &&
                   aptus_ud_peer_tx_idle(peer);
        }));
        return peer;
    }

    /* One round: the network delivers, both sides progress, time moves. */
    void round(uint64_t step_us = 50)
    {
        m_net.deliver();
        if (m_a.wire) {
            aptus_ud_chan_progress(&m_a.chan, 0);
        }
        if (m_b.wire) {
            aptus_ud_chan_progress(&m_b.chan, 0);
        }
        fake_net::now += step_us;
    }

    template <typename Pred>
    bool run_until(Pred pred, uint64_t max_us = 30000000)
    {
        return fake_run_until(
            pred, [this] { round(); }, max_us);
    }

    ssize_t send_bcopy(side &s, aptus_ud_peer_t *peer, uint8_t am_id,
                       const std::vector<uint8_t> &data)
    {
        pack_arg arg{ &data };
        aptus_chan_send_t send;
        aptus_chan_send_pack(&send, am_id, pack_cb, &arg);
        return aptus_ud_chan_send(&s.chan, peer, &send);
    }

    ucs_status_t send_short(side &s, aptus_ud_peer_t *peer, uint8_t am_id,
                            uint64_t header, const std::vector<uint8_t> &data)
    {
        aptus_chan_send_t send;
        aptus_chan_send_copy(&send, am_id, &header, sizeof(header), data.data(),
                             data.size());
        return (ucs_status_t)aptus_ud_chan_send(&s.chan, peer, &send);
    }

    ucs_status_t send_zcopy(side &s, aptus_ud_peer_t *peer, uint8_t am_id,
                            const std::vector<uint8_t> &hdr,
                            std::vector<std::vector<uint8_t> *> bufs,
                            test_comp *comp)
    {
        std::vector<struct iovec> iov(bufs.size());
        for (size_t i = 0; i < bufs.size(); ++i) {
            iov[i].iov_base = bufs[i]->data();
            iov[i].iov_len  = bufs[i]->size();
        }
        aptus_chan_send_t send;
        aptus_chan_send_iov(&send, am_id, hdr.data(), hdr.size(), iov.data(),
                            iov.size(),
                            (comp != nullptr) ? &comp->super : nullptr);
        return (ucs_status_t)aptus_ud_chan_send(&s.chan, peer, &send);
    }

    /* Send messages of varied sizes, retrying on NO_RESOURCE; returns what
     * the receiver must see. */
    std::vector<message> stream(side &from, aptus_ud_peer_t *peer, unsigned n,
                                size_t max_len, unsigned seed)
    {
        std::mt19937 rng(seed);
        std::vector<message> sent;
        for (unsigned i = 0; i < n; ++i) {
            size_t len = (i % 5 == 0) ? (rng() % max_len) : (rng() % 200);
            message m{ (uint8_t)(i % 30), pattern(i, len) };
            ssize_t ret;
            while ((ret = send_bcopy(from, peer, m.am_id, m.data)) ==
                   UCS_ERR_NO_RESOURCE) {
                round();
            }
            EXPECT_EQ((ssize_t)len, ret);
            sent.push_back(m);
            if (i % 7 == 0) {
                round();
            }
        }
        return sent;
    }

    /* A pending request that sends its data from a to peer as a bcopy
     * under am_id, and says when it went. */
    struct pending_send {
        uct_pending_req_t super;
        ud_chan *test;
        aptus_ud_peer_t *peer;
        uint8_t am_id;
        std::vector<uint8_t> data;
        int done;
    };

    static ucs_status_t pending_send_cb(uct_pending_req_t *self)
    {
        pending_send *r = reinterpret_cast<pending_send *>(self);
        ssize_t ret =
            r->test->send_bcopy(r->test->m_a, r->peer, r->am_id, r->data);
        if (ret < 0) {
            return (ucs_status_t)ret;
        }
        r->done = 1;
        return UCS_OK;
    }

    /* count such requests to peer, added to a's pending queue */
    void add_pending_sends(std::vector<pending_send> &reqs,
                           aptus_ud_peer_t *peer, uint8_t am_id,
                           std::function<std::vector<uint8_t>(unsigned)> data,
                           unsigned count)
    {
        reqs.resize(count);
        for (unsigned i = 0; i < count; ++i) {
            reqs[i] = pending_send{ {}, this, peer, am_id, data(i), 0 };
            reqs[i].super.func = pending_send_cb;
            ASSERT_EQ(UCS_OK, aptus_ud_chan_pending_add(&m_a.chan, peer,
                                                        &reqs[i].super, 0))
                << i;
        }
    }

    aptus_ud_chan_config_t m_cfg;
    fake_net m_net;
    side m_a, m_b;
    bool m_seg = false; /* wires offer send_seg (UDP GSO) */
};

/* Wires that send trains of datagrams in one call. */
class ud_chan_train : public ud_chan
{
  public:
    void SetUp() override
    {
        ud_chan::SetUp();
        m_seg = true;
    }

    /* A stream from a to b with its handshake done, and the datagrams of
     * the next messages recorded as they are sent. */
    aptus_ud_peer_t *open_and_watch()
    {
        init_both();
        aptus_ud_peer_t *p = open_stream(m_a, m_b);
        m_net.filter       = [this](const fake_dgram &d,
                              const aptus_ud_sr_pkt_t &pkt) {
            if ((d.from == m_a.wire->id) &&
                (pkt.type == APTUS_UD_SR_TYPE_DATA)) {
                m_data.push_back(d);
            }
            return FAKE_PASS;
        };
        return p;
    }

    std::vector<fake_dgram> m_data; /* a's data datagrams, as delivered */
};

} // namespace

TEST_F(ud_chan, config_check_names_the_variable)
{
    aptus_ud_chan_config_t c = m_cfg;
    EXPECT_EQ(nullptr, aptus_ud_chan_config_check(&c, 1024));
    c.max_msg = 64 * 1024; /* more fragments than the window */
    EXPECT_STREQ("SEG_SIZE needs more datagrams than TX_WINDOW allows",
                 aptus_ud_chan_config_check(&c, 1024));
    c         = m_cfg;
    c.rx_pool = c.rx_batch;
    EXPECT_NE(nullptr, aptus_ud_chan_config_check(&c, 1024));
    c               = m_cfg;
    c.rel.tx_window = APTUS_REL_TX_WINDOW_MAX + 1;
    EXPECT_NE(nullptr,
              strstr(aptus_ud_chan_config_check(&c, 1024), "TX_WINDOW"));
}

TEST_F(ud_chan, short_message_delivered_and_acknowledged)
{
    init_both();
    aptus_ud_peer_t *p           = connect(m_a, m_b);
    std::vector<uint8_t> payload = pattern(1, 40);
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 3, 0x0102030405060708ull, payload));
    EXPECT_FALSE(aptus_ud_peer_tx_idle(p));

    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));
    ASSERT_EQ(48u, m_b.rx[0].data.size());
    uint64_t hdr;
    memcpy(&hdr, m_b.rx[0].data.data(), 8);
    EXPECT_EQ(0x0102030405060708ull, hdr);
    EXPECT_EQ(payload, std::vector<uint8_t>(m_b.rx[0].data.begin() + 8,
                                            m_b.rx[0].data.end()));
    EXPECT_EQ(3, m_b.rx[0].am_id);

    /* no reply traffic: the delayed ACK empties the window */
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    EXPECT_GE(m_b.chan.stats.tx_acks, 1u);
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits);
}

/* A peer with nothing in flight gives its send window back at the tick
 * (an idle peer costs the struct alone); the next send opens it again with
 * the PSNs going on and the RTT it had, and the stream stays exact. */
TEST_F(ud_chan, idle_peer_gives_its_send_window_back)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    EXPECT_EQ(nullptr, p->win); /* never sent: no window */
    size_t idle_bytes = aptus_ud_chan_peer_bytes(&m_a.chan);

    std::vector<message> sent;
    for (unsigned round_no = 0; round_no < 3; ++round_no) {
        for (unsigned i = 0; i < 5; ++i) {
            sent.push_back(message{ 1, pattern(round_no * 5 + i, 100) });
            ssize_t ret;
            while ((ret = send_bcopy(m_a, p, 1, sent.back().data)) ==
                   UCS_ERR_NO_RESOURCE) {
                round(); /* the opening: one message until answered */
            }
            ASSERT_GT(ret, -1);
        }
        ASSERT_NE(nullptr, p->win);
        EXPECT_EQ(1u, m_a.chan.num_win);
        EXPECT_GT(aptus_ud_chan_peer_bytes(&m_a.chan), idle_bytes);
        ASSERT_TRUE(run_until([&] {
            return (m_b.rx.size() == sent.size()) && (p->win == nullptr);
        }));
        EXPECT_EQ(0u, m_a.chan.num_win);
        EXPECT_EQ(idle_bytes, aptus_ud_chan_peer_bytes(&m_a.chan));
        EXPECT_EQ(sent.size(), p->parked.next_psn);
        if (round_no > 0) { /* the first went again after the handshake */
            EXPECT_GT(aptus_ud_peer_srtt_us(p), 0u);
        }
        /* time passes: a long idle spell is not the peer's silence */
        for (unsigned i = 0; i < 100; ++i) {
            round(m_cfg.rel.peer_timeout_us / 50);
        }
    }
    EXPECT_EQ(sent, m_b.rx);
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
    EXPECT_EQ(0u, m_a.chan.stats.rx_bad_ack);

    /* an ACK for a PSN never sent is refused with no window too */
    EXPECT_EQ(nullptr, p->win);
    aptus_ud_sr_pkt_t pkt = {};
    pkt.dest_key          = m_a.key;
    pkt.src_key           = m_b.key;
    pkt.dest_token        = p->local_token;
    pkt.src_token         = p->remote_token;
    pkt.conn_id           = p->conn_id;
    pkt.type              = APTUS_UD_SR_TYPE_ACK;
    pkt.ack               = (uint16_t)(p->parked.next_psn + 1);
    pkt.psn               = 0;
    std::vector<uint8_t> d(64);
    d.resize(aptus_ud_sr_build(d.data(), &pkt));
    m_net.in_flight.push_back(fake_dgram{ m_b.wire->id, m_a.wire->id, d });
    m_net.deliver();
    aptus_ud_chan_progress(&m_a.chan, 0);
    EXPECT_EQ(1u, m_a.chan.stats.rx_bad_ack);
    EXPECT_EQ(nullptr, p->win);
}

/* Data that arrived a moment ago waits for the reply that carries its
 * acknowledgement, even when a timer of the stream falls due meanwhile (a
 * probe two round trips after the receiver's own last send, acknowledged
 * long since): an ACK goes alone only at the periodic tick. */
TEST_F(ud_chan, a_reply_carries_the_ack_when_a_timer_falls_due_first)
{
    m_cfg.crc              = 0;
    m_cfg.tick_us          = 100000;
    m_cfg.rel.probe_min_us = 0; /* a: no probes, and no early timer */
    m_cfg.rel.rto_min_us   = 300000;
    m_cfg.rel.rto_init_us  = 300000;
    m_cfg.rel.rto_max_us   = 1000000;
    init(m_a, 0xaaaa0001);
    m_cfg.rel.probe_min_us = 20; /* b: its timer falls due early */
    init(m_b, 0xbbbb0002);
    aptus_ud_peer_t *ab       = open_stream(m_a, m_b);
    std::vector<uint8_t> data = pattern(1, 8);
    uint64_t acks0            = m_b.chan.stats.tx_acks; /* the handshake */

    for (unsigned i = 1; i <= 20; ++i) {
        ASSERT_EQ(UCS_OK, send_short(m_a, ab, 1, i, data));
        ASSERT_TRUE(run_until([&] { return m_b.rx.size() == i; }));
        for (int r = 0; r < 6; ++r) {
            round(); /* b thinks before it answers */
        }
        ASSERT_EQ(UCS_OK, send_short(m_b, m_b.from, 2, i, data));
        ASSERT_TRUE(run_until([&] { return m_a.rx.size() == i; }));
    }
    EXPECT_EQ(acks0, m_b.chan.stats.tx_acks);

    /* no answer at all: the periodic tick acknowledges, within a tick */
    ASSERT_EQ(UCS_OK, send_short(m_a, ab, 1, 0, data));
    uint64_t start = fake_net::now;
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(ab); }));
    EXPECT_EQ(acks0 + 1, m_b.chan.stats.tx_acks);
    EXPECT_LE(fake_net::now - start, m_cfg.tick_us + 200);
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits);
}

TEST_F(ud_chan, segmentation_and_reassembly)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    /* around the one-datagram payload (1024 - 24 - 8 with CRC) */
    std::vector<size_t> sizes = { 0, 1, 991, 992, 993, 1983, 2500, 16384 };
    for (size_t len : sizes) {
        ASSERT_EQ((ssize_t)len, send_bcopy(m_a, p, 7, pattern(len, len)));
        ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    }
    ASSERT_EQ(sizes.size(), m_b.rx.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(pattern(sizes[i], sizes[i]), m_b.rx[i].data) << sizes[i];
    }
    EXPECT_EQ(sizes.size(), m_a.chan.stats.tx_msgs);
    EXPECT_GT(m_a.chan.stats.tx_data_dgrams, sizes.size());
}

TEST_F(ud_chan, zcopy_completes_only_when_acknowledged)
{
    init_both();
    aptus_ud_peer_t *p       = connect(m_a, m_b);
    std::vector<uint8_t> hdr = pattern(9, 24), b1 = pattern(10, 3000),
                         b2 = pattern(11, 5);
    test_comp comp;
    init_comp(comp);
    ASSERT_EQ(UCS_INPROGRESS, send_zcopy(m_a, p, 4, hdr, { &b1, &b2 }, &comp));
    EXPECT_EQ(0, comp.done);
    m_net.deliver();
    aptus_ud_chan_progress(&m_b.chan, 0); /* received, ACK sent at once */
    EXPECT_EQ(0, comp.done);
    ASSERT_TRUE(run_until([&] { return comp.done == 1; }));
    EXPECT_EQ(UCS_OK, comp.status);
    std::vector<uint8_t> expect = hdr;
    expect.insert(expect.end(), b1.begin(), b1.end());
    expect.insert(expect.end(), b2.begin(), b2.end());
    ASSERT_EQ(1u, m_b.rx.size());
    EXPECT_EQ(expect, m_b.rx[0].data);
}

TEST_F(ud_chan, loss_duplication_reordering_both_ways)
{
    init_both();
    aptus_ud_peer_t *pa = connect(m_a, m_b);
    aptus_ud_peer_t *pb = connect(m_b, m_a);
    EXPECT_EQ(pa->conn_id, pb->conn_id);

    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(0, 1);
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &pkt) {
        double r = u(rng);
        if (r < 0.10) {
            return FAKE_DROP;
        } else if (r < 0.15) {
            return FAKE_DUP;
        } else if (r < 0.22) {
            return FAKE_HOLD; /* reordered: arrives a round later */
        }
        return FAKE_PASS;
    };
    auto old_round = [&] { m_net.release_held(); };

    std::vector<message> to_b, to_a;
    std::mt19937 srng(3);
    for (unsigned i = 0; i < 400; ++i) {
        size_t len = (i % 9 == 0) ? (srng() % 16384) : (srng() % 300);
        message m{ (uint8_t)(i % 32), pattern(i, len) };
        side &from            = (i % 2) ? m_b : m_a;
        aptus_ud_peer_t *peer = (i % 2) ? pb : pa;
        while (send_bcopy(from, peer, m.am_id, m.data) == UCS_ERR_NO_RESOURCE) {
            round();
            old_round();
        }
        ((i % 2) ? to_a : to_b).push_back(m);
        round();
        old_round();
    }
    ASSERT_TRUE(run_until([&] {
        m_net.release_held();
        return (m_b.rx.size() == to_b.size()) &&
               (m_a.rx.size() == to_a.size()) && aptus_ud_peer_tx_idle(pa) &&
               aptus_ud_peer_tx_idle(pb);
    }));
    EXPECT_EQ(to_b, m_b.rx);
    EXPECT_EQ(to_a, m_a.rx);
    EXPECT_GT(
        m_a.chan.stats.tx_retransmits + m_a.chan.stats.tx_fast_retransmits, 0u);
    EXPECT_GT(m_b.chan.stats.rx_duplicates, 0u);
    EXPECT_GT(m_b.chan.stats.rx_held, 0u);
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
}

TEST_F(ud_chan, lost_tail_recovered_by_probe_before_timeout)
{
    m_cfg.rel.rto_min_us  = 50000;
    m_cfg.rel.rto_init_us = 50000;
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    for (unsigned i = 0; i < 5; ++i) { /* measure the RTT */
        ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, i, pattern(i, 10)));
        ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    }
    /* the last datagram of a 4-datagram message is lost once */
    int dropped  = 0;
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &pkt) {
        if (!dropped && (pkt.type == APTUS_UD_SR_TYPE_DATA) &&
            (pkt.flags & APTUS_UD_SR_F_LAST)) {
            dropped = 1;
            return FAKE_DROP;
        }
        return FAKE_PASS;
    };
    std::vector<uint8_t> data = pattern(77, 3500);
    ASSERT_GT(send_bcopy(m_a, p, 1, data), 0);
    uint64_t start = fake_net::now;
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    EXPECT_EQ(1, dropped);
    EXPECT_LT(fake_net::now - start, m_cfg.rel.rto_min_us / 4);
    EXPECT_GE(m_a.chan.stats.tx_probes, 1u);
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits); /* no timeout needed */
    EXPECT_EQ(1u, m_a.chan.stats.tx_fast_retransmits);
    EXPECT_EQ(data, m_b.rx.back().data);
}

TEST_F(ud_chan, lost_first_datagram_of_a_stream_recovered_by_probe)
{
    m_cfg.rel.rto_min_us  = 50000;
    m_cfg.rel.rto_init_us = 50000;
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    int dropped        = 0;
    m_net.filter       = [&](const fake_dgram &, const aptus_ud_sr_pkt_t &pkt) {
        if (!dropped && (pkt.type == APTUS_UD_SR_TYPE_DATA)) {
            dropped = 1;
            return FAKE_DROP;
        }
        return FAKE_PASS;
    };
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 7, pattern(1, 10)));
    uint64_t start = fake_net::now;
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    EXPECT_LT(fake_net::now - start, m_cfg.rel.rto_min_us / 4);
    /* the stream is new to B, so the probe is the data itself (marked
     * OPEN), long before the timeout */
    EXPECT_EQ(1u, m_a.chan.stats.tx_probes);
    EXPECT_EQ(1u, m_a.chan.stats.tx_retransmits);
    EXPECT_EQ(1u, m_b.rx.size());
    EXPECT_EQ(0u, m_b.chan.stats.rx_unknown_stream);
    EXPECT_EQ(0u, m_b.chan.stats.rx_dead_stream);
}

TEST_F(ud_chan, ack_loss_recovered)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    /* the stream opens first: before the handshake B takes no data */
    std::vector<message> sent = stream(m_a, p, 1, 100, 1);
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    bool drop_acks = true;
    m_net.filter   = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &pkt) {
        return (drop_acks && (d.from == m_b.wire->id)) ? FAKE_DROP : FAKE_PASS;
    };
    std::vector<message> more = stream(m_a, p, 20, 100, 2);
    sent.insert(sent.end(), more.begin(), more.end());
    /* everything arrives, nothing gets acknowledged: probes and timeouts
     * ask again and again */
    ASSERT_TRUE(run_until([&] {
        return (m_a.chan.stats.tx_retransmits >= 3) &&
               (m_a.chan.stats.tx_probes > 3);
    }));
    EXPECT_EQ(sent, m_b.rx);
    drop_acks = false;
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    EXPECT_EQ(sent, m_b.rx); /* no duplicate was delivered */
    EXPECT_GT(m_b.chan.stats.rx_duplicates, 0u);
}

TEST_F(ud_chan, window_full_then_pending_in_order)
{
    init_both();
    aptus_ud_peer_t *p         = open_stream(m_a, m_b);
    std::vector<uint8_t> small = pattern(0, 10);
    unsigned n                 = 0;
    while (send_bcopy(m_a, p, 1, pattern(n, 10)) > 0) {
        ++n;
    }
    EXPECT_EQ(m_cfg.rel.tx_window, n);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, send_short(m_a, p, 1, 0, small));

    std::vector<pending_send> reqs;
    ASSERT_NO_FATAL_FAILURE(add_pending_sends(
        reqs, p, 1, [n](unsigned i) { return pattern(n + i, 10); }, 40));
    /* with requests queued, a direct send must not overtake them */
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, send_bcopy(m_a, p, 1, small));

    ASSERT_TRUE(run_until([&] { return reqs.back().done == 1; }));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == n + reqs.size(); }));
    for (unsigned i = 0; i < m_b.rx.size(); ++i) {
        EXPECT_EQ(pattern(i, 10), m_b.rx[i].data) << i;
    }
    EXPECT_EQ(reqs.size(), m_a.chan.stats.pending_dispatched);
}

/* What goes before the remote's token is known only opens the stream (the
 * remote takes none of it, and it all goes again once answered), so the
 * opener sends one message, however many datagrams, and waits: the
 * first burst to a new peer costs one message twice, not a window. */
TEST_F(ud_chan, an_opening_sends_one_message_until_answered)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    std::vector<message> sent{ message{ 1, pattern(0, 3000) } };
    ASSERT_EQ(3000, send_bcopy(m_a, p, 1, sent[0].data));
    aptus_ud_tx_batch_flush(&m_a.chan);
    uint64_t first = m_a.chan.stats.tx_data_dgrams;
    EXPECT_GT(first, 2u); /* 1024-byte datagrams */
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, send_bcopy(m_a, p, 1, pattern(1, 10)));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, send_short(m_a, p, 1, 0, pattern(1, 10)));
    EXPECT_EQ(first, m_a.chan.stats.tx_data_dgrams);

    for (unsigned i = 1; i < 200; ++i) {
        sent.push_back(message{ 1, pattern(i, 10 + (i % 3) * 1000) });
        ssize_t ret;
        while ((ret = send_bcopy(m_a, p, 1, sent.back().data)) ==
               UCS_ERR_NO_RESOURCE) {
            round();
        }
        ASSERT_EQ((ssize_t)sent.back().data.size(), ret);
    }
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == sent.size(); }));
    for (unsigned i = 0; i < sent.size(); ++i) {
        EXPECT_EQ(sent[i].data, m_b.rx[i].data) << i;
    }
    EXPECT_EQ(first, m_a.chan.stats.tx_open_resends);
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits);
    EXPECT_EQ(0u, m_b.chan.stats.rx_duplicates);
}

/* A sender that keeps its window more than half full ahead of a receiver
 * that takes one datagram a call asks for an ACK once in a quarter window,
 * not with every datagram: the receiver answered each ask with an ACK
 * datagram of its own, one for every message it received. */
TEST_F(ud_chan, a_receiver_behind_is_asked_for_acks_sparingly)
{
    m_cfg.rel.tx_window = 64;
    m_cfg.rel.ack_count = 1000; /* only asks make the receiver acknowledge */
    m_cfg.rx_batch      = 1;
    init_both();
    aptus_ud_peer_t *p  = open_stream(m_a, m_b);
    const uint64_t acks = m_b.chan.stats.tx_acks;
    const unsigned n    = 2000;
    unsigned sent       = 0;
    ucs_status_t status;
    for (; sent < 48; ++sent) { /* three quarters of a window ahead */
        ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, sent, pattern(sent, 8)));
    }
    while (sent < n) {
        status = send_short(m_a, p, 1, sent, pattern(sent, 8));
        if (status == UCS_OK) {
            ++sent;
        } else {
            ASSERT_EQ(UCS_ERR_NO_RESOURCE, status);
        }
        m_net.deliver();
        aptus_ud_chan_progress(&m_b.chan, 0); /* one datagram */
        m_net.deliver();
        aptus_ud_chan_progress(&m_a.chan, 0);
    }
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == n; }));
    for (unsigned i = 0; i < n; ++i) {
        uint64_t hdr;
        memcpy(&hdr, m_b.rx[i].data.data(), sizeof(hdr));
        ASSERT_EQ(i, hdr);
    }
    /* a quarter window is 16: about n / 16 asks, each answered */
    EXPECT_LE(m_b.chan.stats.tx_acks - acks, n / 8);
    EXPECT_GT(m_b.chan.stats.tx_acks - acks, n / 32);
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits);
}

/* What is in flight to all peers together is bounded (TX_MAX_BYTES): past
 * it a send to any peer waits, even to one whose window is empty, and its
 * pending request is taken (not refused as BUSY) and goes once
 * acknowledgements free room; every message arrives, per stream in order. */
TEST_F(ud_chan, bytes_in_flight_to_all_peers_are_bounded)
{
    m_cfg.tx_all_bytes = 8 * 1024;
    init_both();
    std::vector<aptus_ud_peer_t *> peers;
    for (unsigned i = 0; i < 4; ++i) {
        peers.push_back(open_stream(m_a, m_b));
    }
    std::vector<uint8_t> msg = pattern(1, 1000);
    unsigned sent            = 0;
    while (send_bcopy(m_a, peers[sent % 3], 1, msg) > 0) {
        ++sent;
    }
    EXPECT_EQ(9u, sent); /* 8,000 bytes below the bound, one message past */
    EXPECT_GT(m_a.chan.stats.tx_all_full, 0u);
    EXPECT_EQ(0u, m_a.chan.stats.tx_window_full);
    /* the fourth stream has sent nothing, yet waits too */
    EXPECT_TRUE(aptus_ud_peer_tx_idle(peers[3]));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, send_bcopy(m_a, peers[3], 1, msg));

    std::vector<pending_send> reqs;
    ASSERT_NO_FATAL_FAILURE(add_pending_sends(
        reqs, peers[3], 2, [](unsigned i) { return pattern(100 + i, 1000); },
        20));
    ASSERT_TRUE(run_until([&] { return reqs.back().done == 1; }));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == sent + reqs.size(); }));
    std::vector<std::vector<uint8_t>> last;
    for (auto &m : m_b.rx) {
        if (m.am_id == 2) {
            last.push_back(m.data);
        }
    }
    ASSERT_EQ(reqs.size(), last.size());
    for (unsigned i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(reqs[i].data, last[i]) << i;
    }
    EXPECT_EQ(0u, m_a.chan.stats.tx_window_full);
    EXPECT_EQ(reqs.size(), m_a.chan.stats.pending_dispatched);
}

TEST_F(ud_chan, pending_add_refused_when_resources_exist)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    uct_pending_req_t r;
    EXPECT_EQ(UCS_ERR_BUSY, aptus_ud_chan_pending_add(&m_a.chan, p, &r, 0));
}

TEST_F(ud_chan, pending_purge_returns_requests)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    while (send_bcopy(m_a, p, 1, pattern(0, 10)) > 0) {
    }
    std::vector<uct_pending_req_t> reqs(5);
    for (auto &r : reqs) {
        ASSERT_EQ(UCS_OK, aptus_ud_chan_pending_add(&m_a.chan, p, &r, 0));
    }
    std::vector<uct_pending_req_t *> purged;
    aptus_ud_chan_pending_purge(
        &m_a.chan, p,
        [](uct_pending_req_t *r, void *arg) {
            static_cast<std::vector<uct_pending_req_t *> *>(arg)->push_back(r);
        },
        &purged);
    ASSERT_EQ(5u, purged.size());
    EXPECT_EQ(&reqs[0], purged[0]);
    EXPECT_EQ(&reqs[4], purged[4]);
}

TEST_F(ud_chan, flush_completes_after_acknowledgement)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    EXPECT_EQ(UCS_OK, aptus_ud_chan_flush(&m_a.chan, p, 0, NULL));
    /* the stream opens (a handshake) before the exchange timed below */
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 0, pattern(0, 4)));
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    ASSERT_GT(send_bcopy(m_a, p, 2, pattern(1, 3000)), 0);
    EXPECT_EQ(UCS_INPROGRESS, aptus_ud_chan_flush(&m_a.chan, p, 0, NULL));
    test_comp comp, icomp;
    init_comp(comp);
    init_comp(icomp);
    EXPECT_EQ(UCS_INPROGRESS,
              aptus_ud_chan_flush(&m_a.chan, p, 0, &comp.super));
    EXPECT_EQ(UCS_INPROGRESS,
              aptus_ud_chan_flush_all(&m_a.chan, 0, &icomp.super));
    /* the flush asks for the ACK at once: one exchange completes it */
    m_net.deliver();
    aptus_ud_chan_progress(&m_b.chan, 0);
    m_net.deliver();
    aptus_ud_chan_progress(&m_a.chan, 0);
    EXPECT_EQ(1, comp.done);
    EXPECT_EQ(1, icomp.done);
    EXPECT_EQ(UCS_OK, comp.status);
    EXPECT_EQ(UCS_OK, aptus_ud_chan_flush_all(&m_a.chan, 0, NULL));
}

TEST_F(ud_chan, silent_peer_fails_everything_outstanding)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    m_net.filter       = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        return FAKE_DROP; /* the peer is gone */
    };
    std::vector<uint8_t> hdr = pattern(1, 8), buf = pattern(2, 100);
    test_comp zc, fc;
    init_comp(zc);
    init_comp(fc);
    ASSERT_EQ(UCS_INPROGRESS, send_zcopy(m_a, p, 1, hdr, { &buf }, &zc));
    ASSERT_EQ(UCS_INPROGRESS, aptus_ud_chan_flush(&m_a.chan, p, 0, &fc.super));
    uint64_t start = fake_net::now;
    ASSERT_TRUE(run_until([&] { return !m_a.failed.empty(); }, 10000000));
    EXPECT_GE(fake_net::now - start, m_cfg.rel.peer_timeout_us);
    ASSERT_EQ(1u, m_a.failed.size());
    EXPECT_EQ(p, m_a.failed[0].first);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_a.failed[0].second);
    EXPECT_EQ(1, zc.done);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, zc.status);
    EXPECT_EQ(1, fc.done);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, fc.status);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, send_short(m_a, p, 1, 0, buf));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT,
              aptus_ud_chan_flush(&m_a.chan, p, 0, NULL));
    EXPECT_EQ(1u, m_a.chan.stats.peers_failed);

    /* a new endpoint gets a fresh stream; the peer, alive after all,
     * answers data on the dead stream with a reset */
    m_net.filter        = nullptr;
    aptus_ud_peer_t *p2 = connect(m_a, m_b);
    EXPECT_NE(p, p2);
    EXPECT_NE(p->conn_id, p2->conn_id);
    ASSERT_EQ(UCS_OK, send_short(m_a, p2, 1, 5, buf));
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p2); }));
    ASSERT_FALSE(m_b.rx.empty());
    EXPECT_EQ(1u, m_a.failed.size());
}

TEST_F(ud_chan, endpoint_check_finds_an_idle_dead_peer)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    /* alive: the no-op is acknowledged and delivers nothing */
    ASSERT_EQ(UCS_OK, aptus_ud_chan_check(&m_a.chan, p));
    EXPECT_FALSE(aptus_ud_peer_tx_idle(p));
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    EXPECT_TRUE(m_b.rx.empty());
    EXPECT_EQ(1u, m_a.chan.stats.checks);
    EXPECT_EQ(0u, m_a.chan.stats.tx_msgs);
    /* a message after it is delivered normally */
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 2, 3, pattern(1, 5)));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));

    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));

    /* dead and idle: only the check makes the silence observable */
    m_net.filter = [](const fake_dgram &, const aptus_ud_sr_pkt_t &) {
        return FAKE_DROP;
    };
    fake_net::now += 10 * (uint64_t)m_cfg.rel.peer_timeout_us;
    round();
    EXPECT_TRUE(m_a.failed.empty()); /* idle peers are not judged */
    ASSERT_EQ(UCS_OK, aptus_ud_chan_check(&m_a.chan, p));
    ASSERT_TRUE(run_until([&] { return !m_a.failed.empty(); }));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_a.failed[0].second);
    EXPECT_EQ(UCS_OK, aptus_ud_chan_check(&m_a.chan, p)); /* reported once */
    EXPECT_EQ(1u, m_a.failed.size());
}

TEST_F(ud_chan, forged_and_malformed_datagrams_dropped_and_counted)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 1, pattern(0, 10)));
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));

    auto inject = [&](std::vector<uint8_t> d) {
        m_net.in_flight.push_back(fake_dgram{ m_a.wire->id, m_b.wire->id, d });
        m_net.deliver();
        aptus_ud_chan_progress(&m_b.chan, 0);
    };
    aptus_ud_sr_pkt_t pkt = {};
    pkt.dest_key          = 0xdeadbeef; /* not B's key */
    pkt.src_key           = m_a.key;
    pkt.dest_token        = p->remote_token; /* the stream's incarnation */
    pkt.src_token         = p->local_token;
    pkt.type              = APTUS_UD_SR_TYPE_DATA;
    pkt.flags             = APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST;
    pkt.psn               = 1;
    pkt.ack               = 0;
    std::vector<uint8_t> d(64);
    d.resize(aptus_ud_sr_build(d.data(), &pkt) + 10);
    inject(d);
    EXPECT_EQ(1u, m_b.chan.stats.rx_bad_key);

    inject(std::vector<uint8_t>(7, 0)); /* truncated */
    EXPECT_EQ(1u, m_b.chan.stats.rx_malformed);

    /* right key, acknowledges data B never sent */
    pkt.dest_key = m_b.key;
    pkt.ack      = 500;
    d.resize(64);
    d.resize(aptus_ud_sr_build(d.data(), &pkt) + 10);
    inject(d);
    EXPECT_EQ(1u, m_b.chan.stats.rx_bad_ack);

    /* corrupted payload under CRC */
    pkt.ack = 0;
    pkt.flags |= APTUS_UD_SR_F_CRC;
    pkt.crc = 0x1234;
    d.resize(64);
    d.resize(aptus_ud_sr_build(d.data(), &pkt) + 10);
    inject(d);
    EXPECT_EQ(1u, m_b.chan.stats.rx_bad_crc);

    /* announced message longer than allowed */
    pkt.flags   = APTUS_UD_SR_F_FIRST;
    pkt.msg_len = m_cfg.max_msg + 1;
    d.resize(64);
    d.resize(aptus_ud_sr_build(d.data(), &pkt) + 10);
    inject(d);
    EXPECT_EQ(2u, m_b.chan.stats.rx_malformed);

    EXPECT_EQ(1u, m_b.rx.size()); /* only the genuine message */
    EXPECT_TRUE(m_b.failed.empty());
    /* and the genuine stream still works */
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 2, pattern(0, 10)));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 2; }));
}

TEST_F(ud_chan, async_context_defers_sync_handlers_in_order)
{
    init_both();
    aptus_ud_peer_t *p = open_stream(m_a, m_b);
    m_b.async_busy     = true;
    std::vector<message> sent;
    for (unsigned i = 0; i < 6; ++i) {
        sent.push_back(message{ 1, pattern(i, i * 700) });
        ASSERT_GT(send_bcopy(m_a, p, 1, sent.back().data), -1);
    }
    m_net.deliver();
    aptus_ud_chan_progress(&m_b.chan, 1); /* the async timer */
    EXPECT_TRUE(m_b.rx.empty());
    EXPECT_EQ(6u, m_b.chan.stats.rx_deferred);
    /* acknowledged even though not yet delivered */
    m_net.deliver();
    aptus_ud_chan_progress(&m_a.chan, 0);
    fake_net::now += 1000;
    aptus_ud_chan_progress(&m_b.chan, 1);
    m_net.deliver();
    aptus_ud_chan_progress(&m_a.chan, 0);
    EXPECT_TRUE(aptus_ud_peer_tx_idle(p));

    aptus_ud_chan_progress(&m_b.chan, 0); /* user's progress */
    EXPECT_EQ(sent, m_b.rx);

    /* async-capable handlers run from the timer directly */
    m_b.async_busy = false;
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 2, 9, pattern(1, 1)));
    m_net.deliver();
    aptus_ud_chan_progress(&m_b.chan, 1);
    EXPECT_EQ(7u, m_b.rx.size());
    EXPECT_EQ(1u, m_b.async_delivered);
}

TEST_F(ud_chan, receive_pool_exhaustion_holds_back_then_recovers)
{
    m_cfg.rx_pool  = 32;
    m_cfg.rx_max   = 32; /* the ceiling: no room to grow */
    m_cfg.rx_batch = 4;
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    m_b.keep           = true; /* the user holds every descriptor */
    unsigned n         = 0;
    while (m_b.rx.size() < 40) {
        if (send_bcopy(m_a, p, 1, pattern(n, 50)) > 0) {
            ++n;
        }
        round();
        if (fake_net::now > 60000000) {
            break;
        }
        if ((m_b.kept.size() >= m_cfg.rx_pool) && (m_b.chan.rx_posted == 0)) {
            break;
        }
    }
    /* the pool dried up: nothing more is received */
    EXPECT_EQ(0u, m_b.chan.rx_posted);
    size_t before = m_b.rx.size();
    for (int i = 0; i < 50; ++i) {
        round();
    }
    EXPECT_EQ(before, m_b.rx.size());
    EXPECT_GT(m_b.chan.stats.rx_no_buffer, 0u);
    EXPECT_GT(m_b.chan.stats.rx_pool_exhausted, 0u); /* reported, counted */
    EXPECT_EQ(1, m_b.chan.rx_pool_reported);

    /* the user gives the descriptors back: reception resumes, nothing lost */
    m_b.keep = false;
    for (void *d : m_b.kept) {
        uct_iface_release_desc(d);
    }
    m_b.kept.clear();
    ASSERT_TRUE(run_until(
        [&] { return (m_b.rx.size() == n) && aptus_ud_peer_tx_idle(p); }));
    for (unsigned i = 0; i < n; ++i) {
        EXPECT_EQ(pattern(i, 50), m_b.rx[i].data) << i;
    }
}

TEST_F(ud_chan, destroyed_endpoint_still_delivers_accepted_data)
{
    init_both();
    aptus_ud_peer_t *p = open_stream(m_a, m_b);
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(0, 1);
    m_net.filter = [&](const fake_dgram &, const aptus_ud_sr_pkt_t &) {
        return (u(rng) < 0.3) ? FAKE_DROP : FAKE_PASS;
    };
    std::vector<uint8_t> hdr    = pattern(3, 16);
    std::vector<uint8_t> *buf   = new std::vector<uint8_t>(pattern(4, 9000));
    std::vector<uint8_t> expect = hdr;
    expect.insert(expect.end(), buf->begin(), buf->end());
    test_comp comp;
    init_comp(comp);
    ASSERT_EQ(UCS_INPROGRESS, send_zcopy(m_a, p, 6, hdr, { buf }, &comp));
    ASSERT_GT(send_bcopy(m_a, p, 7, pattern(5, 700)), 0);

    aptus_ud_chan_peer_disconnect(&m_a.chan, p);
    EXPECT_EQ(1, comp.done); /* data copied: the user's buffer is free */
    EXPECT_EQ(UCS_OK, comp.status);
    memset(buf->data(), 0, buf->size());
    delete buf;

    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 2; }));
    EXPECT_EQ(expect, m_b.rx[0].data);
    EXPECT_EQ(pattern(5, 700), m_b.rx[1].data);
}

TEST_F(ud_chan, cancel_flush_resets_the_stream)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 0, pattern(1, 10)));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    aptus_ud_peer_t *pb = connect(m_b, m_a); /* B adopts the same stream */

    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        return (d.from == m_a.wire->id) ? FAKE_HOLD : FAKE_PASS;
    };
    std::vector<uint8_t> hdr = pattern(1, 8), data = pattern(2, 100);
    test_comp comp;
    init_comp(comp);
    ASSERT_EQ(UCS_INPROGRESS, send_zcopy(m_a, p, 1, hdr, { &data }, &comp));
    EXPECT_EQ(UCS_OK,
              aptus_ud_chan_flush(&m_a.chan, p, UCT_FLUSH_FLAG_CANCEL, NULL));
    EXPECT_EQ(1, comp.done);
    EXPECT_EQ(UCS_ERR_CANCELED, comp.status);
    EXPECT_TRUE(m_a.failed.size() <= 1);

    /* the reset tells B; B's endpoint fails instead of waiting */
    m_net.filter = nullptr;
    m_net.held.clear();
    ASSERT_TRUE(run_until([&] { return !m_b.failed.empty(); }));
    EXPECT_EQ(pb, m_b.failed[0].first);
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, m_b.failed[0].second);
}

TEST_F(ud_chan, endpoints_towards_each_other_share_a_stream)
{
    init_both();
    aptus_ud_peer_t *pa = connect(m_a, m_b);
    ASSERT_EQ(UCS_OK, send_short(m_a, pa, 1, 0, pattern(1, 4)));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));
    EXPECT_EQ(1u, aptus_ud_chan_num_peers(&m_b.chan)); /* learned */
    aptus_ud_peer_t *pb = connect(m_b, m_a);
    EXPECT_EQ(1u, aptus_ud_chan_num_peers(&m_b.chan)); /* adopted */
    EXPECT_EQ(pa->conn_id, pb->conn_id);
    /* a second endpoint to the same interface gets its own stream */
    aptus_ud_peer_t *pa2 = connect(m_a, m_b);
    EXPECT_NE(pa, pa2);
    EXPECT_EQ(1, pa2->conn_id);
    ASSERT_EQ(UCS_OK, send_short(m_a, pa2, 2, 0, pattern(2, 4)));
    ASSERT_EQ(UCS_OK, send_short(m_b, pb, 3, 0, pattern(3, 4)));
    ASSERT_TRUE(run_until(
        [&] { return (m_b.rx.size() == 2) && (m_a.rx.size() == 1); }));
    EXPECT_EQ(2u, aptus_ud_chan_num_peers(&m_b.chan));
}

TEST_F(ud_chan, peer_state_is_constant_and_returns_to_idle)
{
    init_both();
    size_t idle_one = 0;
    std::vector<aptus_ud_peer_t *> peers;
    for (unsigned i = 0; i < 1000; ++i) {
        aptus_ud_peer_t *p;
        ASSERT_EQ(UCS_OK,
                  aptus_ud_chan_peer_connect(&m_a.chan, &fake_addr(100000 + i),
                                             0x77777777, 2048, &p));
        peers.push_back(p);
        if (i == 0) {
            idle_one = aptus_ud_chan_peer_bytes(&m_a.chan);
        }
    }
    /* no buffer belongs to a peer: the cost is the struct and its slot in
     * the lookup table, whatever the number of peers (the benchmark reports
     * the figure against its target) */
    size_t bytes = aptus_ud_chan_peer_bytes(&m_a.chan);
    EXPECT_GE(bytes, sizeof(aptus_ud_peer_t));
    EXPECT_LT(bytes, sizeof(aptus_ud_peer_t) + 64);
    EXPECT_LE(bytes, idle_one);

    /* traffic with loss and reordering to a real peer: afterwards its
     * extra state (held packets, reassembly) is gone */
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(0, 1);
    m_net.filter = [&](const fake_dgram &, const aptus_ud_sr_pkt_t &) {
        double r = u(rng);
        return (r < 0.1) ? FAKE_DROP : (r < 0.2) ? FAKE_HOLD : FAKE_PASS;
    };
    aptus_ud_peer_t *p        = connect(m_a, m_b);
    std::vector<message> sent = stream(m_a, p, 200, 16000, 9);
    ASSERT_TRUE(run_until([&] {
        m_net.release_held();
        return (m_b.rx.size() == sent.size()) && aptus_ud_peer_tx_idle(p);
    }));
    EXPECT_EQ(sent, m_b.rx);
    for (int i = 0; i < 20; ++i) {
        round(m_cfg.tick_us);
    }
    EXPECT_EQ(nullptr, p->ext);
    aptus_ud_peer_t *bp = connect(m_b, m_a);
    EXPECT_EQ(nullptr, bp->ext);
    EXPECT_EQ(0u, ucs_array_length(&m_b.chan.active));
}
TEST_F(ud_chan, heavy_loss_repaired_without_timeouts)
{
    /* 30% of all datagrams lost, both ways, probes and replies included:
     * selective ACKs and repeated tail probes repair everything; the
     * timeout (and its backoff) is not needed, and the RTT estimate stays
     * the round trip, not the time packets waited behind holes. */
    m_cfg.rel.rto_min_us  = 20000;
    m_cfg.rel.rto_init_us = 20000;
    m_cfg.rel.rto_max_us  = 500000;
    init_both();
    aptus_ud_peer_t *pa = connect(m_a, m_b);
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(0, 1);
    m_net.filter = [&](const fake_dgram &, const aptus_ud_sr_pkt_t &) {
        return (u(rng) < 0.3) ? FAKE_DROP : FAKE_PASS;
    };
    uint64_t start            = fake_net::now;
    std::vector<message> sent = stream(m_a, pa, 200, 16000, 3);
    ASSERT_TRUE(run_until([&] {
        return (m_b.rx.size() == sent.size()) && aptus_ud_peer_tx_idle(pa);
    }));
    EXPECT_EQ(sent, m_b.rx);
    uint64_t took = fake_net::now - start;
    EXPECT_LT(took, 200 * m_cfg.rel.rto_min_us / 10) << "simulated usec";
    EXPECT_LT(aptus_ud_peer_srtt_us(pa), 10 * m_cfg.tick_us);
    EXPECT_LE(m_a.chan.stats.tx_retransmits, 10u);
    EXPECT_GT(m_a.chan.stats.tx_fast_retransmits, 50u);
    EXPECT_GT(m_a.chan.stats.tx_probes, 0u);
}

/* A window of 1024 datagrams: a burst far past the old 64 goes out at
 * once, losses far apart are reported in one selective ACK of many words,
 * and everything arrives once and in order. */
TEST_F(ud_chan, window_of_1024_with_multiword_sack)
{
    m_cfg.rel.tx_window = APTUS_REL_TX_WINDOW_MAX;
    init_both();
    aptus_ud_peer_t *pa = open_stream(m_a, m_b);
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(0, 1);
    unsigned most_words = 0, data_seen = 0;
    m_net.filter = [&](const fake_dgram &, const aptus_ud_sr_pkt_t &pkt) {
        if ((pkt.type == APTUS_UD_SR_TYPE_ACK) &&
            (pkt.flags & APTUS_UD_SR_F_SACK)) {
            most_words = std::max(most_words, (unsigned)pkt.sack_words);
        }
        if (pkt.type != APTUS_UD_SR_TYPE_DATA) {
            return FAKE_PASS;
        }
        /* the first datagram and then 1 in 100 are lost */
        return ((data_seen++ == 0) || (u(rng) < 0.01)) ? FAKE_DROP : FAKE_PASS;
    };
    std::vector<message> sent;
    for (unsigned i = 0; i < 1000; ++i) {
        message m{ (uint8_t)(i % 30), pattern(i, 64 + i % 100) };
        ASSERT_EQ((ssize_t)m.data.size(), send_bcopy(m_a, pa, m.am_id, m.data))
            << i;
        sent.push_back(m);
    }
    EXPECT_EQ(1000u, aptus_rel_tx_inflight(&pa->win->tx));
    ASSERT_TRUE(run_until([&] {
        return (m_b.rx.size() == sent.size()) && aptus_ud_peer_tx_idle(pa);
    }));
    EXPECT_EQ(sent, m_b.rx);
    EXPECT_GT(most_words, 8u); /* holes far below the highest held */
    EXPECT_GT(m_b.chan.stats.rx_held, 900u);
    EXPECT_EQ(0u, m_b.chan.stats.rx_out_of_window);
    EXPECT_EQ(nullptr, pa->ext);
}

/* A window larger than the receive pool: datagrams held past a hole stop
 * short of the pool's ceiling, so the hole itself can still be received
 * (with no room left for it, the held ones would wait for ever). */
TEST_F(ud_chan, held_datagrams_leave_room_to_receive_the_hole)
{
    m_cfg.rel.tx_window = APTUS_REL_TX_WINDOW_MAX;
    m_cfg.rx_pool       = 64;
    m_cfg.rx_max        = 256;
    init_both();
    aptus_ud_peer_t *pa = open_stream(m_a, m_b);
    bool first          = true;
    m_net.filter = [&](const fake_dgram &, const aptus_ud_sr_pkt_t &pkt) {
        if (first && (pkt.type == APTUS_UD_SR_TYPE_DATA)) {
            first = false;
            return FAKE_DROP;
        }
        return FAKE_PASS;
    };
    std::vector<message> sent;
    for (unsigned i = 0; i < 800; ++i) {
        message m{ 1, pattern(i, 32) };
        ASSERT_EQ((ssize_t)m.data.size(), send_bcopy(m_a, pa, 1, m.data));
        sent.push_back(m);
    }
    ASSERT_TRUE(run_until([&] {
        return (m_b.rx.size() == sent.size()) && aptus_ud_peer_tx_idle(pa);
    }));
    EXPECT_EQ(sent, m_b.rx);
    EXPECT_GT(m_b.chan.stats.rx_hold_limit, 0u);
    EXPECT_LE(m_b.chan.stats.rx_held, 800u);
    EXPECT_EQ(0u, m_b.chan.rx_held);
}

TEST_F(ud_chan, receive_pool_grows_while_the_user_holds_descriptors)
{
    m_cfg.rx_pool  = 32;
    m_cfg.rx_max   = 100000;
    m_cfg.rx_batch = 4;
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    m_b.keep           = true;
    const unsigned n   = 2000; /* far beyond one allocation of the pool */
    unsigned sent      = 0;
    ASSERT_TRUE(run_until([&] {
        while ((sent < n) &&
               (send_short(m_a, p, 1, sent, pattern(sent, 4)) == UCS_OK)) {
            ++sent;
        }
        return (m_b.rx.size() == n) && aptus_ud_peer_tx_idle(p);
    }));
    EXPECT_EQ(n, m_b.kept.size());
    EXPECT_EQ(0u, m_b.chan.stats.rx_pool_exhausted);
    EXPECT_EQ(0, m_b.chan.rx_pool_reported);
    EXPECT_TRUE(m_a.failed.empty());
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(8u + 4u, m_b.rx[i].data.size());
        uint64_t hdr;
        memcpy(&hdr, m_b.rx[i].data.data(), sizeof(hdr));
        ASSERT_EQ(i, hdr);
    }
}

TEST_F(ud_chan, deferred_delivery_is_bounded_per_progress_call)
{
    m_cfg.rx_budget = 5;
    init_both();
    aptus_ud_peer_t *p = open_stream(m_a, m_b);
    m_b.async_busy     = true;
    std::vector<message> sent;
    for (unsigned i = 0; i < 23; ++i) {
        sent.push_back(message{ 1, pattern(i, 10 + i) });
        ASSERT_GT(send_bcopy(m_a, p, 1, sent.back().data), 0);
    }
    for (int i = 0; i < 4; ++i) { /* RX_BATCH datagrams per call */
        m_net.deliver();
        aptus_ud_chan_progress(&m_b.chan, 1); /* all deferred from async */
    }
    EXPECT_TRUE(m_b.rx.empty());
    EXPECT_EQ(23u, m_b.chan.stats.rx_deferred);

    /* each user progress call hands over at most the budget, in order */
    size_t before = 0;
    while (m_b.rx.size() < sent.size()) {
        unsigned count = aptus_ud_chan_progress(&m_b.chan, 0);
        EXPECT_GT(count, 0u);
        EXPECT_EQ(std::min<size_t>(before + 5, sent.size()), m_b.rx.size());
        before = m_b.rx.size();
    }
    EXPECT_EQ(sent, m_b.rx);

    /* new messages wait behind the queue too, and still all arrive */
    m_b.async_busy = false;
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    for (unsigned i = 0; i < 12; ++i) {
        sent.push_back(message{ 2, pattern(100 + i, 30) });
        ASSERT_GT(send_bcopy(m_a, p, 2, sent.back().data), 0);
    }
    m_b.async_busy = true;
    m_net.deliver();
    aptus_ud_chan_progress(&m_b.chan, 1);
    m_b.async_busy = false;
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == sent.size(); }));
    EXPECT_EQ(sent, m_b.rx);
}

TEST_F(ud_chan, failed_streams_are_reclaimed_beyond_255)
{
    init_both();
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        /* A's data never arrives: every stream dies by its own cancel */
        return (d.from == m_a.wire->id) ? FAKE_DROP : FAKE_PASS;
    };
    for (unsigned i = 0; i < 300; ++i) {
        aptus_ud_peer_t *p = connect(m_a, m_b);
        ASSERT_NE(nullptr, p) << i;
        EXPECT_EQ(0, p->conn_id) << i; /* the dead one's number is free */
        ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, i, pattern(i, 8)));
        ASSERT_EQ(UCS_OK, aptus_ud_chan_flush(&m_a.chan, p,
                                              UCT_FLUSH_FLAG_CANCEL, NULL));
        ASSERT_TRUE(aptus_ud_peer_is_failed(p));
        aptus_ud_chan_peer_disconnect(&m_a.chan, p);
        round();
        EXPECT_EQ(0u, aptus_ud_chan_num_peers(&m_a.chan)) << i;
    }
    EXPECT_EQ(300u, m_a.chan.stats.peers_failed);
    EXPECT_EQ(300u, m_a.chan.stats.peers_reclaimed);
    EXPECT_EQ(0u, ucs_array_length(&m_a.chan.dead));

    /* a new endpoint to the same interface works */
    m_net.filter       = nullptr;
    aptus_ud_peer_t *p = connect(m_a, m_b);
    ASSERT_NE(nullptr, p);
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 7, pattern(1, 8)));
    ASSERT_TRUE(run_until(
        [&] { return (m_b.rx.size() == 1) && aptus_ud_peer_tx_idle(p); }));
    EXPECT_EQ(1u, aptus_ud_chan_num_peers(&m_a.chan));
}

TEST_F(ud_chan, more_than_255_streams_to_one_interface)
{
    init_both();
    std::vector<aptus_ud_peer_t *> peers;
    for (unsigned i = 0; i < 600; ++i) {
        peers.push_back(connect(m_a, m_b));
        ASSERT_NE(nullptr, peers.back());
        EXPECT_EQ(i, peers.back()->conn_id);
        ASSERT_EQ(UCS_OK, send_short(m_a, peers.back(), 1, i, pattern(i, 4)));
        if (i % 50 == 0) {
            round();
        }
    }
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == peers.size(); }));
    EXPECT_EQ(600u, aptus_ud_chan_num_peers(&m_b.chan));
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
}

/* An outsider captures every datagram of a stream from its opening on and
 * sends them again, byte for byte: from another address, and later from
 * the stream's own address, while the stream lives and after the receiver
 * dropped it. Nothing reaches the user twice, and the stream goes on. */
TEST_F(ud_chan, replayed_datagrams_deliver_nothing)
{
    init_both();
    std::vector<fake_dgram> captured;
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        if (d.from == m_a.wire->id) {
            captured.push_back(d);
        }
        return FAKE_PASS;
    };
    aptus_ud_peer_t *pa       = connect(m_a, m_b);
    std::vector<message> sent = stream(m_a, pa, 8, 3000, 3);
    ASSERT_TRUE(run_until([&] {
        return (m_b.rx.size() == sent.size()) && aptus_ud_peer_tx_idle(pa);
    }));
    m_net.filter = nullptr;
    ASSERT_EQ(sent, m_b.rx);
    size_t opening = 0;
    for (auto &d : captured) {
        aptus_ud_sr_pkt_t pkt;
        ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
                  aptus_ud_sr_parse(d.data.data(), d.data.size(), 0, &pkt));
        opening += (pkt.dest_token == 0);
    }
    EXPECT_GT(opening, 0u); /* the capture holds the opening */

    auto replay = [&](unsigned from) {
        for (auto d : captured) {
            d.from = from;
            m_net.in_flight.push_back(d);
        }
        for (unsigned i = 0; i < 20; ++i) {
            round(1000);
        }
    };
    fake_wire *outsider = m_net.create(1024);
    uint64_t stale      = m_b.chan.stats.rx_stale;
    replay(outsider->id); /* from another socket */
    replay(m_a.wire->id); /* later, from the stream's own address */
    EXPECT_EQ(sent, m_b.rx);
    EXPECT_GT(m_b.chan.stats.rx_stale, stale);
    EXPECT_TRUE(m_a.failed.empty());

    /* the stream goes on */
    std::vector<message> more = stream(m_a, pa, 4, 3000, 4);
    sent.insert(sent.end(), more.begin(), more.end());
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == sent.size(); }));
    EXPECT_EQ(sent, m_b.rx);

    /* B's side of the stream dies and is reclaimed: the replay of its
     * opening opens an unconfirmed stream at most, never delivers */
    aptus_ud_peer_t *pb = aptus_ud_chan_peer_lookup(
        &m_b.chan, &m_a.wire->super.addr, m_a.key, pa->conn_id);
    ASSERT_NE(nullptr, pb);
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        return (d.from == m_b.wire->id) ? FAKE_DROP : FAKE_PASS;
    };
    aptus_ud_chan_peer_invalidate(&m_b.chan, pb);
    round();
    m_net.filter = nullptr;
    replay(m_a.wire->id);
    EXPECT_EQ(sent, m_b.rx);
    EXPECT_TRUE(outsider->inbox.size() > 0); /* answered, to the sender */
    /* what the campaign reports */
    printf("replay: replayed=%zu delivered_wrongly=%zu stale=%lu "
           "opened_unconfirmed=%lu\n",
           captured.size() * 3, m_b.rx.size() - sent.size(),
           (unsigned long)m_b.chan.stats.rx_stale,
           (unsigned long)m_b.chan.stats.rx_opening);
    outsider->super.ops->close(&outsider->super);
}

/* Openings flood in, each with its own stream number, from one address and
 * from many: what they cost stays within the fixed bounds, counted, and a
 * genuine peer still opens a stream afterwards. */
TEST_F(ud_chan, flood_of_openings_stays_bounded)
{
    init_both();
    auto opening = [&](unsigned from, unsigned conn) {
        aptus_ud_sr_pkt_t pkt = {};
        pkt.dest_key          = m_b.key;
        pkt.src_key           = 0x5151;
        pkt.src_token         = 0x1000 + conn;
        pkt.type              = APTUS_UD_SR_TYPE_DATA;
        pkt.flags =
            APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_OPEN;
        pkt.conn_id = (uint16_t)conn;
        std::vector<uint8_t> d(APTUS_UD_SR_HDR_MAX_LEN + 16);
        d.resize(aptus_ud_sr_build(d.data(), &pkt) + 16);
        m_net.in_flight.push_back(fake_dgram{ from, m_b.wire->id, d });
    };
    auto drain = [&]() {
        while (!m_net.in_flight.empty()) {
            m_net.deliver();
            aptus_ud_chan_progress(&m_b.chan, 0);
        }
    };
    /* one address: at most APTUS_UD_OPENING_PER_ADDR unconfirmed */
    fake_wire *one = m_net.create(1024);
    for (unsigned c = 0; c < 3000; ++c) {
        opening(one->id, c);
        if (c % 16 == 15) {
            drain();
        }
    }
    drain();
    EXPECT_EQ((unsigned)APTUS_UD_OPENING_PER_ADDR,
              aptus_ud_chan_num_peers(&m_b.chan));
    EXPECT_EQ(3000u - APTUS_UD_OPENING_PER_ADDR, m_b.chan.stats.open_refused);

    /* many addresses: at most APTUS_UD_OPENING_MAX, the oldest dropped */
    std::vector<fake_wire *> many;
    const unsigned num_many = (APTUS_UD_OPENING_MAX / 800) + 1;
    for (unsigned w = 0; w < num_many; ++w) {
        many.push_back(m_net.create(1024));
        for (unsigned c = 0; c < 800; ++c) {
            opening(many.back()->id, c);
            if (c % 16 == 15) {
                drain();
            }
        }
    }
    drain();
    EXPECT_LE(aptus_ud_chan_num_peers(&m_b.chan),
              (unsigned)APTUS_UD_OPENING_MAX);
    EXPECT_EQ(1024u + num_many * 800u - APTUS_UD_OPENING_MAX,
              m_b.chan.stats.open_evicted);
    printf("flood: openings=%u delivered=%zu refused=%lu evicted=%lu "
           "streams_kept=%u peer_bytes=%zu\n",
           3000u + num_many * 800u, m_b.rx.size(),
           (unsigned long)m_b.chan.stats.open_refused,
           (unsigned long)m_b.chan.stats.open_evicted,
           aptus_ud_chan_num_peers(&m_b.chan),
           aptus_ud_chan_peer_bytes(&m_b.chan));
    EXPECT_TRUE(m_b.rx.empty());
    /* evicted streams fail quietly (nobody's endpoint: the transport says
     * nothing) */
    EXPECT_EQ(m_b.chan.stats.open_evicted, m_b.failed.size());
    aptus_ud_chan_reclaim(&m_b.chan);
    EXPECT_LE(ucs_array_length(&m_b.chan.dead), 0u);

    /* a genuine peer opens a stream and is heard */
    aptus_ud_peer_t *pa = connect(m_a, m_b);
    ASSERT_EQ(UCS_OK, send_short(m_a, pa, 1, 7, pattern(7, 8)));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));
    EXPECT_TRUE(m_a.failed.empty());
    for (fake_wire *w : many) {
        w->super.ops->close(&w->super);
    }
    one->super.ops->close(&one->super);
}

/* One side's stream fails and its reset is lost; the stream number is used
 * again at once by a new endpoint. The other side learns at the new
 * opening that its incarnation is gone (it asks, the new one answers with a
 * reset), so the new stream carries data long before any timeout. */
TEST_F(ud_chan, lost_reset_and_reused_stream_number_agree_at_once)
{
    m_cfg.rel.peer_timeout_us = 5000000;
    init_both();
    aptus_ud_peer_t *pa = open_stream(m_a, m_b);
    ASSERT_EQ(UCS_OK, send_short(m_a, pa, 1, 1, pattern(1, 8)));
    ASSERT_TRUE(run_until(
        [&] { return (m_b.rx.size() == 1) && aptus_ud_peer_tx_idle(pa); }));
    uint16_t conn = pa->conn_id;

    /* A's side dies alone: its reset never arrives */
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        return (d.from == m_a.wire->id) ? FAKE_DROP : FAKE_PASS;
    };
    aptus_ud_chan_peer_invalidate(&m_a.chan, pa);
    aptus_ud_chan_peer_disconnect(&m_a.chan, pa);
    round();
    aptus_ud_chan_reclaim(&m_a.chan);
    m_net.filter = nullptr;
    EXPECT_EQ(0u, aptus_ud_chan_num_peers(&m_a.chan));

    /* the number again, a new incarnation, data at once */
    uint64_t start       = fake_net::now;
    aptus_ud_peer_t *pa2 = connect(m_a, m_b);
    ASSERT_EQ(conn, pa2->conn_id);
    ASSERT_EQ(UCS_OK, send_short(m_a, pa2, 1, 2, pattern(2, 8)));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 2; }));
    EXPECT_LT(fake_net::now - start, m_cfg.rel.peer_timeout_us / 10);
    std::vector<uint8_t> tail(m_b.rx[1].data.end() - 8, m_b.rx[1].data.end());
    EXPECT_EQ(pattern(2, 8), tail);
    EXPECT_GT(m_b.chan.stats.rx_challenges, 0u);
    EXPECT_EQ(1u, m_b.chan.stats.peers_failed); /* the old incarnation */
}

TEST_F(ud_chan, stale_datagram_of_a_reclaimed_stream_is_reset_not_adopted)
{
    init_both();
    aptus_ud_peer_t *pa = open_stream(m_a, m_b);
    /* a few messages: A's next PSN is well inside the first window, so
     * only the OPEN flag (A has heard from B) tells B the stream is old */
    for (unsigned i = 0; i < 5; ++i) {
        ASSERT_EQ(UCS_OK, send_short(m_a, pa, 1, i, pattern(i, 4)));
    }
    ASSERT_TRUE(run_until(
        [&] { return (m_b.rx.size() == 5) && aptus_ud_peer_tx_idle(pa); }));
    /* B's side of the stream dies alone (its reset is lost) and goes */
    aptus_ud_peer_t *pb = connect(m_b, m_a);
    ASSERT_EQ(pa->conn_id, pb->conn_id);
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        return (d.from == m_b.wire->id) ? FAKE_DROP : FAKE_PASS;
    };
    ASSERT_EQ(UCS_OK, send_short(m_b, pb, 1, 0, pattern(0, 4)));
    ASSERT_EQ(UCS_OK,
              aptus_ud_chan_flush(&m_b.chan, pb, UCT_FLUSH_FLAG_CANCEL, NULL));
    aptus_ud_chan_peer_disconnect(&m_b.chan, pb);
    round();
    EXPECT_EQ(0u, aptus_ud_chan_num_peers(&m_b.chan));
    m_net.filter = nullptr;

    /* A still sends on its stream: B neither delivers nor learns it, and
     * tells A that the stream is dead */
    ASSERT_EQ(UCS_OK, send_short(m_a, pa, 1, 100, pattern(100, 4)));
    ASSERT_TRUE(run_until([&] { return !m_a.failed.empty(); }));
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, m_a.failed[0].second);
    EXPECT_EQ(5u, m_b.rx.size());
    EXPECT_EQ(0u, aptus_ud_chan_num_peers(&m_b.chan));
    EXPECT_GT(m_b.chan.stats.rx_dead_stream, 0u);
}

TEST_F(ud_chan, endpoint_destroy_cancels_its_flushes)
{
    init_both();
    aptus_ud_peer_t *p = connect(m_a, m_b);
    m_net.filter       = [&](const fake_dgram &, const aptus_ud_sr_pkt_t &) {
        return FAKE_DROP;
    };
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 0, pattern(1, 8)));
    test_comp fc;
    init_comp(fc);
    ASSERT_EQ(UCS_INPROGRESS, aptus_ud_chan_flush(&m_a.chan, p, 0, &fc.super));
    aptus_ud_chan_peer_disconnect(&m_a.chan, p);
    EXPECT_EQ(1, fc.done); /* before the endpoint is gone */
    EXPECT_EQ(UCS_ERR_CANCELED, fc.status);
    EXPECT_EQ(0u, ucs_array_length(&m_a.chan.dead));
    /* the data still goes (or fails) without touching the request */
    m_net.filter = nullptr;
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));
    EXPECT_EQ(1, fc.done);
}

/* Issue: reassembly buffers came from an unbounded pool, so peers could pin
 * memory by starting messages of several datagrams. At MAX_REASM a first
 * fragment is refused before the window takes it and its sender
 * retransmits: every message still arrives whole and nothing fails. */
TEST_F(ud_chan, reassembly_is_bounded_and_refused_fragments_retransmitted)
{
    m_cfg.max_reasm = 2;
    init_both();
    std::vector<aptus_ud_peer_t *> peers;
    std::vector<std::vector<uint8_t>> sent;
    for (unsigned i = 0; i < 6; ++i) {
        peers.push_back(open_stream(m_a, m_b));
        ASSERT_NE(nullptr, peers.back());
    }
    /* all six start at once: each is three datagrams */
    for (unsigned i = 0; i < peers.size(); ++i) {
        sent.push_back(pattern(100 + i, 2500 + i));
        ASSERT_EQ((ssize_t)sent.back().size(),
                  send_bcopy(m_a, peers[i], (uint8_t)i, sent.back()));
    }
    /* the datagrams of the six arrive interleaved: every first fragment,
     * then every second, then every third */
    ASSERT_EQ(18u, m_net.in_flight.size());
    std::deque<fake_dgram> interleaved;
    for (unsigned f = 0; f < 3; ++f) {
        for (unsigned i = 0; i < 6; ++i) {
            interleaved.push_back(m_net.in_flight[i * 3 + f]);
        }
    }
    m_net.in_flight = interleaved;
    unsigned peak   = 0;
    ASSERT_TRUE(run_until([&] {
        peak = std::max(peak, m_b.chan.reasm_active);
        return m_b.rx.size() == peers.size();
    }));
    EXPECT_LE(peak, 2u);
    EXPECT_GT(m_b.chan.stats.rx_reasm_limit, 0u);
    EXPECT_EQ(0u, m_b.chan.reasm_active);
    for (unsigned i = 0; i < peers.size(); ++i) {
        bool found = false;
        for (const message &m : m_b.rx) {
            found |= (m.am_id == i) && (m.data == sent[i]);
        }
        EXPECT_TRUE(found) << "message " << i;
    }
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
}

/* Forged first fragments that never finish cannot hold more than
 * MAX_REASM buffers, and what a dead stream reserved comes back. */
TEST_F(ud_chan, unfinished_messages_of_strangers_hold_at_most_max_reasm)
{
    m_cfg.max_reasm = 4;
    init_both();
    auto inject = [&](const aptus_ud_sr_pkt_t &pkt) {
        size_t payload = (pkt.type == APTUS_UD_SR_TYPE_DATA) ? 100 : 0;
        std::vector<uint8_t> d(APTUS_UD_SR_HDR_MAX_LEN + payload);
        d.resize(aptus_ud_sr_build(d.data(), &pkt) + payload);
        m_net.in_flight.push_back(fake_dgram{ m_a.wire->id, m_b.wire->id, d });
        m_net.deliver();
        aptus_ud_chan_progress(&m_b.chan, 0);
    };
    /* strangers that complete the handshake (they read B's answer), so
     * that their first fragments reach the reassembly */
    aptus_ud_sr_pkt_t pkt = {};
    pkt.dest_key          = m_b.key;
    pkt.type              = APTUS_UD_SR_TYPE_DATA;
    pkt.msg_len           = 8000;
    for (unsigned i = 0; i < 50; ++i) {
        pkt.src_key    = 0x5000 + i;
        pkt.conn_id    = i;
        pkt.src_token  = 0x7000 + i;
        pkt.dest_token = 0;
        pkt.flags      = APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_OPEN;
        inject(pkt);
        aptus_ud_peer_t *pb = aptus_ud_chan_peer_lookup(
            &m_b.chan, &m_a.wire->super.addr, pkt.src_key, pkt.conn_id);
        ASSERT_NE(nullptr, pb);
        pkt.dest_token = pb->local_token;
        pkt.flags      = APTUS_UD_SR_F_FIRST;
        inject(pkt);
        /* and a held first fragment further on each stream */
        pkt.psn = 3;
        inject(pkt);
        pkt.psn = 0;
    }
    EXPECT_EQ(4u, m_b.chan.reasm_active);
    EXPECT_EQ(96u, m_b.chan.stats.rx_reasm_limit);
    EXPECT_EQ(50u, m_b.chan.stats.rx_opening);
    EXPECT_TRUE(m_b.rx.empty());

    /* the strangers' streams die: their reservations come back */
    pkt.type  = APTUS_UD_SR_TYPE_RESET;
    pkt.flags = 0;
    for (unsigned i = 0; i < 50; ++i) {
        pkt.src_key         = 0x5000 + i;
        pkt.conn_id         = i;
        pkt.src_token       = 0x7000 + i;
        aptus_ud_peer_t *pb = aptus_ud_chan_peer_lookup(
            &m_b.chan, &m_a.wire->super.addr, pkt.src_key, pkt.conn_id);
        ASSERT_NE(nullptr, pb);
        pkt.dest_token = pb->local_token;
        inject(pkt);
    }
    EXPECT_EQ(0u, m_b.chan.reasm_active);
    aptus_ud_peer_t *p = connect(m_a, m_b);
    ASSERT_EQ(5000, send_bcopy(m_a, p, 3, pattern(5, 5000)));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));
    EXPECT_EQ(pattern(5, 5000), m_b.rx[0].data);
}

/* Issue: a lost datagram waited for the timer tick (and a probe no earlier
 * than two ticks). The probe goes two smoothed RTTs after the data, checked
 * at every progress call, so a loss in a ping-pong costs about two round
 * trips more, far less than a tick; repeats of an unanswered probe still
 * wait at least probe_repeat_us. */
TEST_F(ud_chan, lost_datagram_recovered_within_round_trips_not_ticks)
{
    m_cfg.tick_us             = 200;
    m_cfg.rel.probe_min_us    = 20;
    m_cfg.rel.probe_repeat_us = 400;
    m_cfg.rel.rto_min_us      = 50000;
    m_cfg.rel.rto_init_us     = 50000;
    init_both();
    aptus_ud_peer_t *p  = connect(m_a, m_b);
    auto fine_run_until = [&](std::function<bool()> pred) {
        return fake_run_until(
            pred, [this] { round(5); }, 1000000);
    };
    for (unsigned i = 0; i < 20; ++i) { /* ping-pong: RTTs of ~10 us */
        ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, i, pattern(i, 10)));
        ASSERT_TRUE(fine_run_until([&] { return m_b.rx.size() == i + 1; }));
        aptus_ud_peer_t *q = ucs_array_elem(&m_b.chan.active, 0);
        ASSERT_EQ(UCS_OK, send_short(m_b, q, 1, i, pattern(i, 10)));
        ASSERT_TRUE(fine_run_until([&] { return m_a.rx.size() == i + 1; }));
    }
    ASSERT_GT(aptus_ud_peer_srtt_us(p), 0u);
    ASSERT_LT(aptus_ud_peer_srtt_us(p), 50u);

    int dropped  = 0;
    m_net.filter = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &pkt) {
        if (!dropped && (d.from == m_a.wire->id) &&
            (pkt.type == APTUS_UD_SR_TYPE_DATA)) {
            dropped = 1;
            return FAKE_DROP;
        }
        return FAKE_PASS;
    };
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, 99, pattern(99, 10)));
    uint64_t start = fake_net::now;
    ASSERT_TRUE(fine_run_until([&] { return m_b.rx.size() == 21; }));
    EXPECT_EQ(1, dropped);
    EXPECT_LT(fake_net::now - start, m_cfg.tick_us)
        << "srtt " << aptus_ud_peer_srtt_us(p);
    EXPECT_GE(m_a.chan.stats.tx_probes, 1u);
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits);
}

/* Path MTU: a peer's datagrams are the smaller of the two ends' sizes, and
 * only once a probe of that size crossed; a size the path drops (a switch
 * with a smaller MTU than both ends, which says nothing) is given up for
 * Ethernet's, and no message is lost on the way. */
class ud_chan_path : public ud_chan
{
  public:
    void init_path(size_t mtu_a, size_t mtu_b)
    {
        init(m_a, 0xaaaa0001, mtu_a);
        init(m_b, 0xbbbb0002, mtu_b);
        m_a.wire->super.flags = 0; /* a link, not a loopback device */
        m_b.wire->super.flags = 0;
    }

    /* The network: nothing above path_max bytes crosses, nor anything
     * larger than the receiver takes; the largest that crossed is kept. */
    void filter(size_t path_max)
    {
        m_net.filter = [this, path_max](const fake_dgram &d,
                                        const aptus_ud_sr_pkt_t &) {
            auto it = m_net.wires.find(d.to);
            size_t rx_mtu =
                (it != m_net.wires.end()) ? it->second->super.mtu : SIZE_MAX;
            if ((d.data.size() > path_max) || (d.data.size() > rx_mtu)) {
                ++m_dropped_large;
                return FAKE_DROP;
            }
            if (d.from == m_a.wire->id) {
                m_largest_a = std::max(m_largest_a, d.data.size());
            }
            return FAKE_PASS;
        };
    }

    void send_and_check(aptus_ud_peer_t *p, unsigned n, size_t len)
    {
        std::vector<message> sent;
        for (unsigned i = 0; i < n; ++i) {
            message m{ (uint8_t)(i % 30), pattern(i, len + i) };
            while (send_bcopy(m_a, p, m.am_id, m.data) == UCS_ERR_NO_RESOURCE) {
                round();
            }
            sent.push_back(m);
        }
        ASSERT_TRUE(run_until([&] { return m_b.rx.size() == sent.size(); }));
        EXPECT_EQ(sent, m_b.rx);
        EXPECT_TRUE(m_a.failed.empty());
    }

    size_t m_largest_a       = 0;
    unsigned m_dropped_large = 0;
};

TEST_F(ud_chan_path, mixed_mtus_use_the_smaller_end)
{
    init_path(8952, 1452);
    filter(SIZE_MAX);
    aptus_ud_peer_t *p = connect(m_a, m_b);
    connect(m_b, m_a);
    /* until the probe is answered, a size every link takes */
    EXPECT_EQ(APTUS_UD_PATH_BASE, aptus_ud_peer_mtu(&m_a.chan, p));

    send_and_check(p, 40, 6000);
    EXPECT_EQ(1452u, aptus_ud_peer_mtu(&m_a.chan, p));
    EXPECT_LE(m_largest_a, 1452u);
    EXPECT_EQ(0u, m_dropped_large);
    EXPECT_EQ(1u, m_a.chan.stats.path_raised);
    EXPECT_EQ(0u, m_a.chan.stats.path_lost);
    EXPECT_GE(m_b.chan.stats.path_replies, 1u);

    /* a short message of the sender's own size is split for this peer */
    std::vector<uint8_t> big =
        pattern(7, aptus_ud_chan_max_short(&m_a.chan) - 8);
    m_b.rx.clear();
    ASSERT_EQ(UCS_OK, send_short(m_a, p, 5, 0x1122334455667788ull, big));
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() == 1; }));
    EXPECT_EQ(big.size() + 8, m_b.rx[0].data.size());
    EXPECT_EQ(big, std::vector<uint8_t>(m_b.rx[0].data.begin() + 8,
                                        m_b.rx[0].data.end()));
}

TEST_F(ud_chan_path, both_jumbo_path_drops_large_falls_back)
{
    init_path(8952, 8952);
    filter(1500); /* a switch at 1500 between two 9000-byte devices */
    aptus_ud_peer_t *p = connect(m_a, m_b);
    connect(m_b, m_a);

    send_and_check(p, 60, 7000); /* sent at once, while probes are lost */
    ASSERT_TRUE(run_until([&] { return m_a.chan.stats.path_raised == 1; }));
    EXPECT_EQ((size_t)APTUS_UD_PATH_ETHERNET, aptus_ud_peer_mtu(&m_a.chan, p));
    EXPECT_EQ(1u, m_a.chan.stats.path_lost);
    EXPECT_EQ((uint64_t)APTUS_UD_PATH_TRIES + 1, m_a.chan.stats.path_probes);
    /* only the probes of the jumbo size were lost */
    EXPECT_EQ((unsigned)APTUS_UD_PATH_TRIES * 2, m_dropped_large);
    m_b.rx.clear();
    send_and_check(p, 20, 7000);
    EXPECT_LE(m_largest_a, (size_t)APTUS_UD_PATH_ETHERNET);
}

TEST_F(ud_chan_path, unanswered_probe_is_retried_then_kept_small)
{
    init_path(1452, 1452);
    m_net.filter = [](const fake_dgram &d, const aptus_ud_sr_pkt_t &) {
        return (d.data.size() > APTUS_UD_PATH_BASE) ? FAKE_DROP : FAKE_PASS;
    };
    aptus_ud_peer_t *p = connect(m_a, m_b);
    connect(m_b, m_a);
    send_and_check(p, 10, 3000);
    ASSERT_TRUE(run_until([&] { return m_a.chan.stats.path_lost == 1; }));
    EXPECT_EQ((size_t)APTUS_UD_PATH_BASE, aptus_ud_peer_mtu(&m_a.chan, p));
    EXPECT_EQ((uint64_t)APTUS_UD_PATH_TRIES, m_a.chan.stats.path_probes);
    /* the search is over: the peer falls idle and its extra state goes */
    ASSERT_TRUE(run_until([&] { return p->ext == nullptr; }));
}

TEST_F(ud_chan_path, stale_or_forged_answers_raise_nothing)
{
    init_path(8952, 8952);
    filter(1500);
    aptus_ud_peer_t *p = connect(m_a, m_b);
    /* an answer for a size nobody probes, from the right peer */
    aptus_ud_sr_pkt_t probe = {};
    probe.src_key           = m_a.key;
    probe.conn_id           = p->conn_id;
    probe.src_token         = p->local_token;
    probe.psn               = 4000;
    aptus_ud_tx_path_reply(&m_b.chan, &m_a.wire->super.addr, &probe);
    /* an answer for the probed size, keys right, from another address */
    aptus_ud_chan_t *a = &m_a.chan;
    fake_wire *other   = m_net.create(8952);
    uint8_t hdr[APTUS_UD_SR_HDR_LEN];
    aptus_ud_sr_pkt_t pkt;
    memset(&pkt, 0, sizeof(pkt));
    pkt.dest_key        = m_a.key;
    pkt.src_key         = m_b.key;
    pkt.psn             = 8952;
    pkt.type            = APTUS_UD_SR_TYPE_ACK;
    pkt.flags           = APTUS_UD_SR_F_PATH | APTUS_UD_SR_F_REPLY;
    pkt.conn_id         = p->conn_id;
    pkt.dest_token      = p->local_token;
    struct iovec iov    = { hdr, aptus_ud_sr_build(hdr, &pkt) };
    aptus_dgram_tx_t tx = { &m_a.wire->super.addr, &iov, 1 };
    unsigned sent;
    other->super.ops->send(&other->super, &tx, 1, &sent);
    EXPECT_EQ(1u, sent);
    for (int i = 0; i < 5; ++i) {
        round();
    }
    EXPECT_EQ(0u, a->stats.path_raised);
    EXPECT_EQ((size_t)APTUS_UD_PATH_BASE, aptus_ud_peer_mtu(a, p));
    other->super.ops->close(&other->super);
}

TEST_F(ud_chan_train, multi_datagram_message_goes_as_one_train)
{
    aptus_ud_peer_t *p = open_and_watch();
    uint64_t dgrams    = m_a.chan.stats.tx_data_dgrams;
    unsigned trains    = m_net.trains;

    /* 16 datagrams of 1024 bytes: 984 + 15 * 984 with the CRC */
    std::vector<uint8_t> data = pattern(5, 15000);
    ASSERT_EQ((ssize_t)data.size(), send_bcopy(m_a, p, 6, data));
    uint64_t frags = m_a.chan.stats.tx_data_dgrams - dgrams;
    EXPECT_EQ(16u, frags);
    EXPECT_EQ(trains + 1, m_net.trains);
    EXPECT_EQ(1u, m_a.chan.stats.tx_trains);
    EXPECT_EQ(frags, m_a.chan.stats.tx_train_dgrams);

    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    ASSERT_EQ(1u, m_b.rx.size());
    EXPECT_EQ(data, m_b.rx[0].data);
    EXPECT_EQ(6, m_b.rx[0].am_id);
    ASSERT_EQ(frags, m_data.size());
    for (const fake_dgram &d : m_data) {
        EXPECT_EQ(m_net.trains, d.train);
        if (&d != &m_data.back()) {
            EXPECT_EQ(1024u, d.data.size()); /* the kernel's cut */
        }
    }
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits);
    EXPECT_EQ(0u, m_a.chan.stats.tx_fast_retransmits);
}

TEST_F(ud_chan_train, every_size_and_header_layout_delivered_intact)
{
    for (int crc : { 1, 0 }) {
        m_cfg.crc = crc;
        fini(m_a);
        fini(m_b);
        m_b.rx.clear();
        m_data.clear();
        aptus_ud_peer_t *p = open_and_watch();
        size_t single = 1024 - 32 - (crc ? 8 : 0), first = 1024 - 40;
        uint64_t trains = 0, train_dgrams = 0, net_trains = m_net.trains;
        /* the first fragment's header is 8 bytes longer than the others'
         * without the CRC: its datagram is still the peer's size */
        std::vector<size_t> sizes = { 991,  992,  993,   1983, 1984, 1985,
                                      2500, 8191, 16384, 1,    0 };
        for (size_t len : sizes) {
            ASSERT_EQ((ssize_t)len, send_bcopy(m_a, p, 7, pattern(len, len)));
            ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
            if (len > single) {
                trains++;
                train_dgrams += 1 + (len - first + single - 1) / single;
            }
        }
        ASSERT_EQ(sizes.size(), m_b.rx.size());
        for (size_t i = 0; i < sizes.size(); ++i) {
            EXPECT_EQ(pattern(sizes[i], sizes[i]), m_b.rx[i].data)
                << "crc " << crc << " len " << sizes[i];
        }
        /* every message of several datagrams went as one train, every
         * datagram of them in it */
        EXPECT_EQ(trains, m_a.chan.stats.tx_trains) << crc;
        EXPECT_EQ(train_dgrams, m_a.chan.stats.tx_train_dgrams) << crc;
        EXPECT_EQ(trains, m_net.trains - net_trains) << crc;
        EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits);
    }
}

TEST_F(ud_chan_train, train_cut_to_the_wire_limits_evenly)
{
    aptus_ud_peer_t *p            = open_and_watch();
    m_a.wire->super.seg_max_count = 4;
    std::vector<uint8_t> data     = pattern(9, 16384); /* 17 datagrams */
    ASSERT_EQ((ssize_t)data.size(), send_bcopy(m_a, p, 2, data));
    /* 4 + 4 + 3 + 3 + 3: no train of one */
    EXPECT_EQ(5u, m_a.chan.stats.tx_trains);
    EXPECT_EQ(17u, m_a.chan.stats.tx_train_dgrams);
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    ASSERT_EQ(1u, m_b.rx.size());
    EXPECT_EQ(data, m_b.rx[0].data);

    /* a byte limit below two datagrams: one by one */
    m_a.wire->super.seg_max_count = 64;
    m_a.wire->super.seg_max_bytes = 1500;
    ASSERT_EQ((ssize_t)data.size(), send_bcopy(m_a, p, 2, data));
    EXPECT_EQ(5u, m_a.chan.stats.tx_trains);
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    ASSERT_EQ(2u, m_b.rx.size());
    EXPECT_EQ(data, m_b.rx[1].data);
}

TEST_F(ud_chan_train, loss_inside_a_train_repaired_by_resend)
{
    aptus_ud_peer_t *p = open_and_watch();
    for (unsigned i = 0; i < 5; ++i) { /* measure the RTT */
        ASSERT_EQ(UCS_OK, send_short(m_a, p, 1, i, pattern(i, 10)));
        ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    }
    /* the sixth datagram of the train is lost once; its resend goes
     * alone */
    unsigned seen = 0, resent_alone = 0;
    uint16_t lost_psn = 0;
    m_net.filter      = [&](const fake_dgram &d, const aptus_ud_sr_pkt_t &pkt) {
        if ((d.from != m_a.wire->id) || (pkt.type != APTUS_UD_SR_TYPE_DATA)) {
            return FAKE_PASS;
        }
        if ((d.train != 0) && (++seen == 6)) {
            lost_psn = pkt.psn;
            return FAKE_DROP;
        }
        if ((seen >= 6) && (d.train == 0) && (pkt.psn == lost_psn)) {
            resent_alone++;
        }
        return FAKE_PASS;
    };
    std::vector<uint8_t> data = pattern(42, 16000);
    ASSERT_EQ((ssize_t)data.size(), send_bcopy(m_a, p, 3, data));
    EXPECT_EQ(1u, m_a.chan.stats.tx_trains);
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    EXPECT_GE(seen, 6u);
    EXPECT_EQ(1u, resent_alone);
    EXPECT_EQ(1u, m_a.chan.stats.tx_trains); /* the resend is no train */
    EXPECT_EQ(1u, m_a.chan.stats.tx_fast_retransmits +
                      m_a.chan.stats.tx_retransmits);
    ASSERT_EQ(6u, m_b.rx.size());
    EXPECT_EQ(data, m_b.rx.back().data);
    EXPECT_GE(m_b.chan.stats.rx_held, 1u); /* the rest waited for it */
}

TEST_F(ud_chan_train, refused_train_falls_back_to_single_datagrams)
{
    aptus_ud_peer_t *p        = open_and_watch();
    m_net.seg_refuse          = true;
    std::vector<uint8_t> data = pattern(3, 12000);
    ASSERT_EQ((ssize_t)data.size(), send_bcopy(m_a, p, 4, data));
    EXPECT_EQ(1u, m_net.seg_refused);
    EXPECT_EQ(0u, m_a.chan.stats.tx_trains);
    EXPECT_EQ(0u, m_a.wire->super.seg_max_bytes);
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    ASSERT_EQ(1u, m_b.rx.size());
    EXPECT_EQ(data, m_b.rx[0].data);
    EXPECT_EQ(0u, m_a.chan.stats.tx_retransmits); /* none was lost */
    EXPECT_EQ(0u, m_a.chan.stats.tx_fast_retransmits);

    /* the wire said no once: later messages do not ask again */
    ASSERT_EQ((ssize_t)data.size(), send_bcopy(m_a, p, 4, data));
    EXPECT_EQ(1u, m_net.seg_refused);
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    ASSERT_EQ(2u, m_b.rx.size());
    EXPECT_EQ(data, m_b.rx[1].data);
    for (const fake_dgram &d : m_data) {
        EXPECT_EQ(0u, d.train);
    }
}

TEST_F(ud_chan_train, wire_without_send_seg_sends_one_by_one)
{
    aptus_ud_peer_t *p                   = open_and_watch();
    static aptus_dgram_wire_ops_t no_seg = *m_a.wire->super.ops;
    no_seg.send_seg                      = NULL;
    m_a.wire->super.ops                  = &no_seg;
    std::vector<uint8_t> data            = pattern(8, 9000);
    ASSERT_EQ((ssize_t)data.size(), send_bcopy(m_a, p, 5, data));
    EXPECT_EQ(0u, m_a.chan.stats.tx_trains);
    ASSERT_TRUE(run_until([&] { return aptus_ud_peer_tx_idle(p); }));
    ASSERT_EQ(1u, m_b.rx.size());
    EXPECT_EQ(data, m_b.rx[0].data);
}

TEST_F(ud_chan_train, zcopy_message_goes_as_a_train)
{
    aptus_ud_peer_t *p       = open_and_watch();
    std::vector<uint8_t> hdr = pattern(1, 16), b1 = pattern(2, 5000),
                         b2 = pattern(3, 3), b3 = pattern(4, 4000);
    test_comp comp;
    init_comp(comp);
    ASSERT_EQ(UCS_INPROGRESS,
              send_zcopy(m_a, p, 9, hdr, { &b1, &b2, &b3 }, &comp));
    EXPECT_EQ(1u, m_a.chan.stats.tx_trains);
    ASSERT_TRUE(run_until([&] { return comp.done == 1; }));
    EXPECT_EQ(UCS_OK, comp.status);
    std::vector<uint8_t> expect = hdr;
    expect.insert(expect.end(), b1.begin(), b1.end());
    expect.insert(expect.end(), b2.begin(), b2.end());
    expect.insert(expect.end(), b3.begin(), b3.end());
    ASSERT_EQ(1u, m_b.rx.size());
    EXPECT_EQ(expect, m_b.rx[0].data);
}
