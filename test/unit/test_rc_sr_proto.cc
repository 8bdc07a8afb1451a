/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the RC-SR wire format and credit flow control
 * (src/proto/rc_sr_proto.c) and of the sock wire's frames that carry it
 * (src/wire/sock/sock_frame.c), including a fuzzer: the frame and message
 * parsers face the network, so no input may make them read past what
 * arrived, or accept something outside their contract.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/rc_sr_proto.h"
#include "wire/sock/sock_frame.h"
}

#include <algorithm>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <unistd.h>
#include <random>
#include <vector>

static std::vector<uint8_t> frame_bytes(unsigned type,
                                        const std::vector<uint8_t> &payload)
{
    std::vector<uint8_t> buf(APTUS_FRAME_HDR_LEN + payload.size());
    aptus_frame_hdr_pack(buf.data(), type, payload.size());
    std::copy(payload.begin(), payload.end(),
              buf.begin() + APTUS_FRAME_HDR_LEN);
    return buf;
}

static std::vector<uint8_t> msg_bytes(unsigned kind, uint8_t am_id,
                                      uint16_t credits,
                                      const std::vector<uint8_t> &body)
{
    std::vector<uint8_t> buf(APTUS_RC_HDR_LEN + body.size());
    aptus_rc_hdr_pack(buf.data(), kind, am_id, credits);
    std::copy(body.begin(), body.end(), buf.begin() + APTUS_RC_HDR_LEN);
    return buf;
}

/* Kinds that carry no body. */
static bool kind_is_empty(unsigned kind)
{
    return (kind == APTUS_RC_KIND_CREDIT) || (kind == APTUS_RC_KIND_NOP) ||
           (kind == APTUS_RC_KIND_BYE) || (kind == APTUS_RC_KIND_SWITCH_ACK);
}

static std::vector<uint8_t> hello_msg(uint64_t key, uint16_t credits,
                                      uint16_t version, uint16_t msg_credits,
                                      uint64_t src_key  = 0x0badf00d,
                                      uint32_t src_port = 4321,
                                      uint32_t conn_id  = 7)
{
    aptus_rc_hello_t h = {};
    h.conn_id          = conn_id;
    h.key              = key;
    h.src_key          = src_key;
    h.credits          = credits;
    h.version          = version;
    h.src_port         = src_port;
    std::vector<uint8_t> body(APTUS_RC_HELLO_LEN);
    aptus_rc_hello_pack(body.data(), &h);
    return msg_bytes(APTUS_RC_KIND_HELLO, 0, msg_credits, body);
}

/* An exact-size heap copy, so that ASan sees any read past the end. */
static std::unique_ptr<uint8_t[]> exact_copy(const uint8_t *data, size_t length)
{
    std::unique_ptr<uint8_t[]> p(new uint8_t[length]);
    if (length > 0) {
        memcpy(p.get(), data, length);
    }
    return p;
}

static std::unique_ptr<uint8_t[]> exact_copy(const std::vector<uint8_t> &v)
{
    return exact_copy(v.data(), v.size());
}

TEST(rc_sr_proto, header_sizes)
{
    EXPECT_EQ(4u, APTUS_FRAME_HDR_LEN);
    EXPECT_EQ(4u, APTUS_RC_HDR_LEN);
    /* both headers together keep a payload 8-byte aligned */
    EXPECT_EQ(0u, (APTUS_FRAME_HDR_LEN + APTUS_RC_HDR_LEN) % 8);
    /* magic, key, src_key, credits, version, src_port, tag, conn_id */
    EXPECT_EQ(34u, APTUS_RC_HELLO_LEN);
    EXPECT_EQ(4u, APTUS_RC_SWITCH_LEN);
    EXPECT_EQ(4u, APTUS_FRAME_IMM_LEN);
    EXPECT_EQ(0xffffffu, APTUS_FRAME_MAX_LEN);
}

TEST(rc_sr_proto, frame_header_is_little_endian)
{
    uint8_t hdr[APTUS_FRAME_HDR_LEN];
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_MSG, 0x123456);
    EXPECT_EQ(0x56, hdr[0]);
    EXPECT_EQ(0x34, hdr[1]);
    EXPECT_EQ(0x12, hdr[2]);
    EXPECT_EQ(APTUS_FRAME_TYPE_MSG, hdr[3]);
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_IMM, APTUS_FRAME_IMM_LEN);
    EXPECT_EQ(4, hdr[0]);
    EXPECT_EQ(0, hdr[1]);
    EXPECT_EQ(0, hdr[2]);
    EXPECT_EQ(APTUS_FRAME_TYPE_IMM, hdr[3]);
}

TEST(rc_sr_proto, frame_round_trip)
{
    const size_t max = 8196;
    for (size_t len :
         { (size_t)0, (size_t)1, (size_t)7, (size_t)100, max - 1, max }) {
        std::vector<uint8_t> payload(len);
        for (size_t i = 0; i < len; ++i) {
            payload[i] = (uint8_t)(i * 13 + len);
        }
        std::vector<uint8_t> buf = frame_bytes(APTUS_FRAME_TYPE_MSG, payload);
        auto copy                = exact_copy(buf);
        aptus_frame_t f;
        ASSERT_EQ(APTUS_FRAME_OK,
                  aptus_frame_parse(copy.get(), buf.size(), max, &f))
            << len;
        EXPECT_EQ((unsigned)APTUS_FRAME_TYPE_MSG, f.type);
        EXPECT_EQ(len, f.length);
        EXPECT_EQ(copy.get() + APTUS_FRAME_HDR_LEN, f.payload);
        if (len > 0) {
            EXPECT_EQ(0, memcmp(payload.data(), f.payload, len));
        }
    }

    std::vector<uint8_t> imm = { 0xef, 0xbe, 0xad, 0xde };
    std::vector<uint8_t> buf = frame_bytes(APTUS_FRAME_TYPE_IMM, imm);
    auto copy                = exact_copy(buf);
    aptus_frame_t f;
    ASSERT_EQ(APTUS_FRAME_OK, aptus_frame_parse(copy.get(), buf.size(), 1, &f));
    EXPECT_EQ((unsigned)APTUS_FRAME_TYPE_IMM, f.type);
    EXPECT_EQ(4u, f.length);
    EXPECT_EQ(0, memcmp(imm.data(), f.payload, 4));
}

