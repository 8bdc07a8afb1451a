/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the UD-ZCopy protocol logic (src/proto/zcopy.c): receiver
 * placement and misplacement, the window, missing ranges, the owner's
 * resend queue, and the message codecs (fuzzed).
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/zcopy.h"
}

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace
{

struct rx_fixture {
    rx_fixture(uint64_t length, uint32_t payload, uint32_t window)
        : bitmap(aptus_zc_bitmap_words(aptus_zc_count(length, payload)) + 1,
                 ~0ull)
    {
        aptus_zc_rx_init(&rx, length, payload, window, bitmap.data());
    }
    aptus_zc_rx_t rx;
    std::vector<uint64_t> bitmap;
    uint32_t seq = 0; /* the owner's send sequence */
};

} // namespace

TEST(zcopy, data_header_round_trip_and_rejects)
{
    uint8_t buf[APTUS_ZC_HDR_LEN];
    aptus_zc_data_t d = { 0xabcdef0123456789ull, 7, 123456, 0x10203 }, e;
    aptus_zc_data_build(buf, &d);
    ASSERT_EQ(0, aptus_zc_data_parse(buf, sizeof(buf), &e));
    EXPECT_EQ(d.key, e.key);
    EXPECT_EQ(d.xfer, e.xfer);
    EXPECT_EQ(d.index, e.index);
    EXPECT_EQ(d.seq, e.seq);
    EXPECT_EQ(-1, aptus_zc_data_parse(buf, sizeof(buf) - 1, &e));
    d.seq = 0; /* sequences start at 1 */
    aptus_zc_data_build(buf, &d);
    EXPECT_EQ(-1, aptus_zc_data_parse(buf, sizeof(buf), &e));
}

TEST(zcopy, in_order_placement_completes)
{
    rx_fixture f(10000, 1000, 4);
    EXPECT_EQ(10u, f.rx.count);
    EXPECT_EQ(4u, aptus_zc_rx_edge(&f.rx));
    uint32_t idx[8];
    ASSERT_EQ(4u, aptus_zc_rx_plan(&f.rx, idx, 8));
    EXPECT_EQ(0u, idx[0]);
    EXPECT_EQ(3u, idx[3]);
    for (uint32_t i = 0; i < 10; ++i) {
        EXPECT_EQ(APTUS_ZC_PLACED,
                  aptus_zc_rx_accept(&f.rx, i, i, ++f.seq, 1000));
        EXPECT_EQ(std::min<uint32_t>(10, i + 1 + 4), aptus_zc_rx_edge(&f.rx));
    }
    EXPECT_TRUE(aptus_zc_rx_complete(&f.rx));
    EXPECT_EQ(0u, aptus_zc_rx_plan(&f.rx, idx, 8));
}

/* The receiver grants a quarter of its window at a time, and the last
 * bit of a transfer even when it is less (or the owner would wait). */
TEST(zcopy, credit_every_quarter_window_and_at_the_end)
{
    rx_fixture f(516 * 100, 100, 256);
    f.rx.edge_sent = aptus_zc_rx_edge(&f.rx); /* the request granted 256 */
    EXPECT_EQ(256u, f.rx.edge_sent);
    uint32_t credits = 0;
    for (uint32_t i = 0; i < 516; ++i) {
        aptus_zc_rx_accept(&f.rx, i, i, ++f.seq, 100);
        if (aptus_zc_rx_want_credit(&f.rx)) {
            EXPECT_TRUE((aptus_zc_rx_edge(&f.rx) - f.rx.edge_sent >= 64) ||
                        (aptus_zc_rx_edge(&f.rx) == 516u));
            f.rx.edge_sent = aptus_zc_rx_edge(&f.rx);
            ++credits;
        }
    }
    EXPECT_EQ(516u, f.rx.edge_sent); /* the owner could send everything */
    EXPECT_EQ(5u, credits);          /* 320, 384, 448, 512, 516 */
}

