/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs wire's device table (src/wire/verbs/verbs_dev.c) and ud_sr
 * through the public UCT API on the "aptus_verbs" memory domain, over the
 * in-memory verbs double (test/verbs): HCA ports listed as devices, device
 * addresses that route to a peer's QP, and the transport's messages,
 * one-sided operations and recovery from loss and reordering on UD QPs.
 * Nothing here has run on an HCA.
 */
#include "uct_fixture.h"

#include <gtest/gtest.h>

extern "C" {
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include "uct/base/aptus_md.h"
#include "uct/ud/ud_sr_iface.h"
#include "wire/verbs/verbs_addr.h"
#include "wire/wire_dev.h"
}

#include "verbs_fixture.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace
{

std::vector<std::string> verbs_devices()
{
    uct_tl_device_resource_t *devices = nullptr;
    unsigned num                      = 0;
    std::vector<std::string> names;
    EXPECT_EQ(UCS_OK, aptus_verbs_wire_dev.query_devices(&devices, &num));
    for (unsigned i = 0; i < num; ++i) {
        EXPECT_EQ(UCT_DEVICE_TYPE_NET, devices[i].type);
        names.push_back(devices[i].name);
    }
    ucs_free(devices);
    return names;
}

std::set<std::string> aptus_md_names()
{
    std::set<std::string> names;
    uct_component_h comp = aptus_component();
    uct_component_attr_t attr;
    EXPECT_NE(nullptr, comp);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    EXPECT_EQ(UCS_OK, uct_component_query(comp, &attr));
    std::vector<uct_md_resource_desc_t> res(attr.md_resource_count);
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = res.data();
    EXPECT_EQ(UCS_OK, uct_component_query(comp, &attr));
    for (unsigned j = 0; j < attr.md_resource_count; ++j) {
        names.insert(res[j].md_name);
    }
    return names;
}

} // namespace

/* The table without a transport: devices, addresses, ports. */
class verbs_dev : public verbs_double_test
{
};

/* Without an HCA (the double disabled, as this machine is) no device and
 * no "aptus_verbs" domain; with two, one device per active port, named as
 * UCX names HCA ports, and the domain. */
TEST_F(verbs_dev, lists_active_hca_ports_only_where_there_are_some)
{
    EXPECT_TRUE(verbs_devices().empty());
    EXPECT_EQ(0u, aptus_md_names().count(UCT_APTUS_VERBS_MD_NAME));
    EXPECT_EQ(1u, aptus_md_names().count(UCT_APTUS_MD_NAME));

    ibv_double_enable(2);
    EXPECT_EQ((std::vector<std::string>{ "dbl0:1", "dbl1:1" }),
              verbs_devices());
    EXPECT_EQ(1u, aptus_md_names().count(UCT_APTUS_VERBS_MD_NAME));
    EXPECT_EQ(0u, ibv_double_live()) << "listing leaves nothing open";

    double latency, bw;
    aptus_verbs_wire_dev.caps("dbl0:1", &latency, &bw);
    EXPECT_GT(latency, 0);
    EXPECT_DOUBLE_EQ(4 * 25e9 / 8, bw); /* the double's port: 4x EDR */
    EXPECT_FALSE(aptus_verbs_wire_dev.is_local("dbl0:1"));
    EXPECT_EQ(size_t(IBV_DOUBLE_PORT_MTU),
              aptus_verbs_wire_dev.dgram_mtu_auto("dbl0:1"));
}

/* A device address and a port (the QP number) make the peer's wire
 * address: a datagram sent to it arrives, from the address the receiver
 * sees as its sender. A forged port above 24 bits reaches no QP. */
