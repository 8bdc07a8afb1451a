/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fast-path ring in its three modes (src/proto/fp_ring.c): Veloblock,
 * Original (fixed top-fill slots with a sender mirror) and
 * Original-Reduced. The same cases run against each: fill until credits
 * run out, credit return, wrap, a message that exactly fills its room,
 * zero-length messages, corruption, many channels with receivers that lag
 * at random. Then what tells the modes apart: memory per channel and how
 * many small messages fit before credits must come back.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/fp_ring.h"
}

#include <cstring>
#include <deque>
#include <random>
#include <vector>

namespace
{

aptus_fp_geom_t geom_of(aptus_fp_mode_t mode)
{
    aptus_fp_geom_t g;
    const char *why = nullptr;
    EXPECT_EQ(0, aptus_fp_geom_make(mode, 32768, 32, 8192, &g, &why)) << why;
    return g;
}

struct channel {
    aptus_fp_geom_t geom;
    std::vector<uint8_t> mem;    /* the receiver's */
    std::vector<uint8_t> mirror; /* the sender's (fixed modes) */
    std::vector<uint8_t> scratch;
    aptus_fp_tx_t tx;
    aptus_fp_rx_t rx;

    explicit channel(const aptus_fp_geom_t &g)
        : geom(g), mem(g.size, 0), mirror(aptus_fp_send_bytes(&g) + 1, 0),
          scratch(aptus_vb_image_len(aptus_fp_max_len(&g)))
    {
        aptus_fp_tx_init(&tx, &geom);
        aptus_fp_rx_init(&rx, &geom);
    }

    aptus_vb_status_t send(const std::vector<uint8_t> &payload)
    {
        struct iovec iov[2] = { { (void *)payload.data(), payload.size() / 2 },
                                { (void *)(payload.data() + payload.size() / 2),
                                  payload.size() - payload.size() / 2 } };
        const uint8_t *image;
        aptus_vb_write_t w;
        aptus_vb_status_t st;
        while ((st = aptus_fp_tx_pack(&tx, iov, 2, scratch.data(),
                                      mirror.data(), &image, &w)) ==
               APTUS_VB_WRAPPED) {
            aptus_vb_write_local(mem.data(), &w, image);
        }
        if (st == APTUS_VB_OK) {
            EXPECT_LE(w.offset + w.total, geom.size);
            aptus_vb_write_local(mem.data(), &w, image);
        }
        return st;
    }

    aptus_vb_status_t recv(std::vector<uint8_t> &out)
    {
        aptus_vb_msg_t msg;
        aptus_vb_status_t st = aptus_fp_rx_poll(&rx, mem.data(), &msg);
        if (st == APTUS_VB_OK) {
            out.assign(msg.data, msg.data + msg.length);
            aptus_fp_rx_release(&rx, mem.data(), &msg);
        }
        return st;
    }

    void return_credits()
    {
        ASSERT_EQ(APTUS_VB_OK,
                  aptus_fp_tx_credit(&tx, aptus_fp_rx_take_credits(&rx)));
    }
};

std::vector<uint8_t> bytes(unsigned seed, size_t len)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = (uint8_t)(seed * 131 + i * 7 + 1);
    }
    return v;
}

class fp_ring : public ::testing::TestWithParam<aptus_fp_mode_t>
{
};

} // namespace

TEST_P(fp_ring, fill_until_no_credit_then_credits_let_it_go_on)
{
    channel c(geom_of(GetParam()));
    unsigned sent = 0;
    while (c.send(bytes(sent, 100)) == APTUS_VB_OK) {
        ++sent;
        ASSERT_LT(sent, 100000u);
    }
    EXPECT_GT(sent, 0u);
    EXPECT_FALSE(aptus_fp_tx_may_send(&c.tx, 100));
    std::vector<uint8_t> out;
    for (unsigned i = 0; i < sent; ++i) {
        ASSERT_EQ(APTUS_VB_OK, c.recv(out)) << i;
        ASSERT_EQ(bytes(i, 100), out) << i;
    }
    EXPECT_EQ(APTUS_VB_EMPTY, c.recv(out));
    c.return_credits();
    EXPECT_TRUE(aptus_fp_tx_may_send(&c.tx, 100));
    /* several trips around, credits back after every message */
    for (unsigned i = 0; i < 5 * sent; ++i) {
        ASSERT_EQ(APTUS_VB_OK, c.send(bytes(i, 100 + i % 50))) << i;
        ASSERT_EQ(APTUS_VB_OK, c.recv(out));
        ASSERT_EQ(bytes(i, 100 + i % 50), out);
        c.return_credits();
    }
}

