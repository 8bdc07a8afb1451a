/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fixtures of the tests over the in-memory verbs double: a test begins
 * with the double's HCAs and ends checking that nothing of them is left
 * open; a UCT fixture opens its interfaces on the first HCA's port.
 */
#ifndef APTUS_TEST_VERBS_FIXTURE_H_
#define APTUS_TEST_VERBS_FIXTURE_H_

#include "ibv_double.h"

#include <gtest/gtest.h>
#include <uct/api/uct.h>

/* The double off at the start (a machine without HCAs), every verbs
 * object released at the end. */
class verbs_double_test : public ::testing::Test
{
  protected:
    void TearDown() override
    {
        ibv_double_ud_fault(0, 0, 0);
        EXPECT_EQ(0u, ibv_double_disable()) << "verbs objects leaked";
    }
};

/* A UCT fixture (Base: uct_aptus_test or one derived from it) on the
 * domain md_name, its interfaces on the port of the double's one HCA. */
template <class Base> class on_verbs_double : public Base
{
  protected:
    explicit on_verbs_double(const char *md_name)
    {
        this->m_md_name      = md_name;
        this->m_tweak_params = [](uct_iface_params_t &p) {
            p.mode.device.dev_name = "dbl0:1";
        };
    }

    void SetUp() override
    {
        ibv_double_enable(1);
        Base::SetUp();
    }

    void TearDown() override
    {
        Base::TearDown();
        ibv_double_ud_fault(0, 0, 0);
        EXPECT_EQ(0u, ibv_double_disable()) << "verbs objects leaked";
    }
};

#endif
