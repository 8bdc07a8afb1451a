/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the multicast broadcast wire format (src/proto/mcast_proto.c):
 * every type encodes and decodes to the same bytes, and the parser refuses
 * each kind of damage with its own status, foreign traffic apart.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/mcast_proto.h"
}

#include <cstring>
#include <vector>

namespace
{

const aptus_mc_limits_t limits = { 0x1122334455667788ull, 16 };

aptus_mc_hdr_t data_hdr(uint16_t frag, uint16_t nfrag, uint32_t offset,
                        uint16_t payload_len, uint32_t msg_len)
{
    aptus_mc_hdr_t h;

    memset(&h, 0, sizeof(h));
    h.type        = APTUS_MC_TYPE_DATA;
    h.flags       = APTUS_MC_F_ACK;
    h.key         = limits.key;
    h.seq         = 0xfffffff0u;
    h.ack         = 0xfffffff1u;
    h.root        = 3;
    h.sender      = 3;
    h.msg_len     = msg_len;
    h.offset      = offset;
    h.frag        = frag;
    h.nfrag       = nfrag;
    h.payload_len = payload_len;
    h.stable      = 0xffffffe0u;
    return h;
}

std::vector<uint8_t> encode(const aptus_mc_hdr_t &h, uint8_t fill = 0xa5)
{
    std::vector<uint8_t> buf(APTUS_MC_HDR_LEN + h.payload_len, fill);

    EXPECT_EQ(APTUS_MC_HDR_LEN, aptus_mc_hdr_build(buf.data(), &h));
    return buf;
}

aptus_mc_parse_status_t parse(const std::vector<uint8_t> &buf,
                              aptus_mc_hdr_t *out = nullptr)
{
    aptus_mc_hdr_t h;

    return aptus_mc_hdr_parse(buf.data(), buf.size(), &limits, out ? out : &h);
}

} // namespace

TEST(mcast_proto, header_is_8_byte_multiple)
{
    EXPECT_EQ(0u, APTUS_MC_HDR_LEN % 8);
    EXPECT_EQ(48u, APTUS_MC_HDR_LEN);
}

TEST(mcast_proto, data_round_trip)
{
    aptus_mc_hdr_t h         = data_hdr(1, 3, 1000, 1000, 2500), out;
    std::vector<uint8_t> buf = encode(h), again;

    ASSERT_EQ(APTUS_MC_PARSE_OK, parse(buf, &out));
    EXPECT_EQ(h.type, out.type);
    EXPECT_EQ(h.flags, out.flags);
    EXPECT_EQ(h.seq, out.seq);
    EXPECT_EQ(h.ack, out.ack);
    EXPECT_EQ(h.root, out.root);
    EXPECT_EQ(h.sender, out.sender);
    EXPECT_EQ(h.msg_len, out.msg_len);
    EXPECT_EQ(h.offset, out.offset);
    EXPECT_EQ(h.frag, out.frag);
    EXPECT_EQ(h.nfrag, out.nfrag);
    EXPECT_EQ(h.stable, out.stable);
    EXPECT_EQ(buf.data() + APTUS_MC_HDR_LEN, out.payload);
    again = buf;
    aptus_mc_hdr_build(again.data(), &out);
    EXPECT_EQ(buf, again);
    /* little-endian on the wire: the magic spells "AM" */
    EXPECT_EQ('A', buf[0]);
    EXPECT_EQ('M', buf[1]);
    EXPECT_EQ(0xf0, buf[16]);
}

TEST(mcast_proto, control_round_trip_every_type)
{
    for (uint8_t t = APTUS_MC_TYPE_REPAIR; t < APTUS_MC_TYPE_LAST; ++t) {
        aptus_mc_hdr_t h = data_hdr(0, 1, 0, 0, 0), out;

        h.type   = t;
        h.sender = 5;
        if (t == APTUS_MC_TYPE_REPAIR) {
            h.flags |= APTUS_MC_F_ACK_REQ;
            h.msg_len = h.payload_len = 10;
        } else {
            h.nfrag   = 0; /* not part of a control header */
            h.msg_len = 0;
        }
        if ((t == APTUS_MC_TYPE_ACK) || (t == APTUS_MC_TYPE_NACK) ||
            (t == APTUS_MC_TYPE_REPORT)) {
            h.sack = 0x6;
        }
        if (t == APTUS_MC_TYPE_REPORT) {
            h.group_ack = 77;
            h.flags |= APTUS_MC_F_REPLY;
        }
        std::vector<uint8_t> buf = encode(h), again;
        ASSERT_EQ(APTUS_MC_PARSE_OK, parse(buf, &out)) << aptus_mc_type_str(t);
        EXPECT_EQ(h.sack, out.sack) << aptus_mc_type_str(t);
        EXPECT_EQ(h.group_ack, out.group_ack);
        again = buf;
        aptus_mc_hdr_build(again.data(), &out);
        EXPECT_EQ(buf, again) << aptus_mc_type_str(t);
    }
}