TEST_P(fp_ring, largest_message_fits_exactly_and_one_more_byte_does_not)
{
    channel c(geom_of(GetParam()));
    uint32_t max = aptus_fp_max_len(&c.geom);
    std::vector<uint8_t> out;

    EXPECT_EQ(APTUS_VB_TOO_BIG, c.send(bytes(1, max + 1)));
    EXPECT_FALSE(aptus_fp_tx_may_send(&c.tx, max + 1));
    ASSERT_EQ(APTUS_VB_OK, c.send(bytes(2, max)));
    ASSERT_EQ(APTUS_VB_OK, c.recv(out));
    EXPECT_EQ(bytes(2, max), out);
    c.return_credits();
    aptus_vb_status_t st = c.send(bytes(3, max)); /* again, after a wrap */
    if (c.geom.mode == APTUS_FP_VELOBLOCK) {
        /* the wrap record took the block's last byte: the receiver frees
         * it when it reads the record, and only then does a full block fit */
        ASSERT_EQ(APTUS_VB_NO_ROOM, st);
        ASSERT_EQ(APTUS_VB_EMPTY, c.recv(out));
        c.return_credits();
        st = c.send(bytes(3, max));
    }
    ASSERT_EQ(APTUS_VB_OK, st);
    ASSERT_EQ(APTUS_VB_OK, c.recv(out));
    EXPECT_EQ(bytes(3, max), out);
}

TEST_P(fp_ring, nothing_is_seen_before_the_last_piece_lands)
{
    /* a write lands piece by piece, in aptus_fp_write_pieces' order, and
     * the receiver finds the message only when the last piece is in */
    channel c(geom_of(GetParam()));
    for (unsigned i = 0; i < 200; ++i) {
        std::vector<uint8_t> payload = bytes(i, (i * 37) % 900);
        struct iovec iov             = { payload.data(), payload.size() };
        const uint8_t *image;
        aptus_vb_write_t w;
        aptus_vb_status_t st;
        aptus_fp_piece_t pieces[APTUS_FP_MAX_PIECES];
        while ((st = aptus_fp_tx_pack(&c.tx, &iov, 1, c.scratch.data(),
                                      c.mirror.data(), &image, &w)) ==
               APTUS_VB_WRAPPED) {
            ASSERT_EQ(1u, aptus_fp_write_pieces(&c.geom, &w, pieces));
            aptus_vb_write_local(c.mem.data(), &w, image);
        }
        ASSERT_EQ(APTUS_VB_OK, st);
        unsigned count = aptus_fp_write_pieces(&c.geom, &w, pieces);
        ASSERT_EQ((GetParam() == APTUS_FP_VELOBLOCK) ? 2u : 3u, count);
        uint32_t covered = 0;
        std::vector<uint8_t> out;
        for (unsigned p = 0; p < count; ++p) {
            EXPECT_EQ(APTUS_VB_EMPTY, c.recv(out)) << "piece " << p;
            memcpy(c.mem.data() + w.offset + pieces[p].offset,
                   image + pieces[p].offset, pieces[p].length);
            covered += pieces[p].length;
        }
        EXPECT_EQ(w.total, covered); /* every byte, once */
        ASSERT_EQ(APTUS_VB_OK, c.recv(out));
        EXPECT_EQ(payload, out);
        c.return_credits();
    }
}

TEST_P(fp_ring, zero_length_messages)
{
    channel c(geom_of(GetParam()));
    std::vector<uint8_t> out(5, 9);
    for (unsigned i = 0; i < 1000; ++i) {
        ASSERT_EQ(APTUS_VB_OK, c.send({})) << i;
        ASSERT_EQ(APTUS_VB_OK, c.recv(out)) << i;
        EXPECT_TRUE(out.empty());
        c.return_credits();
    }
}

TEST_P(fp_ring, corruption_is_reported_never_followed)
{
    std::vector<uint8_t> out;
    { /* a flag the sender cannot have made */
        channel c(geom_of(GetParam()));
        ASSERT_EQ(APTUS_VB_OK, c.send(bytes(1, 10)));
        uint32_t at = (c.geom.mode == APTUS_FP_VELOBLOCK) ? c.geom.size - 1 : 0;
        c.mem[at]   = 7;
        EXPECT_EQ(APTUS_VB_CORRUPT, c.recv(out));
    }
    { /* a length that does not fit */
        channel c(geom_of(GetParam()));
        ASSERT_EQ(APTUS_VB_OK, c.send(bytes(1, 10)));
        uint32_t at = (c.geom.mode == APTUS_FP_VELOBLOCK) ? c.geom.size - 3 : 1;
        c.mem[at]   = 0xff;
        c.mem[at + 1] = 0xff;
        EXPECT_EQ(APTUS_VB_CORRUPT, c.recv(out));
    }
    { /* credits back that were never spent */
        channel c(geom_of(GetParam()));
        EXPECT_EQ(APTUS_VB_CORRUPT, aptus_fp_tx_credit(&c.tx, 1));
    }
}

