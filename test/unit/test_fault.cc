/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the fault injector's decisions (src/proto/fault.c).
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/fault.h"
}

static aptus_fault_config_t fault_cfg(double drop, double dup, double reorder,
                                      double delay, uint64_t seed)
{
    aptus_fault_config_t c = { drop, dup, reorder, delay, 1000, seed };
    return c;
}

TEST(fault, disabled_by_default_passes_everything)
{
    aptus_fault_config_t c = fault_cfg(0, 0, 0, 0, 1);
    aptus_fault_t f;
    aptus_fault_init(&f, &c);
    EXPECT_FALSE(aptus_fault_enabled(&f));
    for (int i = 0; i < 1000; ++i) {
        EXPECT_EQ(APTUS_FAULT_PASS, aptus_fault_decide(&f));
    }
}

TEST(fault, config_check_names_bad_field)
{
    aptus_fault_config_t c = fault_cfg(0.5, 0, 0, 0, 1);
    EXPECT_EQ(nullptr, aptus_fault_config_check(&c));
    c.drop = -0.1;
    EXPECT_STREQ("FAULT_DROP", aptus_fault_config_check(&c));
    c = fault_cfg(0, 1.5, 0, 0, 1);
    EXPECT_STREQ("FAULT_DUP", aptus_fault_config_check(&c));
    c = fault_cfg(0, 0, 0, 0.0 / 0.0, 1); /* NaN */
    EXPECT_STREQ("FAULT_DELAY", aptus_fault_config_check(&c));
    c = fault_cfg(0.6, 0.6, 0, 0, 1);
    EXPECT_NE(nullptr, aptus_fault_config_check(&c));
}

TEST(fault, rates_match_configuration)
{
    aptus_fault_config_t c = fault_cfg(0.05, 0.02, 0.03, 0.01, 7);
    aptus_fault_t f;
    aptus_fault_init(&f, &c);
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        aptus_fault_decide(&f);
    }
    EXPECT_NEAR(0.05, f.count[APTUS_FAULT_DROP] / (double)n, 0.005);
    EXPECT_NEAR(0.02, f.count[APTUS_FAULT_DUPLICATE] / (double)n, 0.003);
    EXPECT_NEAR(0.03, f.count[APTUS_FAULT_REORDER] / (double)n, 0.004);
    EXPECT_NEAR(0.01, f.count[APTUS_FAULT_DELAY] / (double)n, 0.002);
    uint64_t total = 0;
    for (int a = 0; a < APTUS_FAULT_LAST; ++a) {
        total += f.count[a];
    }
    EXPECT_EQ((uint64_t)n, total);
}

TEST(fault, same_seed_same_sequence)
{
    aptus_fault_config_t c = fault_cfg(0.2, 0.2, 0.2, 0.2, 99);
    aptus_fault_t a, b, other;
    aptus_fault_init(&a, &c);
    aptus_fault_init(&b, &c);
    c.seed = 100;
    aptus_fault_init(&other, &c);
    int differ = 0;
    for (int i = 0; i < 1000; ++i) {
        aptus_fault_action_t x = aptus_fault_decide(&a);
        EXPECT_EQ(x, aptus_fault_decide(&b));
        differ += (x != aptus_fault_decide(&other));
    }
    EXPECT_GT(differ, 100);
}

TEST(fault, action_names)
{
    EXPECT_STREQ("drop", aptus_fault_action_name(APTUS_FAULT_DROP));
    EXPECT_STREQ("?", aptus_fault_action_name(APTUS_FAULT_LAST));
}
