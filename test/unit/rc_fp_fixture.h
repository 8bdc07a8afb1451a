/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rc_fp fixture of the UCT-level tests: messages of each kind (short,
 * bcopy, zcopy), a mixed stream across the fast path and RC-SR, and the
 * check that it arrived whole and in order. The sock wire by default; the
 * verbs tests set the domain and device.
 */
#ifndef APTUS_TEST_RC_FP_FIXTURE_H_
#define APTUS_TEST_RC_FP_FIXTURE_H_

#include "uct_fixture.h"

extern "C" {
#include "uct/rc/rc_fp.h"
}

class uct_rc_fp : public uct_aptus_test
{
  protected:
    uct_rc_fp()
    {
        m_tl = "rc_fp";
    }

    uct_rc_fp_iface_t *iface(entity &e)
    {
        return ucs_derived_of(e.iface, uct_rc_fp_iface_t);
    }

    std::map<std::string, uint64_t> stats(entity &e)
    {
        return read_stats([&](uct_aptus_stat_t *st, unsigned max) {
            return uct_rc_fp_iface_stats(iface(e), st, max);
        });
    }

    /* one message by am_short (how 0), bcopy (1) or zcopy (2) */
    void send(entity &from, uct_ep_h ep, const std::vector<uint8_t> &data,
              unsigned how)
    {
        ucs_status_t status;
        for (;;) {
            if ((how == 0) && (data.size() <= 2048)) {
                uint64_t hdr;
                memcpy(&hdr, data.data(), 8);
                status = uct_ep_am_short(ep, 1, hdr, data.data() + 8,
                                         data.size() - 8);
            } else if (how != 2) {
                std::vector<uint8_t> copy = data;
                ssize_t ret = uct_ep_am_bcopy(ep, 1, pack_vec, &copy, 0);
                status      = (ret >= 0) ? UCS_OK : (ucs_status_t)ret;
            } else {
                size_t half      = data.size() / 2;
                uct_iov_t iov[2] = { { (void *)data.data(), half, NULL, 0, 1 },
                                     { (void *)(data.data() + half),
                                       data.size() - half, NULL, 0, 1 } };
                status = uct_ep_am_zcopy(ep, 1, NULL, 0, iov, 2, 0, NULL);
            }
            if (status != UCS_ERR_NO_RESOURCE) {
                break;
            }
            progress();
        }
        ASSERT_EQ(UCS_OK, status);
    }

    /* count messages, most small (fast path), some above 8 KB (RC-SR);
     * the receiver progresses only when the sender must wait */
    std::vector<std::vector<uint8_t>> send_mixed(entity &from, unsigned count,
                                                 unsigned seed)
    {
        std::vector<std::vector<uint8_t>> sent;
        for (unsigned i = 0; i < count; ++i) {
            size_t len = 8 + ((i + seed) * 2654435761u) % 600;
            if (i % 7 == 3) {
                /* above the fast path's limit (MAX_MSG=4k in these tests),
                 * up to RC-SR's */
                len = 4000 + (i * 37) % 4186;
            }
            std::vector<uint8_t> msg = pattern(seed * 100000 + i, len);
            memcpy(msg.data(), &i, sizeof(i));
            sent.push_back(msg);
            send(from, from.ep, sent.back(), i % 3);
            if (HasFatalFailure()) {
                break;
            }
        }
        return sent;
    }

    void expect_received(entity &to,
                         const std::vector<std::vector<uint8_t>> &sent)
    {
        ASSERT_TRUE(wait_for([&] { return rx_count(to) >= sent.size(); }, 30));
        ASSERT_EQ(sent.size(), rx_count(to));
        for (size_t i = 0; i < sent.size(); ++i) {
            ASSERT_EQ(sent[i], to.rx.msgs[i]) << "message " << i;
        }
    }
};

#endif
