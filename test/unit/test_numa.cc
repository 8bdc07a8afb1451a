/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NUMA placement (src/base/aptus_numa.c): the device's node read from
 * sysfs, whole pages bound to it (really, with mbind, on node 0 of this
 * machine), and the transports' receive pools placed on the node of the
 * device they open, or nowhere with UCX_APTUS_NUMA=n.
 */
#include "numa_fake.h"
#include "uct_fixture.h"

#include <unistd.h>
#ifdef APTUS_HAVE_NUMA
#include <numaif.h>
#endif

TEST(numa, node_of_reads_the_devices_sysfs_entry)
{
    numa_fake fake;
    fake.set("net", "eth9", "1\n");
    fake.set("net", "eth8", "-1\n"); /* a device without a node */
    fake.set("net", "eth7", "banana\n");
    fake.set("net", "eth6", "4096\n"); /* past any node a mask holds */
    fake.set("infiniband", "mlx5_0", "3");

    EXPECT_EQ(1, aptus_numa_node_of("net", "eth9"));
    EXPECT_EQ(-1, aptus_numa_node_of("net", "eth8"));
    EXPECT_EQ(-1, aptus_numa_node_of("net", "eth7"));
    EXPECT_EQ(-1, aptus_numa_node_of("net", "eth6"));
    EXPECT_EQ(3, aptus_numa_node_of("infiniband", "mlx5_0"));
    EXPECT_EQ(-1, aptus_numa_node_of("net", "mlx5_0")); /* not a NIC */
    EXPECT_EQ(-1, aptus_numa_node_of("net", "nosuch"));
    /* a name is one path element: nothing reaches outside the class */
    EXPECT_EQ(-1, aptus_numa_node_of("net", "../infiniband/mlx5_0"));
    EXPECT_EQ(-1, aptus_numa_node_of("net", ".."));
    EXPECT_EQ(-1, aptus_numa_node_of("net", ""));
    EXPECT_EQ(-1, aptus_numa_node_of("net", NULL));
}

TEST(numa, loopback_has_no_node)
{
    EXPECT_EQ(-1, aptus_numa_node_of("net", "lo")); /* the real sysfs */
}

TEST(numa, place_binds_whole_pages_only)
{
    numa_fake fake;
    size_t page = sysconf(_SC_PAGESIZE);
    std::vector<uint8_t> buf(5 * page);
    uintptr_t base = (uintptr_t)buf.data();

    ASSERT_EQ(UCS_OK, aptus_numa_place(buf.data() + 1, 4 * page, 2));
    ASSERT_EQ(1u, numa_fake_calls().size());
    numa_bind_call c = numa_fake_calls()[0];
    EXPECT_EQ(2, c.node);
    EXPECT_EQ(0u, c.addr % page);
    EXPECT_GT(c.addr, base); /* the first, shared page is left alone */
    EXPECT_LE(c.addr + c.length, base + 1 + 4 * page);
    EXPECT_GE(c.length, 3 * page);

    /* no node, or less than a page: nothing */
    numa_fake_calls().clear();
    EXPECT_EQ(UCS_OK, aptus_numa_place(buf.data(), 4 * page, -1));
    EXPECT_EQ(UCS_OK, aptus_numa_place(buf.data() + 1, page, 0));
    EXPECT_TRUE(numa_fake_calls().empty());

    /* memory allocated for a node is pages, bound whole */
    size_t len = page + 1;
    void *mem  = aptus_numa_alloc(&len, 1, "test");
    ASSERT_NE(nullptr, mem);
    EXPECT_EQ(2 * page, len);
    ASSERT_EQ(1u, numa_fake_calls().size());
    EXPECT_EQ((uintptr_t)mem, numa_fake_calls()[0].addr);
    EXPECT_EQ(2 * page, numa_fake_calls()[0].length);
    EXPECT_EQ(1, numa_fake_calls()[0].node);
    ucs_free(mem);
}

#ifdef APTUS_HAVE_NUMA
/* The real call: the pages of a block placed on node 0 (every Linux
 * machine has it) carry that policy, as the kernel reports it. */
TEST(numa, place_really_binds_with_mbind)
{
    size_t len = 3 * sysconf(_SC_PAGESIZE);
    void *mem  = aptus_numa_alloc(&len, 0, "test");
    ASSERT_NE(nullptr, mem);
    int mode                                               = -1;
    unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {};
    ASSERT_EQ(0, get_mempolicy(&mode, mask, 1024, mem, MPOL_F_ADDR))
        << strerror(errno);
    EXPECT_EQ(MPOL_PREFERRED, mode);
    EXPECT_EQ(1ul, mask[0]);
    memset(mem, 1, len); /* the pages fault in where the policy says */
    ucs_free(mem);

    /* a node the machine does not have is refused, and nothing breaks */
    size_t big = 2 * sysconf(_SC_PAGESIZE);
    mem        = aptus_numa_alloc(&big, 1000, "test");
    ASSERT_NE(nullptr, mem); /* unplaced, but memory */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, aptus_numa_place(mem, big, 1000));
    ucs_free(mem);
}
#endif

class uct_numa : public uct_aptus_test,
                 public ::testing::WithParamInterface<const char *>
{
  protected:
    uct_numa()
    {
        m_tl = GetParam();
        if (!strcmp(m_tl, "rc_sr") || !strcmp(m_tl, "rc_fp")) {
            m_md_name = "aptus_rc";
        }
    }

    /* reopen the domain with UCX_APTUS_NUMA=n */
    void reopen_md_without_numa()
    {
        uct_md_close(m_md);
        uct_md_config_t *md_config;
        ASSERT_EQ(UCS_OK,
                  uct_md_config_read(m_component, NULL, NULL, &md_config));
        ASSERT_EQ(UCS_OK, uct_config_modify(md_config, "NUMA", "n"));
        ASSERT_EQ(UCS_OK,
                  uct_md_open(m_component, m_md_name, md_config, &m_md));
        uct_config_release(md_config);
    }
};

/* Each transport's receive pool (the datagram buffers, the connections'
 * shared pool, which grows from the first message) is bound to the node
 * sysfs gives its device, and nothing to another node. */
TEST_P(uct_numa, receive_pools_go_on_the_devices_node)
{
    numa_fake fake;
    fake.set("net", "lo", "1");
    setup_pair();
    uint64_t hdr = 7;
    ASSERT_TRUE(wait_for([&] {
        ucs_status_t status = uct_ep_am_short(m_a.ep, 1, hdr, &hdr, 8);
        progress();
        return status == UCS_OK;
    }));
    ASSERT_TRUE(wait_for([&] { return !m_b.rx.msgs.empty(); }));
    unsigned others = 0;
    EXPECT_GE(fake.bytes_on(1, &others), 64 * 1024u);
    EXPECT_EQ(0u, others);
}

TEST_P(uct_numa, nothing_is_placed_with_numa_off)
{
    numa_fake fake;
    fake.set("net", "lo", "1");
    reopen_md_without_numa();
    ASSERT_EQ(UCS_OK, open(m_a));
    EXPECT_TRUE(numa_fake_calls().empty());
}

TEST_P(uct_numa, nothing_is_placed_for_a_device_without_a_node)
{
    numa_fake fake; /* lo has no entry */
    ASSERT_EQ(UCS_OK, open(m_a));
    EXPECT_TRUE(numa_fake_calls().empty());
}

INSTANTIATE_TEST_SUITE_P(tl, uct_numa,
                         ::testing::Values("ud_sr", "rc_sr", "rc_fp", "aptus"));
