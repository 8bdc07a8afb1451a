/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the verbs wire's connection part (src/wire/verbs/
 * verbs_conn*.c) over the in-memory verbs double (test/verbs): wires on
 * the double's HCA ports in one process, RC QPs on one SRQ per wire, set
 * up by datagrams the double may lose. What they prove is the wire's use of
 * the verbs API against a strict double, not that it runs on an HCA.
 */
#include "test_util.h"

#include <gtest/gtest.h>

extern "C" {
#include "wire/verbs/verbs_conn.h"
#include "wire/verbs/verbs_dgram.h"
#include <ucs/time/time.h> /* first: it brings UCX's config.h */
}

#include "ibv_double.h"
#include "numa_fake.h"

#include <arpa/inet.h>
#include <endian.h>
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace
{

const size_t MAX_FRAME   = 8192;
const size_t HEADROOM    = 40;
const size_t ALIGNMENT   = 64;
const size_t ALIGN_OFF   = 8;
const size_t MAX_BACKLOG = 64 * 1024;

/* One wire and what its handlers saw. */
struct side {
    struct msg {
        aptus_conn_t *conn;
        std::vector<uint8_t> data;
    };

    aptus_conn_wire_t *wire = nullptr;
    std::vector<aptus_conn_t *> accepted;
    std::vector<msg> msgs;
    std::vector<std::pair<aptus_conn_t *, uint32_t>> imms;
    std::vector<aptus_conn_t *> writable;
    std::vector<std::pair<aptus_conn_t *, ucs_status_t>> failed;
    bool hold         = false;
    bool bad_position = false;
    std::vector<aptus_conn_buf_t *> held;
    std::function<void(aptus_conn_t *, uint32_t)> on_imm;
    std::function<void(aptus_conn_t *)> on_failed;

    void release_held()
    {
        for (auto *b : held) {
            aptus_conn_buf_release(b);
        }
        held.clear();
    }
};

void h_accepted(void *arg, aptus_conn_t *conn)
{
    static_cast<side *>(arg)->accepted.push_back(conn);
}

void h_recv(void *arg, aptus_conn_t *conn, void *data, size_t length,
            aptus_conn_buf_t *buf, int at_start)
{
    side *s          = static_cast<side *>(arg);
    const uint8_t *p = static_cast<const uint8_t *>(data);

    /* every message starts its buffer, past the owner's headroom, with
     * the byte at ALIGN_OFF aligned */
    if (!at_start || (buf == nullptr) || (buf->wire != conn->wire) ||
        (buf->refs == 0) || (p < (uint8_t *)(buf + 1) + HEADROOM) ||
        (((uintptr_t)p + ALIGN_OFF) % ALIGNMENT != 0)) {
        s->bad_position = true;
    }
    s->msgs.push_back({ conn, std::vector<uint8_t>(p, p + length) });
    if (s->hold) {
        aptus_conn_buf_hold(buf);
        s->held.push_back(buf);
    }
}

void h_imm(void *arg, aptus_conn_t *conn, uint32_t imm)
{
    side *s = static_cast<side *>(arg);
    s->imms.emplace_back(conn, imm);
    if (s->on_imm) {
        s->on_imm(conn, imm);
    }
}

void h_writable(void *arg, aptus_conn_t *conn)
{
    static_cast<side *>(arg)->writable.push_back(conn);
}

void h_failed(void *arg, aptus_conn_t *conn, ucs_status_t status)
{
    side *s = static_cast<side *>(arg);
    s->failed.emplace_back(conn, status);
    if (s->on_failed) {
        s->on_failed(conn);
    }
}

const aptus_conn_handlers_t handlers = { h_accepted, h_recv, h_imm, h_writable,
                                         h_failed };

struct rma_req : aptus_conn_rma_req_t {
    int calls           = 0;
    ucs_status_t status = UCS_INPROGRESS;
};

void rma_done(aptus_conn_rma_req_t *r, ucs_status_t status)
{
    rma_req *req = static_cast<rma_req *>(r);
    ++req->calls;
    req->status = status;
}

std::vector<uint8_t> pattern(size_t len, unsigned seed)
{
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
    }
    return v;
}

class verbs_conn : public ::testing::Test
{
  protected:
    side m_a, m_b;
    std::vector<std::pair<aptus_conn_wire_t *, void *>> m_regs;
    std::vector<aptus_dgram_wire_t *> m_dgrams;
    /* the wires' time: each progress round is 500 us later, so that setup
     * retransmissions happen at the same points every run */
    uint64_t m_clock = 1000000;

    void SetUp() override
    {
        ibv_double_enable(2);
    }

