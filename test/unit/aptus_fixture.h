/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The aptus fixture of the UCT-level tests: messages of each kind, mixed
 * and small streams, the settings that make a peer earn RC and a fast
 * path early, and the checks that everything arrived in order. The sock
 * wire by default; the verbs tests set the domain and device.
 */
#ifndef APTUS_TEST_APTUS_FIXTURE_H_
#define APTUS_TEST_APTUS_FIXTURE_H_

#include "uct_fixture.h"

extern "C" {
#include "uct/hybrid/aptus_tl.h"
}

class uct_aptus : public uct_aptus_test
{
  protected:
    uct_aptus()
    {
        m_tl = "aptus";
    }

    std::map<std::string, uint64_t> stats(entity &e)
    {
        return read_stats([&](uct_aptus_stat_t *st, unsigned max) {
            return uct_aptus_tl_iface_stats(iface(e), st, max);
        });
    }

    uct_aptus_tl_iface_t *iface(entity &e)
    {
        return ucs_derived_of(e.iface, uct_aptus_tl_iface_t);
    }

    /* One message of len bytes (len >= 8), by am_short, am_bcopy or
     * am_zcopy (by 'how'), waiting while the transport has no room. */
    void send(entity &from, const std::vector<uint8_t> &data, unsigned how)
    {
        ucs_status_t status;
        test_comp c;

        init_comp(c);
        for (;;) {
            if ((how == 0) && (data.size() <= iface(from)->max_short)) {
                uint64_t hdr;
                memcpy(&hdr, data.data(), 8);
                status = uct_ep_am_short(from.ep, 1, hdr, data.data() + 8,
                                         data.size() - 8);
            } else if (how != 2) {
                std::vector<uint8_t> copy = data;
                ssize_t ret = uct_ep_am_bcopy(from.ep, 1, pack_vec, &copy, 0);
                status      = (ret >= 0) ? UCS_OK : (ucs_status_t)ret;
                if (ret >= 0) {
                    EXPECT_EQ((ssize_t)data.size(), ret);
                }
            } else {
                size_t half      = data.size() / 2;
                uct_iov_t iov[2] = { { (void *)data.data(), half, NULL, 0, 1 },
                                     { (void *)(data.data() + half),
                                       data.size() - half, NULL, 0, 1 } };
                status =
                    uct_ep_am_zcopy(from.ep, 1, NULL, 0, iov, 2, 0, &c.super);
                if (status == UCS_INPROGRESS) {
                    ASSERT_TRUE(wait_for([&] { return c.done > 0; }));
                    status = c.status;
                }
            }
            if (status != UCS_ERR_NO_RESOURCE) {
                break;
            }
            progress();
        }
        ASSERT_EQ(UCS_OK, status);
    }

    /* count messages of mixed sizes (some over 8 KB: UD even with RC),
     * in order; returns what was sent */
    std::vector<std::vector<uint8_t>> send_mixed(entity &from, unsigned count,
                                                 unsigned seed)
    {
        std::vector<std::vector<uint8_t>> sent;
        for (unsigned i = 0; i < count; ++i) {
            size_t len = 8 + ((i + seed) * 2654435761u) % 12000;
            if (i % 5 == 0) {
                len = 8 + i % 64; /* small: UD-SR by the default rules */
            }
            sent.push_back(pattern(seed * 100000 + i, len));
            send(from, sent.back(), i % 3);
            if (HasFatalFailure()) {
                break;
            }
        }
        return sent;
    }

    void expect_received(entity &to,
                         const std::vector<std::vector<uint8_t>> &sent,
                         size_t first = 0)
    {
        ASSERT_TRUE(
            wait_for([&] { return rx_count(to) >= first + sent.size(); }, 30));
        ASSERT_EQ(first + sent.size(), rx_count(to));
        for (size_t i = 0; i < sent.size(); ++i) {
            ASSERT_EQ(sent[i], to.rx.msgs[first + i]) << "message " << i;
        }
    }

    void settle(double seconds)
    {
        ucs_time_t end = ucs_get_time() + ucs_time_from_sec(seconds);
        while (ucs_get_time() < end) {
            progress();
        }
    }

