/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the UD-SR reliability window (src/proto/rel_window.c), on a
 * deterministic simulated link: every loss, duplicate and reordering is
 * chosen by the test.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/rel_window.h"
}

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <vector>

namespace
{

const aptus_rel_config_t default_cfg = {
    /* tx_window */ 64,
    /* ack_count */ 8,
    /* rto_min_us */ 1000,
    /* rto_max_us */ 64000,
    /* rto_init_us */ 10000,
    /* peer_timeout_us */ 1000000,
};

struct packet {
    aptus_rel_txe_t txe;
    unsigned id; /* payload: the test's message number */
};

struct wire_pkt {
    bool is_data;
    uint16_t psn;
    unsigned id;
    uint16_t ack;
    bool has_sack;
    std::vector<uint64_t> sack; /* the words of the selective map */
};

/* One direction of a connection: a sender window and a receiver. */
class rel_link
{
  public:
    explicit rel_link(const aptus_rel_config_t &cfg = default_cfg,
                      uint16_t initial_psn          = 0)
        : m_cfg(cfg), m_now(1000000)
    {
        aptus_rel_tx_init(&m_tx, m_now);
        aptus_rel_rx_init(&m_rx);
        aptus_rel_rx_map_init(&m_map);
        m_tx.next_psn  = initial_psn;
        m_tx.acked_psn = initial_psn;
        m_rx.expected  = initial_psn;
    }

    ~rel_link()
    {
        for (packet *p : m_all) {
            delete p;
        }
    }

    /* Sender: new message; returns false if the window is full. */
    bool send(unsigned id)
    {
        if (aptus_rel_tx_window_full(&m_tx, &m_cfg)) {
            return false;
        }
        packet *p = new packet();
        p->id     = id;
        m_all.push_back(p);
        aptus_rel_tx_push(&m_tx, &p->txe, m_now);
        m_by_psn[p->txe.psn] = p;
        m_to_rx.push_back(wire_pkt{ true, p->txe.psn, id, 0, false, {} });
        return true;
    }

    /* Receiver: handle one data packet; returns its verdict. */
    aptus_rel_rx_verdict_t rx(const wire_pkt &wp)
    {
        aptus_rel_rx_verdict_t v = aptus_rel_rx_classify(&m_rx, &m_map, wp.psn);
        aptus_rel_rx_commit(&m_rx, &m_map, wp.psn, v);
        if (v == APTUS_REL_RX_HOLD) {
            m_held[wp.psn] = wp.id;
        } else if (v == APTUS_REL_RX_DELIVER) {
            m_delivered.push_back(wp.id);
            while (aptus_rel_rx_pop_held(&m_rx, &m_map)) {
                uint16_t psn = m_rx.expected - 1;
                EXPECT_TRUE(m_held.count(psn)) << "psn " << psn;
                m_delivered.push_back(m_held[psn]);
                m_held.erase(psn);
            }
        }
        return v;
    }

    /* Receiver: build an explicit ACK. */
    wire_pkt make_ack()
    {
        uint64_t words[APTUS_REL_SACK_WORDS];
        unsigned n = aptus_rel_rx_sack(&m_rx, &m_map, words);
        wire_pkt a{ false,  0,
                    0,      m_rx.expected,
                    n != 0, std::vector<uint64_t>(words, words + n) };
        aptus_rel_rx_acked(&m_rx, 1);
        return a;
    }

    aptus_rel_ack_status_t tx_ack(const wire_pkt &a)
    {
        aptus_rel_tx_heard(&m_tx, m_now);
        aptus_rel_ack_status_t st =
            aptus_rel_tx_ack(&m_tx, &m_cfg, a.ack, a.sack.data(),
                             (unsigned)a.sack.size(), m_now, release_cb, this);
        return st;
    }

    unsigned fast_retransmit()
    {
        return aptus_rel_tx_fast_retransmit(&m_tx, &m_cfg, m_now, resend_cb,
                                            this);
    }

    aptus_rel_timer_status_t timer(unsigned *resent, int *probe = nullptr)
    {
        int dummy;
        uint64_t due;
        aptus_rel_timer_status_t st =
            aptus_rel_tx_timer(&m_tx, &m_cfg, m_now, resend_cb, this, resent,
                               (probe != nullptr) ? probe : &dummy, &due);
        /* the due time from the same pass is the one a pass of its own
         * finds (a failed peer has none: it is done) */
        if (st != APTUS_REL_TIMER_FAILED) {
            EXPECT_EQ(aptus_rel_tx_next_due(&m_tx, &m_cfg, m_now), due);
        }
        return st;
    }