TEST(zcopy, last_datagram_is_short)
{
    rx_fixture f(2500, 1000, 8);
    EXPECT_EQ(3u, f.rx.count);
    EXPECT_EQ(500u, aptus_zc_len(&f.rx, 2));
    EXPECT_EQ(APTUS_ZC_BAD_LENGTH,
              aptus_zc_rx_accept(&f.rx, 2, 2, ++f.seq, 1000));
    EXPECT_EQ(APTUS_ZC_BAD_LENGTH,
              aptus_zc_rx_accept(&f.rx, 0, 0, ++f.seq, 500));
    EXPECT_EQ(APTUS_ZC_PLACED, aptus_zc_rx_accept(&f.rx, 2, 2, ++f.seq, 500));
    EXPECT_EQ(APTUS_ZC_OUT_OF_RANGE,
              aptus_zc_rx_accept(&f.rx, 2, 3, ++f.seq, 1000));
    EXPECT_EQ(APTUS_ZC_OUT_OF_RANGE,
              aptus_zc_rx_accept(&f.rx, 2, ~0u, ++f.seq, 1000));
    EXPECT_EQ(1u, f.rx.received);
}

TEST(zcopy, loss_misplacement_and_missing_ranges)
{
    rx_fixture f(100 * 1000, 1000, 100);
    /* slots posted for 0..9; datagram 3 is lost, so 4.. land one slot early */
    for (uint32_t slot = 0; slot < 9; ++slot) {
        uint32_t pkt = (slot < 3) ? slot : slot + 1;
        aptus_zc_verdict_t v =
            aptus_zc_rx_accept(&f.rx, slot, pkt, ++f.seq, 1000);
        EXPECT_EQ((slot < 3) ? APTUS_ZC_PLACED : APTUS_ZC_MISPLACED, v);
    }
    EXPECT_EQ(3u, f.rx.lowest_missing);
    EXPECT_EQ(10u, f.rx.highest_seen);
    aptus_zc_range_t r[4];
    ASSERT_EQ(1u, aptus_zc_rx_missing(&f.rx, f.rx.highest_seen, r, 4));
    EXPECT_EQ(3u, r[0].first);
    EXPECT_EQ(4u, r[0].last);
    /* the plan fills the hole first */
    uint32_t idx[3];
    ASSERT_EQ(3u, aptus_zc_rx_plan(&f.rx, idx, 3));
    EXPECT_EQ(3u, idx[0]);
    EXPECT_EQ(10u, idx[1]);
    EXPECT_EQ(APTUS_ZC_DUPLICATE,
              aptus_zc_rx_accept(&f.rx, 3, 5, ++f.seq, 1000));
    EXPECT_EQ(APTUS_ZC_PLACED, aptus_zc_rx_accept(&f.rx, 3, 3, ++f.seq, 1000));
    EXPECT_EQ(10u, f.rx.lowest_missing);
    EXPECT_EQ(0u, aptus_zc_rx_missing(&f.rx, f.rx.highest_seen, r, 4));
    /* on a stall the receiver names everything it may still get */
    ASSERT_EQ(1u, aptus_zc_rx_missing(&f.rx, aptus_zc_rx_edge(&f.rx), r, 4));
    EXPECT_EQ(10u, r[0].first);
    EXPECT_EQ(100u, r[0].last);
}

TEST(zcopy, missing_ranges_across_words_and_limit)
{
    rx_fixture f(1000 * 100, 100, 1000);
    for (uint32_t i = 0; i < 1000; ++i) {
        if ((i % 130) != 7 && !(i >= 60 && i < 200)) {
            aptus_zc_rx_accept(&f.rx, i, i, ++f.seq, 100);
        }
    }
    aptus_zc_range_t r[APTUS_ZC_MAX_RANGES];
    unsigned n = aptus_zc_rx_missing(&f.rx, 1000, r, APTUS_ZC_MAX_RANGES);
    std::set<uint32_t> missing;
    for (unsigned k = 0; k < n; ++k) {
        for (uint32_t i = r[k].first; i < r[k].last; ++i) {
            missing.insert(i);
        }
    }
    std::set<uint32_t> expect;
    for (uint32_t i = 0; i < 1000; ++i) {
        if (((i % 130) == 7) || (i >= 60 && i < 200)) {
            expect.insert(i);
        }
    }
    EXPECT_EQ(expect, missing);
    EXPECT_EQ(2u, aptus_zc_rx_missing(&f.rx, 1000, r, 2)); /* capped */
}

