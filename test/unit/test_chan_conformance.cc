/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the same conformance cases against every channel, through the
 * one channel interface (src/channel/chan.h): eager channels (UD-SR, RC-SR)
 * deliver copied, packed and gathered messages in order, flush, wait on
 * the pending queue, and fail when invalidated; data channels (RC-RDMA,
 * UD-ZCopy) move registered memory by key. The channels are those of a
 * pair of open UCT interfaces of the transport that carries them (RC-FP:
 * rc_fp's, once the first message earned the channel), over the sock wire
 * and, for the channels of a transport the verbs wire carries (ud_sr's
 * UD-SR and UD-ZCopy), over the verbs double.
 */
#include "uct_fixture.h"

extern "C" {
#include "wire/sock/sock_netif.h"
#include "uct/rc/rc_fp.h"
#include "uct/rc/rc_sr_iface.h"
#include "uct/ud/ud_sr_iface.h"
}

#ifdef APTUS_HAVE_VERBS
#include "ibv_double.h"
#endif

#include <cstring>
#include <ostream>

namespace
{

struct chan_case {
    aptus_chan_type_t type;
    bool verbs; /* on the "aptus_verbs" domain, over the verbs double */
};

/* for gtest, which would otherwise print the bytes, padding included */
std::ostream &operator<<(std::ostream &os, const chan_case &c)
{
    return os << aptus_chan_names[c.type] << (c.verbs ? " over verbs" : "");
}

class chan_conformance : public uct_aptus_test,
                         public ::testing::WithParamInterface<chan_case>
{
  protected:
    chan_conformance()
    {
        m_type  = GetParam().type;
        m_verbs = GetParam().verbs;
        if (m_verbs) {
            m_md_name      = UCT_APTUS_VERBS_MD_NAME;
            m_tweak_params = [](uct_iface_params_t &p) {
                p.mode.device.dev_name = "dbl0:1";
            };
        }
        m_ud = (m_type == APTUS_CHAN_UD_SR) || (m_type == APTUS_CHAN_UD_ZCOPY);
        m_fp = (m_type == APTUS_CHAN_RC_FP);
        m_tl = m_ud ? "ud_sr" : (m_fp ? "rc_fp" : "rc_sr");
        if (m_ud) {
            m_default_cfg = { { "TIMEOUT", "2s" } };
        } else if (m_fp) {
            m_default_cfg = { { "THRESH", "1" } };
        }
    }

    void SetUp() override
    {
#ifdef APTUS_HAVE_VERBS
        if (m_verbs) {
            ibv_double_enable(1);
        }
#endif
        uct_aptus_test::SetUp();
        setup_pair();
        if (m_fp) {
            /* one message through the transport earns the channel: its
             * peer is attached once the grant is back */
            uint64_t h = 0;
            ASSERT_EQ(UCS_OK, uct_ep_am_short(m_a.ep, 1, h, nullptr, 0));
            ASSERT_TRUE(wait_for([&] {
                return ucs_derived_of(m_a.ep, uct_rc_fp_ep_t)->fp.peer.attached;
            }));
            ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 1; }));
            m_b.rx.msgs.clear();
        }
    }

    void TearDown() override
    {
        uct_aptus_test::TearDown();
#ifdef APTUS_HAVE_VERBS
        if (m_verbs) {
            EXPECT_EQ(0u, ibv_double_disable()) << "verbs objects leaked";
        }
#endif
    }

    /* The channel of this test, of side e's interface. */
    aptus_chan_t *chan(entity &e)
    {
        if (m_fp) {
            return &ucs_derived_of(e.iface, uct_rc_fp_iface_t)->fpc.super;
        }
        if (m_ud) {
            auto *iface = ucs_derived_of(e.iface, uct_ud_sr_iface_t);
            return (m_type == APTUS_CHAN_UD_SR) ? &iface->ud.chan.super
                                                : &iface->ud.udz.super;
        }
        auto *iface = ucs_derived_of(e.iface, uct_rc_sr_iface_t);
        return (m_type == APTUS_CHAN_RC_SR) ? &iface->chan.super
                                            : &iface->rdma.super;
    }

    /* The channel peer that side e's endpoint owns. */
    aptus_chan_peer_t *peer(entity &e)
    {
        if (m_fp) {
            return (aptus_chan_peer_t *)&ucs_derived_of(e.ep, uct_rc_fp_ep_t)
                ->fp.peer;
        }
        if (m_ud) {
            return (aptus_chan_peer_t *)&ucs_derived_of(e.ep, uct_ud_sr_ep_t)
                ->peer;
        }
        return (aptus_chan_peer_t *)&ucs_derived_of(e.ep, uct_rc_sr_ep_t)->link;
    }

    /* Calls into a channel hold the worker's async lock, as a transport's. */
    template <typename F> auto locked(F f) -> decltype(f())
    {
        UCS_ASYNC_BLOCK(m_async);
        auto ret = f();
        UCS_ASYNC_UNBLOCK(m_async);
        return ret;
    }

    ssize_t send(const aptus_chan_send_t &s)
    {
        aptus_chan_t *c = chan(m_a);
        ssize_t ret;
        while ((ret = locked([&] { return c->ops->send(c, peer(m_a), &s); })) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
        return ret;
    }

    ucs_status_t flush()
    {
        aptus_chan_t *c = chan(m_a);
        test_comp comp;
        init_comp(comp);
        ucs_status_t status;
        while ((status = locked([&] {
                    return c->ops->flush(c, peer(m_a), 0, &comp.super);
                })) == UCS_ERR_NO_RESOURCE) {
            progress();
        }
        if (status == UCS_INPROGRESS) {
            EXPECT_TRUE(wait_for([&] { return comp.done > 0; }));
            return comp.status;
        }
        return status;
    }

    aptus_chan_key_t key_of(const remote_buf &rb)
    {
        const uct_aptus_rkey_t *k = (const uct_aptus_rkey_t *)rb.rkey.rkey;
        aptus_chan_key_t key;
        key.mem.address = k->address;
        key.mem.length  = k->length;
        key.mem.host_id = k->host_id;
        key.mem.pid     = k->pid;
        key.token       = k->token;
        return key;
    }

    aptus_chan_type_t m_type;
    bool m_verbs;
    bool m_ud;
    bool m_fp;
};

