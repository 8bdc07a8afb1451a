/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rc_sr and rc_fp through the public UCT API on the "aptus_verbs_rc" memory
 * domain, over the in-memory verbs double (test/verbs): RC queue pairs for
 * messages, and RDMA by the rkey of a registration the domain made in the
 * HCA's protection domain, the one its connections' QPs are in. The double
 * checks an rkey against the PD of the QP an access arrives on, as an HCA
 * does. Nothing here has run on an HCA.
 */
#include "aptus_fixture.h"
#include "rc_fp_fixture.h"

#include <gtest/gtest.h>

extern "C" {
#include <uct/api/uct.h>
#include "uct/base/aptus_md.h"
#include "uct/rc/rc_sr_iface.h"
#include "wire/verbs/verbs_hca.h"
#include "wire/wire_dev.h"
}

#include "verbs_fixture.h"

#include <cstring>
#include <string>
#include <vector>

namespace
{

/* The devices a transport lists on a domain of the aptus component. */
std::vector<std::string> tl_devices(const char *md_name, const char *tl)
{
    std::vector<std::string> names;
    uct_component_h comp = aptus_component();
    uct_md_config_t *config;
    uct_md_h md;
    EXPECT_NE(nullptr, comp);
    EXPECT_EQ(UCS_OK, uct_md_config_read(comp, NULL, NULL, &config));
    ucs_status_t status = uct_md_open(comp, md_name, config, &md);
    uct_config_release(config);
    if (status != UCS_OK) {
        return names;
    }
    uct_tl_resource_desc_t *res;
    unsigned num;
    EXPECT_EQ(UCS_OK, uct_md_query_tl_resources(md, &res, &num));
    for (unsigned j = 0; j < num; ++j) {
        if (!strcmp(res[j].tl_name, tl)) {
            names.push_back(res[j].dev_name);
        }
    }
    uct_release_tl_resource_list(res);
    uct_md_close(md);
    return names;
}

} // namespace

class verbs_rc_domain : public verbs_double_test
{
};

/* With one HCA, the transports with RDMA over connections list its ports
 * on the domains that register with it (rc_sr and rc_fp on the one-sided
 * one, aptus beside ud_sr). With two HCAs a registration cannot serve
 * both protection domains: only ud_sr is listed. */
TEST_F(verbs_rc_domain, one_sided_transports_list_the_ports_of_one_hca)
{
    ibv_double_enable(1);
    std::vector<std::string> one = { "dbl0:1" };
    EXPECT_EQ(one, tl_devices(UCT_APTUS_VERBS_RC_MD_NAME, "rc_sr"));
    EXPECT_EQ(one, tl_devices(UCT_APTUS_VERBS_RC_MD_NAME, "rc_fp"));
    EXPECT_TRUE(tl_devices(UCT_APTUS_VERBS_RC_MD_NAME, "ud_sr").empty());
    EXPECT_EQ(one, tl_devices(UCT_APTUS_VERBS_MD_NAME, "ud_sr"));
    EXPECT_TRUE(tl_devices(UCT_APTUS_VERBS_MD_NAME, "rc_sr").empty());
    EXPECT_EQ(one, tl_devices(UCT_APTUS_VERBS_MD_NAME, "aptus"));
    EXPECT_EQ(0u, ibv_double_live()) << "listing leaves nothing open";
    EXPECT_EQ(0u, ibv_double_disable());

    ibv_double_enable(2);
    EXPECT_TRUE(tl_devices(UCT_APTUS_VERBS_RC_MD_NAME, "rc_sr").empty());
    EXPECT_TRUE(tl_devices(UCT_APTUS_VERBS_MD_NAME, "aptus").empty());
    EXPECT_EQ((std::vector<std::string>{ "dbl0:1", "dbl1:1" }),
              tl_devices(UCT_APTUS_VERBS_MD_NAME, "ud_sr"));
}

/* Every wire on an HCA and the domain share one context and protection
 * domain; the last to let go closes it. */
TEST_F(verbs_rc_domain, the_hca_is_opened_once_and_shared)
{
    ibv_double_enable(2);
    aptus_verbs_hca_t *a, *b, *c;
    ASSERT_EQ(UCS_OK, aptus_verbs_hca_get("dbl0", &a));
    ASSERT_EQ(UCS_OK, aptus_verbs_hca_get("dbl0", &b));
    ASSERT_EQ(UCS_OK, aptus_verbs_hca_get("dbl1", &c));
    EXPECT_EQ(a, b);
    EXPECT_EQ(a->pd, b->pd);
    EXPECT_NE(a->pd, c->pd);
    EXPECT_EQ(UCS_ERR_NO_DEVICE, aptus_verbs_hca_get("dbl7", &b));
    aptus_verbs_hca_put(a);
    EXPECT_GT(ibv_double_live(), 0u);
    aptus_verbs_hca_put(a);
    aptus_verbs_hca_put(c);
    EXPECT_EQ(0u, ibv_double_live());
}

