/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The memory domains ("aptus", "aptus_rc") answer every operation UCX may
 * call on them, those that UCX calls without checking capabilities first
 * included: a NULL operation would crash the caller.
 */
#include "uct_fixture.h"

extern "C" {
#include <uct/base/uct_md.h>
}

#include <netinet/in.h>

class md_ops : public uct_aptus_test,
               public ::testing::WithParamInterface<const char *>
{
  protected:
    md_ops()
    {
        m_md_name = GetParam();
    }
};

TEST_P(md_ops, every_operation_is_set)
{
    uct_md_ops_t *ops = ((uct_md_t *)m_md)->ops;

    EXPECT_NE(nullptr, (void *)ops->close);
    EXPECT_NE(nullptr, (void *)ops->query);
    EXPECT_NE(nullptr, (void *)ops->mem_alloc);
    EXPECT_NE(nullptr, (void *)ops->mem_free);
    EXPECT_NE(nullptr, (void *)ops->mem_advise);
    EXPECT_NE(nullptr, (void *)ops->mem_reg);
    EXPECT_NE(nullptr, (void *)ops->mem_dereg);
    EXPECT_NE(nullptr, (void *)ops->mem_query);
    EXPECT_NE(nullptr, (void *)ops->mkey_pack);
    EXPECT_NE(nullptr, (void *)ops->is_sockaddr_accessible);
    EXPECT_NE(nullptr, (void *)ops->detect_memory_type);
}

TEST_P(md_ops, sockaddr_is_not_accessible)
{
    struct sockaddr_in sin = {};
    ucs_sock_addr_t addr;

    sin.sin_family      = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.addr           = (const struct sockaddr *)&sin;
    addr.addrlen        = sizeof(sin);

    /* no UCT_MD_FLAG_SOCKADDR: the domain accepts no connections by address */
    uct_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
    EXPECT_FALSE(attr.cap.flags & UCT_MD_FLAG_SOCKADDR);
    EXPECT_EQ(
        0, uct_md_is_sockaddr_accessible(m_md, &addr, UCT_SOCKADDR_ACC_LOCAL));
    EXPECT_EQ(
        0, uct_md_is_sockaddr_accessible(m_md, &addr, UCT_SOCKADDR_ACC_REMOTE));
}

TEST_P(md_ops, unsupported_operations_say_so)
{
    std::vector<uint8_t> buf(4096);
    uct_md_mem_attr_t mem_attr = {};
    ucs_memory_type_t mem_type;

    mem_attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              uct_md_mem_query(m_md, buf.data(), buf.size(), &mem_attr));
    EXPECT_EQ(
        UCS_ERR_UNSUPPORTED,
        uct_md_detect_memory_type(m_md, buf.data(), buf.size(), &mem_type));
}

INSTANTIATE_TEST_SUITE_P(domains, md_ops,
                         ::testing::Values("aptus", "aptus_rc"));