struct packed_msg {
    const std::vector<uint8_t> *data;
};

size_t pack_msg(void *dest, void *arg)
{
    const packed_msg *p = static_cast<const packed_msg *>(arg);
    memcpy(dest, p->data->data(), p->data->size());
    return p->data->size();
}

bool is_eager(aptus_chan_type_t type)
{
    return (type == APTUS_CHAN_UD_SR) || (type == APTUS_CHAN_RC_SR) ||
           (type == APTUS_CHAN_RC_FP);
}

} // namespace

TEST_P(chan_conformance, operations_table_matches_the_channel)
{
    aptus_chan_t *c = chan(m_a);
    ASSERT_NE(nullptr, c->ops);
    EXPECT_EQ(m_type, c->ops->type);
    EXPECT_STREQ(aptus_chan_names[m_type], aptus_chan_name(c));
    /* an eager channel sends, a data channel moves memory by key */
    EXPECT_EQ(is_eager(m_type), c->ops->send != nullptr);
    EXPECT_EQ(!is_eager(m_type), c->ops->get != nullptr);
    EXPECT_NE(nullptr, c->ops->flush);
    EXPECT_NE(nullptr, c->ops->pending_add);
    EXPECT_NE(nullptr, c->ops->pending_purge);
    EXPECT_NE(nullptr, c->ops->check);
    EXPECT_NE(nullptr, c->ops->invalidate);
    /* a channel makes its own peers, or uses its carrier's */
    if (c->ops->peer_connect == nullptr) {
        EXPECT_NE(nullptr, c->carrier);
    } else {
        EXPECT_NE(nullptr, c->ops->peer_disconnect);
    }
}