    /* Deliver everything queued to the receiver (in order). */
    void deliver_all()
    {
        while (!m_to_rx.empty()) {
            wire_pkt wp = m_to_rx.front();
            m_to_rx.pop_front();
            rx(wp);
        }
    }

    static void release_cb(void *arg, aptus_rel_txe_t *txe)
    {
        rel_link *self = static_cast<rel_link *>(arg);
        packet *p      = reinterpret_cast<packet *>(txe);
        self->m_released.push_back(p->id);
        self->m_by_psn.erase(txe->psn);
    }

    static void resend_cb(void *arg, aptus_rel_txe_t *txe)
    {
        rel_link *self = static_cast<rel_link *>(arg);
        packet *p      = reinterpret_cast<packet *>(txe);
        self->m_resent.push_back(p->id);
        self->m_to_rx.push_back(
            wire_pkt{ true, txe->psn, p->id, 0, false, {} });
    }

    aptus_rel_config_t m_cfg;
    uint64_t m_now;
    aptus_rel_tx_t m_tx;
    aptus_rel_rx_t m_rx;
    std::vector<packet *> m_all;
    std::map<uint16_t, packet *> m_by_psn;
    std::deque<wire_pkt> m_to_rx;
    std::map<uint16_t, unsigned> m_held;
    aptus_rel_rx_map_t m_map; /* the receiver's map of held packets */
    std::vector<unsigned> m_delivered;
    std::vector<unsigned> m_released;
    std::vector<unsigned> m_resent;
};

std::vector<unsigned> seq(unsigned from, unsigned to)
{
    std::vector<unsigned> v;
    for (unsigned i = from; i < to; ++i) {
        v.push_back(i);
    }
    return v;
}

} // namespace

TEST(rel_window, config_check)
{
    aptus_rel_config_t cfg = default_cfg;
    EXPECT_EQ(nullptr, aptus_rel_config_check(&cfg));

    cfg.tx_window = 0;
    EXPECT_NE(nullptr, aptus_rel_config_check(&cfg));
    cfg.tx_window = APTUS_REL_RX_WINDOW + 1;
    EXPECT_NE(nullptr, aptus_rel_config_check(&cfg));
    cfg            = default_cfg;
    cfg.rto_max_us = cfg.rto_min_us - 1;
    EXPECT_NE(nullptr, aptus_rel_config_check(&cfg));
    cfg             = default_cfg;
    cfg.rto_init_us = cfg.rto_max_us + 1;
    EXPECT_NE(nullptr, aptus_rel_config_check(&cfg));
    cfg                 = default_cfg;
    cfg.peer_timeout_us = cfg.rto_min_us;
    EXPECT_NE(nullptr, aptus_rel_config_check(&cfg));
    cfg           = default_cfg;
    cfg.ack_count = 0;
    EXPECT_NE(nullptr, aptus_rel_config_check(&cfg));
}

TEST(rel_window, psn_arithmetic_wraps)
{
    EXPECT_TRUE(aptus_psn_lt(65535, 0));
    EXPECT_TRUE(aptus_psn_lt(65000, 100));
    EXPECT_FALSE(aptus_psn_lt(100, 65000));
    EXPECT_TRUE(aptus_psn_le(7, 7));
    EXPECT_EQ(2, aptus_psn_dist(65535, 1));
}