    void TearDown() override
    {
        ibv_double_ud_fault(0, 0, 0);
        m_a.release_held();
        m_b.release_held();
        for (auto &r : m_regs) {
            aptus_verbs_conn_mem_dereg(r.first, r.second);
        }
        for (auto *d : m_dgrams) {
            d->ops->close(d);
        }
        for (side *s : { &m_a, &m_b }) {
            if (s->wire != nullptr) {
                s->wire->ops->close(s->wire);
            }
        }
        EXPECT_EQ(0u, ibv_double_disable()) << "verbs objects leaked";
    }

    static aptus_conn_wire_config_t config(side *s, unsigned rx = 32,
                                           unsigned rx_max = 256)
    {
        aptus_conn_wire_config_t c;
        memset(&c, 0, sizeof(c));
        c.max_frame       = MAX_FRAME;
        c.rx_headroom     = HEADROOM;
        c.rx_buffers      = rx;
        c.rx_max_buffers  = rx_max;
        c.rx_alignment    = ALIGNMENT;
        c.rx_align_offset = ALIGN_OFF;
        c.max_backlog     = MAX_BACKLOG;
        c.handlers        = &handlers;
        c.arg             = s;
        c.numa_node       = -1;
        return c;
    }

    void open(side *s, const char *dev, unsigned rx = 32, unsigned rx_max = 256,
              int numa_node = -1)
    {
        aptus_conn_wire_config_t c = config(s, rx, rx_max);
        c.numa_node                = numa_node;
        ASSERT_EQ(UCS_OK, aptus_verbs_conn_open(dev, &c, &s->wire));
        aptus_verbs_conn_set_test_clock(s->wire, &m_clock);
    }

    void progress()
    {
        m_clock += 500;
        m_a.wire->ops->progress(m_a.wire);
        m_b.wire->ops->progress(m_b.wire);
    }

    /* Progress until pred holds; a guard against hanging, not a figure */
    bool run_until(const std::function<bool()> &pred, double max_s = 30)
    {
        ucs_time_t end = ucs_get_time() + ucs_time_from_sec(max_s);
        while (!pred()) {
            if (ucs_get_time() > end) {
                return false;
            }
            progress();
        }
        return true;
    }

    /* A connection from a to b, up at both ends. */
    void connect(aptus_conn_t **ca, aptus_conn_t **cb)
    {
        size_t before = m_b.accepted.size();
        ASSERT_EQ(UCS_OK, m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr,
                                                 nullptr, ca));
        ASSERT_TRUE(run_until([&] { return m_b.accepted.size() > before; }));
        *cb = m_b.accepted.back();
        /* credits flow once both are up */
        for (int i = 0; i < 4; ++i) {
            progress();
        }
    }

    void open_pair(unsigned rx = 32, unsigned rx_max = 256)
    {
        open(&m_a, "dbl0:1", rx, rx_max);
        open(&m_b, "dbl1:1", rx, rx_max);
    }

    ucs_status_t send(aptus_conn_t *conn, const std::vector<uint8_t> &v)
    {
        struct iovec iov[2];
        size_t half = v.size() / 2;

        iov[0].iov_base = (void *)v.data();
        iov[0].iov_len  = half;
        iov[1].iov_base = (void *)(v.data() + half);
        iov[1].iov_len  = v.size() - half;
        return conn->wire->ops->send(conn, iov, 2);
    }

    aptus_mem_key_t reg(aptus_conn_wire_t *wire, void *p, size_t len)
    {
        aptus_mem_key_t key;
        void *memh = nullptr;

        EXPECT_EQ(UCS_OK, aptus_verbs_conn_mem_reg(wire, p, len, &key, &memh));
        m_regs.emplace_back(wire, memh);
        return key;
    }
};

