/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus unit tests: the multicast broadcast library's settings and
 * group addresses (src/bcast/bcast_config.c, bcast_net.c), without MPI.
 */
#include <gtest/gtest.h>

extern "C" {
#include "bcast/bcast_config.h"
#include "bcast/bcast_net.h"
}

#include <arpa/inet.h>

#include <map>
#include <set>
#include <string>

namespace
{

std::map<std::string, std::string> g_env;

const char *fake_env(const char *name)
{
    auto it = g_env.find(name);
    return (it == g_env.end()) ? nullptr : it->second.c_str();
}

class bcast_config : public testing::Test
{
  protected:
    void SetUp() override
    {
        g_env.clear();
    }

    /* reads the fake environment; returns the error text ("" when good) */
    std::string read(aptus_bc_config_t *cfg)
    {
        char err[256] = "";

        if (aptus_bc_config_read(cfg, fake_env, err, sizeof(err)) == 0) {
            EXPECT_STREQ("", err);
            return "";
        }
        EXPECT_STRNE("", err);
        return err;
    }
};

} // namespace

TEST_F(bcast_config, defaults)
{
    aptus_bc_config_t cfg;

    ASSERT_EQ("", read(&cfg));
    EXPECT_EQ(1, cfg.enable);
    EXPECT_EQ(0, cfg.verbose);
    EXPECT_EQ(64u, cfg.mc.window);
    EXPECT_EQ(8u, cfg.mc.ack_every);
    EXPECT_EQ(0u, cfg.mc.group_size);
    EXPECT_EQ(0u, cfg.mc.frag_size); /* from the interface */
    EXPECT_EQ(32768u, cfg.mc.max_msg);
    EXPECT_EQ(30000000u, cfg.peer_timeout_us);
    EXPECT_EQ(0, cfg.fixed_group);
    EXPECT_STREQ("", cfg.ifspec);
    EXPECT_EQ(APTUS_BC_WIRE_AUTO, cfg.wire);
    EXPECT_STREQ("", cfg.stats);
}

TEST_F(bcast_config, wire_is_chosen)
{
    const struct {
        const char *value;
        aptus_bc_wire_t wire;
    } cases[] = { { "auto", APTUS_BC_WIRE_AUTO },
                  { "", APTUS_BC_WIRE_AUTO },
                  { "sock", APTUS_BC_WIRE_SOCK },
                  { "verbs", APTUS_BC_WIRE_VERBS } };
    aptus_bc_config_t cfg;

    for (const auto &c : cases) {
        g_env = { { "APTUS_BCAST_WIRE", c.value } };
        ASSERT_EQ("", read(&cfg)) << c.value;
        EXPECT_EQ(c.wire, cfg.wire) << c.value;
    }
}

TEST_F(bcast_config, values_are_taken)
{
    aptus_bc_config_t cfg;

    g_env = { { "APTUS_BCAST", "n" },
              { "APTUS_BCAST_WINDOW", "128" },
              { "APTUS_BCAST_ACK_EVERY", "4" },
              { "APTUS_BCAST_GROUP_SIZE", "3" },
              { "APTUS_BCAST_FRAG_SIZE", "1400" },
              { "APTUS_BCAST_MAX_MSG", "8192" },
              { "APTUS_BCAST_PEER_TIMEOUT", "0" },
              { "APTUS_BCAST_IF", "lo" },
              { "APTUS_BCAST_GROUP", "239.1.2.3:5000" },
              { "APTUS_BCAST_STATS", "/tmp/x.%r" },
              { "APTUS_BCAST_VERBOSE", "yes" } };
    ASSERT_EQ("", read(&cfg));
    EXPECT_EQ(0, cfg.enable);
    EXPECT_EQ(1, cfg.verbose);
    EXPECT_EQ(128u, cfg.mc.window);
    EXPECT_EQ(4u, cfg.mc.ack_every);
    EXPECT_EQ(3u, cfg.mc.group_size);
    EXPECT_EQ(1400u, cfg.mc.frag_size);
    EXPECT_EQ(8192u, cfg.mc.max_msg);
    EXPECT_EQ(0u, cfg.peer_timeout_us);
    EXPECT_STREQ("lo", cfg.ifspec);
    ASSERT_EQ(1, cfg.fixed_group);
    EXPECT_EQ(htonl(0xef010203u), cfg.group.sin_addr.s_addr);
    EXPECT_EQ(htons(5000), cfg.group.sin_port);
    EXPECT_STREQ("/tmp/x.%r", cfg.stats);
}

