/*
 * UCT-level tests of the ud_sr transport through the public UCT API: two
 * interfaces in one process on the loopback device, over the real sock
 * wire (UDP). Ordering, segmentation, zero-copy, pending, flush, async
 * callbacks, endpoint destroy, bad configuration, peer failure.
 */
#include <gtest/gtest.h>

extern "C" {
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include "uct/ud_sr_iface.h"
}

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

namespace
{

const size_t RX_HEADROOM = 32;

struct received {
    std::mutex lock;
    std::vector<std::vector<uint8_t>> msgs;
    std::atomic<int> async_calls{ 0 };
    pthread_t main_thread;
    std::vector<void *> kept;
    bool keep = false;
};

ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned flags)
{
    received *r = static_cast<received *>(arg);
    std::lock_guard<std::mutex> guard(r->lock);
    const uint8_t *p = static_cast<const uint8_t *>(data);
    r->msgs.emplace_back(p, p + length);
    if (!pthread_equal(pthread_self(), r->main_thread)) {
        r->async_calls++;
    }
    if (r->keep && (flags & UCT_CB_PARAM_FLAG_DESC)) {
        r->kept.push_back(UCS_PTR_BYTE_OFFSET(data, -(ptrdiff_t)RX_HEADROOM));
        return UCS_INPROGRESS;
    }
    return UCS_OK;
}

struct failure {
    std::atomic<int> count{ 0 };
    uct_ep_h ep         = nullptr;
    ucs_status_t status = UCS_OK;
};

ucs_status_t err_cb(void *arg, uct_ep_h ep, ucs_status_t status)
{
    failure *f = static_cast<failure *>(arg);
    f->ep      = ep;
    f->status  = status;
    f->count++;
    return UCS_OK;
}

std::vector<uint8_t> pattern(unsigned id, size_t len)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = (uint8_t)(id * 31 + i * 13 + (i >> 9));
    }
    return v;
}

size_t pack_vec(void *dest, void *arg)
{
    auto *v = static_cast<std::vector<uint8_t> *>(arg);
    if (!v->empty()) {
        memcpy(dest, v->data(), v->size());
    }
    return v->size();
}

struct comp_t {
    uct_completion_t super;
    int done;
    ucs_status_t status;
};

void comp_cb(uct_completion_t *self)
{
    comp_t *c = reinterpret_cast<comp_t *>(self);
    c->done++;
    c->status = self->status;
}

class uct_ud_sr : public ::testing::Test
{
  protected:
    struct entity {
        uct_iface_h iface = nullptr;
        uct_ep_h ep       = nullptr;
        received rx;
        failure err;
        std::vector<uint8_t> dev_addr, iface_addr;
    };

    void SetUp() override
    {
        ASSERT_EQ(UCS_OK, ucs_async_context_create(
                              UCS_ASYNC_MODE_THREAD_SPINLOCK, &m_async));
        ASSERT_EQ(UCS_OK, uct_worker_create(m_async, UCS_THREAD_MODE_SINGLE,
                                            &m_worker));
        uct_component_h *comps;
        unsigned num_comps;
        ASSERT_EQ(UCS_OK, uct_query_components(&comps, &num_comps));
        for (unsigned i = 0; i < num_comps; ++i) {
            uct_component_attr_t attr;
            attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
            ASSERT_EQ(UCS_OK, uct_component_query(comps[i], &attr));
            if (!strcmp(attr.name, "aptus")) {
                m_component = comps[i];
            }
        }
        uct_release_component_list(comps);
        ASSERT_NE(nullptr, m_component) << "the aptus component is not loaded";

        uct_md_config_t *md_config;
        ASSERT_EQ(UCS_OK,
                  uct_md_config_read(m_component, NULL, NULL, &md_config));
        ASSERT_EQ(UCS_OK, uct_md_open(m_component, "aptus", md_config, &m_md));
        uct_config_release(md_config);
    }

    void TearDown() override
    {
        close(m_a);
        close(m_b);
        if (m_md != nullptr) {
            uct_md_close(m_md);
        }
        if (m_worker != nullptr) {
            uct_worker_destroy(m_worker);
        }
        if (m_async != nullptr) {
            ucs_async_context_destroy(m_async);
        }
    }