TEST_P(fp_ring, many_channels_with_receivers_lagging_at_random)
{
    std::mt19937 rng(7 + GetParam());
    std::vector<channel> chans;
    for (int i = 0; i < 64; ++i) {
        chans.emplace_back(geom_of(GetParam()));
    }
    std::vector<std::deque<std::vector<uint8_t>>> inflight(chans.size());
    unsigned delivered = 0;
    uint32_t max       = aptus_fp_max_len(&chans[0].geom);
    for (unsigned step = 0; step < 40000; ++step) {
        size_t i   = rng() % chans.size();
        channel &c = chans[i];
        if (rng() % 3 != 0) {
            size_t len = (rng() % 4 == 0) ? rng() % (max + 1) : rng() % 300;
            auto msg   = bytes(step, len);
            aptus_vb_status_t st = c.send(msg);
            if (st == APTUS_VB_OK) {
                inflight[i].push_back(msg);
            } else {
                ASSERT_EQ(APTUS_VB_NO_ROOM, st);
                if (inflight[i].empty()) {
                    /* everything was read: the credits come back, and then
                     * the message goes (after the receiver reads a wrap
                     * record the sender may have left) */
                    std::vector<uint8_t> out;
                    aptus_vb_status_t again = APTUS_VB_NO_ROOM;
                    for (int round = 0;
                         (round < 2) && (again == APTUS_VB_NO_ROOM); ++round) {
                        ASSERT_EQ(APTUS_VB_EMPTY, c.recv(out));
                        c.return_credits();
                        again = c.send(msg);
                    }
                    ASSERT_EQ(APTUS_VB_OK, again) << "step " << step;
                    inflight[i].push_back(msg);
                }
            }
        } else {
            std::vector<uint8_t> out;
            while (!inflight[i].empty() && (rng() % 4 != 0)) {
                ASSERT_EQ(APTUS_VB_OK, c.recv(out));
                ASSERT_EQ(inflight[i].front(), out);
                inflight[i].pop_front();
                ++delivered;
            }
            if (inflight[i].empty()) {
                ASSERT_EQ(APTUS_VB_EMPTY, c.recv(out));
            }
            if (rng() % 2) {
                c.return_credits();
            }
        }
    }
    EXPECT_GT(delivered, 5000u);
}

INSTANTIATE_TEST_SUITE_P(
    modes, fp_ring,
    ::testing::Values(APTUS_FP_VELOBLOCK, APTUS_FP_ORIGINAL,
                      APTUS_FP_ORIGINAL_REDUCED),
    [](const ::testing::TestParamInfo<aptus_fp_mode_t> &info) {
        return std::string(aptus_fp_mode_names[info.param]);
    });

/* The paper's comparison: memory per channel, and small messages in
 * flight before the sender must wait for credits. */
TEST(fp_ring_modes, memory_and_capacity_as_in_the_paper)
{
    aptus_fp_geom_t vb = geom_of(APTUS_FP_VELOBLOCK);
    aptus_fp_geom_t og = geom_of(APTUS_FP_ORIGINAL);
    aptus_fp_geom_t rd = geom_of(APTUS_FP_ORIGINAL_REDUCED);

    EXPECT_EQ(32768u, aptus_fp_recv_bytes(&vb) + aptus_fp_send_bytes(&vb));
    EXPECT_EQ(524288u, aptus_fp_recv_bytes(&og) + aptus_fp_send_bytes(&og));
    EXPECT_EQ(32768u, aptus_fp_recv_bytes(&rd) + aptus_fp_send_bytes(&rd));
    EXPECT_EQ(16u, (aptus_fp_recv_bytes(&og) + aptus_fp_send_bytes(&og)) /
                       (aptus_fp_recv_bytes(&vb) + aptus_fp_send_bytes(&vb)));
    EXPECT_EQ(2u, rd.slots);

    auto capacity = [](const aptus_fp_geom_t &g, size_t len) {
        channel c(g);
        unsigned n = 0;
        while (c.send(bytes(n, len)) == APTUS_VB_OK) {
            ++n;
        }
        return n;
    };
    /* 64-byte messages: Veloblock packs them, the slots take one each */
    EXPECT_EQ((32768u - 68) / 67 + 1, capacity(vb, 64)); /* the top: +1 */
    EXPECT_EQ(32u, capacity(og, 64));
    EXPECT_EQ(2u, capacity(rd, 64));
}

TEST(fp_ring_modes, bad_geometry_is_refused_with_a_reason)
{
    aptus_fp_geom_t g;
    const char *why = nullptr;
    EXPECT_EQ(-1, aptus_fp_geom_make(APTUS_FP_VELOBLOCK, 10, 0, 0, &g, &why));
    EXPECT_NE(nullptr, why);
    why = nullptr;
    EXPECT_EQ(-1, aptus_fp_geom_make(APTUS_FP_ORIGINAL, 0, 0, 8192, &g, &why));
    EXPECT_NE(nullptr, why);
    why = nullptr;
    EXPECT_EQ(-1, aptus_fp_geom_make(APTUS_FP_ORIGINAL_REDUCED, 8192, 0, 8192,
                                     &g, &why)); /* not one slot per side */
    EXPECT_NE(nullptr, why);
    EXPECT_EQ(-1,
              aptus_fp_geom_make(APTUS_FP_ORIGINAL, 0, 4, 100000, &g, &why));
}
