/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Keys and tokens: from the OS CSPRNG through one helper, never from the
 * time, the pid or a counter. What a test can see of that: values are
 * non-zero, distinct, and their high bits as spread as their low ones (a
 * counter or a clock fails that). The memory domain's registration tokens,
 * which a remote key carries and a UD-ZCopy request must show, are checked
 * the same way. (Unguessability itself is the OS CSPRNG's: the code draws
 * every key and token through proto/random.h, nothing else.)
 */
#include "uct_fixture.h"

extern "C" {
#include "proto/random.h"
#include "uct/base/aptus_md.h"
}

#include <set>
#include <vector>

namespace
{

/* distinct values of the top 16 bits among the values */
size_t distinct_tops(const std::vector<uint64_t> &v)
{
    std::set<uint64_t> tops;
    for (uint64_t x : v) {
        tops.insert(x >> 48);
    }
    return tops.size();
}

} // namespace

TEST(random, values_are_nonzero_distinct_and_without_structure)
{
    std::vector<uint64_t> v;
    std::set<uint64_t> seen;
    for (unsigned i = 0; i < 4096; ++i) {
        uint64_t x = aptus_random64();
        ASSERT_NE(0u, x);
        v.push_back(x);
        seen.insert(x);
        ASSERT_NE(0u, aptus_random32());
    }
    EXPECT_EQ(v.size(), seen.size());
    /* 4096 draws of 16 bits: about 3,900 distinct values when random */
    EXPECT_GT(distinct_tops(v), 3500u);
    uint8_t buf[100000];
    ASSERT_EQ(0, aptus_random_bytes(buf, sizeof(buf)));
    unsigned zeros = 0;
    for (uint8_t b : buf) {
        zeros += (b == 0);
    }
    EXPECT_LT(zeros, 600u); /* about 390 expected */
}

class md_tokens : public uct_aptus_test
{
};

TEST_F(md_tokens, registration_tokens_cannot_be_guessed)
{
    std::vector<uint8_t> mem(1 << 20);
    std::vector<uint64_t> tokens;
    std::vector<uct_mem_h> memhs;
    for (unsigned i = 0; i < 1024; ++i) {
        uct_mem_h memh;
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, mem.data() + i * 1024, 512,
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        uct_aptus_rkey_t rkey;
        ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, &rkey));
        EXPECT_NE(0u, rkey.token);
        tokens.push_back(rkey.token);
        memhs.push_back(memh);
    }
    EXPECT_EQ(tokens.size(),
              std::set<uint64_t>(tokens.begin(), tokens.end()).size());
    EXPECT_GT(distinct_tops(tokens), 800u); /* about 1,016 when random */
    for (uct_mem_h memh : memhs) {
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    }
}