TEST(rc_sr_proto, frame_followed_by_more_bytes)
{
    /* a stream holds several frames: each parse takes exactly one */
    std::vector<uint8_t> a = frame_bytes(APTUS_FRAME_TYPE_MSG, { 1, 2, 3 });
    std::vector<uint8_t> b = frame_bytes(APTUS_FRAME_TYPE_IMM, { 9, 8, 7, 6 });
    std::vector<uint8_t> c = frame_bytes(APTUS_FRAME_TYPE_MSG, {});
    std::vector<uint8_t> s = a;
    s.insert(s.end(), b.begin(), b.end());
    s.insert(s.end(), c.begin(), c.end());
    s.push_back(0x55); /* the first byte of a next header */
    auto copy = exact_copy(s);

    size_t off = 0;
    aptus_frame_t f;
    ASSERT_EQ(APTUS_FRAME_OK,
              aptus_frame_parse(copy.get() + off, s.size() - off, 100, &f));
    EXPECT_EQ(3u, f.length);
    off += APTUS_FRAME_HDR_LEN + f.length;
    ASSERT_EQ(APTUS_FRAME_OK,
              aptus_frame_parse(copy.get() + off, s.size() - off, 100, &f));
    EXPECT_EQ((unsigned)APTUS_FRAME_TYPE_IMM, f.type);
    off += APTUS_FRAME_HDR_LEN + f.length;
    ASSERT_EQ(APTUS_FRAME_OK,
              aptus_frame_parse(copy.get() + off, s.size() - off, 100, &f));
    EXPECT_EQ(0u, f.length);
    off += APTUS_FRAME_HDR_LEN + f.length;
    EXPECT_EQ(APTUS_FRAME_PARTIAL,
              aptus_frame_parse(copy.get() + off, s.size() - off, 100, &f));
}

TEST(rc_sr_proto, frame_partial_for_every_truncation)
{
    const size_t max = 300;
    for (size_t len : { (size_t)0, (size_t)1, (size_t)5, max }) {
        std::vector<uint8_t> buf =
            frame_bytes(APTUS_FRAME_TYPE_MSG, std::vector<uint8_t>(len, 0xab));
        for (size_t avail = 0; avail < buf.size(); ++avail) {
            std::vector<uint8_t> cut(buf.begin(), buf.begin() + avail);
            auto copy = exact_copy(cut);
            aptus_frame_t f;
            EXPECT_EQ(APTUS_FRAME_PARTIAL,
                      aptus_frame_parse(copy.get(), avail, max, &f))
                << "len " << len << " avail " << avail;
        }
    }
    std::vector<uint8_t> buf =
        frame_bytes(APTUS_FRAME_TYPE_IMM, { 1, 2, 3, 4 });
    for (size_t avail = 0; avail < buf.size(); ++avail) {
        std::vector<uint8_t> cut(buf.begin(), buf.begin() + avail);
        auto copy = exact_copy(cut);
        aptus_frame_t f;
        EXPECT_EQ(APTUS_FRAME_PARTIAL,
                  aptus_frame_parse(copy.get(), avail, max, &f))
            << "imm avail " << avail;
    }
}

TEST(rc_sr_proto, frame_bad)
{
    aptus_frame_t f;
    uint8_t hdr[APTUS_FRAME_HDR_LEN];

    /* longer than the limit: bad as soon as the header is there, before
     * any of the (possibly huge) payload */
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_MSG, 101);
    EXPECT_EQ(APTUS_FRAME_BAD, aptus_frame_parse(hdr, sizeof(hdr), 100, &f));
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_MSG, 100);
    EXPECT_EQ(APTUS_FRAME_PARTIAL,
              aptus_frame_parse(hdr, sizeof(hdr), 100, &f));
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_MSG, APTUS_FRAME_MAX_LEN);
    EXPECT_EQ(APTUS_FRAME_BAD, aptus_frame_parse(hdr, sizeof(hdr), 8196, &f));
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_MSG, 1);
    EXPECT_EQ(APTUS_FRAME_BAD, aptus_frame_parse(hdr, sizeof(hdr), 0, &f));
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_MSG, 0);
    EXPECT_EQ(APTUS_FRAME_OK, aptus_frame_parse(hdr, sizeof(hdr), 0, &f));

    /* one-sided frames: each with the lengths it may have */
    struct {
        unsigned type;
        size_t ok, bad;
    } rma[] = { { APTUS_FRAME_TYPE_WRITE, 17, 16 },
                /* one-sided data is not bound by the largest message (1000
                 * here): it goes to its memory, not into a buffer */
                { APTUS_FRAME_TYPE_WRITE, APTUS_FRAME_RMA_MAX_LEN,
                  APTUS_FRAME_RMA_MAX_LEN + 1 },
                { APTUS_FRAME_TYPE_READ_REQ, 24, 25 },
                { APTUS_FRAME_TYPE_READ_RESP, 1, 0 },
                { APTUS_FRAME_TYPE_READ_RESP, APTUS_FRAME_RMA_MAX_LEN,
                  APTUS_FRAME_RMA_MAX_LEN + 1 },
                { APTUS_FRAME_TYPE_READ_ERR, 0, 4 },
                { APTUS_FRAME_TYPE_FENCE_ACK, 0, 1 } };
    for (const auto &r : rma) {
        std::vector<uint8_t> ok =
            frame_bytes(r.type, std::vector<uint8_t>(r.ok, 1));
        std::vector<uint8_t> bad =
            frame_bytes(r.type, std::vector<uint8_t>(r.bad, 1));
        EXPECT_EQ(APTUS_FRAME_OK,
                  aptus_frame_parse(ok.data(), ok.size(), 1000, &f))
            << "type " << r.type << " len " << r.ok;
        EXPECT_EQ(APTUS_FRAME_BAD,
                  aptus_frame_parse(bad.data(), bad.size(), 1000, &f))
            << "type " << r.type << " len " << r.bad;
    }

    /* every unknown type, whatever the length */
    for (unsigned type = APTUS_FRAME_TYPE_PROVE_ANS + 1; type < 256; ++type) {
        for (size_t len : { (size_t)0, (size_t)4, (size_t)50 }) {
            std::vector<uint8_t> buf =
                frame_bytes(type, std::vector<uint8_t>(len, 1));
            auto copy = exact_copy(buf);
            EXPECT_EQ(APTUS_FRAME_BAD,
                      aptus_frame_parse(copy.get(), buf.size(), 1000, &f))
                << "type " << type << " len " << len;
            EXPECT_EQ(
                APTUS_FRAME_BAD,
                aptus_frame_parse(copy.get(), APTUS_FRAME_HDR_LEN, 1000, &f))
                << "type " << type << " len " << len;
        }
    }

    /* an immediate is exactly 4 bytes */
    for (size_t len : { (size_t)0, (size_t)1, (size_t)3, (size_t)5, (size_t)8,
                        (size_t)1000 }) {
        std::vector<uint8_t> buf =
            frame_bytes(APTUS_FRAME_TYPE_IMM, std::vector<uint8_t>(len, 2));
        auto copy = exact_copy(buf);
        EXPECT_EQ(APTUS_FRAME_BAD,
                  aptus_frame_parse(copy.get(), buf.size(), 100000, &f))
            << len;
        EXPECT_EQ(
            APTUS_FRAME_BAD,
            aptus_frame_parse(copy.get(), APTUS_FRAME_HDR_LEN, 100000, &f))
            << len;
    }
    /* even when the IMM would fit the message limit */
    aptus_frame_hdr_pack(hdr, APTUS_FRAME_TYPE_IMM, APTUS_FRAME_MAX_LEN);
    EXPECT_EQ(APTUS_FRAME_BAD,
              aptus_frame_parse(hdr, sizeof(hdr), APTUS_FRAME_MAX_LEN, &f));
}

