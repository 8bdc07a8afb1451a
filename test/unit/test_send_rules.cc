/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the send rule chain: grammar (every kind of error, with its
 * position), canonical form, and the evaluator.
 */
#include "proto/send_rules.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace
{

const char *const paper_chain = "{<=2048 rc_fp},{<=2008 ud_sr},{<=8192 rc_sr},"
                                "{<=8192 ud_sr},{any rc_rdma},{any ud_zcopy}";

aptus_rule_chain_t parse_ok(const std::string &text)
{
    aptus_rule_chain_t chain;
    aptus_rule_error_t err;
    EXPECT_EQ(0, aptus_rule_chain_parse(text.c_str(), &chain, &err))
        << text << ": position " << err.position << ": " << err.message;
    return chain;
}

std::string format(const aptus_rule_chain_t &chain)
{
    char buf[1024];
    size_t len = aptus_rule_chain_format(&chain, buf, sizeof(buf));
    EXPECT_LT(len, sizeof(buf));
    return buf;
}

const unsigned eager = APTUS_RULE_EAGER_CHANS;
const unsigned data  = APTUS_RULE_DATA_CHANS;
const unsigned rc =
    APTUS_RULE_BIT(APTUS_RULE_RC_SR) | APTUS_RULE_BIT(APTUS_RULE_RC_RDMA);
const unsigned fp = APTUS_RULE_BIT(APTUS_RULE_RC_FP);

} // namespace

TEST(send_rules, paper_chain_parses_and_formats_back)
{
    aptus_rule_chain_t chain = parse_ok(paper_chain);
    ASSERT_EQ(6u, chain.num_rules);
    EXPECT_EQ(paper_chain, format(chain));
    EXPECT_EQ(APTUS_RULE_EAGER_CHANS | APTUS_RULE_DATA_CHANS,
              aptus_rule_chain_channels(&chain));
    /* spaces between tokens, units, several conditions */
    chain = parse_ok("  { >=1k & <= 2k  & peers<64 rc_sr } , {any   ud_sr}  ");
    EXPECT_EQ("{>=1024&<=2048&peers<64 rc_sr},{any ud_sr}", format(chain));
    chain = parse_ok("{==0 ud_sr},{>1m rc_rdma},{any ud_zcopy}");
    EXPECT_EQ("{==0 ud_sr},{>1048576 rc_rdma},{any ud_zcopy}", format(chain));
}

TEST(send_rules, first_applicable_rule_with_an_allocated_channel_wins)
{
    aptus_rule_chain_t chain = parse_ok(paper_chain);
    unsigned rule;
    /* a peer on UD only */
    EXPECT_EQ(APTUS_RULE_UD_SR,
              aptus_rule_chain_select(&chain, eager, 100, 8, 0, &rule));
    EXPECT_EQ(1u, rule);
    EXPECT_EQ(APTUS_RULE_UD_SR,
              aptus_rule_chain_select(&chain, eager, 5000, 8, 0, &rule));
    EXPECT_EQ(3u, rule);
    EXPECT_EQ(APTUS_RULE_UD_ZCOPY,
              aptus_rule_chain_select(&chain, data, 1 << 20, 8, 0, &rule));
    EXPECT_EQ(5u, rule);
    /* a peer with an RC connection */
    EXPECT_EQ(APTUS_RULE_UD_SR,
              aptus_rule_chain_select(&chain, eager, 2008, 8, rc, &rule));
    EXPECT_EQ(APTUS_RULE_RC_SR,
              aptus_rule_chain_select(&chain, eager, 2009, 8, rc, &rule));
    EXPECT_EQ(2u, rule);
    EXPECT_EQ(APTUS_RULE_RC_RDMA,
              aptus_rule_chain_select(&chain, data, 1 << 20, 8, rc, &rule));
    EXPECT_EQ(4u, rule);
    /* and a fast path */
    EXPECT_EQ(APTUS_RULE_RC_FP,
              aptus_rule_chain_select(&chain, eager, 2048, 8, rc | fp, &rule));
    EXPECT_EQ(0u, rule);
    EXPECT_EQ(APTUS_RULE_RC_SR,
              aptus_rule_chain_select(&chain, eager, 2049, 8, rc | fp, &rule));
    /* an eager message above the eager rules goes by a data channel's
     * rule over that link's eager channel: RC-SR with a connection, UD-SR
     * without */
    EXPECT_EQ(APTUS_RULE_RC_SR,
              aptus_rule_chain_select(&chain, eager, 9000, 8, rc | fp, &rule));
    EXPECT_EQ(4u, rule); /* {any rc_rdma} */
    EXPECT_EQ(APTUS_RULE_UD_SR,
              aptus_rule_chain_select(&chain, eager, 9000, 8, 0, &rule));
    EXPECT_EQ(5u, rule); /* {any ud_zcopy} */
    /* and a chain without data rules leaves it to UD of its kind */
    aptus_rule_chain_t eager_only =
        parse_ok("{<=2048 rc_fp},{<=8192 rc_sr},{<=8192 ud_sr}");
    EXPECT_EQ(APTUS_RULE_UD_SR,
              aptus_rule_chain_select(&eager_only, eager, 9000, 8, rc, &rule));
    EXPECT_EQ(eager_only.num_rules, rule);
    /* rendezvous data never goes by an eager channel's rule */
    EXPECT_EQ(APTUS_RULE_RC_RDMA,
              aptus_rule_chain_select(&chain, data, 10, 8, rc, &rule));
    EXPECT_EQ(APTUS_RULE_UD_ZCOPY,
              aptus_rule_chain_select(&eager_only, data, 10, 8, rc, &rule));
}