/* rc_sr over RC QPs: messages, and one-sided operations by the domain's
 * keys. */
class uct_rc_sr_verbs : public on_verbs_double<uct_aptus_test>
{
  protected:
    uct_rc_sr_verbs() : on_verbs_double(UCT_APTUS_VERBS_RC_MD_NAME)
    {
        m_tl = "rc_sr";
    }

    std::map<std::string, uint64_t> stats(entity &e)
    {
        return read_stats([&](uct_aptus_stat_t *st, unsigned max) {
            return uct_rc_sr_iface_stats(
                ucs_derived_of(e.iface, uct_rc_sr_iface_t), st, max);
        });
    }

    void send_am(entity &e, const std::vector<uint8_t> &m)
    {
        ucs_status_t status;
        while ((status = uct_ep_am_short(e.ep, 1, 0, m.data(), m.size())) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
        ASSERT_EQ(UCS_OK, status);
    }
};

TEST_F(uct_rc_sr_verbs, messages_both_ways)
{
    setup_pair();
    for (unsigned i = 0; i < 100; ++i) {
        send_am(m_a, pattern(i, 8 + i));
        send_am(m_b, pattern(1000 + i, 100 + i));
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 100; }));
    ASSERT_TRUE(wait_for([&] { return rx_count(m_a) == 100; }));
    for (unsigned i = 0; i < 100; ++i) {
        /* an am_short's 8-byte header comes first */
        std::vector<uint8_t> want(8, 0);
        std::vector<uint8_t> p = pattern(i, 8 + i);
        want.insert(want.end(), p.begin(), p.end());
        EXPECT_EQ(want, m_b.rx.msgs[i]) << i;
    }
}

/* A put lands and a get reads back through the HCA, by the rkey of the
 * domain's registration: the target's CPU sees nothing. */
TEST_F(uct_rc_sr_verbs, put_and_get_by_the_domains_keys)
{
    setup_pair();
    remote_buf rb;
    expose(rb, 64 * 1024, 1);
    uint64_t base = (uint64_t)(uintptr_t)rb.data.data();

    std::vector<uint8_t> s = pattern(2, 100);
    ucs_status_t status;
    while ((status = uct_ep_put_short(m_a.ep, s.data(), s.size(), base,
                                      rb.rkey.rkey)) == UCS_ERR_NO_RESOURCE) {
        progress();
    }
    ASSERT_EQ(UCS_OK, status);

    std::vector<uint8_t> z = pattern(4, 30000);
    uct_iov_t iov          = { z.data(), z.size(), NULL, 0, 1 };
    test_comp c;
    init_comp(c);
    status =
        uct_ep_put_zcopy(m_a.ep, &iov, 1, base + 30000, rb.rkey.rkey, &c.super);
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return c.done > 0; }));
        status = c.status;
    }
    ASSERT_EQ(UCS_OK, status);
    ASSERT_EQ(UCS_OK, flush_ep(m_a.ep));
    EXPECT_EQ(0, memcmp(rb.data.data(), s.data(), s.size()));
    EXPECT_EQ(0, memcmp(rb.data.data() + 30000, z.data(), z.size()));

    std::vector<uint8_t> zg(30000);
    uct_iov_t giov = { zg.data(), zg.size(), NULL, 0, 1 };
    init_comp(c);
    status = uct_ep_get_zcopy(m_a.ep, &giov, 1, base + 30000, rb.rkey.rkey,
                              &c.super);
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return c.done > 0; }));
        status = c.status;
    }
    ASSERT_EQ(UCS_OK, status);
    EXPECT_EQ(z, zg);

    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_GT(st.rdma_writes, 0u);
    EXPECT_GT(st.rdma_reads, 0u);
    EXPECT_EQ(0u, rx_count(m_b)); /* one-sided: the target saw nothing */
    release(rb);
}

/* What the key does not cover is refused before anything is posted. */
TEST_F(uct_rc_sr_verbs, out_of_bounds_is_refused)
{
    setup_pair();
    remote_buf rb;
    expose(rb, 4096, 1);
    const uct_aptus_rkey_t *key = (const uct_aptus_rkey_t *)rb.rkey.rkey;
    std::vector<uint8_t> d      = pattern(5, 64);
    uct_iov_t iov               = { d.data(), d.size(), NULL, 0, 1 };
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_ep_put_zcopy(m_a.ep, &iov, 1, key->address + key->length - 63,
                               rb.rkey.rkey, NULL));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_ep_get_zcopy(m_a.ep, &iov, 1, key->address - 1, rb.rkey.rkey,
                               NULL));
    release(rb);
}

/* A key whose rkey was made in another protection domain (a peer that
 * lies, or a registration of another HCA): the HCA refuses the access,
 * nothing lands, and the endpoint hears of it. */