/* Every malformed value is refused with a message naming the variable. */
TEST_F(bcast_config, malformed_values_name_the_variable)
{
    static const std::string long_if(100, 'x');
    const struct {
        const char *name, *value;
    } bad[] = {
        { "APTUS_BCAST", "maybe" },
        { "APTUS_BCAST_VERBOSE", "2" },
        { "APTUS_BCAST_WINDOW", "abc" },
        { "APTUS_BCAST_WINDOW", "1" },
        { "APTUS_BCAST_WINDOW", "5000" },
        { "APTUS_BCAST_WINDOW", "-3" },
        { "APTUS_BCAST_WINDOW", "64k" },
        { "APTUS_BCAST_WINDOW", "99999999999999999999999" },
        { "APTUS_BCAST_ACK_EVERY", "0" },
        { "APTUS_BCAST_ACK_EVERY", "33" }, /* above WINDOW / 2 */
        { "APTUS_BCAST_FRAG_SIZE", "70000" },
        { "APTUS_BCAST_ACK_DELAY_US", "0" },
        { "APTUS_BCAST_RTO_MIN_US", "200000" }, /* above RTO_MAX */
        { "APTUS_BCAST_PEER_TIMEOUT", "x" },
        { "APTUS_BCAST_RCVBUF", "10" },
        { "APTUS_BCAST_GROUP", "10.0.0.1:5000" }, /* not multicast */
        { "APTUS_BCAST_GROUP", "239.1.2.3" },
        { "APTUS_BCAST_GROUP", "239.1.2.3:0" },
        { "APTUS_BCAST_GROUP", "239.1.2.3:70000" },
        { "APTUS_BCAST_GROUP", "239.1.2:5000" },
        { "APTUS_BCAST_IF", long_if.c_str() },
        { "APTUS_BCAST_WIRE", "ib" },
        { "APTUS_BCAST_WIRE", "Verbs" },
    };
    aptus_bc_config_t cfg;

    for (const auto &b : bad) {
        SCOPED_TRACE(std::string(b.name) + "=" + b.value);
        g_env.clear();
        g_env[b.name]   = b.value;
        std::string err = read(&cfg);
        EXPECT_NE(std::string::npos, err.find(b.name)) << err;
    }
}

/* Group addresses stay in 239/8, off the link-local-shadowing second
 * octets, on ports a user would not collide with; keys spread. */
TEST(bcast_net, group_of_key)
{
    std::set<uint32_t> addrs;
    struct sockaddr_in g;
    uint64_t key;
    uint32_t a;
    uint16_t port;

    for (key = 1; key <= 20000; ++key) {
        aptus_bc_group_of_key(key * 0x9E3779B97F4A7C15ull, &g);
        a    = ntohl(g.sin_addr.s_addr);
        port = ntohs(g.sin_port);
        ASSERT_EQ(AF_INET, g.sin_family);
        ASSERT_EQ(239u, a >> 24);
        ASSERT_NE(0u, (a >> 16) & 0xff);
        ASSERT_NE(128u, (a >> 16) & 0xff);
        ASSERT_GE(port, 10000);
        ASSERT_LT(port, 60000);
        addrs.insert(a);
    }
    /* 24 bits of address: 20,000 keys nearly all distinct */
    EXPECT_GT(addrs.size(), 19900u);

    /* deterministic: every rank derives the same group from the key */
    struct sockaddr_in g2;
    aptus_bc_group_of_key(42, &g);
    aptus_bc_group_of_key(42, &g2);
    EXPECT_EQ(g.sin_addr.s_addr, g2.sin_addr.s_addr);
    EXPECT_EQ(g.sin_port, g2.sin_port);
}

TEST(bcast_net, bad_interface_is_named)
{
    struct sockaddr_in g;
    struct in_addr ifaddr;
    unsigned mtu;
    char err[256] = "";

    aptus_bc_group_of_key(7, &g);
    EXPECT_LT(aptus_bc_net_pick_if("no-such-if0", &g, &ifaddr, &mtu, err,
                                   sizeof(err)),
              0);
    EXPECT_NE(nullptr, strstr(err, "APTUS_BCAST_IF=no-such-if0")) << err;

    /* the loopback by name and by address: found, with its MTU */
    ASSERT_EQ(0,
              aptus_bc_net_pick_if("lo", &g, &ifaddr, &mtu, err, sizeof(err)))
        << err;
    EXPECT_EQ(htonl(INADDR_LOOPBACK), ifaddr.s_addr);
    EXPECT_GE(mtu, 1280u);
    ASSERT_EQ(0, aptus_bc_net_pick_if("127.0.0.1", &g, &ifaddr, &mtu, err,
                                      sizeof(err)))
        << err;
    EXPECT_EQ(htonl(INADDR_LOOPBACK), ifaddr.s_addr);
}

TEST(bcast_mpi, the_running_mpi_is_told_apart)
{
    /* what MPI_Get_library_version answers, and the library to preload */
    EXPECT_EQ(APTUS_BC_MPI_OPEN_MPI,
              aptus_bc_mpi_family("Open MPI v4.1.2, package: Debian OpenMPI"));
    EXPECT_EQ(APTUS_BC_MPI_MPICH,
              aptus_bc_mpi_family("MPICH Version:\t4.0\nMPICH Release date:"));
    EXPECT_EQ(APTUS_BC_MPI_MPICH,
              aptus_bc_mpi_family("Intel(R) MPI Library 2021.6"));
    EXPECT_EQ(APTUS_BC_MPI_MPICH, aptus_bc_mpi_family(""));
    EXPECT_STREQ("libaptus_bcast.so",
                 aptus_bc_mpi_library(APTUS_BC_MPI_OPEN_MPI));
    EXPECT_STREQ("libaptus_bcast_mpich.so",
                 aptus_bc_mpi_library(APTUS_BC_MPI_MPICH));
    EXPECT_STREQ("MPICH", aptus_bc_mpi_name(APTUS_BC_MPI_MPICH));
}