TEST_P(chan_conformance, a_peer_made_through_the_table_carries_messages)
{
    aptus_chan_t *c = chan(m_a);
    if (c->ops->peer_connect == nullptr) {
        GTEST_SKIP() << aptus_chan_names[m_type] << " uses "
                     << aptus_chan_name(c->carrier) << "'s peers";
    }
    if (m_fp) {
        /* a block takes one sender, whose ring state its receiver
         * follows: the endpoint's peer, which rc_fp makes through the
         * table when the grant comes, is the case (the tests above) */
        GTEST_SKIP() << "rc_fp's one peer per block is the endpoint's";
    }
    /* a second peer to the same interface, beside the endpoint's: a UD
     * stream of no endpoint, an RC link of its own (another tag) */
    aptus_ud_remote_t ud;
    aptus_rc_remote_t rc;
    aptus_wire_addr_t addr;
    const void *remote;
    if (m_ud) {
        aptus_ud_peer_t *p = (aptus_ud_peer_t *)peer(m_a);
        ud.addr            = &p->addr;
        ud.remote_key      = p->remote_key;
        ud.mtu =
            aptus_ud_peer_mtu(ucs_derived_of(chan(m_a), aptus_ud_chan_t), p);
        remote = &ud;
    } else {
        auto *ia = (const uct_rc_sr_iface_addr_t *)m_b.iface_addr.data();
        aptus_sock_wire_addr_make(m_b.dev_addr.data(), aptus_get32(ia->port),
                                  &addr);
        rc.addr    = &addr;
        rc.key     = ia->key;
        rc.port    = aptus_get32(ia->port);
        rc.credits = ia->credits;
        rc.tag     = 7;
        remote     = &rc;
    }
    std::vector<uint8_t> storage(c->ops->peer_size + 64);
    aptus_chan_peer_t *p2 = nullptr;
    ASSERT_EQ(UCS_OK, locked([&] {
                  return aptus_chan_peer_connect(
                      c, remote, c->ops->peer_size ? storage.data() : nullptr,
                      &p2);
              }));
    ASSERT_NE(nullptr, p2);
    if (c->ops->peer_size > 0) {
        EXPECT_EQ((void *)storage.data(), (void *)p2); /* the caller's */
    }

    std::vector<uint8_t> hdr = pattern(42, 8), body = pattern(43, 300);
    std::vector<uint8_t> whole(hdr);
    whole.insert(whole.end(), body.begin(), body.end());
    aptus_chan_send_t s;
    aptus_chan_send_copy(&s, 1, hdr.data(), hdr.size(), body.data(),
                         body.size());
    ssize_t ret;
    while ((ret = locked([&] { return aptus_chan_send(c, p2, &s); })) ==
           UCS_ERR_NO_RESOURCE) {
        progress();
    }
    ASSERT_EQ(UCS_OK, ret);
    test_comp comp;
    init_comp(comp);
    ucs_status_t status;
    while ((status = locked([&] {
                return aptus_chan_flush(c, p2, 0, &comp.super);
            })) == UCS_ERR_NO_RESOURCE) {
        progress();
    }
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return comp.done > 0; }));
        status = comp.status;
    }
    EXPECT_EQ(UCS_OK, status);
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 1; }));
    EXPECT_EQ(whole, m_b.rx.msgs[0]);
    locked([&] {
        aptus_chan_peer_disconnect(c, p2);
        return 0;
    });
    /* what was accepted before the disconnect still arrived; nothing more
     * comes from the peer that went */
    ucs_time_t end = ucs_get_time() + ucs_time_from_msec(50);
    while (ucs_get_time() < end) {
        progress();
    }
    EXPECT_EQ(1u, rx_count(m_b));
}