TEST_F(verbs_dev, device_address_and_port_reach_the_peer)
{
    ibv_double_enable(2);
    aptus_dgram_wire_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.rx_queue_len      = 64;
    cfg.tx_queue_len      = 64;
    cfg.numa_node         = -1;
    aptus_dgram_wire_t *a = nullptr, *b = nullptr;
    ASSERT_EQ(UCS_OK, aptus_verbs_wire_dev.dgram_open("dbl0:1", &cfg, &a));
    ASSERT_EQ(UCS_OK, aptus_verbs_wire_dev.dgram_open("dbl1:1", &cfg, &b));

    size_t len = aptus_verbs_wire_dev.dev_addr_len(&b->addr);
    EXPECT_EQ(3u, len); /* flags and a LID: InfiniBand */
    std::vector<uint8_t> dev(len);
    aptus_verbs_wire_dev.dev_addr_pack(&b->addr, dev.data());
    EXPECT_TRUE(aptus_verbs_wire_dev.dev_addr_reachable(&a->addr, dev.data()));
    std::vector<uint8_t> roce = { APTUS_VERBS_ADDR_F_GLOBAL };
    roce.resize(17, 0xfe);
    EXPECT_FALSE(
        aptus_verbs_wire_dev.dev_addr_reachable(&a->addr, roce.data()));
    std::vector<uint8_t> odd = dev;
    odd[0] |= 0x80;
    EXPECT_FALSE(aptus_verbs_wire_dev.dev_addr_reachable(&a->addr, odd.data()));

    uint32_t port = aptus_verbs_wire_dev.addr_port(&b->addr);
    aptus_wire_addr_t to;
    aptus_verbs_wire_dev.addr_make(dev.data(), port, &to);
    EXPECT_EQ(0, memcmp(&to, &b->addr, sizeof(to)));
    aptus_wire_addr_t other;
    aptus_verbs_wire_dev.addr_with_port(&to, port + 1, &other);
    EXPECT_EQ(port + 1, aptus_verbs_wire_dev.addr_port(&other));
    aptus_verbs_wire_dev.addr_make(dev.data(), 0x1000000u | port, &other);
    EXPECT_EQ(0u, aptus_verbs_wire_dev.addr_port(&other));

    std::vector<uint8_t> msg = pattern(7, 100);
    struct iovec iov         = { msg.data(), msg.size() };
    aptus_dgram_tx_t tx      = { &to, &iov, 1 };
    unsigned sent            = 0;
    ASSERT_EQ(UCS_OK, a->ops->send(a, &tx, 1, &sent));
    ASSERT_EQ(1u, sent);
    ibv_double_stats_t before, after;
    ibv_double_get_stats(&before);
    tx.dst = &other;
    ASSERT_EQ(UCS_OK, a->ops->send(a, &tx, 1, &sent));
    ibv_double_get_stats(&after);
    EXPECT_EQ(before.ud_delivered, after.ud_delivered);
    EXPECT_EQ(before.ud_no_dest + 1, after.ud_no_dest);

    std::vector<uint8_t> buf(b->mtu);
    aptus_dgram_rx_t rx;
    memset(&rx, 0, sizeof(rx));
    rx.buf = buf.data();
    ASSERT_EQ(1u, b->ops->recv(b, &rx, 1));
    EXPECT_EQ(msg, std::vector<uint8_t>(buf.begin(), buf.begin() + rx.length));
    EXPECT_TRUE(aptus_verbs_addr_same_node(&rx.src, &a->addr));
    EXPECT_EQ(0u, b->ops->recv(b, &rx, 1));
    a->ops->close(a);
    b->ops->close(b);
}

/* ud_sr over the verbs wire through UCT, as UCP opens it. */
class uct_ud_sr_verbs : public on_verbs_double<uct_aptus_test>
{
  protected:
    uct_ud_sr_verbs() : on_verbs_double(UCT_APTUS_VERBS_MD_NAME)
    {
        m_tl          = "ud_sr";
        m_default_cfg = { { "TIMEOUT", "5s" } };
    }

    std::map<std::string, uint64_t> stats(entity &e)
    {
        return read_stats([&](uct_aptus_stat_t *st, unsigned max) {
            return uct_ud_sr_iface_stats(
                ucs_derived_of(e.iface, uct_ud_sr_iface_t), st, max);
        });
    }

