/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Veloblock ring (src/proto/veloblock.c): fill, wrap, credits, a
 * message that fills the block, zero-length messages, corruption, many
 * channels, a receiver that lags behind at random, and the flag-last
 * property under two threads.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/veloblock.h"
}

#include <atomic>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

namespace
{

struct ring {
    std::vector<uint8_t> block;
    aptus_vb_tx_t tx;
    aptus_vb_rx_t rx;

    explicit ring(uint32_t size) : block(size, 0)
    {
        aptus_vb_tx_init(&tx, size);
        aptus_vb_rx_init(&rx, size);
    }

    /* send one message (following wraps); the status of the last step */
    aptus_vb_status_t send(const std::vector<uint8_t> &payload)
    {
        std::vector<uint8_t> image(aptus_vb_image_len(payload.size()));
        aptus_vb_write_t w;
        aptus_vb_status_t st;
        while ((st = aptus_vb_tx_pack(&tx, payload.data(), payload.size(),
                                      image.data(), &w)) == APTUS_VB_WRAPPED) {
            aptus_vb_write_local(block.data(), &w, image.data());
        }
        if (st == APTUS_VB_OK) {
            aptus_vb_write_local(block.data(), &w, image.data());
        }
        return st;
    }

    /* receive one message into out; the poll status */
    aptus_vb_status_t recv(std::vector<uint8_t> &out)
    {
        aptus_vb_msg_t msg;
        aptus_vb_status_t st = aptus_vb_rx_poll(&rx, block.data(), &msg);
        if (st == APTUS_VB_OK) {
            out.assign(msg.data, msg.data + msg.length);
            aptus_vb_rx_release(&rx, block.data(), &msg);
        }
        return st;
    }

    void return_credits()
    {
        ASSERT_EQ(APTUS_VB_OK,
                  aptus_vb_tx_credit(&tx, aptus_vb_rx_take_credits(&rx)));
    }
};

std::vector<uint8_t> payload(unsigned id, size_t len)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = (uint8_t)(id * 131 + i * 7 + (i >> 8));
    }
    return v;
}

} // namespace

TEST(veloblock, sizes)
{
    EXPECT_EQ(-1, aptus_vb_size_check(APTUS_VB_MIN_SIZE - 1));
    EXPECT_EQ(0, aptus_vb_size_check(32768));
    EXPECT_EQ(32768u - 1 - 3, aptus_vb_max_len(32768));
    EXPECT_EQ((uint32_t)APTUS_VB_MAX_LEN, aptus_vb_max_len(1u << 20));
}

TEST(veloblock, fill_in_order_and_nothing_more)
{
    ring r(1024);
    std::vector<uint8_t> out;
    EXPECT_EQ(APTUS_VB_EMPTY, r.recv(out));
    /* 100 + 3 bytes each (and the top slot): 9 fit in 1024 (928 bytes),
     * the 10th needs a wrap and credits for it */
    for (unsigned i = 0; i < 9; ++i) {
        ASSERT_EQ(APTUS_VB_OK, r.send(payload(i, 100))) << i;
    }
    /* the wrap record fits the 96 bytes left, the message not */
    EXPECT_EQ(APTUS_VB_NO_ROOM, r.send(payload(9, 100)));
    EXPECT_EQ(1u, r.tx.wraps);
    for (unsigned i = 0; i < 9; ++i) {
        ASSERT_EQ(APTUS_VB_OK, r.recv(out));
        EXPECT_EQ(payload(i, 100), out);
    }
    EXPECT_EQ(APTUS_VB_EMPTY, r.recv(out));
    EXPECT_EQ(1024u, r.rx.freed); /* a whole trip, the wrap included */
}