TEST_F(verbs_conn, connect_accept)
{
    aptus_conn_t *ca, *cb;

    open_pair();
    connect(&ca, &cb);
    EXPECT_EQ(1u, m_a.wire->stats.connects);
    EXPECT_EQ(1u, m_b.wire->stats.accepts);
    EXPECT_EQ(1u, m_a.wire->num_conns);
    EXPECT_EQ(1u, m_b.wire->num_conns);
    /* the connector is told that the connection completed */
    EXPECT_FALSE(m_a.writable.empty());
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
    EXPECT_EQ(NULL, (void *)m_a.wire->ops->watch_fd);
    EXPECT_EQ(0, m_a.wire->ops->peer_pid(ca));

    size_t state, kernel;
    unsigned fds;
    m_a.wire->ops->conn_resources(ca, &state, &kernel, &fds);
    EXPECT_GT(state, 0u);
    EXPECT_EQ(64u, kernel);
    EXPECT_EQ(0u, fds);

    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

/* The shared receive queue's buffers go on the HCA's NUMA node (a fake
 * sysfs gives dbl1 node 1; the binding call records), and messages arrive
 * in them. */
TEST_F(verbs_conn, srq_and_send_buffers_go_on_the_hcas_node)
{
    numa_fake fake;
    fake.set("infiniband", "dbl1", "1");
    aptus_conn_t *ca, *cb;

    open(&m_a, "dbl0:1", 32, 256, aptus_verbs_numa_node("dbl0:1"));
    EXPECT_TRUE(numa_fake_calls().empty()); /* dbl0 has no node */
    open(&m_b, "dbl1:1", 32, 256, aptus_verbs_numa_node("dbl1:1"));
    unsigned others = 0;
    /* the receive buffers, and the send buffers (64 of at least 8 KB) */
    EXPECT_GT(fake.bytes_on(1, &others), 32u * MAX_FRAME + 64u * 8192);
    EXPECT_EQ(0u, others);
    connect(&ca, &cb);
    ASSERT_EQ(UCS_OK, send(ca, pattern(MAX_FRAME, 3)));
    ASSERT_TRUE(run_until([&] { return m_b.msgs.size() == 1; }));
    EXPECT_EQ(pattern(MAX_FRAME, 3), m_b.msgs[0].data);
}

TEST_F(verbs_conn, sizes_in_order)
{
    aptus_conn_t *ca, *cb;
    std::vector<size_t> sizes;

    open_pair();
    connect(&ca, &cb);
    for (size_t n = 0; n <= MAX_FRAME; n += (n < 300) ? 1 : 97) {
        sizes.push_back(n);
    }
    sizes.push_back(MAX_FRAME);
    size_t next = 0;
    while (next < sizes.size()) {
        ucs_status_t st = send(ca, pattern(sizes[next], (unsigned)next));
        if (st == UCS_ERR_NO_RESOURCE) {
            progress();
            continue;
        }
        ASSERT_EQ(UCS_OK, st);
        ++next;
    }
    /* and one the other way */
    ASSERT_EQ(UCS_OK, send(cb, pattern(MAX_FRAME, 7)));
    ASSERT_TRUE(run_until([&] {
        return (m_b.msgs.size() == sizes.size()) && (m_a.msgs.size() == 1);
    }));
    for (size_t i = 0; i < sizes.size(); ++i) {
        ASSERT_EQ(pattern(sizes[i], (unsigned)i), m_b.msgs[i].data) << i;
        EXPECT_EQ(cb, m_b.msgs[i].conn);
    }
    EXPECT_EQ(pattern(MAX_FRAME, 7), m_a.msgs[0].data);
    EXPECT_FALSE(m_b.bad_position);
    EXPECT_FALSE(m_a.bad_position);
    /* larger than max_frame: refused */
    std::vector<uint8_t> big(MAX_FRAME + 1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, send(ca, big));
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(0u, st.rc_rnr);
    EXPECT_EQ(0u, m_b.wire->stats.rx_pool_in_use);
    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

TEST_F(verbs_conn, queued_before_connected)
{
    aptus_conn_t *ca;

    open_pair();
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr, nullptr, &ca));
    for (unsigned i = 0; i < 20; ++i) {
        ASSERT_EQ(UCS_OK, send(ca, pattern(100 + i * 300, i)));
    }
    EXPECT_GT(m_a.wire->ops->backlog(ca), 0u);
    EXPECT_EQ(20u, m_a.wire->stats.tx_queued);
    ASSERT_TRUE(run_until([&] { return m_b.msgs.size() == 20; }));
    for (unsigned i = 0; i < 20; ++i) {
        EXPECT_EQ(pattern(100 + i * 300, i), m_b.msgs[i].data);
    }
    EXPECT_EQ(0u, m_a.wire->ops->backlog(ca));
    ca->wire->ops->conn_close(ca);
    m_b.accepted[0]->wire->ops->conn_close(m_b.accepted[0]);
}

/* Over the connection before it is up: a write waits in order behind the
 * messages before it, a read is to be asked again. */
TEST_F(verbs_conn, rma_conn_before_connected)
{
    std::vector<uint8_t> target(10000, 0);
    aptus_conn_t *ca;
    rma_req wreq, rreq;

    open_pair();
    aptus_mem_key_t key = reg(m_b.wire, target.data(), target.size());
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr, nullptr, &ca));
    ASSERT_EQ(UCS_OK, send(ca, pattern(100, 1)));
    std::vector<uint8_t> src = pattern(9000, 4);
    struct iovec iov         = { src.data(), src.size() };
    wreq.done                = rma_done;
    rreq.done                = rma_done;
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->write_conn(ca, &key, key.address, &iov, 1, &wreq));
    std::vector<uint8_t> back(100);
    struct iovec riov = { back.data(), back.size() };
    EXPECT_EQ(UCS_ERR_NO_RESOURCE,
              m_a.wire->ops->read_conn(ca, &key, key.address, &riov, 1, &rreq));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, m_a.wire->ops->key_check(ca, &key));
    EXPECT_EQ(1u, m_a.wire->ops->reads_outstanding(ca));
    ASSERT_TRUE(run_until([&] { return wreq.calls == 1; }));
    EXPECT_EQ(UCS_OK, wreq.status);
    EXPECT_EQ(0, memcmp(target.data(), src.data(), src.size()));
    EXPECT_EQ(1u, m_b.msgs.size());
    /* the refused read is asked again when the writable handler says so */
    ASSERT_TRUE(run_until([&] {
        return std::count(m_a.writable.begin(), m_a.writable.end(), ca) > 0;
    }));
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->read_conn(ca, &key, key.address, &riov, 1, &rreq));
    ASSERT_TRUE(run_until([&] { return rreq.calls == 1; }));
    EXPECT_EQ(UCS_OK, rreq.status);
    EXPECT_EQ(0, memcmp(back.data(), src.data(), back.size()));
    ca->wire->ops->conn_close(ca);
    m_b.accepted[0]->wire->ops->conn_close(m_b.accepted[0]);
}

