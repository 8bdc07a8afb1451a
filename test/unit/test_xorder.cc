/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: one order per peer across channels: messages spread over
 * several ordered channels, switched at random, arrive exactly once and in
 * order; a failed channel's messages resent over another are not
 * duplicated; holding is bounded; sequence numbers wrap.
 */
#include "proto/xorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <vector>

namespace
{

struct rx_msg {
    aptus_xorder_entry_t entry; /* first: the entry is the message */
    uint32_t payload;
};

/* The receiver: delivers in order into 'got'. */
struct receiver {
    aptus_xorder_rx_t rx;
    std::vector<uint32_t> got;
    uint32_t max_seen_held = 0;

    explicit receiver(uint32_t max_held, aptus_xseq_t start = 0)
    {
        aptus_xorder_rx_init(&rx, max_held);
        rx.next = start;
    }

    aptus_xorder_result_t arrive(aptus_xseq_t seq, uint32_t payload)
    {
        auto *m                 = new rx_msg;
        m->payload              = payload;
        aptus_xorder_result_t r = aptus_xorder_rx_arrive(&rx, seq, &m->entry);
        if (r == APTUS_XORDER_DELIVER) {
            got.push_back(payload);
            delete m;
            aptus_xorder_entry_t *e;
            while ((e = aptus_xorder_rx_pop(&rx)) != nullptr) {
                got.push_back(reinterpret_cast<rx_msg *>(e)->payload);
                delete reinterpret_cast<rx_msg *>(e);
            }
        } else if (r != APTUS_XORDER_HELD) {
            delete m;
        }
        max_seen_held = std::max(max_seen_held, rx.num_held);
        return r;
    }

    ~receiver()
    {
        aptus_xorder_entry_t *e = aptus_xorder_rx_take_all(&rx);
        while (e != nullptr) {
            aptus_xorder_entry_t *next = e->next;
            delete reinterpret_cast<rx_msg *>(e);
            e = next;
        }
    }
};

struct wire_msg {
    aptus_xseq_t seq;
    uint32_t payload;
};

} // namespace

TEST(xorder, in_order_messages_are_delivered_at_once)
{
    receiver r(16);
    for (uint32_t i = 0; i < 100; ++i) {
        EXPECT_EQ(APTUS_XORDER_DELIVER, r.arrive(i, i));
    }
    EXPECT_EQ(100u, r.got.size());
    EXPECT_EQ(0u, r.max_seen_held);
    EXPECT_EQ(0u, r.rx.held_total);
}

TEST(xorder, channels_switched_at_random_deliver_once_and_in_order)
{
    /* three ordered channels of different speed; each message takes one
     * at random (a channel appears, is demoted, comes back) */
    std::mt19937 rng(3);
    for (int round = 0; round < 10; ++round) {
        receiver r(1 << 20);
        aptus_xorder_tx_t tx;
        aptus_xorder_tx_init(&tx);
        std::deque<wire_msg> chans[3];
        const uint32_t n = 5000;
        uint32_t sent    = 0;
        while (r.got.size() < n) {
            if ((sent < n) && (rng() % 2)) {
                /* bursts on one channel, as the rule chain would choose */
                int c = (sent / (1 + rng() % 50)) % 3;
                chans[c].push_back({ aptus_xorder_tx_next(&tx), sent++ });
            } else {
                int c = rng() % 3;
                if (!chans[c].empty() && (rng() % (c + 1) == 0)) {
                    wire_msg m = chans[c].front();
                    chans[c].pop_front();
                    ASSERT_NE(APTUS_XORDER_DUPLICATE,
                              r.arrive(m.seq, m.payload));
                }
            }
        }
        for (uint32_t i = 0; i < n; ++i) {
            ASSERT_EQ(i, r.got[i]) << "round " << round;
        }
        EXPECT_GT(r.rx.held_total, 0u);
        EXPECT_EQ(0u, r.rx.num_held);
    }
}