TEST(rc_sr_proto, msg_header_is_little_endian)
{
    uint8_t hdr[APTUS_RC_HDR_LEN];
    aptus_rc_hdr_pack(hdr, APTUS_RC_KIND_CREDIT, 0xa5, 0x1234);
    EXPECT_EQ(APTUS_RC_KIND_CREDIT, hdr[0]);
    EXPECT_EQ(0xa5, hdr[1]);
    EXPECT_EQ(0x34, hdr[2]);
    EXPECT_EQ(0x12, hdr[3]);
}

TEST(rc_sr_proto, msg_round_trip_every_kind)
{
    aptus_rc_msg_t m;

    /* AM with a body, and an empty AM */
    for (size_t len : { (size_t)0, (size_t)1, (size_t)8, (size_t)8192 }) {
        std::vector<uint8_t> body(len);
        for (size_t i = 0; i < len; ++i) {
            body[i] = (uint8_t)(i ^ 0x3c);
        }
        std::vector<uint8_t> buf = msg_bytes(APTUS_RC_KIND_AM, 31, 65535, body);
        auto copy                = exact_copy(buf);
        ASSERT_EQ(0, aptus_rc_msg_parse(copy.get(), buf.size(), &m)) << len;
        EXPECT_EQ((unsigned)APTUS_RC_KIND_AM, m.kind);
        EXPECT_EQ(31, m.am_id);
        EXPECT_EQ(65535, m.credits);
        EXPECT_EQ(copy.get() + APTUS_RC_HDR_LEN, m.body);
        EXPECT_EQ(len, m.body_length);
        if (len > 0) {
            EXPECT_EQ(0, memcmp(body.data(), m.body, len));
        }
    }

    for (unsigned kind :
         { APTUS_RC_KIND_CREDIT, APTUS_RC_KIND_NOP, APTUS_RC_KIND_BYE }) {
        std::vector<uint8_t> buf = msg_bytes(kind, 0, 77, {});
        auto copy                = exact_copy(buf);
        ASSERT_EQ(0, aptus_rc_msg_parse(copy.get(), buf.size(), &m)) << kind;
        EXPECT_EQ(kind, m.kind);
        EXPECT_EQ(77, m.credits);
        EXPECT_EQ(0u, m.body_length);
    }

    std::vector<uint8_t> buf = hello_msg(0xcafe, 128, APTUS_RC_VERSION, 5);
    auto copy                = exact_copy(buf);
    ASSERT_EQ(0, aptus_rc_msg_parse(copy.get(), buf.size(), &m));
    EXPECT_EQ((unsigned)APTUS_RC_KIND_HELLO, m.kind);
    EXPECT_EQ(5, m.credits);
    EXPECT_EQ((size_t)APTUS_RC_HELLO_LEN, m.body_length);
}

TEST(rc_sr_proto, msg_rejects_malformed)
{
    aptus_rc_msg_t m;

    /* shorter than the header, whatever the kind */
    std::vector<uint8_t> full = msg_bytes(APTUS_RC_KIND_AM, 1, 1, {});
    for (size_t len = 0; len < APTUS_RC_HDR_LEN; ++len) {
        std::vector<uint8_t> cut(full.begin(), full.begin() + len);
        auto copy = exact_copy(cut);
        EXPECT_EQ(-1, aptus_rc_msg_parse(copy.get(), len, &m)) << len;
    }

    /* CREDIT, NOP and BYE carry nothing */
    for (unsigned kind :
         { APTUS_RC_KIND_CREDIT, APTUS_RC_KIND_NOP, APTUS_RC_KIND_BYE }) {
        for (size_t len : { (size_t)1, (size_t)4, (size_t)12 }) {
            std::vector<uint8_t> buf =
                msg_bytes(kind, 0, 1, std::vector<uint8_t>(len, 0));
            auto copy = exact_copy(buf);
            EXPECT_EQ(-1, aptus_rc_msg_parse(copy.get(), buf.size(), &m))
                << kind << " " << len;
        }
    }

    /* HELLO is exactly APTUS_RC_HELLO_LEN bytes of body */
    std::vector<uint8_t> hello = hello_msg(1, 1, APTUS_RC_VERSION, 0);
    for (size_t len = 0; len <= hello.size() + 4; ++len) {
        if (len == hello.size()) {
            continue;
        }
        std::vector<uint8_t> buf(len, 0);
        std::copy(hello.begin(), hello.begin() + std::min(len, hello.size()),
                  buf.begin());
        if (len < APTUS_RC_HDR_LEN) {
            continue; /* covered above */
        }
        auto copy = exact_copy(buf);
        EXPECT_EQ(-1, aptus_rc_msg_parse(copy.get(), len, &m)) << len;
    }

    /* unknown kinds */
    for (unsigned kind = APTUS_RC_KIND_LAST; kind < 256; ++kind) {
        for (size_t len : { (size_t)0, (size_t)12, (size_t)40 }) {
            std::vector<uint8_t> buf =
                msg_bytes(kind, 0, 0, std::vector<uint8_t>(len, 0));
            auto copy = exact_copy(buf);
            EXPECT_EQ(-1, aptus_rc_msg_parse(copy.get(), buf.size(), &m))
                << kind << " " << len;
        }
    }
}

