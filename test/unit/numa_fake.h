/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fake sysfs that gives devices a NUMA node, and a binding call that
 * records what it is asked instead of calling mbind: placement can be
 * tested on a machine with one node.
 */
#ifndef APTUS_NUMA_FAKE_H_
#define APTUS_NUMA_FAKE_H_

extern "C" {
#include "base/aptus_numa.h"
}

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

struct numa_bind_call {
    uintptr_t addr;
    size_t length;
    int node;
};

static std::vector<numa_bind_call> &numa_fake_calls()
{
    static std::vector<numa_bind_call> calls;
    return calls;
}

static inline int numa_fake_bind(void *addr, size_t length, int node)
{
    numa_fake_calls().push_back({ (uintptr_t)addr, length, node });
    return 0;
}

/* While alive: /sys/class/<cls>/<dev>/device/numa_node as given, and every
 * binding recorded. */
class numa_fake
{
  public:
    numa_fake()
    {
        char tmpl[] = "/tmp/aptus_numa_XXXXXX";
        m_root      = mkdtemp(tmpl);
        numa_fake_calls().clear();
        aptus_numa_set_sysfs_root(m_root.c_str());
        aptus_numa_set_bind(numa_fake_bind);
    }

    ~numa_fake()
    {
        aptus_numa_set_sysfs_root(NULL);
        aptus_numa_set_bind(NULL);
        numa_fake_calls().clear();
        std::string cmd = "rm -rf '" + m_root + "'";
        (void)!system(cmd.c_str());
    }

    void set(const std::string &cls, const std::string &dev,
             const std::string &content)
    {
        std::string dir = m_root + "/class/" + cls + "/" + dev + "/device";
        std::string cmd = "mkdir -p '" + dir + "'";
        (void)!system(cmd.c_str());
        std::ofstream(dir + "/numa_node") << content;
    }

    /* bytes bound to node, and calls naming any other node */
    size_t bytes_on(int node, unsigned *others = nullptr) const
    {
        size_t bytes = 0;
        for (const numa_bind_call &c : numa_fake_calls()) {
            if (c.node == node) {
                bytes += c.length;
            } else if (others != nullptr) {
                ++*others;
            }
        }
        return bytes;
    }

  private:
    std::string m_root;
};

#endif