TEST(veloblock, wrap_and_credit_return)
{
    ring r(1024);
    std::vector<uint8_t> out;
    for (unsigned round = 0; round < 50; ++round) {
        for (unsigned i = 0; i < 7; ++i) {
            ASSERT_EQ(APTUS_VB_OK, r.send(payload(round * 10 + i, 120)))
                << round << " " << i;
        }
        for (unsigned i = 0; i < 7; ++i) {
            ASSERT_EQ(APTUS_VB_OK, r.recv(out));
            ASSERT_EQ(payload(round * 10 + i, 120), out);
        }
        r.return_credits();
    }
    EXPECT_GT(r.tx.wraps, 10u);
    EXPECT_EQ(r.tx.wraps, r.rx.wraps);
    /* every byte came back but the last message's zero byte: the slot of
     * the next flag, freed once that is read */
    EXPECT_EQ(1023u, r.tx.credits);
}

TEST(veloblock, message_that_fills_the_block)
{
    ring r(256);
    std::vector<uint8_t> out;
    uint32_t max = aptus_vb_max_len(256);
    EXPECT_EQ(APTUS_VB_TOO_BIG, r.send(payload(1, max + 1)));
    ASSERT_EQ(APTUS_VB_OK, r.send(payload(1, max)));
    EXPECT_EQ(0u, r.tx.slot); /* down to the first byte */
    ASSERT_EQ(APTUS_VB_OK, r.recv(out));
    EXPECT_EQ(payload(1, max), out);
    r.return_credits();
    /* and again: a wrap at the first byte, which stays until it was read,
     * so the whole block waits for that */
    EXPECT_EQ(APTUS_VB_NO_ROOM, r.send(payload(2, max)));
    EXPECT_EQ(APTUS_VB_EMPTY, r.recv(out)); /* follows the wrap */
    r.return_credits();
    ASSERT_EQ(APTUS_VB_OK, r.send(payload(2, max)));
    ASSERT_EQ(APTUS_VB_OK, r.recv(out));
    EXPECT_EQ(payload(2, max), out);
    r.return_credits();
    EXPECT_EQ(255u, r.tx.credits); /* all but the next slot */
}

TEST(veloblock, zero_length_messages)
{
    ring r(128);
    std::vector<uint8_t> out(5, 1);
    for (unsigned i = 0; i < 500; ++i) {
        ASSERT_EQ(APTUS_VB_OK, r.send({})) << i;
        ASSERT_EQ(APTUS_VB_OK, r.recv(out));
        EXPECT_TRUE(out.empty());
        r.return_credits();
    }
    EXPECT_EQ(500u, r.rx.msgs);
}

TEST(veloblock, corruption_is_detected_not_followed)
{
    std::vector<uint8_t> out;
    {
        ring r(512);
        ASSERT_EQ(APTUS_VB_OK, r.send(payload(1, 10)));
        r.block[511] = 7; /* a flag no sender makes */
        EXPECT_EQ(APTUS_VB_CORRUPT, r.recv(out));
        EXPECT_EQ(1u, r.rx.corrupt);
    }
    {
        ring r(512);
        ASSERT_EQ(APTUS_VB_OK, r.send(payload(1, 10)));
        r.block[509] = 0xff; /* length beyond the block's start */
        r.block[510] = 0xff;
        EXPECT_EQ(APTUS_VB_CORRUPT, r.recv(out));
    }
    {
        ring r(512);
        /* a message flag on a slot too close to the start for a length */
        r.rx.slot  = 1;
        r.block[1] = APTUS_VB_FLAG_MSG;
        EXPECT_EQ(APTUS_VB_CORRUPT, r.recv(out));
    }
    {
        ring r(512);
        /* credits beyond what the sender used */
        EXPECT_EQ(APTUS_VB_CORRUPT, aptus_vb_tx_credit(&r.tx, 1));
        ASSERT_EQ(APTUS_VB_OK, r.send(payload(1, 10)));
        EXPECT_EQ(APTUS_VB_CORRUPT, aptus_vb_tx_credit(&r.tx, 15));
        EXPECT_EQ(APTUS_VB_OK, aptus_vb_tx_credit(&r.tx, 14));
    }
}