TEST(rc_sr_proto, hello_round_trip)
{
    std::vector<uint8_t> buf =
        hello_msg(0x89abcdef76543210ull, 1, APTUS_RC_VERSION, 0,
                  0x0123456789abcdefull, 1);
    aptus_rc_msg_t m;
    aptus_rc_hello_t h;
    ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
    ASSERT_EQ(0, aptus_rc_hello_parse(&m, &h));
    EXPECT_EQ(0x89abcdef76543210ull, h.key);
    EXPECT_EQ(0x0123456789abcdefull, h.src_key);
    EXPECT_EQ(1, h.credits);
    EXPECT_EQ(APTUS_RC_VERSION, h.version);
    EXPECT_EQ(1, h.src_port);

    buf = hello_msg(0, 65535, APTUS_RC_VERSION, 65535, 0xffffffff, 0xfedc);
    ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
    ASSERT_EQ(0, aptus_rc_hello_parse(&m, &h));
    EXPECT_EQ(0u, h.key);
    EXPECT_EQ(0xffffffffu, h.src_key);
    EXPECT_EQ(65535, h.credits);
    EXPECT_EQ(0xfedc, h.src_port);

    /* the layout, little-endian: magic "RCSR", key, src_key, credits,
     * version, src_port, tag, conn_id */
    buf = hello_msg(0x0807060544332211ull, 0x6655, APTUS_RC_VERSION, 0,
                    0x1817161588776655ull, 0xaa99, 0xddccbbaa);
    const uint8_t expect[APTUS_RC_HELLO_LEN] = { 0x52,
                                                 0x53,
                                                 0x43,
                                                 0x52,
                                                 0x11,
                                                 0x22,
                                                 0x33,
                                                 0x44,
                                                 0x05,
                                                 0x06,
                                                 0x07,
                                                 0x08,
                                                 0x55,
                                                 0x66,
                                                 0x77,
                                                 0x88,
                                                 0x15,
                                                 0x16,
                                                 0x17,
                                                 0x18,
                                                 0x55,
                                                 0x66,
                                                 APTUS_RC_VERSION,
                                                 0,
                                                 0x99,
                                                 0xaa,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0xaa,
                                                 0xbb,
                                                 0xcc,
                                                 0xdd };
    /* the tag is carried as given */
    buf[APTUS_RC_HDR_LEN + 28] = 0x34;
    buf[APTUS_RC_HDR_LEN + 29] = 0x12;
    ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
    ASSERT_EQ(0, aptus_rc_hello_parse(&m, &h));
    EXPECT_EQ(0x1234, h.tag);
    buf[APTUS_RC_HDR_LEN + 28] = 0;
    buf[APTUS_RC_HDR_LEN + 29] = 0;
    EXPECT_EQ(
        0, memcmp(expect, buf.data() + APTUS_RC_HDR_LEN, APTUS_RC_HELLO_LEN));
}

/* A port is the wire's opaque 32-bit value: a verbs QP number takes 24
 * bits, which a 16-bit field would have cut. */
TEST(rc_sr_proto, hello_round_trip_wide_port)
{
    for (uint32_t port : { 0xabcdefu, 0xffffffu, 0x10000u, 0xffffffffu }) {
        std::vector<uint8_t> buf =
            hello_msg(0x42, 8, APTUS_RC_VERSION, 0, 0x43, port, 0x01020304);
        aptus_rc_msg_t m;
        aptus_rc_hello_t h;
        ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
        ASSERT_EQ(0, aptus_rc_hello_parse(&m, &h));
        EXPECT_EQ(port, h.src_port);
        EXPECT_EQ(0x01020304u, h.conn_id) << "the port overlapped conn_id";
        EXPECT_EQ(0, h.tag);
        /* little-endian at byte 24 of the body */
        EXPECT_EQ(port, (uint32_t)buf[APTUS_RC_HDR_LEN + 24] |
                            ((uint32_t)buf[APTUS_RC_HDR_LEN + 25] << 8) |
                            ((uint32_t)buf[APTUS_RC_HDR_LEN + 26] << 16) |
                            ((uint32_t)buf[APTUS_RC_HDR_LEN + 27] << 24));
    }
}

TEST(rc_sr_proto, hello_rejects_bad)
{
    aptus_rc_msg_t m;
    aptus_rc_hello_t h;
    std::vector<uint8_t> buf;

    /* bad magic: every byte of it */
    for (size_t i = 0; i < 4; ++i) {
        buf = hello_msg(7, 10, APTUS_RC_VERSION, 0);
        buf[APTUS_RC_HDR_LEN + i] ^= 0x01;
        ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
        EXPECT_EQ(-1, aptus_rc_hello_parse(&m, &h)) << i;
    }

    /* another version */
    for (uint16_t v :
         { 0, APTUS_RC_VERSION + 1, 0x100 | APTUS_RC_VERSION, 0xffff }) {
        buf = hello_msg(7, 10, v, 0);
        ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
        EXPECT_EQ(-1, aptus_rc_hello_parse(&m, &h)) << v;
    }

    /* granting nothing would stall the peer for ever */
    buf = hello_msg(7, 0, APTUS_RC_VERSION, 0);
    ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
    EXPECT_EQ(-1, aptus_rc_hello_parse(&m, &h));

    /* a message of another kind, or of another length, is no hello even
     * when its body looks like one */
    buf    = hello_msg(7, 10, APTUS_RC_VERSION, 0);
    buf[0] = APTUS_RC_KIND_AM;
    ASSERT_EQ(0, aptus_rc_msg_parse(buf.data(), buf.size(), &m));
    EXPECT_EQ(-1, aptus_rc_hello_parse(&m, &h));

    buf = hello_msg(7, 10, APTUS_RC_VERSION, 0);
    buf.push_back(0);
    m.kind        = APTUS_RC_KIND_HELLO;
    m.am_id       = 0;
    m.credits     = 0;
    m.body        = buf.data() + APTUS_RC_HDR_LEN;
    m.body_length = APTUS_RC_HELLO_LEN + 1;
    EXPECT_EQ(-1, aptus_rc_hello_parse(&m, &h));
    m.body_length = APTUS_RC_HELLO_LEN - 1;
    EXPECT_EQ(-1, aptus_rc_hello_parse(&m, &h));
    m.body_length = APTUS_RC_HELLO_LEN;
    EXPECT_EQ(0, aptus_rc_hello_parse(&m, &h));
}