TEST_P(chan_conformance, copied_packed_and_gathered_messages_arrive_in_order)
{
    if (!is_eager(m_type)) {
        GTEST_SKIP() << aptus_chan_names[m_type] << " sends no messages";
    }
    std::vector<std::vector<uint8_t>> expect;
    for (unsigned i = 0; i < 60; ++i) {
        aptus_chan_send_t s;
        std::vector<uint8_t> hdr  = pattern(i, 8);
        std::vector<uint8_t> body = pattern(i + 500, (i * 97) % 1900 + 1);
        std::vector<uint8_t> whole(hdr);
        whole.insert(whole.end(), body.begin(), body.end());
        packed_msg pm{ &whole };
        struct iovec iov[2] = { { body.data(), body.size() / 2 },
                                { body.data() + body.size() / 2,
                                  body.size() - body.size() / 2 } };
        test_comp comp;
        init_comp(comp);
        switch (i % 3) {
        case 0:
            aptus_chan_send_copy(&s, 1, hdr.data(), hdr.size(), body.data(),
                                 body.size());
            ASSERT_EQ(UCS_OK, send(s)) << i;
            break;
        case 1:
            aptus_chan_send_pack(&s, 1, pack_msg, &pm);
            ASSERT_EQ((ssize_t)whole.size(), send(s)) << i;
            break;
        default:
            aptus_chan_send_iov(&s, 1, hdr.data(), hdr.size(), iov, 2,
                                &comp.super);
            ssize_t ret = send(s);
            ASSERT_TRUE((ret == UCS_OK) || (ret == UCS_INPROGRESS)) << ret;
            if (ret == UCS_INPROGRESS) {
                /* the caller's buffers are in use until the completion */
                ASSERT_TRUE(wait_for([&] { return comp.done > 0; }));
                EXPECT_EQ(UCS_OK, comp.status);
            }
            break;
        }
        expect.push_back(whole);
    }
    ASSERT_EQ(UCS_OK, flush());
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == expect.size(); }));
    for (size_t i = 0; i < expect.size(); ++i) {
        ASSERT_EQ(expect[i], m_b.rx.msgs[i]) << i;
    }
}

namespace
{

struct pending_req {
    uct_pending_req_t super;
    aptus_chan_t *chan;
    aptus_chan_peer_t *peer;
    std::vector<uint8_t> hdr;
    int calls = 0;
    int sent  = 0;
};

/* Sends one message from the pending queue. */
ucs_status_t pending_send_cb(uct_pending_req_t *self)
{
    pending_req *r = ucs_container_of(self, pending_req, super);
    aptus_chan_send_t s;
    r->calls++;
    if (r->chan->ops->send == nullptr) {
        r->sent++;
        return UCS_OK;
    }
    aptus_chan_send_copy(&s, 1, r->hdr.data(), r->hdr.size(), nullptr, 0);
    ssize_t ret = r->chan->ops->send(r->chan, r->peer, &s);
    if (ret == UCS_OK) {
        r->sent++;
    }
    return (ucs_status_t)ret;
}

} // namespace

TEST_P(chan_conformance, pending_requests_wait_for_room)
{
    aptus_chan_t *c = chan(m_a);
    pending_req req;
    req.super.func = pending_send_cb;
    req.chan       = c;
    req.peer       = peer(m_a);
    req.hdr        = pattern(9999, 8);
    /* with room (nothing in flight), a request is refused: retry now */
    ASSERT_EQ(UCS_OK, flush());
    EXPECT_EQ(UCS_ERR_BUSY, locked([&] {
                  return c->ops->pending_add(c, peer(m_a), &req.super, 0);
              }));
    EXPECT_EQ(0, req.calls);
    if (!is_eager(m_type)) {
        return;
    }
    /* without room, it waits, and runs once there is room again; the
     * sends that fill the window and the request go in one hold of the
     * async lock, or an acknowledgement the async thread takes in between
     * may make room again (and the request is rightly refused) */
    unsigned sent          = 0;
    ssize_t ret            = UCS_OK;
    std::vector<uint8_t> d = pattern(1, 64);
    aptus_chan_send_t s;
    aptus_chan_send_copy(&s, 1, d.data(), 8, d.data() + 8, d.size() - 8);
    ucs_status_t added = locked([&] {
        while ((sent < 100000) &&
               ((ret = c->ops->send(c, peer(m_a), &s)) == UCS_OK)) {
            ++sent;
        }
        return (ret == UCS_ERR_NO_RESOURCE)
                   ? c->ops->pending_add(c, peer(m_a), &req.super, 0)
                   : UCS_ERR_LAST;
    });
    ASSERT_LT(sent, 100000u) << "never out of room";
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, ret);
    ASSERT_EQ(UCS_OK, added);
    ASSERT_TRUE(wait_for([&] { return req.sent == 1; }));
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == sent + 1; }));
    EXPECT_EQ(req.hdr, m_b.rx.msgs[sent]); /* last: after all sent before */
}