TEST(veloblock, lagging_receiver_never_loses_or_reads_overwritten_data)
{
    /* random sizes, a receiver that polls and returns credits at random:
     * the sender must never overwrite what was not consumed */
    for (uint32_t size : { 64u, 100u, 1024u, 32768u }) {
        ring r(size);
        std::mt19937 rng(size);
        std::deque<std::vector<uint8_t>> in_flight;
        std::vector<uint8_t> out;
        unsigned sent = 0, received = 0;
        uint32_t max = aptus_vb_max_len(size);
        while (received < 20000) {
            unsigned what = rng() % 4;
            if (what < 2) {
                size_t len           = (rng() % 4 == 0) ? rng() % (max + 1)
                                                        : rng() % (max / 8 + 1);
                auto p               = payload(sent, len);
                aptus_vb_status_t st = r.send(p);
                ASSERT_TRUE((st == APTUS_VB_OK) || (st == APTUS_VB_NO_ROOM))
                    << st;
                if (st == APTUS_VB_OK) {
                    in_flight.push_back(p);
                    ++sent;
                }
            } else if (what == 2) {
                aptus_vb_status_t st = r.recv(out);
                if (in_flight.empty()) {
                    ASSERT_EQ(APTUS_VB_EMPTY, st);
                } else {
                    ASSERT_EQ(APTUS_VB_OK, st) << received;
                    ASSERT_EQ(in_flight.front(), out) << received;
                    in_flight.pop_front();
                    ++received;
                }
            } else {
                r.return_credits();
            }
        }
        EXPECT_GT(r.tx.wraps, 0u) << size;
        EXPECT_GT(r.tx.no_room, 0u) << size;
    }
}

TEST(veloblock, many_channels)
{
    std::vector<ring> rings;
    for (unsigned c = 0; c < 64; ++c) {
        rings.emplace_back(2048);
    }
    std::vector<uint8_t> out;
    for (unsigned round = 0; round < 100; ++round) {
        for (unsigned c = 0; c < rings.size(); ++c) {
            ASSERT_EQ(APTUS_VB_OK,
                      rings[c].send(payload(c * 1000 + round, (c * 37) % 500)));
        }
        for (unsigned c = 0; c < rings.size(); ++c) {
            ASSERT_EQ(APTUS_VB_OK, rings[c].recv(out));
            ASSERT_EQ(payload(c * 1000 + round, (c * 37) % 500), out);
            rings[c].return_credits();
        }
    }
}

TEST(veloblock, flag_written_last_is_seen_last)
{
    /* a writer thread and a polling reader: whenever the reader sees the
     * flag, the whole message is there (release store, acquire load) */
    ring r(4096);
    std::atomic<uint32_t> credits{ 0 };
    std::atomic<bool> failed{ false };
    const unsigned count = 200000;
    std::thread writer([&] {
        std::vector<uint8_t> image(aptus_vb_image_len(300));
        for (unsigned i = 0; i < count; ++i) {
            auto p = payload(i, 1 + i % 300);
            aptus_vb_write_t w;
            aptus_vb_status_t st;
            for (;;) {
                st = aptus_vb_tx_pack(&r.tx, p.data(), p.size(), image.data(),
                                      &w);
                if (st == APTUS_VB_NO_ROOM) {
                    aptus_vb_tx_credit(&r.tx, credits.exchange(0));
                    continue;
                }
                aptus_vb_write_local(r.block.data(), &w, image.data());
                if (st == APTUS_VB_OK) {
                    break;
                }
            }
        }
    });
    aptus_vb_msg_t msg;
    for (unsigned i = 0; (i < count) && !failed;) {
        aptus_vb_status_t st = aptus_vb_rx_poll(&r.rx, r.block.data(), &msg);
        if (st == APTUS_VB_EMPTY) {
            continue;
        }
        if ((st != APTUS_VB_OK) || (msg.length != 1 + i % 300) ||
            memcmp(msg.data, payload(i, msg.length).data(), msg.length)) {
            failed = true;
            break;
        }
        aptus_vb_rx_release(&r.rx, r.block.data(), &msg);
        credits += aptus_vb_rx_take_credits(&r.rx);
        ++i;
    }
    if (failed) {
        writer.detach(); /* it may wait for credits forever */
        FAIL() << "a message was seen before all of it";
    }
    writer.join();
}
