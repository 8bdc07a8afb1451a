/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the unit tests: a counting UCT completion and a data
 * pattern that differs per message and per byte.
 */
#ifndef APTUS_TEST_UTIL_H_
#define APTUS_TEST_UTIL_H_

extern "C" {
#include <uct/api/uct.h>
}

#include <cstddef>
#include <cstdint>
#include <vector>

/* A completion that counts its calls and keeps the last status. */
struct test_comp {
    uct_completion_t super;
    int done            = 0;
    ucs_status_t status = UCS_OK;
};

static inline void test_comp_cb(uct_completion_t *self)
{
    test_comp *c = reinterpret_cast<test_comp *>(self);
    c->done++;
    c->status = self->status;
}

/* Ready for one operation. */
static inline void init_comp(test_comp &c)
{
    c.super.func   = test_comp_cb;
    c.super.count  = 1;
    c.super.status = UCS_OK;
    c.done         = 0;
    c.status       = UCS_OK;
}

/* len bytes that depend on id and on the position. */
static inline std::vector<uint8_t> pattern(unsigned id, size_t len)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = (uint8_t)(id * 131 + i * 7 + (i >> 9));
    }
    return v;
}

#endif
