/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The UD-SR channel (src/channel) over the verbs wire (src/wire/verbs) on
 * the in-memory verbs double: messages of every size, segmented above the
 * UD MTU, arrive whole and in order, also through the double's loss and
 * reordering. The channel's own suite (test_ud_sr_chan.cc) runs on the
 * fake wire; this one shows the same channel unchanged on UD QPs.
 */
#include "fake_wire.h"
#include "test_util.h"

#include <gtest/gtest.h>

extern "C" {
#include "channel/ud_sr_chan.h"
#include "channel/ud_sr_chan_int.h"
#include "wire/verbs/verbs_dgram.h"
}

#include "ibv_double.h"

#include <cstring>
#include <random>
#include <vector>

namespace
{

const size_t RX_HEADROOM = 24;

struct vmsg {
    uint8_t am_id;
    std::vector<uint8_t> data;
    bool operator==(const vmsg &o) const
    {
        return (am_id == o.am_id) && (data == o.data);
    }
};

struct vside {
    aptus_ud_chan_t chan;
    aptus_dgram_wire_t *wire = nullptr;
    uint32_t key             = 0;
    std::vector<vmsg> rx;
    unsigned failed = 0;
};

ucs_status_t vdeliver_cb(void *arg, aptus_ud_peer_t *peer, uint8_t am_id,
                         void *data, size_t length, unsigned flags,
                         int is_async)
{
    vside *s         = static_cast<vside *>(arg);
    const uint8_t *p = static_cast<const uint8_t *>(data);
    s->rx.push_back(vmsg{ am_id, std::vector<uint8_t>(p, p + length) });
    return UCS_OK;
}

void vfailed_cb(void *arg, aptus_ud_peer_t *peer, ucs_status_t status)
{
    static_cast<vside *>(arg)->failed++;
}

const aptus_ud_chan_ops_t vchan_ops = { vdeliver_cb, vfailed_cb };

size_t vpack_cb(void *dest, void *arg)
{
    const std::vector<uint8_t> *v = static_cast<std::vector<uint8_t> *>(arg);
    if (!v->empty()) {
        memcpy(dest, v->data(), v->size());
    }
    return v->size();
}

class ud_chan_verbs : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        ibv_double_enable(2);
        m_cfg = fake_chan_config(RX_HEADROOM);
        init(m_a, "dbl0:1", 0xaaaa0001);
        init(m_b, "dbl1:1", 0xbbbb0002);
    }

    void TearDown() override
    {
        for (vside *s : { &m_a, &m_b }) {
            if (s->wire != nullptr) {
                aptus_ud_chan_cleanup(&s->chan);
                s->wire->ops->close(s->wire);
            }
        }
        EXPECT_EQ(0u, ibv_double_disable()) << "verbs objects leaked";
    }

    void init(vside &s, const char *dev, uint32_t key)
    {
        aptus_dgram_wire_config_t wc;
        memset(&wc, 0, sizeof(wc));
        wc.mtu          = 2048;
        wc.rx_queue_len = 512;
        wc.numa_node    = -1;
        wc.tx_queue_len = 128;
        ASSERT_EQ(UCS_OK, aptus_verbs_dgram_open(dev, &wc, &s.wire));
        s.key = key;
        ASSERT_EQ(UCS_OK,
                  aptus_ud_chan_init(&s.chan, &m_cfg, s.wire, NULL, &vchan_ops,
                                     &s, fake_net::clock, key));
    }

    aptus_ud_peer_t *connect(vside &from, vside &to)
    {
        aptus_ud_peer_t *peer = nullptr;
        EXPECT_EQ(UCS_OK,
                  aptus_ud_chan_peer_connect(&from.chan, &to.wire->addr, to.key,
                                             to.wire->mtu, &peer));
        return peer;
    }

    /* both sides progress, held datagrams go, fake time moves */
    void round()
    {
        ibv_double_flush();
        aptus_ud_chan_progress(&m_a.chan, 0);
        aptus_ud_chan_progress(&m_b.chan, 0);
        fake_net::now += 50;
    }

    template <typename Pred> bool run_until(Pred pred)
    {
        return fake_run_until(
            pred, [this] { round(); }, 30000000);
    }

    /* n messages of varied sizes up to max_len, retried on NO_RESOURCE */
    std::vector<vmsg> stream(vside &from, aptus_ud_peer_t *peer, unsigned n,
                             size_t max_len, unsigned seed)
    {
        std::mt19937 rng(seed);
        std::vector<vmsg> sent;
        for (unsigned i = 0; i < n; ++i) {
            size_t len = (i % 4 == 0) ? (rng() % max_len) : (rng() % 300);
            vmsg m{ (uint8_t)(i % 30), pattern(i + seed, len) };
            aptus_chan_send_t send;
            ssize_t ret;
            aptus_chan_send_pack(&send, m.am_id, vpack_cb, &m.data);
            while ((ret = aptus_ud_chan_send(&from.chan, peer, &send)) ==
                   UCS_ERR_NO_RESOURCE) {
                round();
            }
            EXPECT_EQ((ssize_t)len, ret);
            sent.push_back(m);
            if (i % 5 == 0) {
                round();
            }
        }
        return sent;
    }

    aptus_ud_chan_config_t m_cfg;
    vside m_a, m_b;
};

} // namespace

/* Messages up to 16 KiB (eight datagrams of the 2 KiB wire) both ways. */
TEST_F(ud_chan_verbs, messages_arrive_whole_and_in_order_both_ways)
{
    aptus_ud_peer_t *ab = connect(m_a, m_b), *ba = connect(m_b, m_a);
    ASSERT_TRUE((ab != nullptr) && (ba != nullptr));
    auto to_b = stream(m_a, ab, 300, 16000, 1);
    auto to_a = stream(m_b, ba, 300, 16000, 2);
    ASSERT_TRUE(run_until([&] {
        return (m_b.rx.size() >= to_b.size()) && (m_a.rx.size() >= to_a.size());
    }));
    EXPECT_EQ(to_b, m_b.rx);
    EXPECT_EQ(to_a, m_a.rx);
    EXPECT_EQ(0u, m_a.failed + m_b.failed);
}

/* The double loses and reorders datagrams: the channel's reliability
 * makes up for it, as it must on a real UD fabric. */
TEST_F(ud_chan_verbs, loss_and_reordering_on_the_fabric_are_recovered)
{
    ibv_double_ud_fault(0.05, 0.05, 2024);
    aptus_ud_peer_t *ab = connect(m_a, m_b);
    ASSERT_NE(nullptr, ab);
    auto to_b = stream(m_a, ab, 400, 12000, 3);
    ASSERT_TRUE(run_until([&] { return m_b.rx.size() >= to_b.size(); }));
    EXPECT_EQ(to_b, m_b.rx);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_GT(st.ud_fault_drop, 0u);
    EXPECT_GT(st.ud_fault_reorder, 0u);
    EXPECT_EQ(0u, m_a.failed + m_b.failed);
}
