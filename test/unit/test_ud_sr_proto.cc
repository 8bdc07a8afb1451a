/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the UD-SR wire format (src/proto/ud_sr_proto.c), including
 * a mutation fuzzer: the parser faces the network, so no input may crash it
 * or be accepted with fields out of their contract.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/ud_sr_proto.h"
}

#include <random>
#include <vector>

static aptus_ud_sr_pkt_t data_pkt(uint8_t flags, uint32_t msg_len)
{
    aptus_ud_sr_pkt_t p = {};
    p.dest_key          = 0x1122334455667788ull;
    p.src_key           = 0x99aabbccddeeff01ull;
    p.dest_token        = 0xa1b2c3d4u;
    p.src_token         = 0x55667788u;
    p.psn               = 1234;
    p.ack               = 4321;
    p.type              = APTUS_UD_SR_TYPE_DATA;
    p.flags             = flags;
    p.am_id             = 5;
    p.conn_id           = 2 + 0x300; /* both bytes of the stream number */
    p.msg_len           = msg_len;
    return p;
}

static std::vector<uint8_t> build(const aptus_ud_sr_pkt_t &p,
                                  const std::vector<uint8_t> &payload)
{
    std::vector<uint8_t> buf(APTUS_UD_SR_ACK_MAX_LEN + payload.size());
    size_t hlen = aptus_ud_sr_build(buf.data(), &p);
    EXPECT_EQ(hlen, aptus_ud_sr_hdr_len(&p));
    std::copy(payload.begin(), payload.end(), buf.begin() + hlen);
    buf.resize(hlen + payload.size());
    return buf;
}

TEST(ud_sr_proto, header_is_32_bytes)
{
    aptus_ud_sr_pkt_t p = data_pkt(APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST, 0);
    EXPECT_EQ(32u, aptus_ud_sr_hdr_len(&p));
    p.flags = APTUS_UD_SR_F_FIRST;
    EXPECT_EQ(40u, aptus_ud_sr_hdr_len(&p)); /* MSG_LEN */
    p.flags |= APTUS_UD_SR_F_CRC;
    EXPECT_EQ(40u, aptus_ud_sr_hdr_len(&p)); /* and CRC, same block */
    p.flags = APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_CRC;
    EXPECT_EQ(40u, aptus_ud_sr_hdr_len(&p));
    p.type       = APTUS_UD_SR_TYPE_ACK;
    p.flags      = APTUS_UD_SR_F_SACK;
    p.sack_words = 1;
    EXPECT_EQ(40u, aptus_ud_sr_hdr_len(&p));
    /* a window of 1024: 16 words of selective map */
    p.sack_words = APTUS_UD_SR_SACK_WORDS_MAX;
    EXPECT_EQ(160u, aptus_ud_sr_hdr_len(&p));
    EXPECT_EQ((size_t)APTUS_UD_SR_ACK_MAX_LEN, aptus_ud_sr_hdr_len(&p));
}

TEST(ud_sr_proto, round_trip_all_fields)
{
    std::vector<uint8_t> payload(100);
    for (size_t i = 0; i < payload.size(); ++i) {
        payload[i] = (uint8_t)(i * 7);
    }
    aptus_ud_sr_pkt_t p = data_pkt(
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_ACK_REQ | APTUS_UD_SR_F_CRC, 5000);
    p.crc                    = aptus_crc32c(0, payload.data(), payload.size());
    std::vector<uint8_t> buf = build(p, payload);

    aptus_ud_sr_pkt_t q;
    ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 1, &q));
    EXPECT_EQ(p.dest_key, q.dest_key);
    EXPECT_EQ(p.src_key, q.src_key);
    EXPECT_EQ(p.dest_token, q.dest_token);
    EXPECT_EQ(p.src_token, q.src_token);
    EXPECT_EQ(p.psn, q.psn);
    EXPECT_EQ(p.ack, q.ack);
    EXPECT_EQ(p.type, q.type);
    EXPECT_EQ(p.flags, q.flags);
    EXPECT_EQ(p.am_id, q.am_id);
    EXPECT_EQ(p.conn_id, q.conn_id);
    EXPECT_EQ(p.msg_len, q.msg_len);
    EXPECT_EQ(p.crc, q.crc);
    ASSERT_EQ(payload.size(), q.payload_len);
    EXPECT_EQ(0, memcmp(payload.data(), q.payload, payload.size()));

    char line[256];
    aptus_ud_sr_snprint(&q, line, sizeof(line));
    EXPECT_NE(nullptr, strstr(line, "DATA conn 770 tokens a1b2c3d4<-55667788 "
                                    "psn 1234 ack 4321 am 5 FIRST"));
}