namespace
{

struct tx_fixture {
    tx_fixture(uint32_t count, uint32_t edge)
        : ring(aptus_zc_tx_ring_size(count, edge))
    {
        aptus_zc_tx_init(&tx, count, edge, ring.data(), ring.size());
    }
    /* indices and sequences of everything sendable now */
    std::vector<uint32_t> drain(std::vector<uint32_t> *seqs = nullptr)
    {
        std::vector<uint32_t> sent;
        uint32_t i, seq;
        while (aptus_zc_tx_next(&tx, &i, &seq)) {
            sent.push_back(i);
            if (seqs != nullptr) {
                seqs->push_back(seq);
            }
        }
        return sent;
    }
    /* the latest sequence stamped */
    uint32_t last_seq() const
    {
        return tx.next_seq - 1;
    }
    aptus_zc_tx_t tx;
    std::vector<aptus_zc_sent_t> ring;
};

} // namespace

TEST(zcopy, owner_window_and_resend_queue)
{
    tx_fixture f(20, 4);
    std::vector<uint32_t> seqs;
    EXPECT_EQ((std::vector<uint32_t>{ 0, 1, 2, 3 }), f.drain(&seqs));
    EXPECT_EQ((std::vector<uint32_t>{ 1, 2, 3, 4 }), seqs); /* from 1 */

    /* credit: edge 8, resend 1 and 2, and a range never sent (clipped);
     * the receiver saw everything sent so far */
    aptus_zc_range_t r[2] = { { 1, 3 }, { 6, 9 } };
    aptus_zc_tx_credit(&f.tx, 8, r, 2, f.last_seq());
    EXPECT_EQ((std::vector<uint32_t>{ 1, 2, 4, 5, 6, 7 }), f.drain());

    /* the edge never moves back; overlapping ranges merge */
    aptus_zc_range_t r2[3] = { { 0, 2 }, { 1, 5 }, { 4, 6 } };
    aptus_zc_tx_credit(&f.tx, 3, r2, 3, f.last_seq());
    EXPECT_EQ(8u, f.tx.edge);
    EXPECT_EQ(1u, f.tx.num_rtx);
    EXPECT_EQ((std::vector<uint32_t>{ 0, 1, 2, 3, 4, 5 }), f.drain());
    aptus_zc_tx_credit(&f.tx, 1000, nullptr, 0, f.last_seq());
    EXPECT_EQ(20u, f.tx.edge);
}

/* A missing list names what the receiver had not seen when it wrote it;
 * indices sent after the latest sequence it saw may still be on their way
 * and are not resent. */
TEST(zcopy, owner_resends_only_what_went_before_the_seen_sequence)
{
    tx_fixture f(100, 64);
    std::vector<uint32_t> seqs;
    f.drain(&seqs); /* 0..63 with sequences 1..64 */
    ASSERT_EQ(64u, seqs.size());

    /* the receiver saw up to sequence 30 (index 29), with 10..11 lost */
    aptus_zc_range_t r[2] = { { 10, 12 }, { 30, 64 } };
    aptus_zc_tx_credit(&f.tx, 64, r, 2, 30);
    EXPECT_EQ((std::vector<uint32_t>{ 10, 11 }), f.drain(&seqs));

    /* a stale list (written before the resends arrived) does not resend
     * them again; a later one, after they were lost too, does */
    aptus_zc_tx_credit(&f.tx, 64, r, 1, 40);
    EXPECT_TRUE(f.drain().empty());
    aptus_zc_tx_credit(&f.tx, 64, r, 1, f.last_seq());
    EXPECT_EQ((std::vector<uint32_t>{ 10, 11 }), f.drain());

    /* sequences wrap */
    EXPECT_TRUE(aptus_zc_seq_after(1, 0xffffffffu));
    EXPECT_FALSE(aptus_zc_seq_after(0xffffffffu, 1));
}

