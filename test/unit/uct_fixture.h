/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The UCT-level test fixture shared by the transports' tests: two
 * interfaces of one transport in one process on the loopback device, over
 * the real sock wire; active-message capture, error capture, memory
 * registration and remote keys.
 */
#ifndef APTUS_UCT_FIXTURE_H_
#define APTUS_UCT_FIXTURE_H_

#include "test_util.h"

#include <gtest/gtest.h>

extern "C" {
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <ucs/time/time.h>
#include "uct/base/aptus_md.h"
#include "uct/base/aptus_stats.h"
}

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>


static const size_t RX_HEADROOM = 32;

/* The "aptus" UCT component (components live as long as the library), or
 * nullptr when the module is not loaded. */
static inline uct_component_h aptus_component()
{
    uct_component_h *comps, found = nullptr;
    unsigned num_comps;
    if (uct_query_components(&comps, &num_comps) != UCS_OK) {
        return nullptr;
    }
    for (unsigned i = 0; i < num_comps; ++i) {
        uct_component_attr_t attr;
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(comps[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "aptus")) {
            found = comps[i];
        }
    }
    uct_release_component_list(comps);
    return found;
}

struct received {
    std::mutex lock;
    std::vector<std::vector<uint8_t>> msgs;
    std::atomic<int> async_calls{ 0 };
    pthread_t main_thread;
    std::vector<void *> kept;
    bool keep = false;
};

static inline ucs_status_t am_cb(void *arg, void *data, size_t length,
                                 unsigned flags)
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

static inline ucs_status_t err_cb(void *arg, uct_ep_h ep, ucs_status_t status)
{
    failure *f = static_cast<failure *>(arg);
    f->ep      = ep;
    f->status  = status;
    f->count++;
    return UCS_OK;
}

static inline size_t pack_vec(void *dest, void *arg)
{
    auto *v = static_cast<std::vector<uint8_t> *>(arg);
    if (!v->empty()) {
        memcpy(dest, v->data(), v->size());
    }
    return v->size();
}