TEST_F(verbs_conn, many_conns_one_srq)
{
    const unsigned n = 24;
    std::vector<aptus_conn_t *> cas(n), cbs(n);
    unsigned live_before;

    /* b's pool: 8 buffers, growing to 64 for 24 connections */
    open(&m_a, "dbl0:1");
    open(&m_b, "dbl1:1", 8, 64);
    live_before = ibv_double_live();
    for (unsigned i = 0; i < n; ++i) {
        connect(&cas[i], &cbs[i]);
    }
    /* per connection: a QP and a credit word's registration, each side;
     * and the receive pools' chunks */
    EXPECT_GE(ibv_double_live(), live_before + 4 * n);
    EXPECT_LE(ibv_double_live(), live_before + 4 * n + 20);
    for (unsigned r = 0; r < 10; ++r) {
        for (unsigned i = 0; i < n; ++i) {
            ASSERT_EQ(UCS_OK, send(cas[i], pattern(500 + i, r * n + i)));
        }
    }
    ASSERT_TRUE(run_until([&] { return m_b.msgs.size() == 10 * n; }));
    std::vector<unsigned> seen(n, 0);
    for (auto &m : m_b.msgs) {
        unsigned i = 0;
        while (cbs[i] != m.conn) {
            ++i;
        }
        EXPECT_EQ(pattern(500 + i, seen[i] * n + i), m.data);
        ++seen[i];
    }
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(0u, st.rc_rnr);
    EXPECT_TRUE(m_a.failed.empty());
    for (unsigned i = 0; i < n; ++i) {
        cas[i]->wire->ops->conn_close(cas[i]);
        cbs[i]->wire->ops->conn_close(cbs[i]);
    }
}

/* The receiver holds every buffer: the pool is at its ceiling, nothing
 * posted is left. The sender queues (then gets NO_RESOURCE), loses
 * nothing, does not fail; once the buffers come back all arrive. */