    /* An RC connection comes early: 16 messages in a second earn it. */
    std::map<std::string, std::string> eager_rc()
    {
        return { { "RC_MSGS", "16" }, { "ALLOC_WINDOW", "1s" } };
    }

    /* What r received from the senders s[0..k), each sender's messages
     * in its order (the senders' messages interleave). */
    void expect_each_in_order(entity &r,
                              const std::vector<std::vector<uint8_t>> *sent,
                              unsigned k)
    {
        std::vector<size_t> next(k, 0);
        for (auto &m : r.rx.msgs) {
            bool found = false;
            for (unsigned j = 0; (j < k) && !found; ++j) {
                if ((next[j] < sent[j].size()) && (m == sent[j][next[j]])) {
                    ++next[j];
                    found = true;
                }
            }
            ASSERT_TRUE(found);
        }
    }

    /* ... and then a fast path: 16 small messages more */
    std::map<std::string, std::string> eager_fp()
    {
        auto cfg       = eager_rc();
        cfg["FP_MSGS"] = "16";
        return cfg;
    }

    /* count messages of 8 to 207 bytes from a to b, every kind of send,
     * all received in order */
    void send_small_to_b(unsigned count)
    {
        std::vector<std::vector<uint8_t>> sent;
        for (unsigned i = 0; i < count; ++i) {
            sent.push_back(pattern(i, 8 + (i * 37) % 200));
            send(m_a, sent.back(), i % 3);
            ASSERT_FALSE(HasFatalFailure());
        }
        expect_received(m_b, sent);
    }

    /* small (fast path by the default rules) and middle-sized (RC-SR)
     * messages, some above 8 KB (UD), every kind of send */
    std::vector<std::vector<uint8_t>>
    send_small_mixed(entity &from, unsigned count, unsigned seed)
    {
        std::vector<std::vector<uint8_t>> sent;
        for (unsigned i = 0; i < count; ++i) {
            size_t len = 8 + ((i + seed) * 2654435761u) % 2000;
            if (i % 9 == 4) {
                len = 3000 + (i * 977) % 9000;
            }
            sent.push_back(pattern(seed * 100000 + i, len));
            send(from, sent.back(), i % 3);
            if (HasFatalFailure()) {
                break;
            }
        }
        return sent;
    }

    /* A get before the peer earned RC goes over UD-ZCopy (the owner serves
     * it), the gets after by RC-RDMA; every byte checked. */
    void check_get_over_ud_then_rc()
    {
        setup_pair(eager_rc());
        remote_buf rb;
        expose(rb, 256 * 1024);
        auto get = [&](size_t offset, size_t length) {
            std::vector<uint8_t> dest(length);
            uct_iov_t iov  = { dest.data(), length, NULL, 0, 1 };
            uint64_t raddr = (uint64_t)(uintptr_t)rb.data.data() + offset;
            test_comp c;
            init_comp(c);
            ucs_status_t status;
            while ((status = uct_ep_get_zcopy(m_a.ep, &iov, 1, raddr,
                                              rb.rkey.rkey, &c.super)) ==
                   UCS_ERR_NO_RESOURCE) {
                progress();
            }
            if (status == UCS_INPROGRESS) {
                ASSERT_TRUE(wait_for([&] { return c.done > 0; }));
                status = c.status;
            }
            ASSERT_EQ(UCS_OK, status);
            ASSERT_EQ(0, memcmp(dest.data(), rb.data.data() + offset, length));
        };
        get(0, 100000); /* no connection yet */
        EXPECT_EQ(1u, stats(m_a)["ud_zcopy_msgs"]);
        auto sent = send_mixed(m_a, 300, 6); /* earns the connection */
        expect_received(m_b, sent);
        ASSERT_EQ(1u, stats(m_a)["rc_now"]);
        get(1000, 200000);
        get(77, 3);
        EXPECT_EQ(2u, stats(m_a)["rc_rdma_msgs"]);
        release(rb);
    }
};

#endif