/* A lost tail leaves the receiver nothing to report: the owner's probe
 * sends its latest datagram again, whose sequence covers the tail. */
TEST(zcopy, probe_repeats_the_latest_datagram)
{
    tx_fixture f(10, 10);
    uint32_t i, seq;
    EXPECT_EQ(0, aptus_zc_tx_probe(&f.tx)); /* nothing sent yet */
    f.drain();
    ASSERT_EQ(1, aptus_zc_tx_probe(&f.tx));
    ASSERT_TRUE(aptus_zc_tx_next(&f.tx, &i, &seq));
    EXPECT_EQ(9u, i);
    EXPECT_EQ(11u, seq);

    /* the receiver saw 0..4 and the probe: 5..8 are lost for sure */
    rx_fixture rf(10 * 100, 100, 10);
    for (uint32_t k = 0; k < 5; ++k) {
        aptus_zc_rx_accept(&rf.rx, k, k, k + 1, 100);
    }
    EXPECT_FALSE(aptus_zc_rx_want_nack(&rf.rx));
    EXPECT_EQ(APTUS_ZC_MISPLACED, aptus_zc_rx_accept(&rf.rx, 5, 9, seq, 100));
    EXPECT_TRUE(aptus_zc_rx_want_nack(&rf.rx));
    aptus_zc_range_t r[APTUS_ZC_MAX_RANGES];
    unsigned n =
        aptus_zc_rx_missing(&rf.rx, rf.rx.highest_seen, r, APTUS_ZC_MAX_RANGES);
    aptus_zc_tx_credit(&f.tx, 10, r, n, rf.rx.seen_seq);
    EXPECT_EQ((std::vector<uint32_t>{ 5, 6, 7, 8 }), f.drain());
    rf.rx.nack_seq = rf.rx.seen_seq;
    EXPECT_FALSE(aptus_zc_rx_want_nack(&rf.rx)); /* nothing new to say */

    /* a datagram the wire refused goes again, and a list may name it */
    tx_fixture g(10, 10);
    g.drain();
    aptus_zc_tx_unsend(&g.tx, 9);
    aptus_zc_range_t r9 = { 9, 10 };
    aptus_zc_tx_credit(&g.tx, 10, &r9, 1, 1);
    EXPECT_EQ((std::vector<uint32_t>{ 9 }), g.drain());
}