TEST(mcast_proto, build_zeroes_fields_that_do_not_apply)
{
    aptus_mc_hdr_t h = data_hdr(0, 1, 0, 0, 0), out;

    h.type                   = APTUS_MC_TYPE_POLL;
    h.flags                  = 0;
    h.ack                    = 99; /* no F_ACK: not written */
    h.sack                   = 0xff;
    h.group_ack              = 12;
    std::vector<uint8_t> buf = encode(h);
    ASSERT_EQ(APTUS_MC_PARSE_OK, parse(buf, &out));
    EXPECT_EQ(0u, out.ack);
    EXPECT_EQ(0u, out.sack);
    EXPECT_EQ(0u, out.group_ack);
}

TEST(mcast_proto, truncated_magic_version)
{
    std::vector<uint8_t> buf = encode(data_hdr(0, 1, 0, 4, 4));

    for (size_t len = 0; len < APTUS_MC_HDR_LEN; ++len) {
        std::vector<uint8_t> cut(buf.begin(), buf.begin() + len);
        EXPECT_EQ(APTUS_MC_PARSE_TRUNCATED, parse(cut)) << len;
    }
    std::vector<uint8_t> bad = buf;
    bad[1] ^= 1;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_MAGIC, parse(bad));
    bad    = buf;
    bad[2] = APTUS_MC_VERSION + 1;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_VERSION, parse(bad));
}

TEST(mcast_proto, foreign_key_reported_apart)
{
    aptus_mc_hdr_t h = data_hdr(0, 1, 0, 4, 4), out;

    h.key = limits.key ^ 1;
    EXPECT_EQ(APTUS_MC_PARSE_FOREIGN, parse(encode(h), &out));
    EXPECT_EQ(h.key, out.key);
    /* foreign even where our own rules would refuse the rest: another
     * communicator may be larger */
    h.root = h.sender = 1000;
    EXPECT_EQ(APTUS_MC_PARSE_FOREIGN, parse(encode(h)));
}

TEST(mcast_proto, bad_type_and_flags)
{
    aptus_mc_hdr_t h = data_hdr(0, 1, 0, 4, 4);

    h.type = 0;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_TYPE, parse(encode(h)));
    h.type = APTUS_MC_TYPE_LAST;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_TYPE, parse(encode(h)));

    h = data_hdr(0, 1, 0, 4, 4);
    h.flags |= 0x8; /* unknown */
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FLAGS, parse(encode(h)));
    h.flags = APTUS_MC_F_ACK | APTUS_MC_F_ACK_REQ; /* only on REPAIR */
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FLAGS, parse(encode(h)));
    h.flags = APTUS_MC_F_ACK | APTUS_MC_F_REPLY;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FLAGS, parse(encode(h)));

    h       = data_hdr(0, 1, 0, 0, 0);
    h.type  = APTUS_MC_TYPE_ACK;
    h.nfrag = 0;
    h.flags = 0; /* an ACK without its ack */
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FLAGS, parse(encode(h)));
}

TEST(mcast_proto, ranks_checked_against_comm_size)
{
    aptus_mc_hdr_t h = data_hdr(0, 1, 0, 4, 4);

    h.root = h.sender = limits.comm_size - 1;
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(encode(h)));
    h.root = h.sender = limits.comm_size;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_RANK, parse(encode(h)));
    h.root   = 2;
    h.sender = 4; /* a multicast from someone else than its root */
    EXPECT_EQ(APTUS_MC_PARSE_BAD_RANK, parse(encode(h)));
    h.type = APTUS_MC_TYPE_REPAIR; /* a repair may */
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(encode(h)));
    h.sender = 0xffffffffu;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_RANK, parse(encode(h)));
}

TEST(mcast_proto, length_must_match_payload)
{
    std::vector<uint8_t> buf = encode(data_hdr(0, 1, 0, 4, 4));

    buf.push_back(0);
    EXPECT_EQ(APTUS_MC_PARSE_BAD_LENGTH, parse(buf));
    buf.resize(buf.size() - 2);
    EXPECT_EQ(APTUS_MC_PARSE_BAD_LENGTH, parse(buf));

    aptus_mc_hdr_t h = data_hdr(0, 1, 0, 0, 0);
    h.type           = APTUS_MC_TYPE_NACK;
    h.nfrag          = 0;
    h.payload_len    = 8; /* control messages carry none */
    EXPECT_EQ(APTUS_MC_PARSE_BAD_LENGTH, parse(encode(h)));
}