TEST(rc_sr_proto, credits_take_until_zero)
{
    aptus_rc_credits_t fc;
    aptus_rc_credits_init(&fc, 3, 8);
    EXPECT_EQ(3u, fc.tx);
    EXPECT_EQ(0u, fc.owed);
    EXPECT_EQ(8u, fc.grant);
    EXPECT_EQ(1, aptus_rc_credits_take(&fc));
    EXPECT_EQ(1, aptus_rc_credits_take(&fc));
    EXPECT_EQ(1, aptus_rc_credits_take(&fc));
    EXPECT_EQ(0u, fc.tx);
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(0, aptus_rc_credits_take(&fc));
        EXPECT_EQ(0u, fc.tx); /* never below zero */
    }
    EXPECT_EQ(1, aptus_rc_credits_returned(&fc, 1, 3));
    EXPECT_EQ(1, aptus_rc_credits_take(&fc));
    EXPECT_EQ(0, aptus_rc_credits_take(&fc));

    aptus_rc_credits_init(&fc, 0, 8);
    EXPECT_EQ(0, aptus_rc_credits_take(&fc));
}

TEST(rc_sr_proto, credits_returned_beyond_grant_refused)
{
    aptus_rc_credits_t fc;
    aptus_rc_credits_init(&fc, 4, 4);

    /* nothing spent: nothing may come back */
    EXPECT_EQ(1, aptus_rc_credits_returned(&fc, 0, 4));
    EXPECT_EQ(0, aptus_rc_credits_returned(&fc, 1, 4));
    EXPECT_EQ(4u, fc.tx);

    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(1, aptus_rc_credits_take(&fc));
    }
    EXPECT_EQ(0, aptus_rc_credits_returned(&fc, 5, 4));
    EXPECT_EQ(0u, fc.tx); /* a refused return changes nothing */
    EXPECT_EQ(0, aptus_rc_credits_returned(&fc, UINT32_MAX, 4));
    EXPECT_EQ(0, aptus_rc_credits_returned(&fc, 65535, 4));
    EXPECT_EQ(0u, fc.tx);
    EXPECT_EQ(1, aptus_rc_credits_returned(&fc, 3, 4));
    EXPECT_EQ(3u, fc.tx);
    EXPECT_EQ(0, aptus_rc_credits_returned(&fc, 2, 4));
    EXPECT_EQ(3u, fc.tx);
    EXPECT_EQ(1, aptus_rc_credits_returned(&fc, 1, 4));
    EXPECT_EQ(4u, fc.tx);
    EXPECT_EQ(0, aptus_rc_credits_returned(&fc, 1, 4));
    EXPECT_EQ(4u, fc.tx);

    /* the largest grant a hello can carry */
    aptus_rc_credits_init(&fc, APTUS_RC_MAX_CREDITS, 1);
    for (unsigned i = 0; i < APTUS_RC_MAX_CREDITS; ++i) {
        ASSERT_EQ(1, aptus_rc_credits_take(&fc));
    }
    EXPECT_EQ(0, aptus_rc_credits_take(&fc));
    EXPECT_EQ(1, aptus_rc_credits_returned(&fc, APTUS_RC_MAX_CREDITS,
                                           APTUS_RC_MAX_CREDITS));
    EXPECT_EQ((uint32_t)APTUS_RC_MAX_CREDITS, fc.tx);
}

TEST(rc_sr_proto, credits_piggyback_caps_and_clears)
{
    aptus_rc_credits_t fc;
    aptus_rc_credits_init(&fc, 10, 100000);

    EXPECT_EQ(0, aptus_rc_credits_piggyback(&fc));
    aptus_rc_credits_consumed(&fc);
    aptus_rc_credits_consumed(&fc);
    EXPECT_EQ(2u, fc.owed);
    EXPECT_EQ(2, aptus_rc_credits_piggyback(&fc));
    EXPECT_EQ(0u, fc.owed);
    EXPECT_EQ(0, aptus_rc_credits_piggyback(&fc));

    for (int i = 0; i < 70000; ++i) {
        aptus_rc_credits_consumed(&fc);
    }
    EXPECT_EQ(65535, aptus_rc_credits_piggyback(&fc));
    EXPECT_EQ(70000u - 65535u, fc.owed);
    EXPECT_EQ(70000 - 65535, aptus_rc_credits_piggyback(&fc));
    EXPECT_EQ(0u, fc.owed);

    fc.owed = UINT32_MAX;
    EXPECT_EQ(65535, aptus_rc_credits_piggyback(&fc));
    EXPECT_EQ(UINT32_MAX - 65535u, fc.owed);
    /* the tx side is not touched */
    EXPECT_EQ(10u, fc.tx);
}

TEST(rc_sr_proto, credits_need_explicit_at_half_the_grant)
{
    aptus_rc_credits_t fc;

    aptus_rc_credits_init(&fc, 1, 8);
    for (int i = 0; i < 3; ++i) {
        aptus_rc_credits_consumed(&fc);
        EXPECT_FALSE(aptus_rc_credits_need_explicit(&fc)) << i;
    }
    aptus_rc_credits_consumed(&fc);
    EXPECT_TRUE(aptus_rc_credits_need_explicit(&fc));
    aptus_rc_credits_consumed(&fc);
    EXPECT_TRUE(aptus_rc_credits_need_explicit(&fc));
    EXPECT_EQ(5, aptus_rc_credits_piggyback(&fc));
    EXPECT_FALSE(aptus_rc_credits_need_explicit(&fc));

    /* an odd grant rounds up: the peer still has credits left */
    aptus_rc_credits_init(&fc, 1, 7);
    for (int i = 0; i < 3; ++i) {
        aptus_rc_credits_consumed(&fc);
    }
    EXPECT_FALSE(aptus_rc_credits_need_explicit(&fc));
    aptus_rc_credits_consumed(&fc);
    EXPECT_TRUE(aptus_rc_credits_need_explicit(&fc));

    /* a grant of one: every consumed message is returned at once */
    aptus_rc_credits_init(&fc, 1, 1);
    EXPECT_FALSE(aptus_rc_credits_need_explicit(&fc));
    aptus_rc_credits_consumed(&fc);
    EXPECT_TRUE(aptus_rc_credits_need_explicit(&fc));

    /* the largest grant */
    aptus_rc_credits_init(&fc, 1, APTUS_RC_MAX_CREDITS);
    fc.owed = APTUS_RC_MAX_CREDITS / 2;
    EXPECT_FALSE(aptus_rc_credits_need_explicit(&fc));
    fc.owed++;
    EXPECT_TRUE(aptus_rc_credits_need_explicit(&fc));
}