    /* count messages of every size class from a to b, in order */
    void exchange(unsigned count)
    {
        uct_iface_attr_t attr;
        ASSERT_EQ(UCS_OK, uct_iface_query(m_a.iface, &attr));
        std::vector<std::vector<uint8_t>> sent;
        /* am_short's 8-byte header is part of max_short and arrives
         * before the payload */
        size_t sizes[] = { 8, attr.cap.am.max_short - sizeof(uint64_t), 3000,
                           attr.cap.am.max_bcopy };
        for (unsigned i = 0; i < count; ++i) {
            std::vector<uint8_t> d = pattern(i, sizes[i % 4]);
            ucs_status_t status;
            ssize_t packed;
            if (i % 4 < 2) {
                while ((status = uct_ep_am_short(m_a.ep, 1, 0, d.data(),
                                                 d.size())) ==
                       UCS_ERR_NO_RESOURCE) {
                    progress();
                }
                ASSERT_EQ(UCS_OK, status);
                d.insert(d.begin(), sizeof(uint64_t), 0);
            } else {
                while ((packed = uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &d, 0)) ==
                       UCS_ERR_NO_RESOURCE) {
                    progress();
                }
                ASSERT_EQ((ssize_t)d.size(), packed);
            }
            sent.push_back(d);
        }
        ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == count; }));
        EXPECT_EQ(UCS_OK, flush_ep(m_a.ep));
        std::lock_guard<std::mutex> guard(m_b.rx.lock);
        EXPECT_EQ(sent, m_b.rx.msgs);
    }
};

TEST_F(uct_ud_sr_verbs, listed_on_hca_ports)
{
    uct_tl_resource_desc_t *res;
    unsigned num;
    ASSERT_EQ(UCS_OK, uct_md_query_tl_resources(m_md, &res, &num));
    std::set<std::string> tls;
    for (unsigned i = 0; i < num; ++i) {
        EXPECT_STREQ("dbl0:1", res[i].dev_name);
        tls.insert(res[i].tl_name);
    }
    uct_release_tl_resource_list(res);
    /* the hybrid too: its rendezvous over RC uses the rkey the domain
     * registered in the HCA's protection domain */
    EXPECT_EQ((std::set<std::string>{ "ud_sr", "aptus" }), tls);
}

TEST_F(uct_ud_sr_verbs, messages_arrive_whole_and_in_order)
{
    setup_pair();
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_a.iface, &attr));
    EXPECT_GT(attr.cap.am.max_bcopy, (size_t)IBV_DOUBLE_PORT_MTU)
        << "a message above the UD MTU is segmented";
    exchange(400);
    /* every datagram reached its QP: the addresses are right; what the
     * receiver had no buffer posted for (a burst, as on an HCA) was
     * sent again (so may be a datagram whose ACK came late on a slow
     * machine) */
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(0u, st.ud_bad_qkey);
    EXPECT_EQ(0u, st.ud_no_dest);
    EXPECT_EQ(st.ud_sent, st.ud_delivered + st.ud_no_recv);
    /* the opening was the first message alone (8 bytes, one datagram),
     * not the window that a burst would have put before the answer */
    EXPECT_EQ(1u, stats(m_a)["open_resends"])
        << "posted " << st.ud_sent << ", no receive posted " << st.ud_no_recv;
}

TEST_F(uct_ud_sr_verbs, nothing_lost_through_loss_and_reordering)
{
    setup_pair();
    ibv_double_ud_fault(0.05, 0.05, 42);
    exchange(400);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_GT(st.ud_fault_drop, 0u);
    EXPECT_GT(st.ud_fault_reorder, 0u);
    /* what was lost went again: on a timeout, on the receiver's
     * selective acknowledgement or after a probe, as the timing falls */
    auto st_a = stats(m_a);
    EXPECT_GT(st_a["retransmits"] + st_a["fast_retransmits"] + st_a["probes"],
              0u)
        << "dropped " << st.ud_fault_drop << ", sent " << st.ud_sent
        << ", tx_dgrams " << st_a["tx_dgrams"] << ", resets " << st_a["resets"];
}

TEST_F(uct_ud_sr_verbs, one_sided_operations_through_ud_zcopy)
{
    setup_pair();
    check_rma_round_trip([this](entity &e) { return stats(e); });
}