TEST(mcast_proto, fragment_bounds)
{
    /* well formed: single, first, middle, last, empty message */
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(encode(data_hdr(0, 1, 0, 0, 0))));
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(encode(data_hdr(0, 3, 0, 10, 25))));
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(encode(data_hdr(1, 3, 10, 10, 25))));
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(encode(data_hdr(2, 3, 20, 5, 25))));
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(encode(data_hdr(63, 64, 630, 10, 640))));

    const struct {
        uint16_t frag, nfrag;
        uint32_t offset;
        uint16_t len;
        uint32_t msg_len;
    } bad[] = {
        { 0, 0, 0, 0, 0 },              /* no fragments */
        { 3, 3, 20, 5, 25 },            /* index past the count */
        { 0, 65, 0, 10, 650 },          /* more than a map holds */
        { 2, 3, 20, 6, 25 },            /* past the message */
        { 0, 1, 0, 4, 5 },              /* single but short */
        { 0, 1, 1, 4, 5 },              /* single but not at 0 */
        { 1, 3, 10, 0, 25 },            /* empty middle fragment */
        { 0, 3, 5, 10, 25 },            /* first not at 0 */
        { 1, 3, 0, 10, 25 },            /* later one at 0 */
        { 2, 3, 10, 10, 25 },           /* last does not end it */
        { 1, 3, 15, 10, 25 },           /* middle ends it */
        { 0, 2, 0xfffffff0u, 100, 10 }, /* offset wraps */
    };
    for (const auto &b : bad) {
        EXPECT_EQ(APTUS_MC_PARSE_BAD_FRAGMENT,
                  parse(encode(
                      data_hdr(b.frag, b.nfrag, b.offset, b.len, b.msg_len))))
            << b.frag << "/" << b.nfrag << " at " << b.offset;
    }
}

TEST(mcast_proto, fields_that_do_not_apply_must_be_zero)
{
    aptus_mc_hdr_t h = data_hdr(0, 1, 0, 0, 0);
    std::vector<uint8_t> buf;

    /* an ack value without F_ACK */
    buf = encode(h);
    buf[4] &= ~APTUS_MC_F_ACK;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FIELD, parse(buf));

    /* sack bit 0 */
    h.type  = APTUS_MC_TYPE_ACK;
    h.nfrag = 0;
    h.sack  = 1;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FIELD, parse(encode(h)));
    h.sack = 2;
    buf    = encode(h);
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(buf));
    buf[36] = 1; /* a group point on an ACK */
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FIELD, parse(buf));
    buf[36] = 0;
    buf[41] = 1; /* the fragment word */
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FIELD, parse(buf));

    h.type = APTUS_MC_TYPE_POLL;
    h.sack = 0;
    buf    = encode(h);
    EXPECT_EQ(APTUS_MC_PARSE_OK, parse(buf));
    buf[32] = 4;
    EXPECT_EQ(APTUS_MC_PARSE_BAD_FIELD, parse(buf));
}

TEST(mcast_proto, every_single_byte_change_is_refused_or_reencodes)
{
    /* whatever a flipped byte does, an accepted header encodes back to the
     * same bytes (no field is ignored by the parser) */
    std::vector<uint8_t> base = encode(data_hdr(1, 3, 10, 10, 25));

    for (size_t i = 0; i < APTUS_MC_HDR_LEN; ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            std::vector<uint8_t> buf = base, again;
            aptus_mc_hdr_t out;
            buf[i] ^= (uint8_t)(1u << bit);
            if (parse(buf, &out) != APTUS_MC_PARSE_OK) {
                continue;
            }
            again = buf;
            aptus_mc_hdr_build(again.data(), &out);
            EXPECT_EQ(buf, again) << "byte " << i << " bit " << bit;
        }
    }
}

TEST(mcast_proto, strings_and_trace_line)
{
    char line[256];

    for (int s = 0; s < APTUS_MC_PARSE_LAST; ++s) {
        EXPECT_STRNE("?",
                     aptus_mc_parse_status_str((aptus_mc_parse_status_t)s));
    }
    EXPECT_STREQ("?", aptus_mc_parse_status_str(APTUS_MC_PARSE_LAST));
    EXPECT_STREQ("foreign", aptus_mc_parse_status_str(APTUS_MC_PARSE_FOREIGN));
    EXPECT_STREQ("REPORT", aptus_mc_type_str(APTUS_MC_TYPE_REPORT));
    EXPECT_STREQ("?", aptus_mc_type_str(200));

    aptus_mc_hdr_t h = data_hdr(1, 3, 10, 10, 25);
    h.seq            = 12;
    h.ack            = 13;
    h.stable         = 4;
    aptus_mc_hdr_snprint(&h, line, sizeof(line));
    EXPECT_STREQ("DATA seq 12 root 3 from 3 ack 13 stable 4 frag 1/3 len 10/25",
                 line);
    /* a short buffer is cut, not overrun */
    char small[8];
    aptus_mc_hdr_snprint(&h, small, sizeof(small));
    EXPECT_EQ(7u, strlen(small));
}

TEST(mcast_proto, serial_arithmetic_wraps)
{
    EXPECT_TRUE(aptus_mc_seq_lt(0xffffffffu, 0));
    EXPECT_FALSE(aptus_mc_seq_lt(0, 0xffffffffu));
    EXPECT_TRUE(aptus_mc_seq_le(5, 5));
    EXPECT_TRUE(aptus_mc_seq_lt(0x7ffffff0u, 0x80000010u));
}