TEST_P(chan_conformance, data_moves_by_key)
{
    if (is_eager(m_type)) {
        GTEST_SKIP() << aptus_chan_names[m_type] << " moves no data by key";
    }
    aptus_chan_t *c = chan(m_a);
    remote_buf rb;
    expose(rb, 256 * 1024, 5);
    aptus_chan_key_t key = key_of(rb);
    uint64_t base        = (uint64_t)(uintptr_t)rb.data.data();

    if (m_type == APTUS_CHAN_RC_RDMA) {
        /* the key is not registered with the peer's md: only the direct
         * path, once the kernel proved the peer, reaches it */
        aptus_rc_link_t *link = (aptus_rc_link_t *)peer(m_a);
        ASSERT_TRUE(wait_for([&] {
            return (link->conn != nullptr) &&
                   (link->conn->wire->ops->peer_pid(link->conn) != 0);
        }));
    }
    std::vector<uint8_t> dest(100000);
    struct iovec iov = { dest.data(), dest.size() };
    test_comp comp;
    init_comp(comp);
    ucs_status_t status;
    while ((status = locked([&] {
                return c->ops->get(c, peer(m_a), &iov, 1, base + 4096, &key,
                                   &comp.super);
            })) == UCS_ERR_NO_RESOURCE) {
        progress();
    }
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait_for([&] { return comp.done > 0; }));
        status = comp.status;
    }
    ASSERT_EQ(UCS_OK, status);
    EXPECT_EQ(0, memcmp(dest.data(), rb.data.data() + 4096, dest.size()));

    if (c->ops->put != nullptr) {
        std::vector<uint8_t> src = pattern(77, 50000);
        struct iovec piov        = { src.data(), src.size() };
        init_comp(comp);
        while ((status = locked([&] {
                    return c->ops->put(c, peer(m_a), &piov, 1, base + 100, &key,
                                       &comp.super);
                })) == UCS_ERR_NO_RESOURCE) {
            progress();
        }
        if (status == UCS_INPROGRESS) { /* done when it is in place */
            ASSERT_TRUE(wait_for([&] { return comp.done > 0; }));
            status = comp.status;
        }
        ASSERT_EQ(UCS_OK, status);
        EXPECT_EQ(0, memcmp(rb.data.data() + 100, src.data(), src.size()));
    }
    EXPECT_EQ(UCS_OK, flush());
    release(rb);
}

TEST_P(chan_conformance, invalidated_peer_fails_and_is_reported_once)
{
    aptus_chan_t *c = chan(m_a);
    if (is_eager(m_type)) {
        /* through UCT, which the transport maps to the channel's */
        ASSERT_EQ(UCS_OK, uct_ep_invalidate(m_a.ep, 0));
    } else {
        locked([&] {
            c->ops->invalidate(c, peer(m_a));
            return 0;
        });
    }
    ASSERT_TRUE(wait_for([&] { return m_a.err.count.load() > 0; }, 10));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, m_a.err.status);
    if (is_eager(m_type)) {
        uint64_t h = 0;
        aptus_chan_send_t s;
        aptus_chan_send_copy(&s, 1, &h, sizeof(h), nullptr, 0);
        EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT,
                  locked([&] { return c->ops->send(c, peer(m_a), &s); }));
        ucs_status_t status =
            locked([&] { return c->ops->flush(c, peer(m_a), 0, nullptr); });
        EXPECT_TRUE(UCS_STATUS_IS_ERR(status)) << ucs_status_string(status);
    }
    ucs_time_t end = ucs_get_time() + ucs_time_from_msec(50);
    while (ucs_get_time() < end) {
        progress();
    }
    EXPECT_EQ(1, m_a.err.count.load());
}

INSTANTIATE_TEST_SUITE_P(
    channels, chan_conformance,
    ::testing::Values(chan_case{ APTUS_CHAN_UD_SR, false },
                      chan_case{ APTUS_CHAN_UD_ZCOPY, false },
                      chan_case{ APTUS_CHAN_RC_SR, false },
                      chan_case{ APTUS_CHAN_RC_RDMA, false },
                      chan_case{ APTUS_CHAN_RC_FP, false }
#ifdef APTUS_HAVE_VERBS
                      ,
                      chan_case{ APTUS_CHAN_UD_SR, true },
                      chan_case{ APTUS_CHAN_UD_ZCOPY, true }
#endif
                      ),
    [](const ::testing::TestParamInfo<chan_case> &info) {
        return std::string(aptus_chan_names[info.param.type]) +
               (info.param.verbs ? "_verbs" : "");
    });