TEST(send_rules, peer_count_conditions)
{
    aptus_rule_chain_t chain =
        parse_ok("{peers<=16&>1024 rc_sr},{peers>16 ud_sr},{any ud_sr}");
    unsigned rule;
    EXPECT_EQ(APTUS_RULE_RC_SR,
              aptus_rule_chain_select(&chain, eager, 4096, 16, rc, &rule));
    EXPECT_EQ(APTUS_RULE_UD_SR,
              aptus_rule_chain_select(&chain, eager, 4096, 17, rc, &rule));
    EXPECT_EQ(1u, rule);
    EXPECT_EQ(APTUS_RULE_UD_SR,
              aptus_rule_chain_select(&chain, eager, 1024, 4, rc, &rule));
    EXPECT_EQ(2u, rule);
}

TEST(send_rules, every_error_is_refused_with_its_position)
{
    struct {
        const char *text;
        unsigned position;
        const char *says;
    } cases[] = {
        { "", 1, "empty" },
        { "   ", 4, "empty" },
        { "<=2048 rc_fp}", 1, "expected '{'" },
        { "{<=2048 rc_xx},{any ud_sr}", 9, "unknown channel 'rc_xx'" },
        { "{<=2048rc_fp},{any ud_sr}", 8, "unexpected 'r' after a number" },
        { "{<=2048 rc_fp", 14, "expected '}'" },
        { "{<=2048 rc_fp} {any ud_sr}", 16, "expected ','" },
        { "{=<5 ud_sr}", 2, "expected a condition" },
        { "{<= ud_sr}", 5, "expected a number" },
        { "{<=99999999999999999999999 ud_sr}", 4, "number too large" },
        { "{<=18014398509481984m ud_sr}", 4, "number too large" },
        { "{any rc_sr}", 1, "last rule must name a UD channel" },
        { "{<=8 rc_sr},{any rc_rdma}", 13, "last rule must name a UD" },
        { "{<=1&<=2&<=3&<=4&<=5 ud_sr}", 18, "more than 4 conditions" },
        { "{<=8 ud_sr},,", 13, "expected '{'" },
        { "{<=8 ud_sr},", 13, "expected '{'" },
        { "{any}", 5, "expected a space and a channel" },
        { "{<=8 }", 6, "expected a channel, found '}'" },
        { "{<=8 ud_sr", 11, "expected '}'" },
        { "{peers ud_sr}", 8, "expected a condition" },
        { "{any&<=8 ud_sr}", 5, "expected a space and a channel" },
    };
    for (const auto &c : cases) {
        aptus_rule_chain_t chain;
        aptus_rule_error_t err;
        EXPECT_EQ(-1, aptus_rule_chain_parse(c.text, &chain, &err)) << c.text;
        EXPECT_EQ(c.position, err.position) << c.text << ": " << err.message;
        EXPECT_NE(nullptr, strstr(err.message, c.says))
            << c.text << ": " << err.message;
    }
    /* too many rules */
    std::string many;
    for (int i = 0; i < APTUS_RULES_MAX; ++i) {
        many += "{<=8 rc_sr},";
    }
    std::string ok = many.substr(0, many.size() - 12) + "{any ud_sr}";
    parse_ok(ok);
    many += "{any ud_sr}";
    aptus_rule_chain_t chain;
    aptus_rule_error_t err;
    EXPECT_EQ(-1, aptus_rule_chain_parse(many.c_str(), &chain, &err));
    EXPECT_EQ(APTUS_RULES_MAX * 12u + 1, err.position);
    EXPECT_NE(nullptr, strstr(err.message, "more than 16 rules"));
}