/* A whole conversation: what the receiver piggybacks is what the sender
 * may spend again, and the sender never runs past the grant. */
TEST(rc_sr_proto, credits_conversation)
{
    const uint32_t grant = 16;
    aptus_rc_credits_t tx_side, rx_side;
    aptus_rc_credits_init(&tx_side, grant, 4);
    aptus_rc_credits_init(&rx_side, 4, grant);
    std::mt19937 rng(7);
    uint32_t in_flight = 0, sent = 0, explicit_msgs = 0;

    for (int step = 0; step < 100000; ++step) {
        if (rng() % 2) {
            if (aptus_rc_credits_take(&tx_side)) {
                ++in_flight;
                ++sent;
            } else {
                ASSERT_EQ(grant, in_flight + rx_side.owed);
            }
        } else if (in_flight > 0) {
            --in_flight;
            aptus_rc_credits_consumed(&rx_side);
            if (aptus_rc_credits_need_explicit(&rx_side) || (rng() % 8 == 0)) {
                explicit_msgs += aptus_rc_credits_need_explicit(&rx_side);
                uint16_t c = aptus_rc_credits_piggyback(&rx_side);
                ASSERT_EQ(1, aptus_rc_credits_returned(&tx_side, c, grant));
            }
        }
        ASSERT_EQ(grant, tx_side.tx + in_flight + rx_side.owed);
        ASSERT_LT(rx_side.owed, rx_side.explicit_at + 1);
    }
    EXPECT_GT(sent, 10000u);
    EXPECT_GT(explicit_msgs, 0u);
}

/* Bytes placed so that they end where an inaccessible page begins: a read
 * past them faults at once, with or without ASan, and without an
 * allocation per input. */