TEST_F(verbs_conn, credits_exhausted)
{
    aptus_conn_t *ca, *cb;
    unsigned sent = 0, refused = 0;

    open(&m_a, "dbl0:1");
    open(&m_b, "dbl1:1", 4, 8);
    connect(&ca, &cb);
    m_b.hold = true;
    for (unsigned i = 0; i < 200; ++i) {
        ucs_status_t st = send(ca, pattern(1000, i));
        if (st == UCS_ERR_NO_RESOURCE) {
            ++refused;
            break;
        }
        ASSERT_EQ(UCS_OK, st);
        ++sent;
        progress();
    }
    for (int i = 0; i < 50; ++i) {
        progress();
    }
    EXPECT_GT(refused, 0u);
    EXPECT_LE(m_b.msgs.size(), 8u); /* all the pool holds */
    EXPECT_GT(m_a.wire->ops->backlog(ca), 0u);
    EXPECT_GT(m_b.wire->stats.rx_pool_empty, 0u);
    EXPECT_TRUE(m_a.failed.empty());
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(0u, st.rc_rnr) << "the sender overran the SRQ";

    m_b.hold = false;
    m_b.release_held();
    ASSERT_TRUE(run_until([&] { return m_b.msgs.size() == sent; }));
    for (unsigned i = 0; i < sent; ++i) {
        EXPECT_EQ(pattern(1000, i), m_b.msgs[i].data);
    }
    EXPECT_FALSE(m_a.writable.empty());
    EXPECT_TRUE(m_a.failed.empty());
    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

/* The same without credits: the double fails the sender with RNR, so the
 * test above cannot pass for want of a strict double. */
TEST_F(verbs_conn, unpaced_sender_fails)
{
    aptus_conn_t *ca, *cb;

    open(&m_a, "dbl0:1");
    open(&m_b, "dbl1:1", 4, 8);
    connect(&ca, &cb);
    m_b.hold = true;
    aptus_verbs_conn_set_unpaced(m_a.wire, 1);
    for (unsigned i = 0; (i < 50) && m_a.failed.empty(); ++i) {
        (void)send(ca, pattern(1000, i));
        progress();
    }
    ASSERT_EQ(1u, m_a.failed.size());
    EXPECT_EQ(ca, m_a.failed[0].first);
    EXPECT_NE(UCS_ERR_NOT_CONNECTED, m_a.failed[0].second);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_GT(st.rc_rnr, 0u);
    EXPECT_NE(UCS_OK, send(ca, pattern(10, 0)));
    m_b.hold = false;
    m_b.release_held();
    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

TEST_F(verbs_conn, setup_loss)
{
    aptus_conn_t *ca[4];

    open_pair();
    /* half the setup datagrams lost, some reordered */
    ibv_double_ud_fault(0.5, 0.2, 12345);
    for (auto &c : ca) {
        ASSERT_EQ(UCS_OK, m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr,
                                                 nullptr, &c));
        ASSERT_EQ(UCS_OK, send(c, pattern(333, 1)));
    }
    ASSERT_TRUE(run_until([&] {
        ibv_double_flush();
        return ((m_b.accepted.size() == 4) && (m_b.msgs.size() == 4)) ||
               !m_a.failed.empty();
    }));
    ASSERT_TRUE(m_a.failed.empty());
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_GT(st.ud_fault_drop, 5u);
    EXPECT_GT(st.ud_fault_reorder, 0u);
    ibv_double_ud_fault(0, 0, 0);
    for (unsigned i = 0; i < 4; ++i) {
        ca[i]->wire->ops->conn_close(ca[i]);
        m_b.accepted[i]->wire->ops->conn_close(m_b.accepted[i]);
    }
}

/* Setup datagrams forged from a bare UD QP: a replayed REQ makes one
 * half-open setup, a flood at most the wire's bound, none is accepted. */
TEST_F(verbs_conn, forged_req_flood_bounded)
{
    aptus_dgram_wire_config_t dc;
    aptus_dgram_wire_t *d = nullptr;

    open(&m_b, "dbl1:1");
    open(&m_a, "dbl0:1");
    memset(&dc, 0, sizeof(dc));
    dc.mtu          = 256;
    dc.rx_queue_len = 16;
    dc.tx_queue_len = 16;
    ASSERT_EQ(UCS_OK, aptus_verbs_dgram_open("dbl0:1", &dc, &d));
    m_dgrams.push_back(d);

    auto forge = [&](uint64_t id) {
        uint8_t buf[32] = {};
        uint32_t u32    = htobe32(0x41564331u);
        uint64_t u64    = htobe64(id);
        memcpy(buf, &u32, 4);
        buf[4] = 1; /* REQ */
        memcpy(buf + 8, &u64, 8);
        u32 = htobe32(0x123456);
        memcpy(buf + 16, &u32, 4);
        struct iovec iov    = { buf, sizeof(buf) };
        aptus_dgram_tx_t tx = { &m_b.wire->addr, &iov, 1 };
        unsigned sent;
        while (d->ops->send(d, &tx, 1, &sent) == UCS_ERR_NO_RESOURCE) {
            d->ops->progress(d, 0);
        }
        m_b.wire->ops->progress(m_b.wire);
    };

    /* the first one also makes an address handle each way */
    forge(77);
    unsigned live = ibv_double_live();
    for (int i = 0; i < 20; ++i) {
        forge(77); /* replayed: still one setup */
    }
    EXPECT_EQ(live, ibv_double_live());
    /* each setup: its QP and its credit word's registration */
    for (uint64_t id = 1000; id < 3000; ++id) {
        forge(id);
    }
    EXPECT_LE(ibv_double_live(), live + 2 * 63);
    EXPECT_GT(ibv_double_live(), live + 2 * 62);
    EXPECT_TRUE(m_b.accepted.empty());

    /* a genuine connection still comes up beside them */
    aptus_conn_t *ca;
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr, nullptr, &ca));
    ASSERT_TRUE(run_until([&] { return m_b.accepted.size() == 1; }));
    /* the genuine one pushed the oldest forged setup out: beside the
     * bound, its connector's QP, registration and address handle */
    EXPECT_LE(ibv_double_live(), live + 2 * 63 + 3);
    ca->wire->ops->conn_close(ca);
    m_b.accepted[0]->wire->ops->conn_close(m_b.accepted[0]);
}