    ucs_status_t open(entity &e, std::map<std::string, std::string> cfg = {})
    {
        uct_iface_config_t *config;
        ucs_status_t status =
            uct_md_iface_config_read(m_md, "ud_sr", NULL, NULL, &config);
        EXPECT_EQ(UCS_OK, status);
        for (auto &kv : m_default_cfg) {
            if (!cfg.count(kv.first)) {
                cfg[kv.first] = kv.second;
            }
        }
        for (auto &kv : cfg) {
            EXPECT_EQ(UCS_OK, uct_config_modify(config, kv.first.c_str(),
                                                kv.second.c_str()));
        }

        uct_iface_params_t params;
        memset(&params, 0, sizeof(params));
        params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                            UCT_IFACE_PARAM_FIELD_DEVICE |
                            UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                            UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                            UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                            UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = "ud_sr";
        params.mode.device.dev_name = "lo";
        params.rx_headroom          = RX_HEADROOM;
        params.err_handler          = err_cb;
        params.err_handler_arg      = &e.err;
        params.err_handler_flags    = 0;
        status = uct_iface_open(m_md, m_worker, &params, config, &e.iface);
        uct_config_release(config);
        if (status != UCS_OK) {
            e.iface = nullptr;
            return status;
        }

        uct_iface_attr_t attr;
        EXPECT_EQ(UCS_OK, uct_iface_query(e.iface, &attr));
        e.dev_addr.resize(attr.device_addr_len);
        e.iface_addr.resize(attr.iface_addr_len);
        EXPECT_EQ(UCS_OK, uct_iface_get_device_address(
                              e.iface, (uct_device_addr_t *)e.dev_addr.data()));
        EXPECT_EQ(UCS_OK,
                  uct_iface_get_address(
                      e.iface, (uct_iface_addr_t *)e.iface_addr.data()));
        e.rx.main_thread = pthread_self();
        for (uint8_t id = 0; id < 4; ++id) {
            EXPECT_EQ(UCS_OK,
                      uct_iface_set_am_handler(e.iface, id, am_cb, &e.rx, 0));
        }
        EXPECT_EQ(UCS_OK, uct_iface_set_am_handler(e.iface, 5, am_cb, &e.rx,
                                                   UCT_CB_FLAG_ASYNC));
        uct_iface_progress_enable(e.iface,
                                  UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
        return UCS_OK;
    }

    void connect(entity &from, entity &to)
    {
        uct_ep_params_t params;
        memset(&params, 0, sizeof(params));
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                            UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface      = from.iface;
        params.dev_addr   = (const uct_device_addr_t *)to.dev_addr.data();
        params.iface_addr = (const uct_iface_addr_t *)to.iface_addr.data();
        EXPECT_TRUE(uct_iface_is_reachable(from.iface, params.dev_addr,
                                           params.iface_addr));
        ASSERT_EQ(UCS_OK, uct_ep_create(&params, &from.ep));
    }

    void close(entity &e)
    {
        for (void *d : e.rx.kept) {
            uct_iface_release_desc(d);
        }
        e.rx.kept.clear();
        if (e.ep != nullptr) {
            uct_ep_destroy(e.ep);
            e.ep = nullptr;
        }
        if (e.iface != nullptr) {
            uct_iface_close(e.iface);
            e.iface = nullptr;
        }
    }

    void setup_pair(std::map<std::string, std::string> cfg = {})
    {
        ASSERT_EQ(UCS_OK, open(m_a, cfg));
        ASSERT_EQ(UCS_OK, open(m_b, cfg));
        connect(m_a, m_b);
        connect(m_b, m_a);
    }

    void progress()
    {
        uct_worker_progress(m_worker);
    }

    template <typename Pred> bool wait_for(Pred pred, double seconds = 20)
    {
        ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(seconds);
        while (!pred()) {
            if (ucs_get_time() > deadline) {
                return false;
            }
            progress();
        }
        return true;
    }

    size_t rx_count(entity &e)
    {
        std::lock_guard<std::mutex> guard(e.rx.lock);
        return e.rx.msgs.size();
    }

    ucs_status_t flush_ep(uct_ep_h ep)
    {
        comp_t c;
        c.super.func        = comp_cb;
        c.super.count       = 1;
        c.super.status      = UCS_OK;
        c.done              = 0;
        c.status            = UCS_OK;
        ucs_status_t status = uct_ep_flush(ep, 0, &c.super);
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(wait_for([&] { return c.done > 0; }));
            return c.status;
        }
        return status;
    }