class guarded_buffer
{
  public:
    guarded_buffer(size_t size)
    {
        m_page = sysconf(_SC_PAGESIZE);
        m_size = (size + m_page - 1) / m_page * m_page;
        m_base = (uint8_t *)mmap(NULL, m_size + m_page, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(MAP_FAILED, (void *)m_base);
        EXPECT_EQ(0, mprotect(m_base + m_size, m_page, PROT_NONE));
    }

    ~guarded_buffer()
    {
        munmap(m_base, m_size + m_page);
    }

    const uint8_t *place(const uint8_t *data, size_t length)
    {
        uint8_t *p = m_base + m_size - length;
        if (length > 0) {
            memcpy(p, data, length);
        }
        return p;
    }

  private:
    size_t m_page, m_size;
    uint8_t *m_base;
};

/* Everything the frame parser may say about buf, checked against what the
 * bytes hold. */
static void check_frame(const uint8_t *buf, size_t avail, size_t max_len,
                        unsigned *ok_count)
{
    aptus_frame_t f;
    aptus_frame_result_t r = aptus_frame_parse(buf, avail, max_len, &f);

    ASSERT_TRUE((r == APTUS_FRAME_OK) || (r == APTUS_FRAME_PARTIAL) ||
                (r == APTUS_FRAME_BAD));
    if (avail < APTUS_FRAME_HDR_LEN) {
        ASSERT_EQ(APTUS_FRAME_PARTIAL, r);
        return;
    }
    uint32_t word = (uint32_t)buf[0] | ((uint32_t)buf[1] << 8) |
                    ((uint32_t)buf[2] << 16) | ((uint32_t)buf[3] << 24);
    unsigned type = word >> 24;
    size_t length = word & 0xffffff;
    bool valid =
        ((type == APTUS_FRAME_TYPE_MSG) && (length <= max_len)) ||
        ((type == APTUS_FRAME_TYPE_IMM) && (length == APTUS_FRAME_IMM_LEN)) ||
        ((type == APTUS_FRAME_TYPE_WRITE) &&
         (length > APTUS_FRAME_WRITE_HDR_LEN) &&
         (length <= std::max<size_t>(max_len, APTUS_FRAME_RMA_MAX_LEN))) ||
        ((type == APTUS_FRAME_TYPE_READ_REQ) &&
         (length == APTUS_FRAME_READ_REQ_LEN)) ||
        ((type == APTUS_FRAME_TYPE_READ_RESP) && (length > 0) &&
         (length <= std::max<size_t>(max_len, APTUS_FRAME_RMA_MAX_LEN))) ||
        ((type == APTUS_FRAME_TYPE_PROVE_REQ) &&
         (length == APTUS_FRAME_PROVE_REQ_LEN)) ||
        (((type == APTUS_FRAME_TYPE_READ_ERR) ||
          (type == APTUS_FRAME_TYPE_FENCE_ACK) ||
          (type == APTUS_FRAME_TYPE_PROVE_ANS)) &&
         (length == 0));
    if (!valid) {
        ASSERT_EQ(APTUS_FRAME_BAD, r);
        return;
    }
    if (APTUS_FRAME_HDR_LEN + length > avail) {
        ASSERT_EQ(APTUS_FRAME_PARTIAL, r);
        /* a valid header is told: one-sided data is placed as it comes */
        ASSERT_EQ(type, f.type);
        ASSERT_EQ(length, f.length);
        return;
    }
    ASSERT_EQ(APTUS_FRAME_OK, r);
    ASSERT_LE(APTUS_FRAME_HDR_LEN + f.length, avail);
    ASSERT_EQ(type, f.type);
    ASSERT_EQ(length, f.length);
    if (f.type == APTUS_FRAME_TYPE_IMM) {
        ASSERT_EQ((size_t)APTUS_FRAME_IMM_LEN, f.length);
    } else {
        ASSERT_LE(f.length,
                  std::max({ max_len, (size_t)APTUS_FRAME_READ_REQ_LEN,
                             aptus_frame_max_payload(f.type, max_len) }));
    }
    ASSERT_EQ(buf + APTUS_FRAME_HDR_LEN, f.payload);
    ++*ok_count;

    /* the header packs back to the same bytes */
    uint8_t hdr[APTUS_FRAME_HDR_LEN];
    aptus_frame_hdr_pack(hdr, f.type, f.length);
    ASSERT_EQ(0, memcmp(hdr, buf, APTUS_FRAME_HDR_LEN));
}

static void check_msg(const uint8_t *payload, size_t length, unsigned *ok_count)
{
    aptus_rc_msg_t m;
    int r = aptus_rc_msg_parse(payload, length, &m);

    ASSERT_TRUE((r == 0) || (r == -1));
    if (r != 0) {
        if (length >= APTUS_RC_HDR_LEN) {
            unsigned kind = payload[0];
            size_t body   = length - APTUS_RC_HDR_LEN;
            ASSERT_TRUE((kind >= APTUS_RC_KIND_LAST) ||
                        ((kind == APTUS_RC_KIND_HELLO) &&
                         (body != APTUS_RC_HELLO_LEN)) ||
                        ((kind == APTUS_RC_KIND_SWITCH) &&
                         (body != APTUS_RC_SWITCH_LEN)) ||
                        (kind_is_empty(kind) && (body != 0)))
                << "kind " << kind << " body " << body;
        }
        return;
    }
    ASSERT_GE(length, (size_t)APTUS_RC_HDR_LEN);
    ASSERT_LT(m.kind, (unsigned)APTUS_RC_KIND_LAST);
    ASSERT_EQ(payload + APTUS_RC_HDR_LEN, m.body);
    ASSERT_EQ(length - APTUS_RC_HDR_LEN, m.body_length);
    ASSERT_EQ(payload[0], m.kind);
    ASSERT_EQ(payload[1], m.am_id);
    ASSERT_EQ((uint16_t)(payload[2] | (payload[3] << 8)), m.credits);
    if (kind_is_empty(m.kind)) {
        ASSERT_EQ(0u, m.body_length);
    }
    ++*ok_count;

    uint8_t hdr[APTUS_RC_HDR_LEN];
    aptus_rc_hdr_pack(hdr, m.kind, m.am_id, m.credits);
    ASSERT_EQ(0, memcmp(hdr, payload, APTUS_RC_HDR_LEN));

    if (m.kind == APTUS_RC_KIND_HELLO) {
        ASSERT_EQ((size_t)APTUS_RC_HELLO_LEN, m.body_length);
        aptus_rc_hello_t h;
        if (aptus_rc_hello_parse(&m, &h) == 0) {
            ASSERT_EQ(APTUS_RC_VERSION, h.version);
            ASSERT_GT(h.credits, 0);
            /* packs back to a hello that parses the same */
            uint8_t body[APTUS_RC_HELLO_LEN];
            aptus_rc_hello_pack(body, &h);
            aptus_rc_msg_t m2 = m;
            aptus_rc_hello_t h2;
            m2.body = body;
            ASSERT_EQ(0, aptus_rc_hello_parse(&m2, &h2));
            ASSERT_EQ(h.key, h2.key);
            ASSERT_EQ(h.src_key, h2.src_key);
            ASSERT_EQ(h.credits, h2.credits);
            ASSERT_EQ(h.version, h2.version);
            ASSERT_EQ(h.src_port, h2.src_port);
            ASSERT_EQ(h.conn_id, h2.conn_id);
            ASSERT_EQ(0, memcmp(body, m.body, 4)); /* the magic */
        }
    }
}

/* Whatever bytes arrive, the parsers return without reading past them,
 * and what they accept satisfies the contract the wire and the channel
 * rely on. Seeded: the same inputs every run. */
TEST(rc_sr_proto, fuzz)
{
    std::mt19937 rng(20240613);
    const size_t max_lens[] = { 0,   1,    4,    64,
                                100, 8192, 8196, APTUS_FRAME_MAX_LEN };

    /* well-formed streams to mutate: frames carrying each kind of message */
    std::vector<std::vector<uint8_t>> seeds;
    std::vector<uint8_t> body(60);
    for (size_t i = 0; i < body.size(); ++i) {
        body[i] = (uint8_t)i;
    }
    seeds.push_back(frame_bytes(APTUS_FRAME_TYPE_MSG,
                                msg_bytes(APTUS_RC_KIND_AM, 3, 17, body)));
    seeds.push_back(frame_bytes(APTUS_FRAME_TYPE_MSG,
                                msg_bytes(APTUS_RC_KIND_AM, 0, 0, {})));
    seeds.push_back(frame_bytes(APTUS_FRAME_TYPE_MSG,
                                msg_bytes(APTUS_RC_KIND_CREDIT, 0, 9, {})));
    seeds.push_back(frame_bytes(APTUS_FRAME_TYPE_MSG,
                                msg_bytes(APTUS_RC_KIND_NOP, 0, 0, {})));
    seeds.push_back(frame_bytes(APTUS_FRAME_TYPE_MSG,
                                msg_bytes(APTUS_RC_KIND_BYE, 0, 1, {})));
    seeds.push_back(frame_bytes(APTUS_FRAME_TYPE_MSG,
                                hello_msg(0x1234, 64, APTUS_RC_VERSION, 2)));
    seeds.push_back(frame_bytes(APTUS_FRAME_TYPE_IMM, { 1, 2, 3, 4 }));
    std::vector<uint8_t> stream;
    for (auto &s : seeds) {
        stream.insert(stream.end(), s.begin(), s.end());
    }
    seeds.push_back(stream);

    guarded_buffer in(65536), payload(65536);
    std::vector<uint8_t> buf;
    unsigned frames_ok = 0, msgs_ok = 0, hellos = 0;
    for (int iter = 0; iter < 300000; ++iter) {
        if (iter % 4 == 0) {
            /* random bytes, short ones often */
            buf.resize(rng() % ((rng() % 2) ? 16 : 200));
            for (auto &b : buf) {
                b = (uint8_t)rng();
            }
            /* make the type byte plausible now and then */
            if ((buf.size() >= 4) && (rng() % 2)) {
                buf[3] = (uint8_t)(rng() % 3);
                if (rng() % 2) {
                    buf[2] = buf[1] = 0;
                }
            }
        } else {
            buf      = seeds[rng() % seeds.size()];
            int nmut = 1 + rng() % 4;
            for (int m = 0; m < nmut; ++m) {
                switch (rng() % 5) {
                case 0: /* flip a bit */
                    if (!buf.empty()) {
                        buf[rng() % buf.size()] ^= (uint8_t)(1u << (rng() % 8));
                    }
                    break;
                case 1: /* truncate */
                    buf.resize(rng() % (buf.size() + 1));
                    break;
                case 2: /* random byte, in the headers more often */
                    if (!buf.empty()) {
                        size_t span       = (rng() % 2)
                                                ? std::min<size_t>(buf.size(), 8)
                                                : buf.size();
                        buf[rng() % span] = (uint8_t)rng();
                    }
                    break;
                case 3: /* grow */
                    buf.push_back((uint8_t)rng());
                    break;
                case 4: /* drop bytes from the front: a misaligned stream */
                    buf.erase(buf.begin(),
                              buf.begin() + rng() % (buf.size() + 1) / 2);
                    break;
                }
            }
        }

        const uint8_t *copy = in.place(buf.data(), buf.size());
        size_t max_len      = (rng() % 4) ? max_lens[rng() % 8] : rng() % 300;

        /* as the wire does: frame after frame until one is not whole */
        size_t off = 0;
        for (;;) {
            check_frame(copy + off, buf.size() - off, max_len, &frames_ok);
            if (HasFatalFailure()) {
                FAIL() << "iteration " << iter;
            }
            aptus_frame_t f;
            if (aptus_frame_parse(copy + off, buf.size() - off, max_len, &f) !=
                APTUS_FRAME_OK) {
                break;
            }
            if (f.type == APTUS_FRAME_TYPE_MSG) {
                unsigned m_before = msgs_ok;
                /* the payload itself, exactly as long as the frame says */
                check_msg(payload.place(f.payload, f.length), f.length,
                          &msgs_ok);
                if (HasFatalFailure()) {
                    FAIL() << "iteration " << iter;
                }
                if ((msgs_ok > m_before) &&
                    (f.payload[0] == APTUS_RC_KIND_HELLO)) {
                    ++hellos;
                }
            }
            off += APTUS_FRAME_HDR_LEN + f.length;
        }

        /* and the bytes as a message payload of their own */
        check_msg(copy, buf.size(), &msgs_ok);
        if (HasFatalFailure()) {
            FAIL() << "iteration " << iter;
        }
    }
    /* the fuzzer reached the accepting paths */
    EXPECT_GT(frames_ok, 50000u);
    EXPECT_GT(msgs_ok, 50000u);
    EXPECT_GT(hellos, 1000u);
}

/* Packing then parsing gives back what was packed, for random headers. */
TEST(rc_sr_proto, fuzz_round_trip)
{
    std::mt19937 rng(99);
    for (int iter = 0; iter < 30000; ++iter) {
        size_t max_len = 1 + rng() % 9000;
        unsigned type =
            (rng() % 2) ? APTUS_FRAME_TYPE_MSG : APTUS_FRAME_TYPE_IMM;
        size_t length = (type == APTUS_FRAME_TYPE_IMM)
                            ? APTUS_FRAME_IMM_LEN
                            : rng() % (std::min<size_t>(max_len, 600) + 1);
        std::vector<uint8_t> buf(APTUS_FRAME_HDR_LEN + length);
        aptus_frame_hdr_pack(buf.data(), type, length);
        for (size_t i = APTUS_FRAME_HDR_LEN; i < buf.size(); ++i) {
            buf[i] = (uint8_t)rng();
        }
        auto copy = exact_copy(buf);
        aptus_frame_t f;
        ASSERT_EQ(APTUS_FRAME_OK,
                  aptus_frame_parse(copy.get(), buf.size(), max_len, &f))
            << iter;
        ASSERT_EQ(type, f.type);
        ASSERT_EQ(length, f.length);
        if (length > 0) {
            ASSERT_EQ(APTUS_FRAME_PARTIAL,
                      aptus_frame_parse(copy.get(),
                                        buf.size() - 1 - rng() % length,
                                        max_len, &f));
        }

        if ((type == APTUS_FRAME_TYPE_MSG) && (length >= APTUS_RC_HDR_LEN)) {
            unsigned kind   = rng() % APTUS_RC_KIND_LAST;
            uint8_t am_id   = (uint8_t)rng();
            uint16_t credit = (uint16_t)rng();
            size_t body_len = length - APTUS_RC_HDR_LEN;
            if (kind_is_empty(kind)) {
                body_len = 0;
            } else if (kind == APTUS_RC_KIND_HELLO) {
                body_len = APTUS_RC_HELLO_LEN;
            } else if (kind == APTUS_RC_KIND_SWITCH) {
                body_len = APTUS_RC_SWITCH_LEN;
            }
            std::vector<uint8_t> msg(APTUS_RC_HDR_LEN + body_len);
            aptus_rc_hdr_pack(msg.data(), kind, am_id, credit);
            auto mc = exact_copy(msg);
            aptus_rc_msg_t m;
            ASSERT_EQ(0, aptus_rc_msg_parse(mc.get(), msg.size(), &m)) << iter;
            ASSERT_EQ(kind, m.kind);
            ASSERT_EQ(am_id, m.am_id);
            ASSERT_EQ(credit, m.credits);
            ASSERT_EQ(body_len, m.body_length);
        }
    }

    /* the largest frame the format can carry */
    std::vector<uint8_t> big(APTUS_FRAME_HDR_LEN + APTUS_FRAME_MAX_LEN);
    aptus_frame_hdr_pack(big.data(), APTUS_FRAME_TYPE_MSG, APTUS_FRAME_MAX_LEN);
    aptus_frame_t f;
    ASSERT_EQ(APTUS_FRAME_OK, aptus_frame_parse(big.data(), big.size(),
                                                APTUS_FRAME_MAX_LEN, &f));
    EXPECT_EQ((size_t)APTUS_FRAME_MAX_LEN, f.length);
    EXPECT_EQ(APTUS_FRAME_PARTIAL, aptus_frame_parse(big.data(), big.size() - 1,
                                                     APTUS_FRAME_MAX_LEN, &f));
}