TEST(send_rules, mutated_chains_never_crash_and_point_inside_the_text)
{
    /* what a user's typing does to the variable */
    std::mt19937 rng(7);
    const std::string alphabet = "{}<>=&, anyperskmdufpoz_0123456789";
    unsigned parsed            = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string s = paper_chain;
        int edits     = 1 + rng() % 4;
        for (int e = 0; e < edits; ++e) {
            size_t at = rng() % (s.size() + 1);
            switch (rng() % 3) {
            case 0:
                s.insert(at, 1, alphabet[rng() % alphabet.size()]);
                break;
            case 1:
                if (at < s.size()) {
                    s.erase(at, 1);
                }
                break;
            default:
                if (at < s.size()) {
                    s[at] = alphabet[rng() % alphabet.size()];
                }
            }
        }
        aptus_rule_chain_t chain;
        aptus_rule_error_t err;
        if (aptus_rule_chain_parse(s.c_str(), &chain, &err) == 0) {
            ++parsed;
            /* what parses formats to something that parses the same */
            aptus_rule_chain_t again = parse_ok(format(chain));
            ASSERT_EQ(format(chain), format(again)) << s;
        } else {
            ASSERT_GE(err.position, 1u) << s;
            ASSERT_LE(err.position, s.size() + 1) << s;
            ASSERT_NE('\0', err.message[0]) << s;
        }
    }
    EXPECT_GT(parsed, 0u);
}

TEST(send_rules, coverage_of_every_size_by_ud_rules)
{
    struct {
        const char *text;
        bool covered;
        uint64_t size, peers; /* the smallest gap */
    } cases[] = {
        { paper_chain, true, 0, 0 },
        { "{any ud_sr}", true, 0, 0 },
        { "{<=8k rc_sr},{<=8k ud_sr},{>8k ud_zcopy}", true, 0, 0 },
        { "{peers<=16 ud_sr},{peers>16 ud_zcopy}", true, 0, 0 },
        { "{==0 ud_sr},{>0 ud_zcopy}", true, 0, 0 },
        { "{<=8192 ud_sr}", false, 8193, 1 },
        { "{<=2048 rc_fp},{<=8192 rc_sr},{<=8192 ud_sr}", false, 8193, 1 },
        { "{>0 ud_sr}", false, 0, 1 },
        { "{any rc_sr},{<1m ud_sr},{>1m ud_zcopy}", false, 1048576, 1 },
        { "{peers<=16 ud_sr}", false, 0, 17 },
        { "{<=1k&peers>2 ud_sr},{>1k ud_sr}", false, 0, 1 },
        /* a data channel's rule on RC does not fill a gap of UD's */
        { "{<=8k ud_sr},{any rc_rdma},{>16k ud_zcopy}", false, 8193, 1 },
    };

    for (const auto &c : cases) {
        aptus_rule_chain_t chain = parse_ok(c.text);
        uint64_t size = 0, peers = 0;
        EXPECT_EQ(c.covered ? 1 : 0,
                  aptus_rule_chain_covers(&chain, &size, &peers))
            << c.text;
        if (!c.covered) {
            EXPECT_EQ(c.size, size) << c.text;
            EXPECT_EQ(c.peers, peers) << c.text;
        }
    }
}