TEST(rel_window, in_order_delivery_and_cumulative_ack)
{
    rel_link l;
    for (unsigned i = 0; i < 20; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    EXPECT_EQ(20u, aptus_rel_tx_inflight(&l.m_tx));
    l.deliver_all();
    EXPECT_EQ(seq(0, 20), l.m_delivered);
    EXPECT_TRUE(aptus_rel_rx_ack_due(&l.m_rx, &l.m_cfg)); /* 20 >= ack_count */

    l.m_now += 50;
    EXPECT_EQ(APTUS_REL_ACK_OK, l.tx_ack(l.make_ack()));
    EXPECT_EQ(seq(0, 20), l.m_released);
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
    EXPECT_EQ(50u, l.m_tx.srtt_us); /* first sample */
    EXPECT_EQ(25u, l.m_tx.rttvar_us);
    EXPECT_FALSE(aptus_rel_rx_has_unacked(&l.m_rx));
}

TEST(rel_window, window_full_blocks_until_ack)
{
    rel_link l;
    for (unsigned i = 0; i < l.m_cfg.tx_window; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    EXPECT_TRUE(aptus_rel_tx_window_full(&l.m_tx, &l.m_cfg));
    EXPECT_FALSE(l.send(999));
    EXPECT_TRUE(aptus_rel_tx_want_ack(&l.m_tx, &l.m_cfg));

    /* a partial ack opens exactly that much room */
    l.rx(l.m_to_rx[0]);
    l.rx(l.m_to_rx[1]);
    l.m_to_rx.erase(l.m_to_rx.begin(), l.m_to_rx.begin() + 2);
    l.tx_ack(l.make_ack());
    EXPECT_EQ(2u, l.m_released.size());
    EXPECT_TRUE(l.send(100));
    EXPECT_TRUE(l.send(101));
    EXPECT_FALSE(l.send(102));
}

/* A stream that keeps the window half full asks for an acknowledgement
 * once in APTUS_REL_ASK_EVERY packets (a quarter window when smaller), not
 * with every packet: each ask costs the receiver an ACK datagram. */
TEST(rel_window, asks_for_acks_sparingly_while_the_window_is_half_full)
{
    for (unsigned window : { 64u, 1024u, 8u, 1u }) {
        aptus_rel_config_t cfg = default_cfg;
        cfg.tx_window          = window;
        rel_link l(cfg);
        std::vector<unsigned> asked;
        for (unsigned i = 0; i < window; ++i) {
            ASSERT_TRUE(l.send(i));
            if (aptus_rel_tx_ask(&l.m_tx, &cfg,
                                 aptus_rel_tx_want_ack(&l.m_tx, &cfg))) {
                asked.push_back(i);
            }
        }
        const unsigned every = std::min(32u, window / 4);
        /* the first packet at half a window asks, then one in every */
        std::vector<unsigned> want;
        for (unsigned i = (window + 1) / 2 - 1; i < window;
             i += std::max(every, 1u)) {
            want.push_back(i);
        }
        EXPECT_EQ(want, asked) << "window " << window;
        /* a packet that does not want one never asks */
        EXPECT_FALSE(aptus_rel_tx_ask(&l.m_tx, &cfg, 0));
    }
}

TEST(rel_window, single_loss_resends_only_the_hole)
{
    rel_link l;
    for (unsigned i = 0; i < 10; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    /* packet 3 is lost */
    l.m_to_rx.erase(l.m_to_rx.begin() + 3);
    l.deliver_all();
    EXPECT_EQ(seq(0, 3), l.m_delivered);
    EXPECT_EQ(6u, l.m_held.size());
    EXPECT_TRUE(l.m_rx.flags & APTUS_REL_RX_ACK_NOW);

    wire_pkt ack = l.make_ack();
    EXPECT_EQ(3, ack.ack);
    ASSERT_TRUE(ack.has_sack);
    ASSERT_EQ(1u, ack.sack.size());
    EXPECT_EQ(0x7eull, ack.sack[0]); /* psn 4..9 held: bits 1..6 */

    l.tx_ack(ack);
    EXPECT_EQ(seq(0, 3), l.m_released);
    /* not yet: the hole has not waited one RTT */
    EXPECT_EQ(0u, l.fast_retransmit());
    l.m_now += 2 * l.m_tx.srtt_us + 1;
    EXPECT_EQ(1u, l.fast_retransmit());
    ASSERT_EQ(1u, l.m_resent.size());
    EXPECT_EQ(3u, l.m_resent[0]);

    l.deliver_all();
    EXPECT_EQ(seq(0, 10), l.m_delivered);
    l.tx_ack(l.make_ack());
    EXPECT_EQ(10u, l.m_released.size());
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
}

/* A window of 1024: the selective map spans as many words as reach the
 * highest held packet, and two holes far apart are resent alone. */
TEST(rel_window, window_1024_sack_spans_words_and_resends_only_holes)
{
    aptus_rel_config_t cfg = default_cfg;
    cfg.tx_window          = APTUS_REL_TX_WINDOW_MAX;
    rel_link l(cfg, 65000); /* and across the PSN wrap */
    for (unsigned i = 0; i < 1024; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    EXPECT_FALSE(l.send(1024)); /* the window is full */

    /* only psn +5 arrives past the first hole: one word */
    wire_pkt p5 = l.m_to_rx[5];
    EXPECT_EQ(APTUS_REL_RX_HOLD, l.rx(p5));
    ASSERT_TRUE(aptus_rel_rx_holding(&l.m_rx));
    wire_pkt a1 = l.make_ack();
    ASSERT_EQ(1u, a1.sack.size());
    EXPECT_EQ(1ull << 5, a1.sack[0]);
    /* +130 held: three words */
    EXPECT_EQ(APTUS_REL_RX_HOLD, l.rx(l.m_to_rx[130]));
    wire_pkt a2 = l.make_ack();
    ASSERT_EQ(3u, a2.sack.size());
    EXPECT_EQ(1ull << 2, a2.sack[2]);

    /* everything but +0 and +700 arrives (+5 and +130 again: duplicates) */
    std::deque<wire_pkt> all = l.m_to_rx;
    l.m_to_rx.clear();
    for (unsigned i = 1; i < 1024; ++i) {
        if (i != 700) {
            l.rx(all[i]);
        }
    }
    EXPECT_TRUE(l.m_delivered.empty());
    EXPECT_EQ(1022u, l.m_held.size());
    wire_pkt ack = l.make_ack();
    EXPECT_EQ((uint16_t)65000, ack.ack);
    ASSERT_EQ((size_t)APTUS_REL_SACK_WORDS, ack.sack.size());
    EXPECT_EQ(~1ull, ack.sack[0]);
    EXPECT_EQ(~(1ull << (700 % 64)), ack.sack[700 / 64]);
    EXPECT_EQ(~0ull, ack.sack[15]);

    ASSERT_EQ(APTUS_REL_ACK_OK, l.tx_ack(ack));
    EXPECT_TRUE(l.m_released.empty());
    l.m_now += 20000; /* past one RTT since they were sent */
    /* both holes lie below selectively acknowledged packets */
    EXPECT_EQ(2u, l.fast_retransmit());
    ASSERT_EQ(2u, l.m_resent.size());
    EXPECT_EQ(0u, l.m_resent[0]);
    EXPECT_EQ(700u, l.m_resent[1]);
    l.deliver_all();
    EXPECT_EQ(seq(0, 1024), l.m_delivered);
    EXPECT_TRUE(l.m_held.empty());
    /* nothing held: the map is all zero and free to go */
    EXPECT_FALSE(aptus_rel_rx_holding(&l.m_rx));
    EXPECT_EQ(0u, l.m_map.count);
    for (uint64_t w : l.m_map.bits) {
        EXPECT_EQ(0u, w);
    }
    l.tx_ack(l.make_ack());
    EXPECT_EQ(seq(0, 1024), l.m_released);
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
}

TEST(rel_window, duplicates_dropped_and_reacknowledged)
{
    rel_link l;
    ASSERT_TRUE(l.send(0));
    ASSERT_TRUE(l.send(1));
    wire_pkt p0 = l.m_to_rx[0];
    l.deliver_all();
    l.make_ack(); /* ack sent (and lost) */
    EXPECT_FALSE(aptus_rel_rx_has_unacked(&l.m_rx));

    EXPECT_EQ(APTUS_REL_RX_DUPLICATE, l.rx(p0));
    EXPECT_EQ(seq(0, 2), l.m_delivered);
    EXPECT_TRUE(aptus_rel_rx_ack_due(&l.m_rx, &l.m_cfg));

    /* a held packet received twice is also a duplicate */
    ASSERT_TRUE(l.send(2));
    ASSERT_TRUE(l.send(3));
    wire_pkt p3 = l.m_to_rx[1];
    EXPECT_EQ(APTUS_REL_RX_HOLD, l.rx(p3));
    EXPECT_EQ(APTUS_REL_RX_DUPLICATE, l.rx(p3));
}

TEST(rel_window, reordering_within_window_delivers_in_order)
{
    rel_link l;
    for (unsigned i = 0; i < 32; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    std::reverse(l.m_to_rx.begin(), l.m_to_rx.end());
    l.deliver_all();
    EXPECT_EQ(seq(0, 32), l.m_delivered);
    EXPECT_TRUE(l.m_held.empty());
    EXPECT_FALSE(aptus_rel_rx_holding(&l.m_rx));
}

TEST(rel_window, out_of_window_dropped)
{
    rel_link l;
    wire_pkt far{ true,  (uint16_t)(l.m_rx.expected + APTUS_REL_RX_WINDOW),
                  77,    0,
                  false, {} };
    EXPECT_EQ(APTUS_REL_RX_OUT_OF_WINDOW, l.rx(far));
    EXPECT_TRUE(l.m_delivered.empty());
    EXPECT_FALSE(aptus_rel_rx_holding(&l.m_rx));
    wire_pkt edge{ true,  (uint16_t)(l.m_rx.expected + APTUS_REL_RX_WINDOW - 1),
                   78,    0,
                   false, {} };
    EXPECT_EQ(APTUS_REL_RX_HOLD, l.rx(edge));
}

TEST(rel_window, ack_loss_recovered_by_timeout)
{
    rel_link l;
    for (unsigned i = 0; i < 4; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    l.deliver_all();
    l.make_ack(); /* lost */

    unsigned resent = 0;
    l.m_now += l.m_cfg.rto_init_us - 1;
    EXPECT_EQ(APTUS_REL_TIMER_ARMED, l.timer(&resent));
    EXPECT_EQ(0u, resent);
    l.m_now += 1;
    EXPECT_EQ(APTUS_REL_TIMER_ARMED, l.timer(&resent));
    EXPECT_EQ(4u, resent); /* without probes, every expired packet */
    EXPECT_EQ(1, l.m_tx.backoff);

    /* receiver sees duplicates and acknowledges again */
    l.deliver_all();
    EXPECT_EQ(seq(0, 4), l.m_delivered);
    wire_pkt ack = l.make_ack();
    l.tx_ack(ack);
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
    EXPECT_EQ(0, l.m_tx.backoff);  /* progress resets the backoff */
    EXPECT_EQ(0u, l.m_tx.srtt_us); /* Karn: no sample from resent packets */
}

TEST(rel_window, rtt_not_inflated_by_waiting_behind_a_hole)
{
    rel_link l;
    for (int i = 0; i < 10; ++i) { /* RTT 100 us */
        ASSERT_TRUE(l.send(i));
        l.m_now += 100;
        l.deliver_all();
        l.tx_ack(l.make_ack());
    }
    EXPECT_NEAR(100, l.m_tx.srtt_us, 10);
    for (int i = 10; i < 20; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    l.m_to_rx.erase(l.m_to_rx.begin()); /* the first is lost */
    l.m_now += 100;
    l.deliver_all();
    l.tx_ack(l.make_ack()); /* SACKs 9 packets after 100 us */
    /* the hole is repaired only much later */
    l.m_now += 50000;
    EXPECT_EQ(1u, l.fast_retransmit());
    l.m_now += 100;
    l.deliver_all();
    l.tx_ack(l.make_ack());
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
    EXPECT_LT(l.m_tx.srtt_us, 200u);
}

TEST(rel_window, timeout_with_probes_resends_only_the_oldest)
{
    aptus_rel_config_t cfg = default_cfg;
    cfg.probe_min_us       = 200;
    rel_link l(cfg);
    for (unsigned i = 0; i < 8; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    l.m_to_rx.clear(); /* the receiver is asleep: nothing arrives, no ACK */
    unsigned resent;
    int probe;
    l.m_now += cfg.rto_init_us;
    l.timer(&resent, &probe);
    EXPECT_EQ(1u, resent);
    ASSERT_EQ(1u, l.m_resent.size());
    EXPECT_EQ(0u, l.m_resent[0]);
}

TEST(rel_window, backoff_doubles_and_is_capped)
{
    rel_link l;
    ASSERT_TRUE(l.send(0));
    unsigned resent;
    uint32_t prev = aptus_rel_tx_rto(&l.m_tx, &l.m_cfg);
    EXPECT_EQ(l.m_cfg.rto_init_us, prev);
    for (int i = 0; i < 10; ++i) {
        l.m_now += aptus_rel_tx_rto(&l.m_tx, &l.m_cfg);
        l.timer(&resent);
        EXPECT_EQ(1u, resent);
        uint32_t rto = aptus_rel_tx_rto(&l.m_tx, &l.m_cfg);
        EXPECT_EQ(std::min<uint32_t>(2 * prev, l.m_cfg.rto_max_us), rto);
        prev = rto;
        aptus_rel_tx_heard(&l.m_tx, l.m_now); /* keep the peer alive */
    }
    EXPECT_EQ(l.m_cfg.rto_max_us, prev);
}

TEST(rel_window, rto_follows_rtt_and_stays_in_bounds)
{
    rel_link l;
    for (int round = 0; round < 50; ++round) {
        ASSERT_TRUE(l.send(round));
        l.m_now += 4000; /* 4 ms RTT */
        l.deliver_all();
        l.tx_ack(l.make_ack());
    }
    EXPECT_NEAR(4000, l.m_tx.srtt_us, 200);
    uint32_t rto = aptus_rel_tx_rto(&l.m_tx, &l.m_cfg);
    EXPECT_GE(rto, l.m_cfg.rto_min_us);
    EXPECT_LE(rto, l.m_cfg.rto_max_us);
    EXPECT_GE(rto, l.m_tx.srtt_us);

    /* a tiny RTT cannot push the timeout below the minimum */
    rel_link fast;
    for (int round = 0; round < 50; ++round) {
        ASSERT_TRUE(fast.send(round));
        fast.m_now += 3;
        fast.deliver_all();
        fast.tx_ack(fast.make_ack());
    }
    EXPECT_EQ(fast.m_cfg.rto_min_us, aptus_rel_tx_rto(&fast.m_tx, &fast.m_cfg));
}

static void resend_nop(void *, aptus_rel_txe_t *)
{
}

/* A window given back while idle and opened again goes on from its PSN,
 * with the RTT it had measured (coarsened), and nothing in flight. */
TEST(rel_window, parked_window_resumes_its_psn_and_rtt)
{
    rel_link l(default_cfg, 65530); /* the PSNs wrap while parked */
    for (int round = 0; round < 20; ++round) {
        ASSERT_TRUE(l.send(round));
        l.m_now += 1003;
        l.deliver_all();
        l.tx_ack(l.make_ack());
    }
    ASSERT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
    uint32_t srtt = l.m_tx.srtt_us;
    ASSERT_GT(srtt, 0u);

    aptus_rel_tx_parked_t parked;
    aptus_rel_tx_park(&l.m_tx, &parked);
    EXPECT_EQ(l.m_tx.next_psn, parked.next_psn);
    EXPECT_EQ(sizeof(uint32_t), sizeof(parked)); /* what an idle peer keeps */

    aptus_rel_tx_t tx;
    memset(&tx, 0xa5, sizeof(tx));
    aptus_rel_tx_unpark(&tx, &parked, l.m_now + 5000000);
    EXPECT_TRUE(aptus_rel_tx_is_idle(&tx));
    EXPECT_EQ(l.m_tx.next_psn, tx.next_psn);
    EXPECT_EQ(l.m_tx.next_psn, tx.acked_psn);
    EXPECT_EQ(0u, tx.backoff);
    EXPECT_EQ(0u, tx.probing);
    /* rounded up to the unit, never below what was measured */
    EXPECT_GE(tx.srtt_us, srtt);
    EXPECT_LT(tx.srtt_us, srtt + APTUS_REL_PARK_RTT_UNIT_US);
    EXPECT_EQ(tx.srtt_us / 2, tx.rttvar_us);
    /* the timeout follows the measured RTT, not RTO_INIT */
    EXPECT_LT(aptus_rel_tx_rto(&tx, &l.m_cfg), l.m_cfg.rto_init_us);
    /* a long idle time is not silence: nothing waits for the peer */
    uint64_t due;
    unsigned resent;
    int probe;
    EXPECT_EQ(APTUS_REL_TIMER_IDLE,
              aptus_rel_tx_timer(&tx, &l.m_cfg, l.m_now + 9000000, resend_nop,
                                 nullptr, &resent, &probe, &due));

    /* no sample: none after unparking either; a huge one saturates */
    aptus_rel_tx_t fresh;
    aptus_rel_tx_init(&fresh, 0);
    aptus_rel_tx_park(&fresh, &parked);
    aptus_rel_tx_unpark(&tx, &parked, 0);
    EXPECT_EQ(0u, tx.srtt_us);
    EXPECT_EQ(l.m_cfg.rto_init_us, aptus_rel_tx_rto(&tx, &l.m_cfg));
    fresh.srtt_us = UINT32_MAX / 2;
    aptus_rel_tx_park(&fresh, &parked);
    EXPECT_EQ(UINT16_MAX, parked.srtt);
}

TEST(rel_window, silent_peer_declared_failed)
{
    rel_link l;
    ASSERT_TRUE(l.send(0));
    unsigned resent;
    uint64_t start              = l.m_now;
    aptus_rel_timer_status_t st = APTUS_REL_TIMER_ARMED;
    while ((st == APTUS_REL_TIMER_ARMED) && (l.m_now - start < 10000000)) {
        l.m_now += 1000;
        st = l.timer(&resent);
    }
    EXPECT_EQ(APTUS_REL_TIMER_FAILED, st);
    /* within one coarse tick (1024 us) of the configured silence */
    EXPECT_GE(l.m_now - start, l.m_cfg.peer_timeout_us);
    EXPECT_LE(l.m_now - start, l.m_cfg.peer_timeout_us + 3000);

    /* purge hands every outstanding packet back */
    aptus_rel_tx_purge(&l.m_tx, rel_link::release_cb, &l);
    EXPECT_EQ(1u, l.m_released.size());
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
}

TEST(rel_window, idle_peer_never_fails)
{
    rel_link l;
    unsigned resent;
    l.m_now += 100 * l.m_cfg.peer_timeout_us;
    EXPECT_EQ(APTUS_REL_TIMER_IDLE, l.timer(&resent));
    /* the silence clock starts with the first packet after idling */
    ASSERT_TRUE(l.send(0));
    l.m_now += l.m_cfg.rto_init_us;
    EXPECT_EQ(APTUS_REL_TIMER_ARMED, l.timer(&resent));
}

TEST(rel_window, forged_ack_ahead_of_sent_is_invalid)
{
    rel_link l;
    ASSERT_TRUE(l.send(0));
    wire_pkt bogus{ false, 0, 0, 5, false, {} };
    EXPECT_EQ(APTUS_REL_ACK_INVALID, l.tx_ack(bogus));
    EXPECT_TRUE(l.m_released.empty());
    EXPECT_EQ(1u, aptus_rel_tx_inflight(&l.m_tx));
    /* a stale ack (behind the cumulative point) is harmless */
    l.deliver_all();
    l.tx_ack(l.make_ack());
    wire_pkt stale{ false, 0, 0, 0, false, {} };
    EXPECT_EQ(APTUS_REL_ACK_OK, l.tx_ack(stale));
}

TEST(rel_window, psn_wraparound)
{
    rel_link l(default_cfg, 65530);
    for (unsigned i = 0; i < 20; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    /* lose the one with psn 65535 and the one with psn 0 */
    l.m_to_rx.erase(l.m_to_rx.begin() + 5, l.m_to_rx.begin() + 7);
    l.deliver_all();
    EXPECT_EQ(seq(0, 5), l.m_delivered);
    l.tx_ack(l.make_ack());
    l.m_now += 100000;
    EXPECT_EQ(2u, l.fast_retransmit());
    l.deliver_all();
    EXPECT_EQ(seq(0, 20), l.m_delivered);
    l.tx_ack(l.make_ack());
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
    EXPECT_EQ(14, l.m_tx.next_psn);
}

TEST(rel_window, tail_probe_finds_lost_tail_before_timeout)
{
    aptus_rel_config_t cfg = default_cfg;
    cfg.probe_min_us       = 200;
    rel_link l(cfg);
    /* establish an RTT of 100 us */
    for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(l.send(i));
        l.m_now += 100;
        l.deliver_all();
        l.tx_ack(l.make_ack());
    }
    /* the last two of a burst are lost: nothing after them to SACK */
    for (int i = 10; i < 16; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    l.m_to_rx.erase(l.m_to_rx.begin() + 4, l.m_to_rx.end());
    l.deliver_all();
    l.tx_ack(l.make_ack());
    EXPECT_EQ(2u, aptus_rel_tx_inflight(&l.m_tx));

    unsigned resent;
    int probe;
    l.m_now += 150;
    l.timer(&resent, &probe);
    EXPECT_FALSE(probe); /* not before probe_min */
    l.m_now += 100;
    l.timer(&resent, &probe);
    EXPECT_TRUE(probe);
    EXPECT_EQ(0u, resent);
    l.timer(&resent, &probe);
    EXPECT_FALSE(probe); /* not again before another probe period */
    l.m_now += 250;
    l.timer(&resent, &probe);
    EXPECT_FALSE(probe); /* the second waits two periods */
    l.m_now += 250;
    l.timer(&resent, &probe);
    EXPECT_TRUE(probe); /* unanswered: asked again */
    EXPECT_EQ(2, l.m_tx.probing);

    /* the receiver answers the request: PSNs before upto it lacks are lost */
    aptus_psn_t upto = aptus_rel_tx_probe_upto(&l.m_tx);
    aptus_rel_rx_request(&l.m_rx, upto, 1);
    EXPECT_TRUE(aptus_rel_rx_ack_due(&l.m_rx, &l.m_cfg));
    EXPECT_TRUE(l.m_rx.flags & APTUS_REL_RX_REPLY);
    EXPECT_EQ(upto, l.m_rx.reply_upto);
    l.tx_ack(l.make_ack());
    EXPECT_FALSE(l.m_rx.flags & APTUS_REL_RX_REPLY);
    EXPECT_EQ(2u, aptus_rel_tx_reply(&l.m_tx, &l.m_cfg, upto, l.m_now,
                                     rel_link::resend_cb, &l));
    EXPECT_LT(l.m_now - 1000000, l.m_cfg.rto_init_us); /* well before RTO */
    /* a second reply at once does not resend the copies in flight */
    EXPECT_EQ(0u, aptus_rel_tx_reply(&l.m_tx, &l.m_cfg, upto, l.m_now,
                                     rel_link::resend_cb, &l));
    l.deliver_all();
    l.tx_ack(l.make_ack());
    EXPECT_TRUE(aptus_rel_tx_is_idle(&l.m_tx));
    EXPECT_EQ(seq(0, 16), l.m_delivered);
}

TEST(rel_window, reply_for_packets_never_sent_ignored)
{
    rel_link l;
    ASSERT_TRUE(l.send(0));
    EXPECT_EQ(0u, aptus_rel_tx_reply(&l.m_tx, &l.m_cfg, 50, l.m_now + 100000,
                                     rel_link::resend_cb, &l));
    EXPECT_TRUE(l.m_resent.empty());
}

TEST(rel_window, piggybacked_ack_settles_only_what_it_covers)
{
    rel_link l;
    for (unsigned i = 0; i < 3; ++i) {
        ASSERT_TRUE(l.send(i));
    }
    l.deliver_all();

    /* a probe covering more than has arrived: the cumulative ack a data
     * packet carries does not answer it */
    aptus_rel_rx_request(&l.m_rx, 5, 1);
    aptus_rel_rx_acked(&l.m_rx, 0);
    EXPECT_TRUE(aptus_rel_rx_ack_due(&l.m_rx, &l.m_cfg));
    aptus_rel_rx_acked(&l.m_rx, 1); /* an explicit ACK answers it */
    EXPECT_FALSE(aptus_rel_rx_has_unacked(&l.m_rx));

    /* data asking for an ACK: wanted by the next progress call, and
     * settled by a reply that carries the cumulative ack past it */
    aptus_rel_rx_request(&l.m_rx, 3, 0);
    EXPECT_FALSE(aptus_rel_rx_ack_due(&l.m_rx, &l.m_cfg));
    EXPECT_TRUE(aptus_rel_rx_ack_soon(&l.m_rx));
    EXPECT_TRUE(aptus_rel_rx_has_unacked(&l.m_rx));
    aptus_rel_rx_acked(&l.m_rx, 0);
    EXPECT_FALSE(aptus_rel_rx_ack_soon(&l.m_rx));
    EXPECT_FALSE(aptus_rel_rx_has_unacked(&l.m_rx));
}

/* Random loss, duplication and reordering in both directions: every
 * message is delivered exactly once, in order, and every packet released. */
class rel_window_random : public ::testing::TestWithParam<unsigned>
{
  protected:
    void run(uint16_t window, unsigned total, double loss)
    {
        std::mt19937 rng(GetParam());
        std::uniform_real_distribution<double> u(0, 1);
        const double dup = 0.05, reorder = 0.1, ack_loss = 0.2;
        aptus_rel_config_t cfg = default_cfg;
        cfg.tx_window          = window;
        rel_link l(cfg);
        unsigned next_id = 0, most_held = 0;

        for (int step = 0; step < 200000; ++step) {
            while ((next_id < total) && l.send(next_id)) {
                ++next_id;
            }

            /* the network: lose, duplicate, swap neighbours */
            std::deque<wire_pkt> out;
            for (const wire_pkt &wp : l.m_to_rx) {
                if (u(rng) < loss) {
                    continue;
                }
                out.push_back(wp);
                if (u(rng) < dup) {
                    out.push_back(wp);
                }
            }
            for (size_t i = 1; i < out.size(); ++i) {
                if (u(rng) < reorder) {
                    std::swap(out[i - 1], out[i]);
                }
            }
            l.m_to_rx.clear();
            for (const wire_pkt &wp : out) {
                l.rx(wp);
            }
            most_held = std::max(most_held, (unsigned)l.m_held.size());

            l.m_now += 300;
            if (aptus_rel_rx_has_unacked(&l.m_rx) && (u(rng) >= ack_loss)) {
                ASSERT_EQ(APTUS_REL_ACK_OK, l.tx_ack(l.make_ack()));
                l.fast_retransmit();
            }
            unsigned resent;
            ASSERT_NE(APTUS_REL_TIMER_FAILED, l.timer(&resent));

            if ((l.m_released.size() == total) &&
                aptus_rel_tx_is_idle(&l.m_tx)) {
                break;
            }
        }

        EXPECT_EQ(seq(0, total), l.m_delivered);
        EXPECT_EQ(seq(0, total), l.m_released);
        EXPECT_FALSE(l.m_resent.empty());
        EXPECT_FALSE(aptus_rel_rx_holding(&l.m_rx)); /* none held at the end */
        /* the receiver held packets across the whole window */
        EXPECT_GT(most_held, window / 2u);
    }
};

TEST_P(rel_window_random, exactly_once_in_order)
{
    run(64, 3000, 0.1);
}

/* The full window of 1024: selective maps of many words, holes far apart. */
TEST_P(rel_window_random, exactly_once_in_order_window_1024)
{
    run(1024, 20000, 0.02);
}

INSTANTIATE_TEST_SUITE_P(seeds, rel_window_random,
                         ::testing::Values(1u, 2u, 3u, 42u, 1234u));