TEST(zcopy, message_round_trips)
{
    uint8_t buf[256];
    aptus_zc_msg_t m = {}, q;

    m.type            = APTUS_ZC_MSG_REQ;
    m.xfer            = 42;
    m.req.flags       = 0;
    m.req.remote_addr = 0x7fff12345678ull;
    m.req.length      = 16 << 20;
    m.req.token       = 0x1122334455667788ull;
    for (unsigned k = 0; k < APTUS_ZC_ADDR_LEN; ++k) {
        m.req.ctx_addr[k] = (uint8_t)k;
    }
    m.req.ctx_key = 0x99aabbccddeeff00ull;
    m.req.payload = 2032;
    m.req.edge    = 128;
    size_t len    = aptus_zc_msg_build(buf, &m);
    ASSERT_EQ(len, aptus_zc_msg_len(&m));
    ASSERT_EQ(0, aptus_zc_msg_parse(buf, len, &q));
    EXPECT_EQ(42u, q.xfer);
    EXPECT_EQ(m.req.remote_addr, q.req.remote_addr);
    EXPECT_EQ(m.req.length, q.req.length);
    EXPECT_EQ(m.req.token, q.req.token);
    EXPECT_EQ(0, memcmp(m.req.ctx_addr, q.req.ctx_addr, APTUS_ZC_ADDR_LEN));
    EXPECT_EQ(0x99aabbccddeeff00ull, q.req.ctx_key);
    EXPECT_EQ(2032u, q.req.payload);
    EXPECT_EQ(128u, q.req.edge);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len - 1, &q));

    m                   = aptus_zc_msg_t();
    m.type              = APTUS_ZC_MSG_CREDIT;
    m.xfer              = 5;
    m.credit.edge       = 300;
    m.credit.num_ranges = 2;
    m.credit.ranges[0]  = { 1, 2 };
    m.credit.ranges[1]  = { 10, 40 };
    m.credit.seen_seq   = 0xfffffff0u;
    len                 = aptus_zc_msg_build(buf, &m);
    ASSERT_EQ(0, aptus_zc_msg_parse(buf, len, &q));
    EXPECT_EQ(300u, q.credit.edge);
    ASSERT_EQ(2u, q.credit.num_ranges);
    EXPECT_EQ(40u, q.credit.ranges[1].last);
    EXPECT_EQ(0xfffffff0u, q.credit.seen_seq);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len - 1, &q));
    buf[8 + 8] = 17; /* more ranges than a credit may hold */
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));

    m             = aptus_zc_msg_t();
    m.type        = APTUS_ZC_MSG_ERROR;
    m.xfer        = 6;
    m.done.status = -11;
    len           = aptus_zc_msg_build(buf, &m);
    ASSERT_EQ(0, aptus_zc_msg_parse(buf, len, &q));
    EXPECT_EQ(-11, q.done.status);

    m             = aptus_zc_msg_t();
    m.type        = APTUS_ZC_MSG_COPY;
    m.xfer        = 7;
    m.copy.offset = 4096;
    len           = aptus_zc_msg_build(buf, &m);
    memset(buf + len, 0x5a, 100);
    ASSERT_EQ(0, aptus_zc_msg_parse(buf, len + 100, &q));
    EXPECT_EQ(4096u, q.copy.offset);
    EXPECT_EQ(100u, q.copy.length);
    EXPECT_EQ(buf + len, q.copy.data);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q)); /* no data */
}

TEST(zcopy, write_messages)
{
    uint8_t buf[256];
    aptus_zc_msg_t m = {}, q;

    m.type             = APTUS_ZC_MSG_WRITE;
    m.xfer             = 77;
    m.write.dest_addr  = 0x7f0000001000ull;
    m.write.length     = 300000;
    m.write.dest_token = 0xa1a2a3a4a5a6a7a8ull;
    m.write.src_addr   = 0x5500000000ull;
    m.write.src_token  = 0x0102030405060708ull;
    size_t len         = aptus_zc_msg_build(buf, &m);
    ASSERT_EQ(len, aptus_zc_msg_len(&m));
    ASSERT_EQ(0, aptus_zc_msg_parse(buf, len, &q));
    EXPECT_EQ(APTUS_ZC_MSG_WRITE, q.type);
    EXPECT_EQ(77u, q.xfer);
    EXPECT_EQ(m.write.dest_addr, q.write.dest_addr);
    EXPECT_EQ(m.write.length, q.write.length);
    EXPECT_EQ(m.write.dest_token, q.write.dest_token);
    EXPECT_EQ(m.write.src_addr, q.write.src_addr);
    EXPECT_EQ(m.write.src_token, q.write.src_token);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len - 1, &q)); /* truncated */
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len + 1, &q)); /* trailing byte */

    m.write.length = 0; /* nothing to write */
    len            = aptus_zc_msg_build(buf, &m);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));
    m.write.length   = 64;
    m.write.src_addr = ~0ull - 10; /* the source wraps */
    len              = aptus_zc_msg_build(buf, &m);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));
    m.write.src_addr  = 4096;
    m.write.dest_addr = ~0ull - 10; /* the destination wraps */
    len               = aptus_zc_msg_build(buf, &m);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));

    m             = aptus_zc_msg_t();
    m.type        = APTUS_ZC_MSG_WDONE;
    m.xfer        = 78;
    m.done.status = -3;
    len           = aptus_zc_msg_build(buf, &m);
    ASSERT_EQ(0, aptus_zc_msg_parse(buf, len, &q));
    EXPECT_EQ(APTUS_ZC_MSG_WDONE, q.type);
    EXPECT_EQ(-3, q.done.status);
}