    std::map<std::string, uint64_t> stats(entity &e)
    {
        uct_aptus_stat_t st[64];
        std::map<std::string, uint64_t> m;
        uct_ud_sr_iface_t *iface = ucs_derived_of(e.iface, uct_ud_sr_iface_t);
        UCS_ASYNC_BLOCK(m_async);
        unsigned n = uct_ud_sr_iface_stats(iface, st, 64);
        UCS_ASYNC_UNBLOCK(m_async);
        for (unsigned i = 0; i < n; ++i) {
            m[st[i].name] = st[i].value;
        }
        return m;
    }

    ucs_async_context_t *m_async = nullptr;
    uct_worker_h m_worker        = nullptr;
    uct_component_h m_component  = nullptr;
    uct_md_h m_md                = nullptr;
    entity m_a, m_b;
    std::map<std::string, std::string> m_default_cfg = { { "TIMEOUT", "2s" } };
};

} // namespace

TEST_F(uct_ud_sr, capabilities)
{
    ASSERT_EQ(UCS_OK, open(m_a));
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_a.iface, &attr));
    uint64_t need = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_AM_SHORT |
                    UCT_IFACE_FLAG_AM_BCOPY | UCT_IFACE_FLAG_AM_ZCOPY |
                    UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                    UCT_IFACE_FLAG_CB_ASYNC | UCT_IFACE_FLAG_EP_CHECK |
                    UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE;
    EXPECT_EQ(need, attr.cap.flags & need);
    EXPECT_FALSE(attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_EP);
    EXPECT_EQ(2048u - 16, attr.cap.am.max_short);
    EXPECT_EQ(32768u, attr.cap.am.max_bcopy);
    EXPECT_EQ(32768u, attr.cap.am.max_zcopy);
    EXPECT_GT(attr.cap.am.max_iov, 1u);
    EXPECT_EQ(0u, attr.ep_addr_len);
    EXPECT_GT(attr.bandwidth.shared, 0);
    EXPECT_GT(attr.latency.c, 0);
}

TEST_F(uct_ud_sr, bad_configuration_refused)
{
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, open(m_a, { { "TX_WINDOW", "100" } }));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, open(m_a, { { "SEG_SIZE", "1m" } }));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, open(m_a, { { "MTU", "100000" } }));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, open(m_a, { { "FAULT_DROP", "1.5" } }));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              open(m_a, { { "RTO_MIN", "1s" }, { "RTO_MAX", "10ms" } }));
    /* a value UCX cannot parse is refused when the configuration is set */
    uct_iface_config_t *config;
    ASSERT_EQ(UCS_OK,
              uct_md_iface_config_read(m_md, "ud_sr", NULL, NULL, &config));
    EXPECT_NE(UCS_OK, uct_config_modify(config, "TX_WINDOW", "many"));
    uct_config_release(config);
}