TEST_F(uct_rc_sr_verbs, an_rkey_of_another_protection_domain_is_refused)
{
    setup_pair();
    remote_buf rb;
    expose(rb, 4096, 1);
    std::vector<uint8_t> want = rb.data;

    /* the same memory, registered in a PD of its own */
    ibv_device **list = ibv_get_device_list(nullptr);
    ASSERT_NE(nullptr, list);
    ibv_context *ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    ASSERT_NE(nullptr, ctx);
    ibv_pd *pd = ibv_alloc_pd(ctx);
    ibv_mr *mr = ibv_reg_mr(pd, rb.data.data(), rb.data.size(),
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(nullptr, mr);
    uct_aptus_rkey_t other = *(const uct_aptus_rkey_t *)rb.rkey.rkey;
    ASSERT_TRUE(other.flags & UCT_APTUS_RKEY_FLAG_WIRE);
    other.wire_token = mr->rkey;

    ibv_double_stats_t before, after;
    ibv_double_get_stats(&before);
    std::vector<uint8_t> d = pattern(6, 256);
    uct_iov_t iov          = { d.data(), d.size(), NULL, 0, 1 };
    ucs_status_t status    = uct_ep_put_zcopy(m_a.ep, &iov, 1, other.address,
                                              (uct_rkey_t)&other, NULL);
    if (status == UCS_OK) {
        status = flush_ep(m_a.ep);
    }
    EXPECT_NE(UCS_OK, status);
    EXPECT_TRUE(wait_for([&] { return m_a.err.count > 0; }));
    ibv_double_get_stats(&after);
    EXPECT_EQ(before.rdma_bad_rkey + 1, after.rdma_bad_rkey);
    EXPECT_EQ(want, rb.data);

    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    release(rb);
}

/* rc_fp over RC QPs: the fast path's messages are RDMA writes into the
 * receiver's block, by the rkey of the grant, in order with RC-SR's. */
class uct_rc_fp_verbs : public on_verbs_double<uct_rc_fp>
{
  protected:
    uct_rc_fp_verbs() : on_verbs_double(UCT_APTUS_VERBS_RC_MD_NAME)
    {
    }
};

TEST_F(uct_rc_fp_verbs, mixed_sizes_in_order_across_fast_path_and_rc_sr)
{
    setup_pair({ { "THRESH", "4" }, { "MAX_MSG", "4k" } });
    ibv_double_stats_t before, after;
    ibv_double_get_stats(&before);
    auto sent = send_mixed(m_a, 1000, 1);
    expect_received(m_b, sent);
    ibv_double_get_stats(&after);
    auto a = stats(m_a), b = stats(m_b);
    EXPECT_EQ(1u, b["fp_granted"]);
    EXPECT_GT(a["fp_tx_msgs"], 300u);
    EXPECT_EQ(a["fp_tx_msgs"], b["fp_rx_msgs"]);
    EXPECT_EQ(0u, b["fp_rx_corrupt"]);
    /* the fast path's messages went as RDMA writes */
    EXPECT_GE(after.rdma_writes - before.rdma_writes, a["fp_tx_msgs"]);
    EXPECT_EQ(before.rdma_bad_rkey, after.rdma_bad_rkey);
    close(m_a);
    close(m_b);
}

/* aptus over the verbs wire: UD QPs to every peer, RC QPs to the peers
 * that earn them, the fast path as RDMA writes into a registered block,
 * rendezvous by RDMA read with the domain's rkey. */
class uct_aptus_verbs : public on_verbs_double<uct_aptus>
{
  protected:
    uct_aptus_verbs() : on_verbs_double(UCT_APTUS_VERBS_MD_NAME)
    {
    }
};

TEST_F(uct_aptus_verbs, small_messages_earn_rc_and_a_fast_path)
{
    setup_pair(eager_fp());
    ASSERT_NO_FATAL_FAILURE(send_small_to_b(2000));
    auto a = stats(m_a), b = stats(m_b);
    EXPECT_EQ(1u, a["rc_now"]);
    EXPECT_EQ(1u, a["fp_now"]);
    EXPECT_GT(a["rc_fp_msgs"], 1500u);
    EXPECT_EQ(2000u, a["rc_fp_msgs"] + a["ud_sr_msgs"]);
    EXPECT_EQ(0u, b["rx_malformed"] + b["fp_rx_corrupt"] + b["rx_duplicates"]);
}

TEST_F(uct_aptus_verbs, mixed_sizes_in_order_while_rc_appears)
{
    setup_pair(eager_rc());
    auto sent = send_mixed(m_a, 400, 3);
    expect_received(m_b, sent);
    auto a = stats(m_a);
    EXPECT_EQ(1u, a["rc_now"]);
    EXPECT_GT(a["rc_sr_msgs"] + a["rc_rdma_msgs"], 0u);
}

TEST_F(uct_aptus_verbs, get_zcopy_over_ud_then_rc_rdma)
{
    ibv_double_stats_t before, after;
    ibv_double_get_stats(&before);
    check_get_over_ud_then_rc();
    ibv_double_get_stats(&after);
    EXPECT_GT(after.rdma_reads, before.rdma_reads); /* by the HCA */
    EXPECT_EQ(before.rdma_bad_rkey, after.rdma_bad_rkey);
}