TEST(zcopy, message_rejects)
{
    uint8_t buf[256];
    aptus_zc_msg_t m    = {}, q;
    m.type              = APTUS_ZC_MSG_CREDIT;
    m.credit.num_ranges = 1;
    m.credit.ranges[0]  = { 5, 5 }; /* empty range */
    size_t len          = aptus_zc_msg_build(buf, &m);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));

    m             = aptus_zc_msg_t();
    m.type        = APTUS_ZC_MSG_REQ;
    m.req.length  = 0; /* nothing to send */
    m.req.payload = 1000;
    m.req.edge    = 1;
    len           = aptus_zc_msg_build(buf, &m);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));
    m.req.length      = 10;
    m.req.remote_addr = ~0ull - 5; /* wraps */
    len               = aptus_zc_msg_build(buf, &m);
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));

    buf[0] = 0; /* unknown type */
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, len, &q));
    buf[0] = APTUS_ZC_MSG_DONE;
    buf[2] = 1; /* reserved */
    EXPECT_EQ(-1, aptus_zc_msg_parse(buf, 16, &q));
}

TEST(zcopy, message_parser_fuzz)
{
    std::mt19937 rng(99);
    std::vector<std::vector<uint8_t>> seeds;
    uint8_t buf[256];
    aptus_zc_msg_t m = {};
    m.type           = APTUS_ZC_MSG_REQ;
    m.req.length     = 100000;
    m.req.payload    = 2000;
    m.req.edge       = 10;
    seeds.emplace_back(buf, buf + aptus_zc_msg_build(buf, &m));
    m                   = aptus_zc_msg_t();
    m.type              = APTUS_ZC_MSG_CREDIT;
    m.credit.num_ranges = 3;
    m.credit.ranges[0]  = { 0, 1 };
    m.credit.ranges[1]  = { 5, 9 };
    m.credit.ranges[2]  = { 20, 21 };
    seeds.emplace_back(buf, buf + aptus_zc_msg_build(buf, &m));
    m             = aptus_zc_msg_t();
    m.type        = APTUS_ZC_MSG_COPY;
    m.copy.offset = 10;
    std::vector<uint8_t> c(buf, buf + aptus_zc_msg_build(buf, &m));
    c.resize(c.size() + 50, 1);
    seeds.push_back(c);

    unsigned accepted = 0;
    for (int iter = 0; iter < 100000; ++iter) {
        std::vector<uint8_t> b = seeds[rng() % seeds.size()];
        for (int k = 0, n = 1 + rng() % 3; k < n; ++k) {
            switch (rng() % 3) {
            case 0:
                if (!b.empty())
                    b[rng() % b.size()] ^= 1u << (rng() % 8);
                break;
            case 1:
                b.resize(rng() % (b.size() + 1));
                break;
            case 2:
                b.push_back((uint8_t)rng());
                break;
            }
        }
        uint8_t *copy = new uint8_t[b.size() + 1];
        std::copy(b.begin(), b.end(), copy);
        aptus_zc_msg_t q;
        if (aptus_zc_msg_parse(copy, b.size(), &q) == 0) {
            ++accepted;
            ASSERT_GE(q.type, APTUS_ZC_MSG_REQ);
            ASSERT_LT(q.type, APTUS_ZC_MSG_LAST);
            if (q.type == APTUS_ZC_MSG_CREDIT) {
                ASSERT_LE(q.credit.num_ranges, APTUS_ZC_MAX_RANGES);
                for (unsigned k = 0; k < q.credit.num_ranges; ++k) {
                    ASSERT_LT(q.credit.ranges[k].first,
                              q.credit.ranges[k].last);
                }
            } else if (q.type == APTUS_ZC_MSG_COPY) {
                ASSERT_GT(q.copy.length, 0u);
                ASSERT_EQ(copy + b.size(),
                          (const uint8_t *)q.copy.data + q.copy.length);
            } else if (q.type == APTUS_ZC_MSG_REQ) {
                ASSERT_GT(q.req.length, 0u);
            }
        }
        delete[] copy;
    }
    EXPECT_GT(accepted, 100u);
}