TEST_F(uct_ud_sr, am_ordering_across_short_bcopy_zcopy)
{
    setup_pair();
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_a.iface, &attr));
    std::vector<std::vector<uint8_t>> expect;
    std::vector<comp_t> comps(300);
    std::vector<std::vector<uint8_t>> zbufs(300);
    for (unsigned i = 0; i < 300; ++i) {
        ucs_status_t status;
        std::vector<uint8_t> data;
        do {
            switch (i % 3) {
            case 0: {
                data = pattern(i, 8 + (i * 37) % (attr.cap.am.max_short - 8));
                uint64_t hdr;
                memcpy(&hdr, data.data(), 8);
                status = uct_ep_am_short(m_a.ep, 1, hdr, data.data() + 8,
                                         data.size() - 8);
                break;
            }
            case 1: {
                data        = pattern(i, (i * 997) % attr.cap.am.max_bcopy);
                ssize_t len = uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &data, 0);
                status      = (len < 0) ? (ucs_status_t)len : UCS_OK;
                if (len >= 0) {
                    EXPECT_EQ((ssize_t)data.size(), len);
                }
                break;
            }
            default: {
                std::vector<uint8_t> hdr = pattern(i + 1000, 16);
                zbufs[i] =
                    pattern(i, (i * 1511) % (attr.cap.am.max_zcopy - 16));
                data = hdr;
                data.insert(data.end(), zbufs[i].begin(), zbufs[i].end());
                uct_iov_t iov[2];
                size_t half = zbufs[i].size() / 2;
                iov[0]      = { zbufs[i].data(), half, NULL, 0, 1 };
                iov[1] = { zbufs[i].data() + half, zbufs[i].size() - half, NULL,
                           0, 1 };
                comps[i].super.func   = comp_cb;
                comps[i].super.count  = 1;
                comps[i].super.status = UCS_OK;
                comps[i].done         = 0;
                status = uct_ep_am_zcopy(m_a.ep, 1, hdr.data(), hdr.size(), iov,
                                         2, 0, &comps[i].super);
                if (status == UCS_INPROGRESS) {
                    status = UCS_OK;
                } else if (status == UCS_OK) {
                    comps[i].done = 1;
                }
                break;
            }
            }
            if (status == UCS_ERR_NO_RESOURCE) {
                progress();
            }
        } while (status == UCS_ERR_NO_RESOURCE);
        ASSERT_EQ(UCS_OK, status) << i;
        expect.push_back(data);
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == expect.size(); }));
    for (size_t i = 0; i < expect.size(); ++i) {
        EXPECT_EQ(expect[i], m_b.rx.msgs[i]) << "message " << i;
    }
    ASSERT_TRUE(wait_for([&] {
        for (unsigned i = 2; i < comps.size(); i += 3) {
            if (!comps[i].done) {
                return false;
            }
        }
        return true;
    }));
    EXPECT_EQ(UCS_OK, flush_ep(m_a.ep));
    auto st = stats(m_a);
    EXPECT_EQ(300u, st["tx_msgs"]);
    EXPECT_EQ(0u, st["rx_malformed"]);
}

TEST_F(uct_ud_sr, pending_resumes_after_window_opens)
{
    setup_pair({ { "TX_WINDOW", "8" }, { "SEG_SIZE", "8k" } });
    struct req_t {
        uct_pending_req_t super;
        uct_ep_h ep;
        std::vector<uint8_t> data;
        int done;
    };
    std::vector<uint8_t> big = pattern(1, 8000);
    unsigned sent            = 0;
    while (uct_ep_am_bcopy(m_a.ep, 2, pack_vec, &big, 0) > 0) {
        ++sent;
    }
    EXPECT_GE(sent, 1u);
    std::vector<req_t> reqs(10);
    for (unsigned i = 0; i < reqs.size(); ++i) {
        reqs[i].ep         = m_a.ep;
        reqs[i].data       = pattern(100 + i, 5000);
        reqs[i].done       = 0;
        reqs[i].super.func = [](uct_pending_req_t *self) -> ucs_status_t {
            req_t *r    = reinterpret_cast<req_t *>(self);
            ssize_t len = uct_ep_am_bcopy(r->ep, 2, pack_vec, &r->data, 0);
            if (len < 0) {
                return (ucs_status_t)len;
            }
            r->done = 1;
            return UCS_OK;
        };
        ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_a.ep, &reqs[i].super, 0));
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == sent + reqs.size(); }));
    for (unsigned i = 0; i < reqs.size(); ++i) {
        EXPECT_TRUE(reqs[i].done);
        EXPECT_EQ(reqs[i].data, m_b.rx.msgs[sent + i]);
    }
    EXPECT_EQ(UCS_OK, flush_ep(m_a.ep));
}

TEST_F(uct_ud_sr, iface_flush_with_completion)
{
    setup_pair();
    std::vector<uint8_t> data = pattern(3, 20000);
    ASSERT_GT(uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &data, 0), 0);
    comp_t c;
    c.super.func        = comp_cb;
    c.super.count       = 1;
    c.super.status      = UCS_OK;
    c.done              = 0;
    ucs_status_t status = uct_iface_flush(m_a.iface, 0, &c.super);
    ASSERT_EQ(UCS_INPROGRESS, status);
    ASSERT_TRUE(wait_for([&] { return c.done == 1; }));
    EXPECT_EQ(UCS_OK, c.status);
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_a.iface, 0, NULL));
    EXPECT_EQ(1u, rx_count(m_b));
}