TEST_F(verbs_conn, rdma_write_read_imm)
{
    aptus_conn_t *ca, *cb;
    std::vector<uint8_t> target(100000, 0);
    std::vector<uint8_t> got;

    open_pair();
    connect(&ca, &cb);
    aptus_mem_key_t key = reg(m_b.wire, target.data(), target.size());
    EXPECT_EQ((uintptr_t)target.data(), key.address);
    EXPECT_EQ(m_b.wire->host_id, key.host_id);
    EXPECT_EQ(m_a.wire->host_id, key.host_id); /* one fabric */
    EXPECT_TRUE(m_a.wire->ops->key_reachable(ca, &key));

    /* a write larger than a send buffer, from two pieces */
    std::vector<uint8_t> src = pattern(50000, 3);
    struct iovec iov[2]      = { { src.data(), 20000 },
                                 { src.data() + 20000, 30000 } };
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->write(ca, &key, key.address + 1000, iov, 2));
    ASSERT_TRUE(run_until(
        [&] { return !memcmp(target.data() + 1000, src.data(), src.size()); }));

    /* read it back, into two pieces */
    std::vector<uint8_t> back(50000);
    struct iovec riov[2] = { { back.data(), 123 },
                             { back.data() + 123, 50000 - 123 } };
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->read(ca, &key, key.address + 1000, riov, 2));
    EXPECT_EQ(src, back);

    /* write-with-immediate: the data is in place when the immediate runs */
    std::vector<uint8_t> src2 = pattern(3000, 9);
    bool in_place             = false;
    m_b.on_imm                = [&](aptus_conn_t *c, uint32_t imm) {
        in_place = !memcmp(target.data() + 60000, src2.data(), src2.size());
    };
    struct iovec iov2 = { src2.data(), src2.size() };
    ASSERT_EQ(UCS_OK, m_a.wire->ops->write_imm(ca, &key, key.address + 60000,
                                               &iov2, 1, 0xabcdef01u));
    ASSERT_TRUE(run_until([&] { return m_b.imms.size() == 1; }));
    EXPECT_EQ(cb, m_b.imms[0].first);
    EXPECT_EQ(0xabcdef01u, m_b.imms[0].second);
    EXPECT_TRUE(in_place);

    /* refusals: nothing moves */
    std::vector<uint8_t> before = target;
    struct iovec one            = { src.data(), 10 };
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write(ca, &key, key.address + target.size() - 5,
                                   &one, 1));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write(ca, &key, key.address - 1, &one, 1));
    EXPECT_EQ(
        UCS_ERR_INVALID_ADDR,
        m_a.wire->ops->read(ca, &key, key.address + target.size(), &one, 1));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write_imm(ca, &key, key.address + target.size(),
                                       &one, 1, 1));
    aptus_mem_key_t other = key;
    other.host_id ^= 1;
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              m_a.wire->ops->write(ca, &other, key.address, &one, 1));
    EXPECT_FALSE(m_a.wire->ops->key_reachable(ca, &other));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, m_a.wire->ops->key_check(ca, &other));
    for (int i = 0; i < 10; ++i) {
        progress();
    }
    EXPECT_EQ(before, target);
    EXPECT_EQ(5u, m_a.wire->stats.refused);
    EXPECT_TRUE(m_a.failed.empty());

    /* over the connection, with requests */
    rma_req wreq, rreq;
    wreq.done                 = rma_done;
    rreq.done                 = rma_done;
    std::vector<uint8_t> src3 = pattern(5000, 11);
    struct iovec iov3         = { src3.data(), src3.size() };
    ASSERT_EQ(UCS_OK, m_a.wire->ops->write_conn(ca, &key, key.address + 70000,
                                                &iov3, 1, &wreq));
    std::vector<uint8_t> back3(5000);
    struct iovec riov3 = { back3.data(), back3.size() };
    ASSERT_EQ(UCS_OK, m_a.wire->ops->read_conn(ca, &key, key.address + 70000,
                                               &riov3, 1, &rreq));
    EXPECT_EQ(2u, m_a.wire->ops->reads_outstanding(ca));
    ASSERT_TRUE(run_until([&] { return (wreq.calls + rreq.calls) == 2; }));
    EXPECT_EQ(UCS_OK, wreq.status);
    EXPECT_EQ(UCS_OK, rreq.status);
    EXPECT_EQ(src3, back3);
    EXPECT_EQ(0u, m_a.wire->ops->reads_outstanding(ca));
    EXPECT_EQ(1, wreq.calls);
    EXPECT_EQ(1, rreq.calls);

    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(0u, st.rc_rnr);
    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

