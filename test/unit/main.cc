/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus unit tests.
 */
#include <gtest/gtest.h>

int main(int argc, char **argv)
{
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
