/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a fast-path peer sends faces the network, or rather lands in this
 * process's memory: the control messages (REQUEST, GRANT, REFUSE, CREDIT,
 * RELEASE), the message header with its piggybacked credits, the order
 * trailer, and whatever bytes the peer writes into a block. Round trips of
 * each, and fuzzers: no input may make a parser read outside its buffer
 * (ASan runs these), an accepted control message packs back to the same
 * bytes, and a ring of random bytes is reported corrupt or delivers
 * messages that lie inside the block -- never followed elsewhere.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/fp_proto.h"
#include "proto/veloblock.h"
}

#include <cstring>
#include <random>
#include <vector>

TEST(fp_proto, control_messages_round_trip)
{
    aptus_fp_ctl_t in[5], out;
    memset(in, 0, sizeof(in));
    in[0].type             = APTUS_FP_CTL_REQUEST;
    in[0].nonce            = 7;
    in[0].request.host_id  = 0x1122334455667788ull;
    in[1].type             = APTUS_FP_CTL_GRANT;
    in[1].nonce            = 8;
    in[1].grant.mode       = APTUS_FP_VELOBLOCK;
    in[1].grant.size       = 32768;
    in[1].grant.address    = 0x7f0000001000ull;
    in[1].grant.pid        = 4242;
    in[1].grant.host_id    = 99;
    in[1].grant.token      = 0x0123456789abcdefull; /* a verbs rkey */
    in[2].type             = APTUS_FP_CTL_REFUSE;
    in[2].nonce            = 9;
    in[3].type             = APTUS_FP_CTL_CREDIT;
    in[3].nonce            = 10;
    in[3].credit.credits   = 12345;
    in[4].type             = APTUS_FP_CTL_RELEASE;
    in[4].nonce            = 11;
    in[4].release.fp_total = 777;
    for (auto &c : in) {
        uint8_t buf[APTUS_FP_CTL_MAX_LEN];
        size_t len = aptus_fp_ctl_pack(buf, &c);
        ASSERT_LE(len, sizeof(buf));
        ASSERT_EQ(0, aptus_fp_ctl_parse(buf, len, &out)) << (int)c.type;
        uint8_t again[APTUS_FP_CTL_MAX_LEN];
        ASSERT_EQ(len, aptus_fp_ctl_pack(again, &out));
        EXPECT_EQ(0, memcmp(buf, again, len));
        /* one byte short or long: refused */
        EXPECT_EQ(-1, aptus_fp_ctl_parse(buf, len - 1, &out));
        EXPECT_EQ(-1, aptus_fp_ctl_parse(buf, len + 1, &out));
    }
}

TEST(fp_proto, header_and_trailer_round_trip)
{
    uint8_t hdr[APTUS_FP_MSG_HDR_LEN];
    aptus_fp_msg_hdr_t h;
    aptus_fp_msg_hdr_pack(hdr, 31, 0xdeadbeef, 0x1234, 0xcafef00d);
    ASSERT_EQ(0, aptus_fp_msg_hdr_parse(hdr, sizeof(hdr), 32, &h));
    EXPECT_EQ(31, h.am_id);
    EXPECT_EQ(0xdeadbeefu, h.rc_before);
    EXPECT_EQ(0x1234u, h.credit_nonce);
    EXPECT_EQ(0xcafef00du, h.credits);
    EXPECT_EQ(-1, aptus_fp_msg_hdr_parse(hdr, sizeof(hdr) - 1, 32, &h));
    hdr[0] = 32; /* no handler may have it */
    EXPECT_EQ(-1, aptus_fp_msg_hdr_parse(hdr, sizeof(hdr), 32, &h));

    uint8_t data[10 + APTUS_FP_TRAILER_LEN];
    uint16_t nonce;
    uint32_t before;
    aptus_fp_trailer_pack(data + 10, 0xabcd, 55);
    ASSERT_EQ(0, aptus_fp_trailer_parse(data, sizeof(data), &nonce, &before));
    EXPECT_EQ(0xabcdu, nonce);
    EXPECT_EQ(55u, before);
    EXPECT_EQ(-1, aptus_fp_trailer_parse(data, APTUS_FP_TRAILER_LEN - 1, &nonce,
                                         &before));
}

TEST(fp_proto, fuzz_control_messages)
{
    std::mt19937 rng(1234);
    unsigned accepted = 0;
    for (unsigned i = 0; i < 300000; ++i) {
        size_t len = rng() % (APTUS_FP_CTL_MAX_LEN + 8);
        /* exactly the bytes: ASan sees a read past them */
        std::vector<uint8_t> buf(len);
        for (auto &b : buf) {
            b = rng();
        }
        if (len > 1) { /* often a valid type and zero pad */
            buf[0] = 1 + rng() % 6;
            buf[1] = (rng() % 4) ? 0 : buf[1];
        }
        aptus_fp_ctl_t ctl;
        if (aptus_fp_ctl_parse(buf.data(), len, &ctl) == 0) {
            ++accepted;
            uint8_t again[APTUS_FP_CTL_MAX_LEN];
            ASSERT_EQ(len, aptus_fp_ctl_pack(again, &ctl));
            ASSERT_EQ(0, memcmp(buf.data(), again, len));
        }
        aptus_fp_msg_hdr_t h;
        (void)aptus_fp_msg_hdr_parse(buf.data(), len, 32, &h);
        uint16_t nonce;
        uint32_t before;
        (void)aptus_fp_trailer_parse(buf.data(), len, &nonce, &before);
    }
    EXPECT_GT(accepted, 1000u); /* the accepting paths were reached */
}

TEST(fp_proto, fuzz_a_block_a_peer_filled_with_anything)
{
    /* a peer may write anything into the block it was given: polling it
     * reports corruption or delivers messages inside the block */
    std::mt19937 rng(99);
    unsigned corrupt = 0, delivered = 0;
    for (unsigned i = 0; i < 20000; ++i) {
        uint32_t size = APTUS_VB_MIN_SIZE + rng() % 4096;
        std::vector<uint8_t> block(size);
        for (auto &b : block) {
            /* mostly small values, so flags and lengths look plausible */
            b = (rng() % 3) ? rng() % 4 : rng();
        }
        aptus_vb_rx_t rx;
        aptus_vb_rx_init(&rx, size);
        for (unsigned k = 0; k < 64; ++k) {
            aptus_vb_msg_t msg;
            aptus_vb_status_t st = aptus_vb_rx_poll(&rx, block.data(), &msg);
            if (st == APTUS_VB_CORRUPT) {
                ++corrupt;
                break;
            }
            if (st != APTUS_VB_OK) {
                break;
            }
            ASSERT_GE(msg.data, block.data());
            ASSERT_LE(msg.data + msg.length, block.data() + size);
            ++delivered;
            aptus_vb_rx_release(&rx, block.data(), &msg);
        }
    }
    EXPECT_GT(corrupt, 1000u);
    EXPECT_GT(delivered, 100u);
}

TEST(fp_proto, wrap_record_at_the_end_is_corruption_not_a_hang)
{
    /* found by the fuzzer above: a WRAP flag on the block's last byte sent
     * the receiver back to that byte, forever */
    std::vector<uint8_t> block(256, 0);
    block.back() = APTUS_VB_FLAG_WRAP;
    aptus_vb_rx_t rx;
    aptus_vb_rx_init(&rx, block.size());
    aptus_vb_msg_t msg;
    EXPECT_EQ(APTUS_VB_CORRUPT, aptus_vb_rx_poll(&rx, block.data(), &msg));
}