TEST_F(verbs_conn, write_ordered)
{
    aptus_conn_t *ca, *cb;
    std::vector<uint8_t> target(20000, 0);

    open_pair();
    connect(&ca, &cb);
    aptus_mem_key_t key = reg(m_b.wire, target.data(), target.size());
    aptus_conn_piece_t pieces[2];
    std::vector<uint8_t> body = pattern(16000, 5);
    uint64_t flag             = 0x1122334455667788ull;

    /* not yet checked on a connection: no connection is known for it */
    pieces[0] = { body.data(), key.address, body.size() };
    pieces[1] = { &flag, key.address + 16384, sizeof(flag) };
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              m_a.wire->ops->write_ordered(m_a.wire, &key, pieces, 2));
    ASSERT_EQ(UCS_OK, m_a.wire->ops->key_check(ca, &key));
    ASSERT_EQ(UCS_OK, m_a.wire->ops->write_ordered(m_a.wire, &key, pieces, 2));
    ASSERT_TRUE(run_until(
        [&] { return !memcmp(target.data() + 16384, &flag, sizeof(flag)); }));
    /* the flag is the last piece: once it is seen, the body is there */
    EXPECT_EQ(0, memcmp(target.data(), body.data(), body.size()));

    /* out of bounds: refused, nothing written */
    flag      = 0;
    pieces[1] = { &flag, key.address + target.size() - 4, sizeof(flag) };
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write_ordered(m_a.wire, &key, pieces, 2));
    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

TEST_F(verbs_conn, peer_close)
{
    aptus_conn_t *ca, *cb;

    open_pair();
    connect(&ca, &cb);
    ASSERT_EQ(UCS_OK, send(ca, pattern(100, 1)));
    ca->wire->ops->conn_close(ca);
    ASSERT_TRUE(run_until([&] { return !m_b.failed.empty(); }));
    EXPECT_EQ(cb, m_b.failed[0].first);
    EXPECT_EQ(UCS_ERR_NOT_CONNECTED, m_b.failed[0].second);
    EXPECT_EQ(1u, m_b.msgs.size()); /* what came before the close */
    EXPECT_EQ(1u, m_b.wire->stats.peer_closes);
    EXPECT_NE(UCS_OK, send(cb, pattern(10, 2)));
    cb->wire->ops->conn_close(cb);
    EXPECT_EQ(0u, m_a.wire->num_conns);
    EXPECT_EQ(0u, m_b.wire->num_conns);
}

/* Connections come and go on a pool of 8 buffers: what a closed one had
 * been granted comes back to the pool, so every new one gets credits. */
TEST_F(verbs_conn, closed_conns_give_credits_back)
{
    open(&m_a, "dbl0:1");
    open(&m_b, "dbl1:1", 4, 8);
    for (unsigned round = 0; round < 20; ++round) {
        aptus_conn_t *ca, *cb;
        size_t before = m_b.msgs.size();

        connect(&ca, &cb);
        for (unsigned i = 0; i < 5; ++i) {
            ASSERT_EQ(UCS_OK, send(ca, pattern(700, round * 5 + i)));
        }
        /* half the rounds close from the receiving side, half from the
         * sending side while messages may still be queued */
        ASSERT_TRUE(run_until([&] { return m_b.msgs.size() == before + 5; }, 5))
            << round;
        if (round % 2) {
            cb->wire->ops->conn_close(cb);
            ASSERT_TRUE(run_until([&] { return !m_a.failed.empty(); }, 5));
            m_a.failed.clear();
            ca->wire->ops->conn_close(ca);
        } else {
            ca->wire->ops->conn_close(ca);
            ASSERT_TRUE(run_until([&] { return !m_b.failed.empty(); }, 5));
            m_b.failed.clear();
            cb->wire->ops->conn_close(cb);
        }
    }
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(0u, st.rc_rnr);
}

/* A peer whose frames are larger than this wire's buffers (its max_frame
 * is larger): the receive fails, the connection is cut at both ends. */