/* A whole transfer through a lossy, reordering, duplicating network with
 * the receiver posting slots in plan order: every byte ends in place. */
TEST(zcopy, random_loss_reorder_end_to_end)
{
    const uint32_t payload = 100;
    const uint64_t length  = 100 * 977 + 37;
    std::vector<uint8_t> src(length), dst(length, 0);
    for (uint64_t k = 0; k < length; ++k) {
        src[k] = (uint8_t)(k * 7 + (k >> 8));
    }
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(0, 1);
    rx_fixture f(length, payload, 64);
    tx_fixture t(f.rx.count, aptus_zc_rx_edge(&f.rx));
    unsigned sent = 0;

    int rounds = 0;
    while (!aptus_zc_rx_complete(&f.rx) && (++rounds < 10000)) {
        /* the owner sends what it may, or probes when it may not */
        std::vector<std::pair<uint32_t, uint32_t>> net; /* index, seq */
        uint32_t i, seq;
        uint32_t dummy;
        if (!aptus_zc_tx_peek(&t.tx, &dummy)) {
            aptus_zc_tx_probe(&t.tx);
        }
        while (aptus_zc_tx_next(&t.tx, &i, &seq)) {
            ++sent;
            if (u(rng) < 0.2)
                continue; /* lost */
            net.push_back({ i, seq });
            if (u(rng) < 0.05)
                net.push_back({ i, seq }); /* duplicated */
        }
        for (size_t k = 1; k < net.size(); ++k) {
            if (u(rng) < 0.1)
                std::swap(net[k - 1], net[k]);
        }
        /* the receiver posts slots in plan order; arrivals fill them */
        size_t next = 0;
        while (next < net.size()) {
            uint32_t slots[16];
            unsigned ns = aptus_zc_rx_plan(&f.rx, slots, 16);
            if (ns == 0)
                break;
            std::vector<std::pair<uint32_t, std::vector<uint8_t>>> staged;
            for (unsigned s = 0; (s < ns) && (next < net.size()); ++s, ++next) {
                uint32_t pkt = net[next].first;
                uint32_t len = aptus_zc_len(&f.rx, pkt);
                /* the datagram lands at the slot's place */
                uint64_t at   = aptus_zc_offset(&f.rx, slots[s]);
                uint32_t room = aptus_zc_len(&f.rx, slots[s]);
                std::vector<uint8_t> landed(
                    src.begin() + aptus_zc_offset(&f.rx, pkt),
                    src.begin() + aptus_zc_offset(&f.rx, pkt) + len);
                std::copy(landed.begin(), landed.begin() + std::min(len, room),
                          dst.begin() + at);
                aptus_zc_verdict_t v = aptus_zc_rx_accept(
                    &f.rx, slots[s], pkt, net[next].second, len);
                if (v == APTUS_ZC_MISPLACED) {
                    staged.push_back({ pkt, landed });
                }
            }
            for (auto &st : staged) {
                std::copy(st.second.begin(), st.second.end(),
                          dst.begin() + aptus_zc_offset(&f.rx, st.first));
            }
        }
        /* credit with the missing ranges below the edge */
        aptus_zc_range_t r[APTUS_ZC_MAX_RANGES];
        unsigned nr = aptus_zc_rx_missing(&f.rx, aptus_zc_rx_edge(&f.rx), r,
                                          APTUS_ZC_MAX_RANGES);
        aptus_zc_tx_credit(&t.tx, aptus_zc_rx_edge(&f.rx), r, nr,
                           f.rx.seen_seq);
    }
    ASSERT_TRUE(aptus_zc_rx_complete(&f.rx));
    EXPECT_EQ(src, dst);
    /* losses cost resends, but not many more than were lost (~25%) */
    EXPECT_LT(sent, f.rx.count * 2);
}