TEST(xorder, a_failed_channel_resent_over_ud_loses_and_duplicates_nothing)
{
    std::mt19937 rng(5);
    receiver r(1024);
    aptus_xorder_tx_t tx;
    aptus_xorder_tx_init(&tx);
    std::deque<wire_msg> rc, ud;
    std::vector<wire_msg> unacked; /* sent on RC, not known delivered */
    uint32_t sent = 0;
    for (; sent < 300; ++sent) {
        wire_msg m{ aptus_xorder_tx_next(&tx), sent };
        if (sent % 3 == 0) {
            ud.push_back(m);
        } else {
            rc.push_back(m);
            unacked.push_back(m);
        }
    }
    /* part of RC's messages arrive, then the connection breaks */
    for (int i = 0; i < 90; ++i) {
        wire_msg m = rc.front();
        rc.pop_front();
        r.arrive(m.seq, m.payload);
    }
    rc.clear();
    /* the sender does not know which arrived: it resends all over UD */
    for (const wire_msg &m : unacked) {
        ud.push_back(m);
    }
    while (!ud.empty()) {
        size_t i   = rng() % std::min<size_t>(ud.size(), 4);
        wire_msg m = ud[i];
        ud.erase(ud.begin() + i);
        r.arrive(m.seq, m.payload);
    }
    ASSERT_EQ(300u, r.got.size());
    for (uint32_t i = 0; i < 300; ++i) {
        ASSERT_EQ(i, r.got[i]);
    }
    EXPECT_EQ(90u, r.rx.duplicates);
}

TEST(xorder, holding_is_bounded_and_a_refused_message_comes_again)
{
    receiver r(4);
    EXPECT_EQ(APTUS_XORDER_HELD, r.arrive(1, 1));
    EXPECT_EQ(APTUS_XORDER_HELD, r.arrive(3, 3));
    EXPECT_EQ(APTUS_XORDER_DUPLICATE, r.arrive(3, 3));
    EXPECT_EQ(APTUS_XORDER_HELD, r.arrive(2, 2));
    EXPECT_EQ(APTUS_XORDER_HELD, r.arrive(5, 5));
    EXPECT_EQ(APTUS_XORDER_REFUSED, r.arrive(4, 4)); /* full */
    EXPECT_EQ(4u, r.rx.num_held);
    EXPECT_EQ(APTUS_XORDER_DELIVER, r.arrive(0, 0));
    EXPECT_EQ((std::vector<uint32_t>{ 0, 1, 2, 3 }), r.got);
    /* the refused one is still the sender's: offered again, it goes */
    EXPECT_EQ(APTUS_XORDER_DELIVER, r.arrive(4, 4));
    EXPECT_EQ((std::vector<uint32_t>{ 0, 1, 2, 3, 4, 5 }), r.got);
    EXPECT_EQ(APTUS_XORDER_DUPLICATE, r.arrive(2, 2));
    /* absurdly far ahead is refused outright */
    EXPECT_EQ(APTUS_XORDER_REFUSED, r.arrive(6 + (1u << 30), 0));
}

TEST(xorder, sequence_numbers_wrap)
{
    receiver r(64, UINT32_MAX - 10);
    std::vector<aptus_xseq_t> seqs;
    for (uint32_t i = 0; i < 40; ++i) {
        seqs.push_back(UINT32_MAX - 10 + i);
    }
    std::mt19937 rng(9);
    for (size_t i = 0; i + 8 <= seqs.size(); i += 8) {
        std::shuffle(seqs.begin() + i, seqs.begin() + i + 8, rng);
    }
    for (aptus_xseq_t s : seqs) {
        ASSERT_NE(APTUS_XORDER_DUPLICATE, r.arrive(s, s));
    }
    ASSERT_EQ(40u, r.got.size());
    for (uint32_t i = 0; i < 40; ++i) {
        EXPECT_EQ((aptus_xseq_t)(UINT32_MAX - 10 + i), r.got[i]);
    }
}