TEST_F(verbs_conn, frame_too_large_cuts)
{
    aptus_conn_t *ca, *cb;

    open(&m_a, "dbl0:1");
    aptus_conn_wire_config_t c = config(&m_b);
    c.max_frame                = 1024;
    ASSERT_EQ(UCS_OK, aptus_verbs_conn_open("dbl1:1", &c, &m_b.wire));
    aptus_verbs_conn_set_test_clock(m_b.wire, &m_clock);
    connect(&ca, &cb);
    ASSERT_EQ(UCS_OK, send(ca, pattern(1024, 1)));
    ASSERT_EQ(UCS_OK, send(ca, pattern(1025, 2)));
    ASSERT_TRUE(
        run_until([&] { return !m_a.failed.empty() && !m_b.failed.empty(); }));
    ASSERT_EQ(1u, m_b.msgs.size());
    EXPECT_EQ(pattern(1024, 1), m_b.msgs[0].data);
    EXPECT_EQ(1u, m_b.wire->stats.rx_malformed);
    EXPECT_NE(UCS_ERR_NOT_CONNECTED, m_b.failed[0].second);
    EXPECT_NE(UCS_ERR_NOT_CONNECTED, m_a.failed[0].second);
    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

/* The failed handler closes every connection, the one it is told about
 * and another broken one not yet told: the other is never told. */
TEST_F(verbs_conn, failed_handler_closes_others)
{
    aptus_conn_t *ca[2], *cb[2];

    open_pair();
    connect(&ca[0], &cb[0]);
    connect(&ca[1], &cb[1]);
    m_b.on_failed = [&](aptus_conn_t *) {
        for (auto *&c : cb) {
            if (c != nullptr) {
                c->wire->ops->conn_close(c);
                c = nullptr;
            }
        }
    };
    ca[0]->wire->ops->conn_close(ca[0]);
    ca[1]->wire->ops->conn_close(ca[1]);
    ASSERT_TRUE(run_until([&] { return !m_b.failed.empty(); }));
    for (int i = 0; i < 10; ++i) {
        progress();
    }
    EXPECT_EQ(1u, m_b.failed.size());
    EXPECT_EQ(UCS_ERR_NOT_CONNECTED, m_b.failed[0].second);
    EXPECT_EQ(0u, m_b.wire->num_conns);
}

/* A peer gone without a word (its wire closed): the next send fails. */
TEST_F(verbs_conn, peer_vanished)
{
    aptus_conn_t *ca, *cb;

    open_pair();
    connect(&ca, &cb);
    m_b.wire->ops->close(m_b.wire);
    m_b.wire = nullptr;
    ASSERT_EQ(UCS_OK, send(ca, pattern(100, 1)));
    for (int i = 0; (i < 100) && m_a.failed.empty(); ++i) {
        m_clock += 500;
        m_a.wire->ops->progress(m_a.wire);
    }
    ASSERT_EQ(1u, m_a.failed.size());
    EXPECT_NE(UCS_ERR_NOT_CONNECTED, m_a.failed[0].second);
    EXPECT_EQ(1u, m_a.wire->stats.failures);
    ca->wire->ops->conn_close(ca);
}

TEST_F(verbs_conn, connect_unreachable)
{
    aptus_conn_t *ca;
    aptus_wire_addr_t nowhere;

    open_pair();
    nowhere = m_b.wire->addr;
    nowhere.raw[3] ^= 0x55; /* no such setup QP */
    ASSERT_EQ(UCS_OK, m_a.wire->ops->connect(m_a.wire, &nowhere, nullptr, &ca));
    ASSERT_TRUE(run_until([&] { return !m_a.failed.empty(); }));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, m_a.failed[0].second);
    ca->wire->ops->conn_close(ca);
}

TEST_F(verbs_conn, held_buffers)
{
    aptus_conn_t *ca, *cb;

    open(&m_a, "dbl0:1");
    open(&m_b, "dbl1:1", 8, 32);
    connect(&ca, &cb);
    m_b.hold = true;
    for (unsigned i = 0; i < 6; ++i) {
        ASSERT_EQ(UCS_OK, send(ca, pattern(4000, i)));
    }
    ASSERT_TRUE(run_until([&] { return m_b.msgs.size() == 6; }));
    EXPECT_EQ(6u, m_b.wire->stats.rx_pool_in_use);
    m_b.hold = false;
    for (unsigned i = 6; i < 40; ++i) {
        ASSERT_EQ(UCS_OK, send(ca, pattern(4000, i)));
        progress();
    }
    ASSERT_TRUE(run_until([&] { return m_b.msgs.size() == 40; }));
    /* the held ones are intact in place, though 34 more went through */
    for (unsigned i = 0; i < 6; ++i) {
        const uint8_t *p          = (const uint8_t *)(m_b.held[i] + 1);
        std::vector<uint8_t> want = pattern(4000, i);
        bool found                = false;
        for (size_t off = HEADROOM; off < HEADROOM + 64; ++off) {
            found = found || !memcmp(p + off, want.data(), want.size());
        }
        EXPECT_TRUE(found) << i;
    }
    EXPECT_GE(m_b.wire->stats.rx_pool_peak, 6u);
    m_b.release_held();
    EXPECT_EQ(0u, m_b.wire->stats.rx_pool_in_use);
    ibv_double_stats_t st;
    ibv_double_get_stats(&st);
    EXPECT_EQ(0u, st.rc_rnr);
    ca->wire->ops->conn_close(ca);
    cb->wire->ops->conn_close(cb);
}

TEST_F(verbs_conn, mem_reg)
{
    std::vector<uint8_t> mem(4096);
    aptus_mem_key_t key;
    void *memh = nullptr;

    open(&m_a, "dbl0:1");
    unsigned live = ibv_double_live();
    ASSERT_EQ(UCS_OK, aptus_verbs_conn_mem_reg(m_a.wire, mem.data(), mem.size(),
                                               &key, &memh));
    EXPECT_EQ(live + 1, ibv_double_live());
    EXPECT_EQ(mem.size(), key.length);
    EXPECT_EQ(ibv_double_lid(0), (uint16_t)(key.token >> 32));
    aptus_verbs_conn_mem_dereg(m_a.wire, memh);
    EXPECT_EQ(live, ibv_double_live());
}

} // namespace