TEST(ud_sr_proto, ack_with_sack_round_trip)
{
    aptus_ud_sr_pkt_t p = {};
    p.type              = APTUS_UD_SR_TYPE_ACK;
    p.flags             = APTUS_UD_SR_F_SACK;
    p.ack               = 65535;
    p.dest_token        = 7;
    p.src_token         = 9;
    for (unsigned n = 1; n <= APTUS_UD_SR_SACK_WORDS_MAX; ++n) {
        p.sack_words = (uint8_t)n;
        for (unsigned i = 0; i < n; ++i) {
            p.sack[i] = 0xf0f0f0f0f0f0f0f0ull ^ ((uint64_t)i << 40);
        }
        std::vector<uint8_t> buf = build(p, {});
        EXPECT_EQ(32u + 8 * n, buf.size());
        aptus_ud_sr_pkt_t q;
        ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
                  aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
        ASSERT_EQ(n, q.sack_words);
        for (unsigned i = 0; i < n; ++i) {
            EXPECT_EQ(p.sack[i], q.sack[i]) << "word " << i;
        }
        EXPECT_EQ(0u, q.payload_len);
        EXPECT_EQ(65535, q.ack);
    }
}

TEST(ud_sr_proto, rejects_malformed)
{
    std::vector<uint8_t> payload(10, 1);
    aptus_ud_sr_pkt_t q;

    /* truncated header */
    std::vector<uint8_t> buf =
        build(data_pkt(APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST, 0), payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_TRUNCATED,
              aptus_ud_sr_parse(buf.data(), 31, 0, &q));

    /* extension announced but datagram too short for it */
    buf = build(data_pkt(APTUS_UD_SR_F_FIRST, 100), {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_TRUNCATED,
              aptus_ud_sr_parse(buf.data(), 34, 0, &q));

    /* extension fields that do not apply must be zero */
    buf = build(data_pkt(APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_CRC, 0), payload);
    buf[32] = 1; /* msg_len on a last fragment */
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* unknown type, unknown flag, bad am id */
    buf = build(data_pkt(APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST, 0), payload);
    auto type_am = [](unsigned type, unsigned am_id) {
        return (uint8_t)(type | (am_id << APTUS_UD_SR_TYPE_BITS));
    };
    buf[28] = type_am(0, 5);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_TYPE,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    buf[29] |= APTUS_UD_SR_F_INTERNAL; /* internal ids are fewer */
    buf[28] = type_am(APTUS_UD_SR_TYPE_DATA, APTUS_UD_SR_INTERNAL_MAX);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_AM_ID,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    buf[28] = type_am(APTUS_UD_SR_TYPE_DATA, 3);
    EXPECT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    EXPECT_EQ(3, q.am_id);
    buf[29] &= ~APTUS_UD_SR_F_INTERNAL;
    buf[28] = type_am(APTUS_UD_SR_TYPE_DATA, APTUS_UD_SR_AM_ID_MAX);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_AM_ID,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    buf[28] = type_am(APTUS_UD_SR_TYPE_DATA, 1);

    /* the stream number is 16 bits, the all-ones value reserved */
    buf[30] = 0xfe;
    buf[31] = 0xff;
    EXPECT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    EXPECT_EQ(APTUS_UD_SR_CONN_MAX - 1, q.conn_id);
    buf[30] = 0xff;
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_CONN,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* a first fragment that announces no more than it carries */
    buf = build(data_pkt(APTUS_UD_SR_F_FIRST, 10), payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* middle fragment without data */
    buf = build(data_pkt(0, 0), {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* an ACK carrying payload, or fragment flags */
    aptus_ud_sr_pkt_t a = {};
    a.type              = APTUS_UD_SR_TYPE_ACK;
    a.dest_token        = 3;
    a.src_token         = 4;
    buf                 = build(a, payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    a.flags = APTUS_UD_SR_F_LAST;
    buf     = build(a, {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_FLAGS,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    /* FIRST's bit on an ACK is a path probe: its length must match */
    a.flags = APTUS_UD_SR_F_FIRST;
    buf     = build(a, {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* a no-op is one whole datagram without payload or AM id */
    aptus_ud_sr_pkt_t nop = data_pkt(
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_NOP, 0);
    nop.am_id = 0;
    buf       = build(nop, {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    buf = build(nop, payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    nop.flags &= ~APTUS_UD_SR_F_LAST;
    nop.msg_len = 100;
    buf         = build(nop, payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_FLAGS,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* REPLY belongs to ACKs only */
    buf = build(
        data_pkt(APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_REPLY,
                 0),
        payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_FLAGS,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* SACK bit 0 is the cumulative point itself */
    a.flags      = APTUS_UD_SR_F_SACK;
    a.sack_words = 2;
    a.sack[0]    = 1;
    a.sack[1]    = 0;
    buf          = build(a, {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_FLAGS,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* the map is whole words, at most a window's worth, at least one */
    a.sack[0] = 2;
    buf       = build(a, {});
    ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    buf.resize(buf.size() - 4);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    buf.resize(APTUS_UD_SR_HDR_LEN);
    EXPECT_EQ(APTUS_UD_SR_PARSE_TRUNCATED,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    a.sack_words = APTUS_UD_SR_SACK_WORDS_MAX;
    buf          = build(a, {});
    buf.resize(buf.size() + 8, 0);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    /* a selective map goes on ACKs only */
    aptus_ud_sr_pkt_t r = a;
    r.type              = APTUS_UD_SR_TYPE_RESET;
    r.sack_words        = 1;
    buf                 = build(r, {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_FLAGS,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    /* on DATA the bit means OPEN: no map follows */
    aptus_ud_sr_pkt_t d = data_pkt(
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_OPEN, 0);
    d.sack_words = 1;
    d.dest_token = 0; /* OPEN: the receiver's token is not known */
    buf          = build(d, payload);
    ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    EXPECT_EQ(32u + payload.size(), buf.size());
    EXPECT_EQ(0u, q.sack_words);
    EXPECT_EQ(payload.size(), q.payload_len);
}

/* The incarnation's tokens: data without the receiver's token says OPEN
 * (and only then), nothing goes without the sender's, and control always
 * names both. */
TEST(ud_sr_proto, tokens_and_the_open_flag_agree)
{
    std::vector<uint8_t> payload(16, 2);
    aptus_ud_sr_pkt_t q;

    aptus_ud_sr_pkt_t d = data_pkt(
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_OPEN, 0);
    d.dest_token             = 0;
    std::vector<uint8_t> buf = build(d, payload);
    ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    EXPECT_EQ(0u, q.dest_token);
    EXPECT_EQ(0x55667788u, q.src_token);

    d.dest_token = 1; /* OPEN while naming the receiver's token */
    buf          = build(d, payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_TOKEN,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    d.flags &= ~APTUS_UD_SR_F_OPEN;
    d.dest_token = 0; /* no token, no OPEN */
    buf          = build(d, payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_TOKEN,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
    d.dest_token = 1;
    d.src_token  = 0; /* the sender always has its own */
    buf          = build(d, payload);
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_TOKEN,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));

    for (uint8_t type : { APTUS_UD_SR_TYPE_ACK, APTUS_UD_SR_TYPE_RESET }) {
        aptus_ud_sr_pkt_t c = {};
        c.type              = type;
        c.dest_token        = 0;
        c.src_token         = 8;
        buf                 = build(c, {});
        /* a RESET may abandon an opening that never heard back; an ACK
         * always answers a known incarnation */
        EXPECT_EQ((type == APTUS_UD_SR_TYPE_RESET)
                      ? APTUS_UD_SR_PARSE_OK
                      : APTUS_UD_SR_PARSE_BAD_TOKEN,
                  aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q))
            << (int)type;
        c.dest_token = 8;
        c.src_token  = 0;
        buf          = build(c, {});
        EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_TOKEN,
                  aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q))
            << (int)type;
        c.src_token = 9;
        buf         = build(c, {});
        EXPECT_EQ(APTUS_UD_SR_PARSE_OK,
                  aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q))
            << (int)type;
    }
    EXPECT_STREQ("bad token",
                 aptus_ud_sr_parse_status_str(APTUS_UD_SR_PARSE_BAD_TOKEN));
}

TEST(ud_sr_proto, crc_detects_corruption)
{
    std::vector<uint8_t> payload(64, 0x5a);
    aptus_ud_sr_pkt_t p = data_pkt(
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_CRC, 0);
    p.crc                    = aptus_crc32c(0, payload.data(), payload.size());
    std::vector<uint8_t> buf = build(p, payload);
    aptus_ud_sr_pkt_t q;
    ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 1, &q));
    buf[buf.size() - 3] ^= 0x04;
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_CRC,
              aptus_ud_sr_parse(buf.data(), buf.size(), 1, &q));
    /* without checking, the same datagram parses */
    EXPECT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(buf.data(), buf.size(), 0, &q));
}

TEST(ud_sr_proto, crc32c_known_value)
{
    /* RFC 3720 test vector: 32 bytes of zeros */
    std::vector<uint8_t> zeros(32, 0);
    EXPECT_EQ(0x8a9136aau, aptus_crc32c(0, zeros.data(), zeros.size()));
    const char *s = "123456789";
    EXPECT_EQ(0xe3069283u, aptus_crc32c(0, s, 9));
}

/* Whatever bytes arrive, the parser returns, and what it accepts satisfies
 * the contract the channel relies on. */
TEST(ud_sr_proto, fuzz_mutations)
{
    std::mt19937 rng(2024);
    std::vector<std::vector<uint8_t>> seeds;
    std::vector<uint8_t> payload(40, 3);
    seeds.push_back(
        build(data_pkt(APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST, 0), payload));
    seeds.push_back(build(data_pkt(APTUS_UD_SR_F_FIRST, 200), payload));
    seeds.push_back(
        build(data_pkt(APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_CRC, 0), payload));
    aptus_ud_sr_pkt_t a = {};
    a.type              = APTUS_UD_SR_TYPE_ACK;
    a.dest_token        = 5;
    a.src_token         = 6;
    a.flags             = APTUS_UD_SR_F_SACK;
    a.sack_words        = 1;
    a.sack[0]           = 6;
    seeds.push_back(build(a, {}));
    a.sack_words = 3;
    a.sack[1]    = 1ull << 63;
    a.sack[2]    = 5;
    seeds.push_back(build(a, {}));
    a.flags = APTUS_UD_SR_F_REPLY;
    a.psn   = 77;
    seeds.push_back(build(a, {}));

    unsigned accepted = 0;
    for (int iter = 0; iter < 200000; ++iter) {
        std::vector<uint8_t> buf = seeds[rng() % seeds.size()];
        int nmut                 = 1 + rng() % 4;
        for (int m = 0; m < nmut; ++m) {
            switch (rng() % 4) {
            case 0: /* flip a bit */
                if (!buf.empty()) {
                    buf[rng() % buf.size()] ^= (uint8_t)(1u << (rng() % 8));
                }
                break;
            case 1: /* truncate */
                buf.resize(rng() % (buf.size() + 1));
                break;
            case 2: /* random byte */
                if (!buf.empty()) {
                    buf[rng() % buf.size()] = (uint8_t)rng();
                }
                break;
            case 3: /* grow */
                buf.push_back((uint8_t)rng());
                break;
            }
        }
        /* exact-size heap copy so ASan sees any overread */
        uint8_t *copy = new uint8_t[buf.size() + 1];
        std::copy(buf.begin(), buf.end(), copy);
        aptus_ud_sr_pkt_t q;
        aptus_ud_sr_parse_status_t st =
            aptus_ud_sr_parse(copy, buf.size(), rng() & 1, &q);
        if (st == APTUS_UD_SR_PARSE_OK) {
            ++accepted;
            ASSERT_GE(buf.size(), APTUS_UD_SR_HDR_LEN);
            ASSERT_LE(q.payload, copy + buf.size());
            ASSERT_EQ(q.payload + q.payload_len, copy + buf.size());
            ASSERT_TRUE(q.type >= APTUS_UD_SR_TYPE_DATA &&
                        q.type <= APTUS_UD_SR_TYPE_RESET);
            ASSERT_EQ(0, q.flags & ~APTUS_UD_SR_F_KNOWN);
            ASSERT_LT(q.conn_id, APTUS_UD_SR_CONN_MAX);
            if (q.type == APTUS_UD_SR_TYPE_DATA) {
                /* data asks for the handshake exactly when it says so */
                ASSERT_NE(0u, q.src_token);
                ASSERT_EQ(!!(q.flags & APTUS_UD_SR_F_OPEN), q.dest_token == 0);
                ASSERT_LT(q.am_id, (q.flags & APTUS_UD_SR_F_INTERNAL)
                                       ? APTUS_UD_SR_INTERNAL_MAX
                                       : APTUS_UD_SR_AM_ID_MAX);
                if ((q.flags & (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) ==
                    APTUS_UD_SR_F_FIRST) {
                    ASSERT_GT(q.msg_len, q.payload_len);
                } else {
                    ASSERT_EQ(0u, q.msg_len);
                }
                if (q.flags & APTUS_UD_SR_F_NOP) {
                    ASSERT_EQ(0u, q.payload_len);
                    ASSERT_EQ(0u, q.am_id);
                }
            } else if ((q.type == APTUS_UD_SR_TYPE_ACK) &&
                       ((q.flags &
                         (APTUS_UD_SR_F_PATH | APTUS_UD_SR_F_REPLY)) ==
                        APTUS_UD_SR_F_PATH)) {
                ASSERT_EQ(q.flags, APTUS_UD_SR_F_PATH); /* nothing else */
                ASSERT_EQ((size_t)q.psn, buf.size());   /* padding probed */
            } else {
                ASSERT_EQ(0u, q.payload_len);
                ASSERT_EQ(0, q.flags & APTUS_UD_SR_F_NOP);
                if (q.type == APTUS_UD_SR_TYPE_RESET) {
                    ASSERT_NE(0u, q.src_token);
                } else if (!(q.flags & APTUS_UD_SR_F_PATH)) {
                    ASSERT_NE(0u, q.dest_token); /* an ACK is within an */
                    ASSERT_NE(0u, q.src_token);  /* incarnation */
                }
            }
            ASSERT_LE(q.sack_words, APTUS_UD_SR_SACK_WORDS_MAX);
            if ((q.type == APTUS_UD_SR_TYPE_ACK) &&
                (q.flags & APTUS_UD_SR_F_SACK)) {
                ASSERT_GE(q.sack_words, 1u);
                ASSERT_EQ(0u, q.sack[0] & 1);
                ASSERT_EQ(32u + 8 * q.sack_words, buf.size());
            } else {
                ASSERT_EQ(0u, q.sack_words);
            }
            ASSERT_EQ(0u, (q.payload - copy) % 8); /* payload stays aligned */
        } else {
            ASSERT_LT(st, APTUS_UD_SR_PARSE_LAST);
        }
        delete[] copy;
    }
    EXPECT_GT(accepted, 1000u); /* the fuzzer reached the accepting paths */
}

/* A path probe is exactly as long as its psn says (the padding is what
 * is probed); its answer carries nothing; neither mixes with other flags. */
TEST(ud_sr_proto, path_probe_and_answer)
{
    aptus_ud_sr_pkt_t p = {};
    aptus_ud_sr_pkt_t out;
    p.dest_key                 = 1;
    p.src_key                  = 2;
    p.type                     = APTUS_UD_SR_TYPE_ACK;
    p.flags                    = APTUS_UD_SR_F_PATH;
    p.psn                      = 1452;
    std::vector<uint8_t> probe = build(p, std::vector<uint8_t>(1452 - 32));
    ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(probe.data(), probe.size(), 1, &out));
    EXPECT_EQ(1452u, out.psn);
    EXPECT_EQ(1452u - 32, out.payload_len);
    /* cut short on the way, or claiming another size */
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(probe.data(), probe.size() - 8, 1, &out));
    p.psn = 1400;
    probe = build(p, std::vector<uint8_t>(1452 - 32));
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(probe.data(), probe.size(), 1, &out));

    p.flags                     = APTUS_UD_SR_F_PATH | APTUS_UD_SR_F_REPLY;
    std::vector<uint8_t> answer = build(p, {});
    ASSERT_EQ(APTUS_UD_SR_PARSE_OK,
              aptus_ud_sr_parse(answer.data(), answer.size(), 1, &out));
    EXPECT_EQ(1400u, out.psn);
    answer = build(p, std::vector<uint8_t>(8));
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(answer.data(), answer.size(), 1, &out));
    p.psn  = 10; /* shorter than a header: no datagram was that size */
    answer = build(p, {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_LENGTH,
              aptus_ud_sr_parse(answer.data(), answer.size(), 1, &out));

    p.psn = 32;
    for (uint8_t extra :
         { APTUS_UD_SR_F_ACK_REQ, APTUS_UD_SR_F_SACK, APTUS_UD_SR_F_CRC }) {
        p.flags                  = APTUS_UD_SR_F_PATH | extra;
        std::vector<uint8_t> bad = build(p, {});
        EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_FLAGS,
                  aptus_ud_sr_parse(bad.data(), bad.size(), 1, &out))
            << (int)extra;
    }
    p.type                     = APTUS_UD_SR_TYPE_RESET;
    p.flags                    = APTUS_UD_SR_F_PATH;
    std::vector<uint8_t> reset = build(p, {});
    EXPECT_EQ(APTUS_UD_SR_PARSE_BAD_FLAGS,
              aptus_ud_sr_parse(reset.data(), reset.size(), 1, &out));
}
