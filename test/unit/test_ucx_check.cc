/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The run-time check that the UCX in the process is the build the module
 * was compiled against: the build IDs read from the loaded libraries'
 * program headers, a mismatch refused with one line naming both.
 */
#include <gtest/gtest.h>

#include "aptus_config.h"

extern "C" {
#include "uct/base/aptus_ucx_check.h"
}

#include <string>

TEST(ucx_check, loaded_libraries_are_the_build_compiled_against)
{
    char hex[UCT_APTUS_BUILD_ID_MAX], why[512] = "";
    if (std::string(APTUS_UCS_BUILD_ID).empty()) {
        GTEST_SKIP() << "configure found no build ID of libucs";
    }
    ASSERT_EQ(1, uct_aptus_loaded_build_id("libucs.so", hex, sizeof(hex)));
    EXPECT_EQ(std::string(APTUS_UCS_BUILD_ID), hex);
    ASSERT_EQ(1, uct_aptus_loaded_build_id("libuct.so", hex, sizeof(hex)));
    EXPECT_EQ(std::string(APTUS_UCT_BUILD_ID), hex);
    EXPECT_EQ(0, uct_aptus_ucx_check(why, sizeof(why))) << why;
}

TEST(ucx_check, another_build_is_refused_with_one_line)
{
    char hex[UCT_APTUS_BUILD_ID_MAX], why[512] = "";
    if (!uct_aptus_loaded_build_id("libucs.so", hex, sizeof(hex))) {
        GTEST_SKIP() << "libucs has no build ID note";
    }
    EXPECT_EQ(-1, uct_aptus_ucx_check_one("ucs", "0123abcd", why, sizeof(why)));
    std::string line(why);
    EXPECT_NE(std::string::npos, line.find("not loaded")) << line;
    EXPECT_NE(std::string::npos, line.find("0123abcd")) << line;
    EXPECT_NE(std::string::npos, line.find(hex)) << line;
    EXPECT_EQ(std::string::npos, line.find('\n'));
    /* unknown on either side: nothing to compare, no refusal */
    EXPECT_EQ(0, uct_aptus_ucx_check_one("ucs", "", why, sizeof(why)));
    EXPECT_EQ(0,
              uct_aptus_ucx_check_one("nosuchlib", "0123", why, sizeof(why)));
}