TEST_F(uct_ud_sr, async_handler_runs_without_progress)
{
    setup_pair({ { "ASYNC_INTERVAL", "2ms" } });
    std::vector<uint8_t> data = pattern(7, 100);
    ASSERT_GT(uct_ep_am_bcopy(m_a.ep, 5, pack_vec, &data, 0), 0); /* async */
    ASSERT_GT(uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &data, 0), 0); /* sync */
    /* nobody calls progress: the async thread receives, acknowledges and
     * runs the async handler; the sync one waits for progress */
    ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(10);
    while ((m_b.rx.async_calls.load() == 0) && (ucs_get_time() < deadline)) {
        usleep(1000);
    }
    EXPECT_EQ(1, m_b.rx.async_calls.load());
    EXPECT_EQ(1u, rx_count(m_b));
    /* acknowledged while the receiver computes: the sender's flush
     * completes from its own async thread as well */
    deadline = ucs_get_time() + ucs_time_from_sec(10);
    ucs_status_t status;
    while (((status = uct_ep_flush(m_a.ep, 0, NULL)) == UCS_INPROGRESS) &&
           (ucs_get_time() < deadline)) {
        usleep(1000);
    }
    EXPECT_EQ(UCS_OK, status);
    EXPECT_GT(stats(m_b)["rx_deferred"], 0u);
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 2; }));
    EXPECT_EQ(1, m_b.rx.async_calls.load());
}

TEST_F(uct_ud_sr, kept_descriptors_are_released_later)
{
    setup_pair();
    m_b.rx.keep = true;
    for (unsigned i = 0; i < 50; ++i) {
        std::vector<uint8_t> data = pattern(i, (i % 2) ? 100 : 9000);
        while (uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &data, 0) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 50; }));
    EXPECT_EQ(50u, m_b.rx.kept.size());
    for (unsigned i = 0; i < 50; ++i) {
        /* still intact while kept */
        EXPECT_EQ(pattern(i, (i % 2) ? 100 : 9000), m_b.rx.msgs[i]);
    }
}

TEST_F(uct_ud_sr, fault_injector_loss_dup_reorder)
{
    setup_pair({ { "FAULT_DROP", "0.1" },
                 { "FAULT_DUP", "0.05" },
                 { "FAULT_REORDER", "0.05" },
                 { "FAULT_DELAY", "0.02" },
                 { "RTO_MIN", "1ms" },
                 { "RTO_INIT", "5ms" } });
    std::vector<std::vector<uint8_t>> expect;
    for (unsigned i = 0; i < 400; ++i) {
        std::vector<uint8_t> data = pattern(i, (i * 211) % 20000);
        ssize_t len;
        while ((len = uct_ep_am_bcopy(m_a.ep, 3, pack_vec, &data, 0)) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
        ASSERT_EQ((ssize_t)data.size(), len);
        expect.push_back(data);
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == expect.size(); }, 60));
    EXPECT_EQ(UCS_OK, flush_ep(m_a.ep));
    for (size_t i = 0; i < expect.size(); ++i) {
        ASSERT_EQ(expect[i], m_b.rx.msgs[i]) << i;
    }
    auto sa = stats(m_a), sb = stats(m_b);
    EXPECT_GT(sa["fault_drop"], 0u);
    EXPECT_GT(sa["fault_dup"], 0u);
    EXPECT_GT(sa["fault_reorder"], 0u);
    EXPECT_GT(sa["retransmits"] + sa["fast_retransmits"], 0u);
    EXPECT_GT(sb["rx_duplicates"], 0u);
    EXPECT_EQ(0, m_a.err.count.load());
}

TEST_F(uct_ud_sr, destroyed_endpoint_delivers_accepted_data)
{
    setup_pair({ { "FAULT_DROP", "0.3" },
                 { "RTO_MIN", "1ms" },
                 { "RTO_INIT", "2ms" } });
    std::vector<uint8_t> *buf   = new std::vector<uint8_t>(pattern(1, 30000));
    std::vector<uint8_t> hdr    = pattern(2, 8);
    std::vector<uint8_t> expect = hdr;
    expect.insert(expect.end(), buf->begin(), buf->end());
    uct_iov_t iov = { buf->data(), buf->size(), NULL, 0, 1 };
    comp_t c;
    c.super.func   = comp_cb;
    c.super.count  = 1;
    c.super.status = UCS_OK;
    c.done         = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(m_a.ep, 1, hdr.data(), hdr.size(),
                                              &iov, 1, 0, &c.super));
    uct_ep_destroy(m_a.ep);
    m_a.ep = nullptr;
    EXPECT_EQ(1, c.done);
    memset(buf->data(), 0, buf->size());
    delete buf;
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 1; }));
    EXPECT_EQ(expect, m_b.rx.msgs[0]);
}

