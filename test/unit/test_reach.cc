/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Who may reach whose memory by pid: processes of one host and one PID
 * namespace. A process in another PID namespace (a container on this
 * host) gets another reach id, so its remote keys unpack as unreachable
 * (UCP falls back) and the wire refuses its keys, as UCX's cma does.
 */
#include "uct_fixture.h"

extern "C" {
#include "uct/base/aptus_md.h"
#include "wire/conn.h"
}

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

namespace
{

/* The reach id a process in a new PID namespace computes; 0 when this
 * process may not make one (not root). */
uint64_t reach_id_in_new_pid_namespace()
{
    int fds[2];
    uint64_t id = 0;
    if (pipe(fds) != 0) {
        return 0;
    }
    pid_t child = fork();
    if (child == 0) {
        /* the namespace is for this one's children */
        uint64_t v = 0;
        if (unshare(CLONE_NEWPID) == 0) {
            pid_t inner = fork();
            if (inner == 0) {
                v = aptus_conn_reach_id();
                _exit(write(fds[1], &v, sizeof(v)) == sizeof(v) ? 0 : 1);
            }
            waitpid(inner, NULL, 0);
            _exit(0);
        }
        _exit(write(fds[1], &v, sizeof(v)) == sizeof(v) ? 0 : 1);
    }
    close(fds[1]);
    if (read(fds[0], &id, sizeof(id)) != sizeof(id)) {
        id = 0;
    }
    close(fds[0]);
    waitpid(child, NULL, 0);
    return id;
}

} // namespace

TEST(reach, a_forked_child_knows_its_own_pid)
{
    ASSERT_EQ(getpid(), aptus_conn_pid());
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    pid_t child = fork();
    if (child == 0) {
        /* the parent's pid was cached: the child must not name it */
        pid_t seen[2] = { aptus_conn_pid(), getpid() };
        _exit(write(fds[1], seen, sizeof(seen)) == sizeof(seen) ? 0 : 1);
    }
    close(fds[1]);
    pid_t seen[2] = { 0, 0 };
    EXPECT_EQ((ssize_t)sizeof(seen), read(fds[0], seen, sizeof(seen)));
    close(fds[0]);
    waitpid(child, NULL, 0);
    EXPECT_EQ(child, seen[1]);
    EXPECT_EQ(seen[1], seen[0]);
    EXPECT_EQ(getpid(), aptus_conn_pid());
}

TEST(reach, another_pid_namespace_is_another_reach)
{
    uint64_t here = aptus_conn_reach_id();
    EXPECT_EQ(here, aptus_conn_reach_id());
    uint64_t there = reach_id_in_new_pid_namespace();
    if (there == 0) {
        GTEST_SKIP() << "no new PID namespace here (not root?)";
    }
    EXPECT_NE(here, there);
}

class reach_md : public uct_aptus_test
{
  protected:
    reach_md()
    {
        m_md_name = "aptus_rc";
    }
};

TEST_F(reach_md, keys_from_another_host_or_pid_namespace_unpack)
{
    std::vector<uint8_t> mem(4096);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, mem.data(), mem.size(),
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    uct_aptus_rkey_t packed;
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, &packed));
    EXPECT_EQ(aptus_conn_reach_id(), packed.host_id);
    uct_rkey_bundle_t b;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &packed, &b));
    uct_rkey_release(m_component, &b);
    /* what a process in a container on this host, or on another host,
     * would pack: it unpacks (the wire decides per peer whether the memory
     * is reached directly or over the connection), and the wire says it
     * cannot reach it directly */
    packed.host_id ^= 0x9e3779b97f4a7c15ull;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &packed, &b));
    EXPECT_EQ(packed.host_id, ((const uct_aptus_rkey_t *)b.rkey)->host_id);
    uct_rkey_release(m_component, &b);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}