class uct_aptus_test : public ::testing::Test
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
        m_component = aptus_component();
        ASSERT_NE(nullptr, m_component) << "the aptus component is not loaded";

        uct_md_config_t *md_config;
        ASSERT_EQ(UCS_OK,
                  uct_md_config_read(m_component, NULL, NULL, &md_config));
        ASSERT_EQ(UCS_OK,
                  uct_md_open(m_component, m_md_name, md_config, &m_md));
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
            uct_md_iface_config_read(m_md, m_tl, NULL, NULL, &config);
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
        params.mode.device.tl_name  = m_tl;
        params.mode.device.dev_name = "lo";
        params.rx_headroom          = RX_HEADROOM;
        params.err_handler          = err_cb;
        params.err_handler_arg      = &e.err;
        params.err_handler_flags    = 0;
        if (m_tweak_params) {
            m_tweak_params(params);
        }
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

    /* Open e on a worker whose async context runs in signal mode. */
    ucs_status_t open_in_signal_mode(entity &e)
    {
        ucs_async_context_t *async;
        uct_worker_h worker, saved = m_worker;
        ucs_status_t status;
        EXPECT_EQ(UCS_OK,
                  ucs_async_context_create(UCS_ASYNC_MODE_SIGNAL, &async));
        EXPECT_EQ(UCS_OK,
                  uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker));
        m_worker = worker;
        status   = open(e);
        m_worker = saved;
        close(e);
        uct_worker_destroy(worker);
        ucs_async_context_destroy(async);
        return status;
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

    /* A transport's statistics by name, read under the worker's async
     * lock (its thread counts too); fill: the transport's *_stats call. */
    template <typename F> std::map<std::string, uint64_t> read_stats(F fill)
    {
        std::vector<uct_aptus_stat_t> st(256);
        std::map<std::string, uint64_t> m;
        UCS_ASYNC_BLOCK(m_async);
        unsigned n = fill(st.data(), (unsigned)st.size());
        UCS_ASYNC_UNBLOCK(m_async);
        for (unsigned i = 0; i < n; ++i) {
            m[st[i].name] = st[i].value;
        }
        return m;
    }

    size_t rx_count(entity &e)
    {
        std::lock_guard<std::mutex> guard(e.rx.lock);
        return e.rx.msgs.size();
    }

    ucs_status_t flush_ep(uct_ep_h ep)
    {
        test_comp c;
        init_comp(c);
        ucs_status_t status = uct_ep_flush(ep, 0, &c.super);
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(wait_for([&] { return c.done > 0; }));
            return c.status;
        }
        return status;
    }

    /* The stream from e's endpoint opened, as UCP's wireup opens it before
     * any burst: until the remote side answers, one message is in flight
     * (a check is a reliable no-op, the flush waits for its answer). */
    void open_stream(entity &e)
    {
        ASSERT_EQ(UCS_OK, uct_ep_check(e.ep, 0, nullptr));
        ASSERT_EQ(UCS_OK, flush_ep(e.ep));
    }

    /* A registered buffer and its packed and unpacked remote key. */
    struct remote_buf {
        std::vector<uint8_t> data;
        uct_mem_h memh = UCT_MEM_HANDLE_NULL;
        std::vector<uint8_t> packed;
        uct_rkey_bundle_t rkey = {};
    };

    void expose(remote_buf &rb, size_t length, unsigned id = 9)
    {
        rb.data = pattern(id, length);
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, rb.data.data(), length,
                                         UCT_MD_MEM_ACCESS_ALL, &rb.memh));
        uct_md_attr_t attr;
        ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
        rb.packed.resize(attr.rkey_packed_size);
        ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, rb.memh, rb.packed.data()));
        unpack(rb);
    }

    void unpack(remote_buf &rb)
    {
        ASSERT_EQ(UCS_OK,
                  uct_rkey_unpack(m_component, rb.packed.data(), &rb.rkey));
    }

    void release(remote_buf &rb)
    {
        if (rb.rkey.rkey != 0) {
            uct_rkey_release(m_component, &rb.rkey);
            rb.rkey.rkey = 0;
        }
        if (rb.memh != UCT_MEM_HANDLE_NULL) {
            EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, rb.memh));
            rb.memh = UCT_MEM_HANDLE_NULL;
        }
    }

    /* ucp_put/ucp_get's operations: put_short, put_bcopy, put_zcopy (small
     * and large) land where the rkey says once the endpoint is flushed;
     * get_bcopy reads them back; a put under a wrong token lands nowhere
     * and is counted. */
    void check_rma_round_trip(
        std::function<std::map<std::string, uint64_t>(entity &)> stats)
    {
        remote_buf rb;
        expose(rb, 300000, 3);
        std::vector<uint8_t> want = rb.data;
        const uint64_t base       = (uint64_t)(uintptr_t)rb.data.data();
        uct_iface_attr_t attr;
        ASSERT_EQ(UCS_OK, uct_iface_query(m_a.iface, &attr));
        ASSERT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_PUT_SHORT);
        ASSERT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_PUT_BCOPY);
        ASSERT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_GET_BCOPY);
        ASSERT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY);
        auto place = [&](size_t off, const std::vector<uint8_t> &v) {
            std::copy(v.begin(), v.end(), want.begin() + off);
        };

        std::vector<uint8_t> s8 = pattern(21, 8);
        ucs_status_t status;
        while ((status = uct_ep_put_short(m_a.ep, s8.data(), s8.size(),
                                          base + 10, rb.rkey.rkey)) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
        ASSERT_EQ(UCS_OK, status);
        place(10, s8);

        std::vector<uint8_t> sb = pattern(22, attr.cap.put.max_bcopy);
        auto pack               = [](void *dest, void *arg) -> size_t {
            auto *v = static_cast<std::vector<uint8_t> *>(arg);
            memcpy(dest, v->data(), v->size());
            return v->size();
        };
        ssize_t packed;
        while ((packed = uct_ep_put_bcopy(m_a.ep, pack, &sb, base + 1000,
                                          rb.rkey.rkey)) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
        ASSERT_EQ((ssize_t)sb.size(), packed);
        place(1000, sb);

        for (size_t len : { (size_t)3000, (size_t)100000 }) {
            std::vector<uint8_t> z = pattern(23 + len, len);
            uct_iov_t iov          = { z.data(), len, NULL, 0, 1 };
            test_comp c;
            init_comp(c);
            while ((status = uct_ep_put_zcopy(m_a.ep, &iov, 1, base + 150000,
                                              rb.rkey.rkey, &c.super)) ==
                   UCS_ERR_NO_RESOURCE) {
                progress();
            }
            if (status == UCS_INPROGRESS) {
                ASSERT_TRUE(wait_for([&] { return c.done > 0; }));
                status = c.status;
            }
            ASSERT_EQ(UCS_OK, status) << len;
            place(150000, z);
        }
        ASSERT_EQ(UCS_OK, flush_ep(m_a.ep));
        EXPECT_EQ(want, rb.data);

        /* read back what the stream wrote, through a bounce buffer */
        std::vector<uint8_t> got;
        auto unpack = [](void *arg, const void *data, size_t length) {
            auto *v          = static_cast<std::vector<uint8_t> *>(arg);
            const uint8_t *p = static_cast<const uint8_t *>(data);
            v->assign(p, p + length);
        };
        test_comp c;
        init_comp(c);
        status = uct_ep_get_bcopy(m_a.ep, unpack, &got, 5000, base + 7,
                                  rb.rkey.rkey, &c.super);
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(wait_for([&] { return c.done > 0; }));
            status = c.status;
        }
        ASSERT_EQ(UCS_OK, status);
        EXPECT_EQ(std::vector<uint8_t>(want.begin() + 7, want.begin() + 5007),
                  got);

        /* a guessed token: nothing lands, the target counts it */
        uct_aptus_rkey_t forged = *(const uct_aptus_rkey_t *)rb.rkey.rkey;
        forged.token ^= 1;
        while ((status = uct_ep_put_short(m_a.ep, s8.data(), s8.size(),
                                          base + 5000, (uct_rkey_t)&forged)) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
        ASSERT_EQ(UCS_OK, status);
        ASSERT_EQ(UCS_OK, flush_ep(m_a.ep));
        EXPECT_EQ(want, rb.data);
        EXPECT_EQ(1u, stats(m_b)["put_refused"]);
        EXPECT_GE(stats(m_a)["puts_inline"], 3u);
        release(rb);
    }

    ucs_async_context_t *m_async = nullptr;
    uct_worker_h m_worker        = nullptr;
    uct_component_h m_component  = nullptr;
    uct_md_h m_md                = nullptr;
    entity m_a, m_b;
    std::map<std::string, std::string> m_default_cfg;
    /* changes the interface parameters of the next open() calls */
    std::function<void(uct_iface_params_t &)> m_tweak_params;
    const char *m_tl      = nullptr; /* set by the derived fixture */
    const char *m_md_name = "aptus";
};

#endif