TEST_F(uct_ud_sr, peer_failure_reported)
{
    setup_pair({ { "TIMEOUT", "300ms" },
                 { "RTO_MIN", "1ms" },
                 { "RTO_MAX", "20ms" } });
    std::vector<uint8_t> data = pattern(1, 64);
    ASSERT_GT(uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &data, 0), 0);
    ASSERT_EQ(UCS_OK, flush_ep(m_a.ep));

    /* the peer process goes away */
    uct_ep_destroy(m_b.ep);
    m_b.ep = nullptr;
    uct_iface_close(m_b.iface);
    m_b.iface = nullptr;

    ucs_time_t start = ucs_get_time();
    ASSERT_GT(uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &data, 0), 0);
    ASSERT_TRUE(wait_for([&] { return m_a.err.count.load() > 0; }, 10));
    double took = ucs_time_to_sec(ucs_get_time() - start);
    EXPECT_GE(took, 0.25);
    EXPECT_EQ(1, m_a.err.count.load());
    EXPECT_EQ(m_a.ep, m_a.err.ep);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_a.err.status);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT,
              uct_ep_am_short(m_a.ep, 1, 0, data.data(), 8));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, uct_ep_flush(m_a.ep, 0, NULL));
    EXPECT_EQ(1u, stats(m_a)["peers_failed"]);
}

TEST_F(uct_ud_sr, ep_check_reports_idle_dead_peer)
{
    setup_pair({ { "TIMEOUT", "300ms" },
                 { "RTO_MIN", "1ms" },
                 { "RTO_MAX", "20ms" } });
    EXPECT_EQ(UCS_OK, uct_ep_check(m_a.ep, 0, NULL));
    ASSERT_EQ(UCS_OK, flush_ep(m_a.ep)); /* the peer answered */
    EXPECT_EQ(0u, rx_count(m_b));        /* nothing delivered */

    uct_ep_destroy(m_b.ep);
    m_b.ep = nullptr;
    uct_iface_close(m_b.iface);
    m_b.iface = nullptr;

    /* idle: no failure without a check */
    ucs_time_t end = ucs_get_time() + ucs_time_from_sec(0.6);
    while (ucs_get_time() < end) {
        progress();
    }
    EXPECT_EQ(0, m_a.err.count.load());
    EXPECT_EQ(UCS_OK, uct_ep_check(m_a.ep, 0, NULL));
    ASSERT_TRUE(wait_for([&] { return m_a.err.count.load() > 0; }, 10));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_a.err.status);
}

TEST_F(uct_ud_sr, stray_datagrams_dropped)
{
    setup_pair();
    /* garbage and a datagram with a wrong key, straight to the socket */
    uct_ud_sr_iface_t *iface = ucs_derived_of(m_b.iface, uct_ud_sr_iface_t);
    int fd                   = iface->wire->ops->event_fd(iface->wire);
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)&ss, &len));
    int s = socket(ss.ss_family, SOCK_DGRAM, 0);
    ASSERT_GE(s, 0);
    uint8_t junk[100];
    memset(junk, 0x42, sizeof(junk));
    ASSERT_EQ((ssize_t)sizeof(junk),
              sendto(s, junk, sizeof(junk), 0, (struct sockaddr *)&ss, len));
    ASSERT_EQ(3, sendto(s, junk, 3, 0, (struct sockaddr *)&ss, len));
    uint8_t big[5000] = { 0 };
    ASSERT_EQ((ssize_t)sizeof(big),
              sendto(s, big, sizeof(big), 0, (struct sockaddr *)&ss, len));
    ::close(s);

    std::vector<uint8_t> data = pattern(9, 300);
    ASSERT_GT(uct_ep_am_bcopy(m_a.ep, 1, pack_vec, &data, 0), 0);
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 1; }));
    EXPECT_EQ(data, m_b.rx.msgs[0]);
    ASSERT_TRUE(wait_for(
        [&] {
            auto st = stats(m_b);
            return st["rx_malformed"] + st["rx_bad_key"] + st["rx_truncated"] >=
                   3;
        },
        5));
    auto st = stats(m_b);
    EXPECT_EQ(1u, st["rx_truncated"]);
    EXPECT_EQ(0, m_b.err.count.load());
}
