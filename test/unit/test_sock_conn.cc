/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the sock wire's connection part (src/wire/sock/sock_conn.c)
 * used directly, without a UCT interface: two wires on "lo" in one process,
 * real TCP connections between them, raw TCP clients that misbehave, and
 * one-sided operations into this process's own memory.
 */
#include "test_util.h"

#include <gtest/gtest.h>

extern "C" {
#include "wire/sock/sock_conn.h"
#include "wire/sock/sock_dgram.h"
#include "wire/sock/sock_frame.h"
#include <ucs/time/time.h> /* first: it brings UCX's config.h */
#include <ucs/debug/log_def.h>
}

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <functional>
#include <iostream>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace
{

const size_t MAX_FRAME   = 8196;
const size_t HEADROOM    = 40;
const size_t MAX_BACKLOG = 256 * 1024;
/* one pool buffer's receive area: a frame header and the largest frame */
const size_t AREA = APTUS_FRAME_HDR_LEN + MAX_FRAME;

/* Payload sizes whose frames (header included) are multiples of 3. The
 * receive area (8200 bytes) is not, so a stream of such frames never ends
 * a full read exactly at the area's end; that case has tests of its own
 * (exact_fill_*). */
size_t len3(size_t n)
{
    return 3 * n + 2;
}

/* One wire and what its handlers saw. */
struct side {
    struct msg {
        aptus_conn_t *conn;
        std::vector<uint8_t> data;
        int at_start;
        aptus_conn_buf_t *buf;
    };
    struct held_msg {
        aptus_conn_buf_t *buf;
        const uint8_t *data;
        std::vector<uint8_t> copy;
    };

    aptus_conn_wire_t *wire = nullptr;
    std::vector<aptus_conn_t *> accepted;
    std::vector<msg> msgs;
    std::vector<std::pair<aptus_conn_t *, uint32_t>> imms;
    std::vector<aptus_conn_t *> writable;
    std::vector<std::pair<aptus_conn_t *, ucs_status_t>> failed;
    std::vector<std::string> events; /* "m<n>" / "i<imm>", in order */

    bool hold          = false; /* hold every buffer a message starts */
    bool close_on_fail = false;
    std::vector<held_msg> held;
    std::function<void(aptus_conn_t *, uint32_t)> on_imm;
    std::function<void(aptus_conn_t *, size_t)> on_recv;
    std::function<void(aptus_conn_t *)> on_accept, on_writable;
    bool bad_position = false; /* at_start data not where it should be */

    void release_held()
    {
        for (auto &h : held) {
            aptus_conn_buf_release(h.buf);
        }
        held.clear();
    }

    size_t msgs_on(aptus_conn_t *conn) const
    {
        return std::count_if(msgs.begin(), msgs.end(),
                             [conn](const msg &m) { return m.conn == conn; });
    }
};

void h_accepted(void *arg, aptus_conn_t *conn)
{
    side *s = static_cast<side *>(arg);
    s->accepted.push_back(conn);
    if (s->on_accept) {
        s->on_accept(conn);
    }
}

void h_recv(void *arg, aptus_conn_t *conn, void *data, size_t length,
            aptus_conn_buf_t *buf, int at_start)
{
    side *s          = static_cast<side *>(arg);
    const uint8_t *p = static_cast<const uint8_t *>(data);

    if ((buf == nullptr) || (buf->wire != conn->wire) || (buf->refs == 0)) {
        s->bad_position = true;
    } else if (at_start && (p != (uint8_t *)aptus_conn_buf_area(buf, HEADROOM) +
                                     APTUS_FRAME_HDR_LEN)) {
        s->bad_position = true;
    }
    s->msgs.push_back(
        { conn, std::vector<uint8_t>(p, p + length), at_start, buf });
    s->events.push_back("m" + std::to_string(s->msgs.size() - 1));
    if (s->hold && at_start) {
        aptus_conn_buf_hold(buf);
        s->held.push_back({ buf, p, std::vector<uint8_t>(p, p + length) });
    }
    if (s->on_recv) {
        s->on_recv(conn, s->msgs.size() - 1);
    }
}

void h_imm(void *arg, aptus_conn_t *conn, uint32_t imm)
{
    side *s = static_cast<side *>(arg);
    s->imms.emplace_back(conn, imm);
    s->events.push_back("i" + std::to_string(imm));
    if (s->on_imm) {
        s->on_imm(conn, imm);
    }
}

void h_writable(void *arg, aptus_conn_t *conn)
{
    side *s = static_cast<side *>(arg);
    s->writable.push_back(conn);
    if (s->on_writable) {
        s->on_writable(conn);
    }
}

void h_failed(void *arg, aptus_conn_t *conn, ucs_status_t status)
{
    side *s = static_cast<side *>(arg);
    s->failed.emplace_back(conn, status);
    s->events.push_back("f");
    if (s->close_on_fail) {
        conn->wire->ops->conn_close(conn);
    }
}

const aptus_conn_handlers_t handlers = { h_accepted, h_recv, h_imm, h_writable,
                                         h_failed };

/* A plain TCP client of a wire's listening address. */
int raw_connect(const aptus_conn_wire_t *wire)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1;

    aptus_sock_addr_from_wire(&wire->addr, &ss, &len);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    /* the listen backlog completes the handshake before any accept */
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        close(fd);
        return -1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

bool raw_send(int fd, const std::vector<uint8_t> &bytes)
{
    size_t off = 0;
    while (off < bytes.size()) {
        ssize_t n =
            send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n <= 0) {
            return false;
        }
        off += n;
    }
    return true;
}

std::vector<uint8_t> frame(unsigned type, const std::vector<uint8_t> &payload)
{
    std::vector<uint8_t> f(APTUS_FRAME_HDR_LEN + payload.size());
    aptus_frame_hdr_pack(f.data(), type, payload.size());
    std::copy(payload.begin(), payload.end(), f.begin() + APTUS_FRAME_HDR_LEN);
    return f;
}

aptus_mem_key_t key_of(const aptus_conn_wire_t *wire, const void *p,
                       size_t length)
{
    aptus_mem_key_t key;
    key.address = (uintptr_t)p;
    key.length  = length;
    key.host_id = wire->host_id;
    key.pid     = getpid();
    return key;
}

/* Counts the errors the wire logs while a test provokes them, instead of
 * printing them. */
unsigned logged_errors = 0;

ucs_log_func_rc_t count_errors(const char *file, unsigned line,
                               const char *function, ucs_log_level_t level,
                               const ucs_log_component_config_t *comp_conf,
                               const char *message, va_list ap)
{
    if (level <= UCS_LOG_LEVEL_ERROR) {
        ++logged_errors;
        return UCS_LOG_FUNC_RC_STOP;
    }
    return UCS_LOG_FUNC_RC_CONTINUE;
}

} // namespace

class sock_conn : public ::testing::Test
{
  protected:
    void TearDown() override
    {
        for (side *s : { &m_a, &m_b, &m_c }) {
            s->release_held();
            if (s->wire != nullptr) {
                s->wire->ops->close(s->wire);
                s->wire = nullptr;
            }
        }
        for (int fd : m_raw) {
            close(fd);
        }
    }

    void open(side &s, unsigned rx_buffers = 64,
              size_t max_backlog = MAX_BACKLOG)
    {
        aptus_conn_wire_config_t cfg = {}; /* rx_max_buffers 0: a fixed pool */
        cfg.max_frame                = MAX_FRAME;
        cfg.rx_headroom              = HEADROOM;
        cfg.rx_buffers               = rx_buffers;
        cfg.max_backlog              = max_backlog;
        cfg.handlers                 = &handlers;
        cfg.arg                      = &s;
        cfg.numa_node                = -1;
        ASSERT_EQ(UCS_OK, aptus_sock_conn_open("lo", &cfg, &s.wire));
        ASSERT_NE(nullptr, s.wire);
    }

    void progress()
    {
        for (side *s : { &m_a, &m_b, &m_c }) {
            if (s->wire != nullptr) {
                s->wire->ops->progress(s->wire);
            }
        }
    }

    template <typename Pred> bool wait_for(Pred pred, double seconds = 5)
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

    /* A plain TCP client of b (kept in m_raw), once b accepted it: its fd,
     * and b's end in *conn_p. */
    void raw_client_of_b(int *fd_p, aptus_conn_t **conn_p)
    {
        int fd = raw_connect(m_b.wire);
        ASSERT_GE(fd, 0);
        m_raw.push_back(fd);
        ASSERT_TRUE(wait_for([&] { return m_b.accepted.size() == 1; }));
        *fd_p   = fd;
        *conn_p = m_b.accepted[0];
    }

    /* b's PROVE_REQ, read off a raw client's connection: *f points into
     * req. */
    void read_prove_req(int fd, std::vector<uint8_t> &req, aptus_frame_t *f)
    {
        req.resize(APTUS_FRAME_HDR_LEN + APTUS_FRAME_PROVE_REQ_LEN);
        size_t got = 0;
        while (got < req.size()) {
            ssize_t n = recv(fd, req.data() + got, req.size() - got, 0);
            ASSERT_GT(n, 0);
            got += n;
        }
        ASSERT_EQ(APTUS_FRAME_OK,
                  aptus_frame_parse(req.data(), req.size(), MAX_FRAME, f));
        ASSERT_EQ((unsigned)APTUS_FRAME_TYPE_PROVE_REQ, f->type);
    }

    /* A client's connection to the rendezvous socket b's PROVE_REQ f
     * names (f.payload: the name, little-endian as x86, then the
     * challenge). */
    int prove_rendezvous(const aptus_frame_t &f)
    {
        uint64_t name;
        memcpy(&name, f.payload, sizeof(name));
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        int len        = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
                                  "aptus-conn-%016" PRIx64, name);
        int ufd        = socket(AF_UNIX, SOCK_STREAM, 0);
        EXPECT_GE(ufd, 0);
        EXPECT_EQ(0, connect(ufd, (struct sockaddr *)&sun,
                             offsetof(struct sockaddr_un, sun_path) + 1 + len));
        return ufd;
    }

    /* The answer to f for the TCP connection fd: the challenge and this
     * end's view of the connection, local address first. */
    std::vector<uint8_t> prove_answer(const aptus_frame_t &f, int fd)
    {
        std::vector<uint8_t> msg(f.payload + 8,
                                 f.payload + 8 + APTUS_FRAME_CHALLENGE_LEN);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        aptus_wire_addr_t a;
        EXPECT_EQ(0, getsockname(fd, (struct sockaddr *)&ss, &sl));
        aptus_sock_addr_to_wire((struct sockaddr *)&ss, &a);
        msg.insert(msg.end(), a.raw, a.raw + APTUS_WIRE_ADDR_LEN);
        sl = sizeof(ss);
        EXPECT_EQ(0, getpeername(fd, (struct sockaddr *)&ss, &sl));
        aptus_sock_addr_to_wire((struct sockaddr *)&ss, &a);
        msg.insert(msg.end(), a.raw, a.raw + APTUS_WIRE_ADDR_LEN);
        return msg;
    }

    /* Connect from a to b; returns a's end once b accepted it. */
    aptus_conn_t *connect_ab(void *user = nullptr)
    {
        aptus_conn_t *conn = nullptr;
        size_t accepted    = m_b.accepted.size();
        EXPECT_EQ(UCS_OK, m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr,
                                                 user, &conn));
        EXPECT_NE(nullptr, conn);
        EXPECT_TRUE(wait_for([&] { return m_b.accepted.size() > accepted; }));
        return conn;
    }

    /* Open both wires, connect, and make sure both ends are up (a ping
     * each way); then forget what the handlers saw. */
    void establish()
    {
        open(m_a);
        open(m_b);
        m_ab = connect_ab();
        ASSERT_NE(nullptr, m_ab);
        ASSERT_EQ(1u, m_b.accepted.size());
        m_ba = m_b.accepted[0];
        ASSERT_EQ(UCS_OK, send(m_ab, { 1 }));
        ASSERT_EQ(UCS_OK, send(m_ba, { 2 }));
        ASSERT_TRUE(wait_for(
            [&] { return (m_a.msgs.size() == 1) && (m_b.msgs.size() == 1); }));
        /* each end knows the other's pid (this process) from the kernel */
        ASSERT_TRUE(wait_for([&] {
            return (m_a.wire->ops->peer_pid(m_ab) != 0) &&
                   (m_b.wire->ops->peer_pid(m_ba) != 0);
        }));
        for (side *s : { &m_a, &m_b }) {
            s->msgs.clear();
            s->events.clear();
            s->writable.clear();
        }
    }

    /* Send one message gathered from up to three pieces. */
    ucs_status_t send(aptus_conn_t *conn, const std::vector<uint8_t> &data)
    {
        struct iovec iov[3];
        size_t cut1 = data.size() / 3, cut2 = data.size() - data.size() / 4;
        uint8_t *p = const_cast<uint8_t *>(data.data());
        iov[0]     = { p, cut1 };
        iov[1]     = { p + cut1, cut2 - cut1 };
        iov[2]     = { p + cut2, data.size() - cut2 };
        return conn->wire->ops->send(conn, iov, 3);
    }

    /* Send, progressing while the backlog is full. */
    void send_wait(aptus_conn_t *conn, const std::vector<uint8_t> &data)
    {
        ucs_status_t status;
        ASSERT_TRUE(wait_for([&] {
            status = send(conn, data);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(UCS_OK, status);
    }

    void expect_received(const side &s, aptus_conn_t *conn,
                         const std::vector<std::vector<uint8_t>> &sent)
    {
        std::vector<const side::msg *> got;
        for (auto &m : s.msgs) {
            if (m.conn == conn) {
                got.push_back(&m);
            }
        }
        ASSERT_EQ(sent.size(), got.size());
        for (size_t i = 0; i < sent.size(); ++i) {
            ASSERT_EQ(sent[i], got[i]->data) << "message " << i;
        }
        EXPECT_FALSE(s.bad_position);
    }

    side m_a, m_b, m_c;
    aptus_conn_t *m_ab = nullptr, *m_ba = nullptr;
    std::vector<int> m_raw;
};

TEST_F(sock_conn, open_validates_config)
{
    aptus_conn_wire_config_t cfg = {};
    cfg.max_frame                = 0;
    cfg.rx_headroom              = HEADROOM;
    cfg.rx_buffers               = 4;
    cfg.max_backlog              = MAX_BACKLOG;
    cfg.handlers                 = &handlers;
    cfg.arg                      = &m_a;
    aptus_conn_wire_t *wire      = nullptr;
    logged_errors                = 0;
    ucs_log_push_handler(count_errors);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, aptus_sock_conn_open("lo", &cfg, &wire));
    cfg.max_frame = APTUS_FRAME_MAX_LEN + 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, aptus_sock_conn_open("lo", &cfg, &wire));
    cfg.max_frame  = MAX_FRAME;
    cfg.rx_buffers = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, aptus_sock_conn_open("lo", &cfg, &wire));
    cfg.rx_buffers = 4;
    EXPECT_NE(UCS_OK, aptus_sock_conn_open("no_such_netif0", &cfg, &wire));
    ucs_log_pop_handler();
    EXPECT_EQ(nullptr, wire);
    EXPECT_EQ(4u, logged_errors); /* each refusal says why */

    ASSERT_NO_FATAL_FAILURE(open(m_a));
    EXPECT_GE(m_a.wire->rx_buf_size,
              sizeof(aptus_conn_buf_t) + HEADROOM + AREA);
    EXPECT_EQ(0u, m_a.wire->num_conns);
    struct sockaddr_storage ss;
    socklen_t len;
    aptus_sock_addr_from_wire(&m_a.wire->addr, &ss, &len);
    EXPECT_TRUE((ss.ss_family == AF_INET) || (ss.ss_family == AF_INET6));
    EXPECT_NE(0, ((struct sockaddr_in *)&ss)->sin_port);
}

TEST_F(sock_conn, connect_and_exchange)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    int tag            = 0;
    aptus_conn_t *conn = nullptr;
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr, &tag, &conn));
    ASSERT_NE(nullptr, conn);
    EXPECT_EQ(&tag, conn->user);
    EXPECT_EQ(m_a.wire, conn->wire);
    EXPECT_EQ(1u, m_a.wire->num_conns);
    EXPECT_EQ(1u, m_a.wire->stats.connects);

    /* messages may be sent at once: they wait for the connection */
    std::vector<std::vector<uint8_t>> ab, ba;
    for (unsigned i = 0; i < 3; ++i) {
        ab.push_back(pattern(i, 10 + i));
        ASSERT_EQ(UCS_OK, send(conn, ab.back()));
    }
    bool queued = m_a.wire->ops->backlog(conn) > 0;

    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == 3; }));
    ASSERT_EQ(1u, m_b.accepted.size());
    aptus_conn_t *peer = m_b.accepted[0];
    EXPECT_EQ(m_b.wire, peer->wire);
    EXPECT_EQ(1u, m_b.wire->stats.accepts);
    EXPECT_EQ(1u, m_b.wire->num_conns);
    expect_received(m_b, peer, ab);
    if (queued) {
        /* what waited for the connection went out, and the owner knows */
        ASSERT_TRUE(wait_for([&] { return !m_a.writable.empty(); }));
        EXPECT_EQ(conn, m_a.writable.back());
        EXPECT_EQ(0u, m_a.wire->ops->backlog(conn));
    }

    /* both ways, interleaved, of many sizes */
    for (unsigned i = 3; i < 200; ++i) {
        ab.push_back(pattern(i, (i * 37) % 1500));
        send_wait(conn, ab.back());
        ba.push_back(pattern(1000 + i, (i * 53) % 2100));
        send_wait(peer, ba.back());
    }
    ASSERT_TRUE(wait_for([&] {
        return (m_b.msgs.size() == ab.size()) && (m_a.msgs.size() == ba.size());
    }));
    expect_received(m_b, peer, ab);
    expect_received(m_a, conn, ba);
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
    /* and each way the proof of the peer: PROVE_REQ, PROVE_ANS */
    EXPECT_EQ(ab.size() + 2, m_a.wire->stats.tx_frames);
    EXPECT_EQ(ab.size() + 2, m_b.wire->stats.rx_frames);
    EXPECT_EQ(ba.size() + 2, m_a.wire->stats.rx_frames);
    EXPECT_EQ(m_a.wire->stats.tx_bytes, m_b.wire->stats.rx_bytes);
    EXPECT_EQ(m_b.wire->stats.tx_bytes, m_a.wire->stats.rx_bytes);
}

/* Another wire's socket joins the connections' readiness check: progress
 * reports input there (level-triggered: until it is read) and nothing
 * when there is none, while the connections work as before. */
TEST_F(sock_conn, watched_fd_reports_input_with_the_connections)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    int rx = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int tx = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(rx, 0);
    ASSERT_GE(tx, 0);
    m_raw.push_back(rx);
    m_raw.push_back(tx);
    struct sockaddr_in sin = {};
    socklen_t len          = sizeof(sin);
    sin.sin_family         = AF_INET;
    sin.sin_addr.s_addr    = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(0, bind(rx, (struct sockaddr *)&sin, sizeof(sin)));
    ASSERT_EQ(0, getsockname(rx, (struct sockaddr *)&sin, &len));

    int ready = 0;
    ASSERT_NE(nullptr, m_a.wire->ops->watch_fd);
    ASSERT_EQ(UCS_OK, m_a.wire->ops->watch_fd(m_a.wire, rx, &ready));
    EXPECT_EQ(UCS_ERR_ALREADY_EXISTS,
              m_a.wire->ops->watch_fd(m_a.wire, tx, &ready));
    for (int i = 0; i < 10; ++i) {
        m_a.wire->ops->progress(m_a.wire);
    }
    EXPECT_EQ(0, ready) << "no datagram was sent";

    char byte = 7;
    ASSERT_EQ(1, sendto(tx, &byte, 1, 0, (struct sockaddr *)&sin, sizeof(sin)));
    ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(5);
    while (!ready && (ucs_get_time() < deadline)) {
        m_a.wire->ops->progress(m_a.wire);
    }
    EXPECT_EQ(1, ready);
    ready = 0;
    m_a.wire->ops->progress(m_a.wire);
    EXPECT_EQ(1, ready) << "unread input is reported again";
    ASSERT_EQ(1, recv(rx, &byte, 1, 0));
    ready = 0;
    m_a.wire->ops->progress(m_a.wire);
    EXPECT_EQ(0, ready) << "read: nothing to report";

    /* the connections go on as before */
    std::vector<uint8_t> msg = pattern(1, 100);
    send_wait(m_ba, msg);
    ASSERT_TRUE(wait_for([&] { return m_a.msgs.size() == 1; }));
    EXPECT_EQ(0, ready);
}

/* Every size class up to the largest frame, one at a time, both ways. */
TEST_F(sock_conn, sizes_up_to_max_frame)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<size_t> sizes;
    for (size_t n = 0; n <= 64; ++n) {
        sizes.push_back(n);
    }
    for (size_t n = 65; n < MAX_FRAME - 8; n += 61) {
        sizes.push_back(n);
    }
    for (size_t n = MAX_FRAME - 8; n <= MAX_FRAME; ++n) {
        sizes.push_back(n);
    }

    std::vector<std::vector<uint8_t>> ab, ba;
    for (size_t i = 0; i < sizes.size(); ++i) {
        ab.push_back(pattern(i, sizes[i]));
        ASSERT_EQ(UCS_OK, send(m_ab, ab.back()));
        ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == ab.size(); }))
            << "size " << sizes[i];
        ba.push_back(pattern(i + 7, sizes[sizes.size() - 1 - i]));
        ASSERT_EQ(UCS_OK, send(m_ba, ba.back()));
        ASSERT_TRUE(wait_for([&] { return m_a.msgs.size() == ba.size(); }))
            << "size " << sizes[sizes.size() - 1 - i];
    }
    expect_received(m_b, m_ba, ab);
    expect_received(m_a, m_ab, ba);
    /* alone in its buffer, each message starts it */
    for (auto &m : m_b.msgs) {
        EXPECT_TRUE(m.at_start);
    }
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
}

/* A burst of small messages shares receive buffers; a held buffer keeps
 * its bytes while the rest of the stream goes on. */
TEST_F(sock_conn, burst_shares_buffers_and_hold_keeps_bytes)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    m_b.hold = true;
    std::vector<std::vector<uint8_t>> sent;
    size_t total = 0;
    for (unsigned i = 0; i < 600; ++i) {
        sent.push_back(pattern(i, len3(i % 20)));
        total += APTUS_FRAME_HDR_LEN + sent.back().size();
        ASSERT_EQ(UCS_OK, send(m_ab, sent.back()));
    }
    ASSERT_GT(total, 2 * AREA); /* several buffers */
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == sent.size(); }));
    expect_received(m_b, m_ba, sent);

    EXPECT_TRUE(m_b.msgs[0].at_start);
    size_t at_start = 0;
    std::set<aptus_conn_buf_t *> bufs;
    for (auto &m : m_b.msgs) {
        at_start += m.at_start;
        bufs.insert(m.buf);
    }
    EXPECT_GE(at_start, 2u);
    EXPECT_LT(at_start, sent.size() / 10); /* many per buffer */
    EXPECT_GE(bufs.size(), 2u);
    EXPECT_LT(bufs.size(), sent.size() / 10);
    EXPECT_LT(m_b.wire->stats.rx_syscalls, sent.size() / 10);

    /* the held messages are intact, in place */
    ASSERT_EQ(at_start, m_b.held.size());
    for (auto &h : m_b.held) {
        EXPECT_EQ(0, memcmp(h.copy.data(), h.data, h.copy.size()));
        /* ours, and the wire's while a frame is half received in it */
        EXPECT_GE(h.buf->refs, 1u);
        EXPECT_LE(h.buf->refs, 2u);
    }

    /* more traffic while holding: the held bytes still do not move */
    for (unsigned i = 0; i < 600; ++i) {
        sent.push_back(pattern(1000 + i, len3(20 - i % 20)));
        ASSERT_EQ(UCS_OK, send(m_ab, sent.back()));
    }
    size_t held_before = m_b.held.size();
    m_b.hold           = false;
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == sent.size(); }));
    expect_received(m_b, m_ba, sent);
    ASSERT_EQ(held_before, m_b.held.size());
    for (auto &h : m_b.held) {
        EXPECT_EQ(0, memcmp(h.copy.data(), h.data, h.copy.size()));
    }
    m_b.release_held();
    EXPECT_TRUE(m_b.failed.empty());
}

TEST_F(sock_conn, larger_than_max_frame_refused)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<uint8_t> big = pattern(1, MAX_FRAME + 1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, send(m_ab, big));
    big.resize(MAX_FRAME + 1000);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, send(m_ab, big));
    /* the limit is on the whole gather list */
    std::vector<uint8_t> half = pattern(2, MAX_FRAME / 2 + 1);
    struct iovec iov[2]       = { { half.data(), half.size() },
                                  { half.data(), half.size() } };
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m_ab->wire->ops->send(m_ab, iov, 2));
    EXPECT_EQ(0u, m_a.wire->ops->backlog(m_ab));
    /* establish()'s ping, and the proof of the peer: PROVE_REQ, PROVE_ANS */
    EXPECT_EQ(3u, m_a.wire->stats.tx_frames);

    /* nothing of them went out: the stream goes on */
    std::vector<uint8_t> ok = pattern(3, MAX_FRAME);
    ASSERT_EQ(UCS_OK, send(m_ab, ok));
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == 1; }));
    expect_received(m_b, m_ba, { ok });
    EXPECT_TRUE(m_b.failed.empty());
}

/* With the receiver not progressing, the kernel's buffers fill, then the
 * backlog up to its limit; then everything arrives in order. */
TEST_F(sock_conn, backlog_limit_and_writable)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<std::vector<uint8_t>> sent;
    ucs_status_t status = UCS_OK;
    const size_t len    = len3(2729); /* 8189: frame of 8193 bytes */
    while (sent.size() < 20000) {
        std::vector<uint8_t> m = pattern(sent.size(), len);
        status                 = send(m_ab, m);
        if (status != UCS_OK) {
            break;
        }
        sent.push_back(std::move(m));
    }
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, status);
    size_t backlog = m_a.wire->ops->backlog(m_ab);
    EXPECT_GT(backlog, 0u);
    EXPECT_LE(backlog, MAX_BACKLOG);
    EXPECT_GT(backlog + APTUS_FRAME_HDR_LEN + len, MAX_BACKLOG);
    EXPECT_GT(m_a.wire->stats.tx_queued, 0u);
    size_t state, kernel;
    unsigned fds;
    m_a.wire->ops->conn_resources(m_ab, &state, &kernel, &fds);
    EXPECT_GE(state, backlog);

    /* refused means nothing was taken */
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, send(m_ab, pattern(0, len)));
    EXPECT_EQ(backlog, m_a.wire->ops->backlog(m_ab));
    EXPECT_TRUE(m_a.writable.empty());
    /* the limit is in bytes: a message that still fits is taken */
    if (backlog + APTUS_FRAME_HDR_LEN + 1 <= MAX_BACKLOG) {
        sent.push_back(pattern(0, 1));
        EXPECT_EQ(UCS_OK, send(m_ab, sent.back()));
        EXPECT_EQ(backlog + APTUS_FRAME_HDR_LEN + 1,
                  m_a.wire->ops->backlog(m_ab));
    }

    /* an immediate follows its one-sided data whatever the backlog */
    std::vector<uint8_t> mem(64, 0), data = pattern(5, 32);
    aptus_mem_key_t key = key_of(m_b.wire, mem.data(), mem.size());
    struct iovec iov    = { data.data(), data.size() };
    ASSERT_EQ(UCS_OK, m_a.wire->ops->write_imm(m_ab, &key, key.address + 16,
                                               &iov, 1, 77));
    EXPECT_EQ(0, memcmp(mem.data() + 16, data.data(), data.size()));

    ASSERT_TRUE(wait_for([&] { return m_b.imms.size() == 1; }, 10));
    expect_received(m_b, m_ba, sent);
    EXPECT_EQ("i77", m_b.events.back()); /* after every message */
    EXPECT_EQ(0u, m_a.wire->ops->backlog(m_ab));
    ASSERT_FALSE(m_a.writable.empty());
    EXPECT_EQ(m_ab, m_a.writable.back());
    EXPECT_EQ(UCS_OK, send(m_ab, pattern(0, 1)));
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
}

/* A small backlog limit still takes one message of any size when empty. */
TEST_F(sock_conn, backlog_takes_one_frame_beyond_small_limit)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a, 64, 100));
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    /* while connecting, everything waits in the backlog */
    aptus_conn_t *conn = nullptr;
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->connect(m_a.wire, &m_b.wire->addr, NULL, &conn));
    std::vector<std::vector<uint8_t>> sent;
    ucs_status_t status;
    do {
        sent.push_back(pattern(sent.size(), 1000));
        status = send(conn, sent.back());
    } while ((status == UCS_OK) && (sent.size() < 100000));
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, status);
    sent.pop_back();
    EXPECT_GE(sent.size(), 1u);
    for (size_t i = sent.size(); i < 20; ++i) {
        sent.push_back(pattern(i, 1000));
        send_wait(conn, sent.back());
    }
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == sent.size(); }));
    expect_received(m_b, m_b.accepted[0], sent);
}

/* Receive buffers held by the owner run the pool dry: reading stops (the
 * bytes wait in the socket) and resumes once buffers come back. */
TEST_F(sock_conn, rx_pool_exhaustion_loses_nothing)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_b, 4));
    m_ab = connect_ab();
    ASSERT_NE(nullptr, m_ab);
    m_ba     = m_b.accepted[0];
    m_b.hold = true;

    std::vector<std::vector<uint8_t>> sent;
    for (unsigned i = 0; i < 40; ++i) {
        sent.push_back(pattern(i, len3(1332))); /* frame of 4002 bytes */
        send_wait(m_ab, sent.back());
    }
    ASSERT_TRUE(wait_for([&] { return m_b.wire->stats.rx_pool_empty >= 3; }));
    EXPECT_LT(m_b.msgs.size(), sent.size());
    EXPECT_LE(m_b.held.size(), 4u);
    size_t got = m_b.msgs.size();
    for (int i = 0; i < 100; ++i) {
        progress();
    }
    EXPECT_EQ(got, m_b.msgs.size()); /* stuck while every buffer is held */
    for (auto &h : m_b.held) {
        EXPECT_EQ(0, memcmp(h.copy.data(), h.data, h.copy.size()));
    }

    m_b.release_held();
    m_b.hold = false;
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == sent.size(); }));
    expect_received(m_b, m_ba, sent);
    EXPECT_TRUE(m_b.failed.empty());
    EXPECT_TRUE(m_a.failed.empty());

    /* and holding one buffer at a time, released at the next message,
     * streams through a pool of four */
    m_b.on_recv = [&](aptus_conn_t *, size_t) {
        if (m_b.held.size() > 1) {
            aptus_conn_buf_release(m_b.held.front().buf);
            m_b.held.erase(m_b.held.begin());
        }
    };
    m_b.hold = true;
    for (unsigned i = 0; i < 200; ++i) {
        sent.push_back(pattern(100 + i, len3(i % 2000)));
        send_wait(m_ab, sent.back());
    }
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == sent.size(); }));
    expect_received(m_b, m_ba, sent);
}

/* A read that ends exactly at the end of the receive area with a whole
 * frame, while more bytes wait in the socket: the largest frame followed
 * by anything. */
TEST_F(sock_conn, exact_fill_max_frame_then_more)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<std::vector<uint8_t>> sent = { pattern(1, MAX_FRAME),
                                               pattern(2, 10),
                                               pattern(3, MAX_FRAME),
                                               pattern(4, 0) };
    for (auto &m : sent) {
        ASSERT_EQ(UCS_OK, send(m_ab, m));
    }
    wait_for([&] {
        return (m_b.msgs.size() == sent.size()) || !m_b.failed.empty();
    });
    EXPECT_TRUE(m_b.failed.empty())
        << "connection failed: "
        << ucs_status_string(m_b.failed.empty() ? UCS_OK
                                                : m_b.failed[0].second);
    expect_received(m_b, m_ba, sent);
}

/* The same with small frames: 82 frames of 100 bytes fill the 8200-byte
 * area exactly. */
TEST_F(sock_conn, exact_fill_small_frames)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<std::vector<uint8_t>> sent;
    for (unsigned i = 0; i < 200; ++i) {
        sent.push_back(pattern(i, 96));
        ASSERT_EQ(UCS_OK, send(m_ab, sent.back()));
    }
    wait_for([&] {
        return (m_b.msgs.size() == sent.size()) || !m_b.failed.empty();
    });
    EXPECT_TRUE(m_b.failed.empty())
        << "connection failed: "
        << ucs_status_string(m_b.failed.empty() ? UCS_OK
                                                : m_b.failed[0].second);
    expect_received(m_b, m_ba, sent);
}

TEST_F(sock_conn, one_sided_write_read)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    const size_t len = 8192, guard = 64;
    std::vector<uint8_t> mem(len + 2 * guard, 0xee);
    uint8_t *region     = mem.data() + guard;
    aptus_mem_key_t key = key_of(m_a.wire, region, len);
    EXPECT_TRUE(m_a.wire->ops->key_reachable(m_ab, &key));

    /* a gather list with an empty piece, into the middle */
    std::vector<uint8_t> src = pattern(9, 1103);
    struct iovec iov[4]      = { { src.data(), 100 },
                                 { src.data() + 100, 0 },
                                 { src.data() + 100, 1000 },
                                 { src.data() + 1100, 3 } };
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->write(m_ab, &key, key.address + 17, iov, 4));
    EXPECT_EQ(0, memcmp(region + 17, src.data(), src.size()));
    for (size_t i = 0; i < 17; ++i) {
        ASSERT_EQ(0xee, region[i]);
    }
    for (size_t i = 17 + src.size(); i < mem.size() - guard; ++i) {
        ASSERT_EQ(0xee, region[i]);
    }

    /* read it back, scattered differently */
    std::vector<uint8_t> dst(src.size() + 2, 0x11);
    struct iovec riov[3] = { { dst.data(), 500 },
                             { dst.data() + 500, 600 },
                             { dst.data() + 1100, 3 } };
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->read(m_ab, &key, key.address + 17, riov, 3));
    EXPECT_EQ(0, memcmp(dst.data(), src.data(), src.size()));
    EXPECT_EQ(0x11, dst[src.size()]);

    /* the whole region, its last byte, and nothing at its end */
    std::vector<uint8_t> whole = pattern(10, len);
    struct iovec w             = { whole.data(), len };
    ASSERT_EQ(UCS_OK, m_a.wire->ops->write(m_ab, &key, key.address, &w, 1));
    EXPECT_EQ(0, memcmp(region, whole.data(), len));
    uint8_t last = 0x5a;
    w            = { &last, 1 };
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->write(m_ab, &key, key.address + len - 1, &w, 1));
    EXPECT_EQ(0x5a, region[len - 1]);
    ASSERT_EQ(UCS_OK,
              m_a.wire->ops->write(m_ab, &key, key.address + len, &w, 0));
    /* 16 pieces, the most a gather list may have */
    std::vector<uint8_t> rd(len, 0);
    struct iovec r16[16];
    for (unsigned i = 0; i < 16; ++i) {
        r16[i] = { rd.data() + i * (len / 16), len / 16 };
    }
    ASSERT_EQ(UCS_OK, m_a.wire->ops->read(m_ab, &key, key.address, r16, 16));
    EXPECT_EQ(0, memcmp(rd.data(), region, len));
    for (size_t i = 0; i < guard; ++i) {
        ASSERT_EQ(0xee, mem[i]);
        ASSERT_EQ(0xee, mem[guard + len + i]);
    }

    EXPECT_EQ(4u, m_a.wire->stats.writes);
    EXPECT_EQ(src.size() + len + 1, m_a.wire->stats.write_bytes);
    EXPECT_EQ(2u, m_a.wire->stats.reads);
    EXPECT_EQ(src.size() + len, m_a.wire->stats.read_bytes);
    EXPECT_EQ(0u, m_a.wire->stats.refused);
}

TEST_F(sock_conn, one_sided_out_of_bounds_refused)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    const size_t len = 4096, guard = 256;
    std::vector<uint8_t> mem(len + 2 * guard, 0xee);
    const std::vector<uint8_t> orig = mem;
    uint8_t *region                 = mem.data() + guard;
    aptus_mem_key_t key             = key_of(m_a.wire, region, len);
    std::vector<uint8_t> src        = pattern(3, len + 1);
    std::vector<uint8_t> dst(len + 1, 0x77);
    const std::vector<uint8_t> dst_orig = dst;
    const uint64_t base                 = key.address;

    struct range {
        uint64_t addr;
        size_t length;
    };
    const range bad[] = {
        { base - 1, 16 },                 /* starts before */
        { base - 16, 16 },                /* ends just at the start */
        { base + len - 15, 16 },          /* ends one past the end */
        { base + len, 1 },                /* starts at the end */
        { base + len + 1, 0 },            /* empty, but past the end */
        { base, len + 1 },                /* longer than the region */
        { base + 8, len },                /* fits the size, not the place */
        { UINT64_MAX - 7, 16 },           /* wraps the address space */
        { 0, 16 },                        /* nowhere */
        { base + len / 2, SIZE_MAX / 2 }, /* the end overflows */
    };
    unsigned refused = 0;
    for (const range &r : bad) {
        struct iovec iov[2]  = { { src.data(), 0 }, { src.data(), 0 } };
        struct iovec riov[2] = { { dst.data(), 0 }, { dst.data(), 0 } };
        /* split in two pieces; the huge one is never touched */
        iov[0].iov_len  = r.length / 2;
        iov[1].iov_len  = r.length - r.length / 2;
        riov[0].iov_len = iov[0].iov_len;
        riov[1].iov_len = iov[1].iov_len;
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  m_a.wire->ops->write(m_ab, &key, r.addr, iov, 2))
            << std::hex << r.addr - base << " " << r.length;
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  m_a.wire->ops->read(m_ab, &key, r.addr, riov, 2))
            << std::hex << r.addr - base << " " << r.length;
        refused += 2;
    }
    EXPECT_EQ(orig, mem);
    EXPECT_EQ(dst_orig, dst);
    EXPECT_EQ(refused, m_a.wire->stats.refused);
    EXPECT_EQ(0u, m_a.wire->stats.writes);
    EXPECT_EQ(0u, m_a.wire->stats.reads);

    /* more pieces than a gather list may have */
    struct iovec many[17];
    for (auto &v : many) {
        v = { src.data(), 1 };
    }
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              m_a.wire->ops->write(m_ab, &key, base, many, 17));
    EXPECT_EQ(orig, mem);

    /* a key whose region wraps the address space refuses what wraps */
    aptus_mem_key_t wrap = key;
    wrap.address         = UINT64_MAX - 99;
    wrap.length          = 1000;
    struct iovec one     = { src.data(), 16 };
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write(m_ab, &wrap, base, &one, 1));
    EXPECT_EQ(orig, mem);
}

/* Piece lengths whose sum wraps around size_t describe a range far larger
 * than the region: refused like any other, with nothing moved. */
TEST_F(sock_conn, one_sided_gather_length_overflow_refused)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<uint8_t> mem(4096, 0xee);
    const std::vector<uint8_t> orig = mem;
    aptus_mem_key_t key             = key_of(m_a.wire, mem.data(), mem.size());
    std::vector<uint8_t> src(16, 1);
    const size_t half = (size_t)1 << (8 * sizeof(size_t) - 1);

    /* 2^63 + 2^63 = 0 */
    struct iovec iov[2] = { { src.data(), half }, { src.data(), half } };
    ucs_status_t status = m_a.wire->ops->write(m_ab, &key, key.address, iov, 2);
    EXPECT_TRUE((status == UCS_ERR_INVALID_ADDR) ||
                (status == UCS_ERR_INVALID_PARAM))
        << ucs_status_string(status);
    status = m_a.wire->ops->read(m_ab, &key, key.address, iov, 2);
    EXPECT_TRUE((status == UCS_ERR_INVALID_ADDR) ||
                (status == UCS_ERR_INVALID_PARAM))
        << ucs_status_string(status);
    EXPECT_EQ(orig, mem);
    EXPECT_EQ(0u, m_a.wire->stats.writes);
    EXPECT_EQ(0u, m_a.wire->stats.reads);
}

/* The same for a message: its pieces' lengths must not wrap around the
 * size limit. Sent at once, such a list breaks the connection without a
 * word to the failed handler; queued behind a backlog, it is copied
 * (2^63 bytes), which only a child process may try. */
TEST_F(sock_conn, send_gather_length_overflow_refused)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<uint8_t> src(16, 1);
    const size_t half   = (size_t)1 << (8 * sizeof(size_t) - 1);
    struct iovec iov[2] = { { src.data(), half }, { src.data(), half } };

    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        /* a connection of the child's own, with something queued: the
         * receiver does not progress */
        side x, y;
        aptus_conn_t *conn = nullptr;
        open(x);
        open(y);
        if ((x.wire == nullptr) || (y.wire == nullptr) ||
            (x.wire->ops->connect(x.wire, &y.wire->addr, NULL, &conn) !=
             UCS_OK)) {
            _exit(2);
        }
        while (x.wire->ops->backlog(conn) == 0) {
            if (send(conn, pattern(1, MAX_FRAME)) != UCS_OK) {
                _exit(3);
            }
        }
        ucs_status_t status = conn->wire->ops->send(conn, iov, 2);
        _exit((status == UCS_ERR_INVALID_PARAM) ? 0 : 4);
    }
    int wstatus = 0;
    ASSERT_EQ(pid, waitpid(pid, &wstatus, 0));
    EXPECT_TRUE(WIFEXITED(wstatus) && (WEXITSTATUS(wstatus) == 0))
        << (WIFSIGNALED(wstatus)
                ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                : "exit status " + std::to_string(WEXITSTATUS(wstatus)));

    /* nothing queued: refused, and the connection goes on */
    ASSERT_EQ(0u, m_a.wire->ops->backlog(m_ab));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m_ab->wire->ops->send(m_ab, iov, 2));
    std::vector<uint8_t> m = pattern(2, 100);
    ucs_status_t status    = send(m_ab, m);
    EXPECT_EQ(UCS_OK, status);
    if (status == UCS_OK) {
        EXPECT_TRUE(wait_for([&] { return m_b.msgs.size() == 1; }));
    }
    expect_received(m_b, m_ba, { m });
}

TEST_F(sock_conn, one_sided_other_host_unreachable)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<uint8_t> mem(256, 0xee);
    const std::vector<uint8_t> orig = mem;
    aptus_mem_key_t key             = key_of(m_a.wire, mem.data(), mem.size());
    key.host_id ^= 1;
    EXPECT_FALSE(m_a.wire->ops->key_reachable(m_ab, &key));
    std::vector<uint8_t> src = pattern(1, 16);
    struct iovec iov         = { src.data(), src.size() };
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              m_a.wire->ops->write(m_ab, &key, key.address, &iov, 1));
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              m_a.wire->ops->read(m_ab, &key, key.address, &iov, 1));
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              m_a.wire->ops->write_imm(m_ab, &key, key.address, &iov, 1, 5));
    EXPECT_EQ(orig, mem);
    EXPECT_EQ(3u, m_a.wire->stats.refused);
    EXPECT_EQ(0u, m_a.wire->stats.imms);

    /* no immediate went to the peer; the connection goes on */
    ASSERT_EQ(UCS_OK, send(m_ab, src));
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == 1; }));
    EXPECT_TRUE(m_b.imms.empty());

    key.host_id ^= 1;
    EXPECT_TRUE(m_a.wire->ops->key_reachable(m_ab, &key));
}

/* The immediate arrives after the messages sent before it, with its data
 * already in place when the handler runs. */
TEST_F(sock_conn, write_imm_data_in_place_and_ordered)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    const size_t len = 4096;
    std::vector<uint8_t> mem(len, 0);
    aptus_mem_key_t key     = key_of(m_b.wire, mem.data(), len);
    std::vector<uint8_t> d1 = pattern(1, 1000), d2 = pattern(2, 2900);
    std::vector<size_t> msgs_at_imm;
    bool in_place = true;
    m_b.on_imm    = [&](aptus_conn_t *conn, uint32_t imm) {
        msgs_at_imm.push_back(m_b.msgs.size());
        if (imm == 0x11111111) {
            in_place &= !memcmp(mem.data() + 100, d1.data(), d1.size());
        } else if (imm == 0x22222222) {
            in_place &= !memcmp(mem.data() + 1100, d2.data(), d2.size());
        } else {
            in_place = false;
        }
        in_place &= (conn == m_ba);
    };

    std::vector<std::vector<uint8_t>> sent = {
        pattern(10, 10), pattern(11, 2000), pattern(12, 0), pattern(13, 50)
    };
    ASSERT_EQ(UCS_OK, send(m_ab, sent[0]));
    ASSERT_EQ(UCS_OK, send(m_ab, sent[1]));
    struct iovec iov1[2] = { { d1.data(), 300 }, { d1.data() + 300, 700 } };
    ASSERT_EQ(UCS_OK, m_a.wire->ops->write_imm(m_ab, &key, key.address + 100,
                                               iov1, 2, 0x11111111));
    ASSERT_EQ(UCS_OK, send(m_ab, sent[2]));
    struct iovec iov2 = { d2.data(), d2.size() };
    ASSERT_EQ(UCS_OK, m_a.wire->ops->write_imm(m_ab, &key, key.address + 1100,
                                               &iov2, 1, 0x22222222));
    ASSERT_EQ(UCS_OK, send(m_ab, sent[3]));

    /* refused: nothing written, no immediate sent */
    struct iovec oob = { d2.data(), d2.size() };
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write_imm(m_ab, &key, key.address + 2000, &oob, 1,
                                       0x33333333));

    ASSERT_TRUE(wait_for(
        [&] { return (m_b.msgs.size() == 4) && (m_b.imms.size() == 2); }));
    expect_received(m_b, m_ba, sent);
    EXPECT_TRUE(in_place);
    std::vector<std::string> order = { "m0", "m1",         "i286331153",
                                       "m2", "i572662306", "m3" };
    EXPECT_EQ(order, m_b.events);
    EXPECT_EQ((std::vector<size_t>{ 2, 3 }), msgs_at_imm);
    EXPECT_EQ(2u, m_a.wire->stats.imms);
    EXPECT_EQ(2u, m_a.wire->stats.writes);
    EXPECT_EQ(1u, m_a.wire->stats.refused);
    for (size_t i = 0; i < len; ++i) {
        if ((i < 100) || (i >= 1100 + d2.size())) {
            ASSERT_EQ(0, mem[i]) << i;
        }
    }

    /* nothing more comes */
    for (int i = 0; i < 50; ++i) {
        progress();
    }
    EXPECT_EQ(2u, m_b.imms.size());
}

/* A raw client that sends bytes that are no frame is cut off; the wire
 * keeps serving others. */
TEST_F(sock_conn, raw_client_garbage_cut)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    m_b.close_on_fail = true;

    int fd = raw_connect(m_b.wire);
    ASSERT_GE(fd, 0);
    m_raw.push_back(fd);
    ASSERT_TRUE(wait_for([&] { return m_b.accepted.size() == 1; }));
    ASSERT_TRUE(raw_send(fd, { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5 }));
    ASSERT_TRUE(wait_for([&] { return m_b.failed.size() == 1; }));
    EXPECT_EQ(m_b.accepted[0], m_b.failed[0].first);
    EXPECT_NE(UCS_OK, m_b.failed[0].second);
    EXPECT_NE(UCS_ERR_NOT_CONNECTED, m_b.failed[0].second);
    EXPECT_EQ(1u, m_b.wire->stats.rx_malformed);
    EXPECT_TRUE(m_b.msgs.empty());
    EXPECT_EQ(0u, m_b.wire->num_conns); /* closed from the handler */

    /* the client sees its connection end, after the wire's PROVE_REQ */
    std::vector<uint8_t> req(APTUS_FRAME_HDR_LEN + APTUS_FRAME_PROVE_REQ_LEN);
    EXPECT_EQ((ssize_t)req.size(),
              recv(fd, req.data(), req.size(), MSG_WAITALL));
    EXPECT_EQ(APTUS_FRAME_TYPE_PROVE_REQ, req[3]);
    struct pollfd pfd = { fd, POLLIN, 0 };
    ASSERT_EQ(1, poll(&pfd, 1, 2000));
    uint8_t byte;
    EXPECT_LE(recv(fd, &byte, 1, MSG_DONTWAIT), 0);

    /* and the wire works */
    m_ab = connect_ab();
    ASSERT_NE(nullptr, m_ab);
    std::vector<uint8_t> m = pattern(1, 100);
    ASSERT_EQ(UCS_OK, send(m_ab, m));
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == 1; }));
    expect_received(m_b, m_b.accepted[1], { m });
    EXPECT_EQ(1u, m_b.failed.size());
}

/* Frame headers that announce too much, or an immediate of the wrong
 * size: cut as soon as the header is there, without waiting for a payload
 * that would never fit. A good frame before the bad one is delivered. */
TEST_F(sock_conn, raw_client_bad_header_cut)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    struct bad {
        unsigned type;
        size_t length;
    };
    const bad headers[] = { { APTUS_FRAME_TYPE_MSG, MAX_FRAME + 1 },
                            { APTUS_FRAME_TYPE_MSG, APTUS_FRAME_MAX_LEN },
                            { APTUS_FRAME_TYPE_IMM, 5 },
                            { APTUS_FRAME_TYPE_IMM, 0 },
                            { 2, 4 },
                            { 255, 0 } };
    size_t n            = 0;
    for (const bad &h : headers) {
        int fd = raw_connect(m_b.wire);
        ASSERT_GE(fd, 0);
        m_raw.push_back(fd);
        ASSERT_TRUE(wait_for([&] { return m_b.accepted.size() == n + 1; }));
        std::vector<uint8_t> bytes = frame(APTUS_FRAME_TYPE_MSG, { 7, 7 });
        bytes.resize(bytes.size() + APTUS_FRAME_HDR_LEN);
        aptus_frame_hdr_pack(bytes.data() + bytes.size() - APTUS_FRAME_HDR_LEN,
                             h.type, h.length);
        ASSERT_TRUE(raw_send(fd, bytes));
        ASSERT_TRUE(wait_for([&] { return m_b.failed.size() == n + 1; }))
            << "type " << h.type << " length " << h.length;
        EXPECT_EQ(m_b.accepted[n], m_b.failed[n].first);
        EXPECT_NE(UCS_OK, m_b.failed[n].second);
        EXPECT_NE(UCS_ERR_NOT_CONNECTED, m_b.failed[n].second);
        EXPECT_EQ(n + 1, m_b.wire->stats.rx_malformed);
        ASSERT_EQ(n + 1, m_b.msgs.size());
        EXPECT_EQ((std::vector<uint8_t>{ 7, 7 }), m_b.msgs[n].data);
        /* nothing more from the broken connection */
        ASSERT_TRUE(raw_send(fd, frame(APTUS_FRAME_TYPE_MSG, { 8 })));
        for (int i = 0; i < 20; ++i) {
            progress();
        }
        EXPECT_EQ(n + 1, m_b.msgs.size());
        EXPECT_EQ(n + 1, m_b.failed.size());
        m_b.wire->ops->conn_close(m_b.accepted[n]);
        ++n;
    }
    EXPECT_EQ(0u, m_b.wire->num_conns);

    m_ab = connect_ab();
    ASSERT_NE(nullptr, m_ab);
    std::vector<uint8_t> m = pattern(1, MAX_FRAME);
    ASSERT_EQ(UCS_OK, send(m_ab, m));
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == n + 1; }));
    EXPECT_EQ(m, m_b.msgs.back().data);
    EXPECT_TRUE(m_a.failed.empty());
}

/* A stream that trickles in one byte at a time is parsed the same. */
TEST_F(sock_conn, raw_client_one_byte_at_a_time)
{
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    int fd = raw_connect(m_b.wire);
    ASSERT_GE(fd, 0);
    m_raw.push_back(fd);
    ASSERT_TRUE(wait_for([&] { return m_b.accepted.size() == 1; }));

    std::vector<std::vector<uint8_t>> msgs = {
        pattern(1, 11), {}, pattern(2, 300), { 42 }
    };
    std::vector<uint8_t> stream;
    auto append = [&](const std::vector<uint8_t> &f) {
        stream.insert(stream.end(), f.begin(), f.end());
    };
    append(frame(APTUS_FRAME_TYPE_MSG, msgs[0]));
    append(frame(APTUS_FRAME_TYPE_MSG, msgs[1]));
    append(frame(APTUS_FRAME_TYPE_IMM, { 0x04, 0x03, 0x02, 0x01 }));
    append(frame(APTUS_FRAME_TYPE_MSG, msgs[2]));
    append(frame(APTUS_FRAME_TYPE_MSG, msgs[3]));

    for (size_t i = 0; i < stream.size(); ++i) {
        uint64_t syscalls = m_b.wire->stats.rx_syscalls;
        ASSERT_TRUE(raw_send(fd, { stream[i] }));
        ASSERT_TRUE(wait_for([&] {
            return m_b.wire->stats.rx_syscalls > syscalls;
        })) << "byte "
            << i;
    }
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == msgs.size(); }));
    expect_received(m_b, m_b.accepted[0], msgs);
    ASSERT_EQ(1u, m_b.imms.size());
    EXPECT_EQ(0x01020304u, m_b.imms[0].second);
    EXPECT_EQ((std::vector<std::string>{ "m0", "m1", "i16909060", "m2", "m3" }),
              m_b.events);
    for (auto &m : m_b.msgs) {
        EXPECT_TRUE(m.at_start);
    }
    EXPECT_GE(m_b.wire->stats.rx_syscalls, stream.size());
    EXPECT_EQ(5u, m_b.wire->stats.rx_frames);
    EXPECT_EQ(stream.size(), m_b.wire->stats.rx_bytes);
    EXPECT_TRUE(m_b.failed.empty());
    EXPECT_EQ(0u, m_b.wire->stats.rx_malformed);
}

/* The peer closes in order: reported once, as NOT_CONNECTED; the broken
 * connection refuses sends until its owner closes it. */
TEST_F(sock_conn, peer_close_not_connected)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    std::vector<uint8_t> m = pattern(1, 500);
    ASSERT_EQ(UCS_OK, send(m_ab, m));
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == 1; }));

    m_a.wire->ops->conn_close(m_ab);
    EXPECT_EQ(0u, m_a.wire->num_conns);
    ASSERT_TRUE(wait_for([&] { return !m_b.failed.empty(); }));
    EXPECT_EQ(m_ba, m_b.failed[0].first);
    EXPECT_EQ(UCS_ERR_NOT_CONNECTED, m_b.failed[0].second);
    EXPECT_EQ(0u, m_b.wire->stats.failures);
    EXPECT_EQ(1u, m_b.wire->stats.peer_closes);
    EXPECT_NE(UCS_OK, send(m_ba, m));
    std::vector<uint8_t> mem(16);
    aptus_mem_key_t key = key_of(m_b.wire, mem.data(), mem.size());
    struct iovec iov    = { m.data(), 8 };
    EXPECT_NE(UCS_OK,
              m_b.wire->ops->write_imm(m_ba, &key, key.address, &iov, 1, 1));
    for (int i = 0; i < 50; ++i) {
        progress();
    }
    EXPECT_EQ(1u, m_b.failed.size()); /* once */
    EXPECT_TRUE(m_a.failed.empty());  /* the closing side hears nothing */
    EXPECT_EQ(1u, m_b.wire->num_conns);
    m_b.wire->ops->conn_close(m_ba);
    EXPECT_EQ(0u, m_b.wire->num_conns);
}

/* Closing a connection from its own receive handler stops delivery at
 * once, with more frames of it in the same buffer. */
TEST_F(sock_conn, close_from_recv_handler)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    m_b.on_recv = [&](aptus_conn_t *conn, size_t i) {
        if (i == 2) {
            conn->wire->ops->conn_close(conn);
        }
    };
    for (unsigned i = 0; i < 10; ++i) {
        ASSERT_EQ(UCS_OK, send(m_ab, pattern(i, 20)));
    }
    ASSERT_TRUE(wait_for([&] { return !m_a.failed.empty(); }));
    EXPECT_EQ(3u, m_b.msgs.size());
    EXPECT_EQ(0u, m_b.wire->num_conns);
    EXPECT_TRUE(m_b.failed.empty());
    EXPECT_EQ(m_ab, m_a.failed[0].first);
    EXPECT_NE(UCS_OK, m_a.failed[0].second);
}

/* Connecting to an address where nobody listens fails, now or later. */
TEST_F(sock_conn, connect_refused)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_c));
    aptus_wire_addr_t gone = m_c.wire->addr;
    m_c.wire->ops->close(m_c.wire);
    m_c.wire = nullptr;

    aptus_conn_t *conn = nullptr;
    ucs_status_t status =
        m_a.wire->ops->connect(m_a.wire, &gone, nullptr, &conn);
    if (status == UCS_OK) {
        ASSERT_TRUE(wait_for([&] { return !m_a.failed.empty(); }));
        EXPECT_EQ(conn, m_a.failed[0].first);
        EXPECT_EQ(UCS_ERR_UNREACHABLE, m_a.failed[0].second);
        EXPECT_NE(UCS_OK, send(conn, { 1 }));
        m_a.wire->ops->conn_close(conn);
    } else {
        EXPECT_EQ(UCS_ERR_UNREACHABLE, status);
    }
    EXPECT_EQ(0u, m_a.wire->num_conns);
}

TEST_F(sock_conn, conn_resources)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    for (aptus_conn_t *conn : { m_ab, m_ba }) {
        size_t state = 0, kernel = 0;
        unsigned fds = 0;
        conn->wire->ops->conn_resources(conn, &state, &kernel, &fds);
        EXPECT_GT(state, 0u);
        EXPECT_LT(state, conn->wire->rx_buf_size); /* idle: no buffer */
        EXPECT_GT(kernel, 0u);
        EXPECT_EQ(1u, fds);
    }
}

/* Many connections share one receive pool smaller than their number. */
TEST_F(sock_conn, many_connections_share_the_pool)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_b, 4));
    std::vector<aptus_conn_t *> conns;
    for (unsigned i = 0; i < 16; ++i) {
        conns.push_back(connect_ab());
        ASSERT_NE(nullptr, conns.back());
    }
    std::vector<std::vector<std::vector<uint8_t>>> sent(conns.size());
    for (unsigned r = 0; r < 20; ++r) {
        for (size_t c = 0; c < conns.size(); ++c) {
            sent[c].push_back(pattern(c * 100 + r, len3((r * 331 + c) % 2700)));
            send_wait(conns[c], sent[c].back());
        }
    }
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == 16 * 20; }));
    /* each accepted connection got one sender's stream */
    for (aptus_conn_t *peer : m_b.accepted) {
        size_t first = 0;
        while ((first < m_b.msgs.size()) && (m_b.msgs[first].conn != peer)) {
            ++first;
        }
        ASSERT_LT(first, m_b.msgs.size());
        size_t c = 0;
        while ((c < sent.size()) && (sent[c][0] != m_b.msgs[first].data)) {
            ++c;
        }
        ASSERT_LT(c, sent.size());
        expect_received(m_b, peer, sent[c]);
    }
    EXPECT_TRUE(m_b.failed.empty());
    EXPECT_EQ(16u, m_b.wire->num_conns);
}

/* The peer sends and closes at once while this side cannot read (its
 * buffers are all held): every message still comes first, then the close,
 * once. */
TEST_F(sock_conn, peer_close_after_data_delivers_all_first)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_b, 4));
    m_ab = connect_ab();
    ASSERT_NE(nullptr, m_ab);
    m_ba     = m_b.accepted[0];
    m_b.hold = true;
    std::vector<std::vector<uint8_t>> sent;
    for (unsigned i = 0; i < 20; ++i) {
        sent.push_back(pattern(i, len3(1332)));
        ASSERT_EQ(UCS_OK, send(m_ab, sent.back()));
    }
    /* what is closed with it unsent would be lost */
    ASSERT_TRUE(wait_for([&] {
        return (m_a.wire->ops->backlog(m_ab) == 0) &&
               (m_b.wire->stats.rx_pool_empty > 0);
    }));
    m_a.wire->ops->conn_close(m_ab);
    for (int i = 0; i < 50; ++i) {
        progress();
    }
    EXPECT_LT(m_b.msgs.size(), sent.size());
    EXPECT_TRUE(m_b.failed.empty()); /* the close waits behind the data */

    m_b.release_held();
    m_b.hold = false;
    ASSERT_TRUE(wait_for([&] { return !m_b.failed.empty(); }));
    expect_received(m_b, m_ba, sent);
    EXPECT_EQ("f", m_b.events.back());
    EXPECT_EQ(UCS_ERR_NOT_CONNECTED, m_b.failed[0].second);
    for (int i = 0; i < 20; ++i) {
        progress();
    }
    EXPECT_EQ(1u, m_b.failed.size());
}

/* An owner may refuse a connection by closing it in the accepted handler;
 * the connecting side learns that it broke. */
TEST_F(sock_conn, close_in_accepted_handler)
{
    ASSERT_NO_FATAL_FAILURE(open(m_a));
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    m_b.on_accept = [](aptus_conn_t *conn) {
        conn->wire->ops->conn_close(conn);
    };
    m_ab = connect_ab();
    ASSERT_NE(nullptr, m_ab);
    EXPECT_EQ(0u, m_b.wire->num_conns);
    ASSERT_TRUE(wait_for([&] {
        (void)send(m_ab, { 1, 2, 3 });
        return !m_a.failed.empty();
    }));
    EXPECT_EQ(m_ab, m_a.failed[0].first);
    EXPECT_NE(UCS_OK, m_a.failed[0].second);
    EXPECT_TRUE(m_b.msgs.empty());
    EXPECT_TRUE(m_b.failed.empty());

    /* later connections are served as usual */
    m_b.on_accept      = nullptr;
    aptus_conn_t *conn = connect_ab();
    ASSERT_NE(nullptr, conn);
    std::vector<uint8_t> m = pattern(4, 33);
    ASSERT_EQ(UCS_OK, send(conn, m));
    ASSERT_TRUE(wait_for([&] { return m_b.msgs.size() == 1; }));
    expect_received(m_b, m_b.accepted[1], { m });
}

/* Handlers may send: an echo from the receive handler, and a sender that
 * refills from the writable handler what the backlog refused. */
TEST_F(sock_conn, send_from_handlers)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    m_b.on_recv = [&](aptus_conn_t *conn, size_t i) {
        std::vector<uint8_t> echo = m_b.msgs[i].data;
        std::reverse(echo.begin(), echo.end());
        EXPECT_EQ(UCS_OK, send(conn, echo));
    };

    std::vector<std::vector<uint8_t>> sent, echoed;
    const size_t total = 600;
    auto refill        = [&](aptus_conn_t *conn) {
        while (sent.size() < total) {
            std::vector<uint8_t> m = pattern(sent.size(), len3(2729));
            if (send(conn, m) != UCS_OK) {
                return; /* the writable handler comes back */
            }
            sent.push_back(std::move(m));
        }
    };
    m_a.on_writable = refill;
    refill(m_ab);
    ASSERT_LT(sent.size(), total); /* the backlog filled */
    ASSERT_TRUE(wait_for([&] { return m_a.msgs.size() == total; }, 10));
    expect_received(m_b, m_ba, sent);
    for (auto &m : sent) {
        echoed.push_back(std::vector<uint8_t>(m.rbegin(), m.rend()));
    }
    expect_received(m_a, m_ab, echoed);
    EXPECT_FALSE(m_a.writable.empty());
    EXPECT_TRUE(m_a.failed.empty());
    EXPECT_TRUE(m_b.failed.empty());
}

/* The edited-key attack: a key packed for this process's own buffer, its
 * pid changed to name another process of the same user (a forked child
 * that never connected to anything). The kernel's ptrace check would let
 * process_vm through; the wire refuses the key, counts it, and touches
 * neither process. Reads, writes, writes with immediate and the fast
 * path's check (key_check, what a GRANT goes through) alike. */
TEST_F(sock_conn, edited_key_naming_another_process_refused)
{
    ASSERT_NO_FATAL_FAILURE(establish());
    ASSERT_EQ(getpid(), m_a.wire->ops->peer_pid(m_ab));
    ASSERT_EQ(getpid(), m_b.wire->ops->peer_pid(m_ba));

    const size_t len = 4096;
    std::vector<uint8_t> mem(len, 0xee);
    const std::vector<uint8_t> orig = mem;
    int to_child[2], from_child[2];
    ASSERT_EQ(0, pipe(to_child));
    ASSERT_EQ(0, pipe(from_child));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        /* the same buffer at the same address: is it still as it was
         * when the parent is done? */
        char c;
        close(to_child[1]);
        close(from_child[0]);
        uint8_t ready = 1;
        if (write(from_child[1], &ready, 1) != 1) {
            _exit(3);
        }
        if (read(to_child[0], &c, 1) != 1) {
            _exit(2);
        }
        _exit((mem == orig) ? 0 : 1);
    }
    close(to_child[0]);
    close(from_child[1]);
    uint8_t ready = 0;
    ASSERT_EQ(1, read(from_child[0], &ready, 1));

    /* what stands in the way otherwise: the kernel lets this process read
     * the child (same user), so a refusal below is the wire's */
    uint8_t peek[16];
    struct iovec lv = { peek, sizeof(peek) }, rv = { mem.data(), sizeof(peek) };
    bool kernel_allows =
        (process_vm_readv(child, &lv, 1, &rv, 1, 0) == (ssize_t)sizeof(peek));

    aptus_mem_key_t key = key_of(m_b.wire, mem.data(), len);
    key.pid             = child;
    ASSERT_TRUE(m_a.wire->ops->key_reachable(m_ab, &key));
    std::vector<uint8_t> src             = pattern(4, 256), dst(256, 0x11);
    struct iovec wiov                    = { src.data(), src.size() };
    struct iovec riov                    = { dst.data(), dst.size() };
    const aptus_conn_wire_stats_t before = m_a.wire->stats;

    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write(m_ab, &key, key.address, &wiov, 1));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->read(m_ab, &key, key.address, &riov, 1));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              m_a.wire->ops->write_imm(m_ab, &key, key.address, &wiov, 1, 7));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, m_a.wire->ops->key_check(m_ab, &key));
    EXPECT_EQ(before.pid_refused + 4, m_a.wire->stats.pid_refused);
    EXPECT_EQ(before.refused + 3, m_a.wire->stats.refused);
    EXPECT_EQ(before.writes, m_a.wire->stats.writes);
    EXPECT_EQ(before.reads, m_a.wire->stats.reads);
    EXPECT_EQ(std::vector<uint8_t>(256, 0x11), dst);
    EXPECT_EQ(orig, mem);

    /* the key as packed names the connection's proven peer (this
     * process): it passes */
    aptus_mem_key_t own = key_of(m_b.wire, mem.data(), len);
    EXPECT_EQ(UCS_OK, m_a.wire->ops->key_check(m_ab, &own));

    ASSERT_EQ(1, write(to_child[1], "x", 1));
    int wstatus = 0;
    ASSERT_EQ(child, waitpid(child, &wstatus, 0));
    close(to_child[1]);
    close(from_child[0]);
    EXPECT_TRUE(WIFEXITED(wstatus) && (WEXITSTATUS(wstatus) == 0))
        << "the child's memory changed";
    if (!kernel_allows) {
        std::cout << "[ NOTE     ] the kernel refuses process_vm to a child "
                     "here too (ptrace scope)"
                  << std::endl;
    }

    /* the legitimate key still works, and nothing more was refused */
    EXPECT_EQ(UCS_OK, m_a.wire->ops->write(m_ab, &own, own.address, &wiov, 1));
    EXPECT_EQ(0, memcmp(mem.data(), src.data(), src.size()));
    EXPECT_EQ(UCS_OK, m_a.wire->ops->read(m_ab, &own, own.address, &riov, 1));
    EXPECT_EQ(src, dst);
    EXPECT_EQ(before.pid_refused + 4, m_a.wire->stats.pid_refused);
    EXPECT_TRUE(m_b.imms.empty()); /* the refused immediate never went */
}

/* A peer that is not proven -- a plain TCP client that never answers the
 * PROVE_REQ, as from another host -- is unreachable directly, whatever
 * pid its keys name: one-sided operations go over the connection. */
TEST_F(sock_conn, unproven_peer_unreachable_directly)
{
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    int fd;
    aptus_conn_t *conn;
    ASSERT_NO_FATAL_FAILURE(raw_client_of_b(&fd, &conn));
    /* it says it answered, without a word on the rendezvous socket */
    ASSERT_TRUE(raw_send(fd, frame(APTUS_FRAME_TYPE_PROVE_ANS, {})));
    ASSERT_TRUE(wait_for([&] { return m_b.wire->stats.pid_unproven == 1; }));
    EXPECT_EQ(0, m_b.wire->ops->peer_pid(conn));

    std::vector<uint8_t> mem(64, 0xee);
    aptus_mem_key_t key = key_of(m_b.wire, mem.data(), mem.size());
    EXPECT_FALSE(m_b.wire->ops->key_reachable(conn, &key));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, m_b.wire->ops->key_check(conn, &key));
    std::vector<uint8_t> src = pattern(1, 16);
    struct iovec iov         = { src.data(), src.size() };
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              m_b.wire->ops->write(conn, &key, key.address, &iov, 1));
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              m_b.wire->ops->read(conn, &key, key.address, &iov, 1));
    EXPECT_EQ(std::vector<uint8_t>(64, 0xee), mem);
    EXPECT_EQ(0u, m_b.wire->stats.pid_proven);
}

/* The answerer connects to the rendezvous socket and then writes its
 * answer; the asker may take the connection in between (its epoll wakes on
 * the connect, the answerer lost the core). The answer, written before
 * PROVE_ANS, is read then, and the peer is proven. */
TEST_F(sock_conn, rendezvous_taken_before_its_answer_still_proves)
{
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    int fd;
    aptus_conn_t *conn;
    ASSERT_NO_FATAL_FAILURE(raw_client_of_b(&fd, &conn));
    std::vector<uint8_t> req;
    aptus_frame_t f;
    ASSERT_NO_FATAL_FAILURE(read_prove_req(fd, req, &f));

    /* connect, and let b take the connection while it is still empty */
    int ufd = prove_rendezvous(f);
    ASSERT_GE(ufd, 0);
    for (unsigned i = 0; i < 20; ++i) {
        m_b.wire->ops->progress(m_b.wire); /* b's epoll: it accepts */
        usleep(1000);
    }
    /* then the answer */
    std::vector<uint8_t> msg = prove_answer(f, fd);
    EXPECT_EQ((ssize_t)msg.size(),
              ::send(ufd, msg.data(), msg.size(), MSG_NOSIGNAL));
    close(ufd);
    ASSERT_TRUE(raw_send(fd, frame(APTUS_FRAME_TYPE_PROVE_ANS, {})));
    ASSERT_TRUE(wait_for([&] {
        return m_b.wire->stats.pid_proven + m_b.wire->stats.pid_unproven > 0;
    }));
    EXPECT_EQ(1u, m_b.wire->stats.pid_proven);
    EXPECT_EQ(0u, m_b.wire->stats.pid_unproven);
    EXPECT_EQ(getpid(), m_b.wire->ops->peer_pid(conn));
}

/* The peer answers, then resets the connection before the asker reads the
 * answer (in a merge, the connection given up is closed as soon as the
 * SWITCH is read): the asker's view of the connection was read while it
 * stood, so the answer still proves the peer. It used to read its view
 * only then, found no peer name on the reset socket and took the peer for
 * unproven (the fast path to it barred for good). */
TEST_F(sock_conn, a_connection_reset_before_the_answer_is_read_still_proves)
{
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    int fd;
    aptus_conn_t *conn;
    ASSERT_NO_FATAL_FAILURE(raw_client_of_b(&fd, &conn));
    std::vector<uint8_t> req;
    aptus_frame_t f;
    ASSERT_NO_FATAL_FAILURE(read_prove_req(fd, req, &f));
    std::vector<uint8_t> msg = prove_answer(f, fd);
    int ufd                  = prove_rendezvous(f);
    ASSERT_GE(ufd, 0);
    EXPECT_EQ((ssize_t)msg.size(),
              ::send(ufd, msg.data(), msg.size(), MSG_NOSIGNAL));
    close(ufd);

    /* a reset, not a close in order: the asker's end has no peer now */
    struct linger lg = { 1, 0 };
    ASSERT_EQ(0, setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
    close(fd);
    m_raw.erase(std::find(m_raw.begin(), m_raw.end(), fd));
    /* asking for the pid reads the answer at once, before any progress */
    EXPECT_EQ(getpid(), m_b.wire->ops->peer_pid(conn));
    EXPECT_EQ(1u, m_b.wire->stats.pid_proven);
    EXPECT_EQ(0u, m_b.wire->stats.pid_unproven);
}

/* A relay: the peer asks another UCX process (here the third wire) to
 * answer this connection's challenge for a connection of its own. The
 * answer names the wrong TCP connection: not proven. */
TEST_F(sock_conn, relayed_challenge_not_proven)
{
    ASSERT_NO_FATAL_FAILURE(open(m_b));
    ASSERT_NO_FATAL_FAILURE(open(m_c));
    int fd;
    aptus_conn_t *victim_conn;
    ASSERT_NO_FATAL_FAILURE(raw_client_of_b(&fd, &victim_conn));
    std::vector<uint8_t> req;
    aptus_frame_t f;
    ASSERT_NO_FATAL_FAILURE(read_prove_req(fd, req, &f));

    /* relay it to c over a raw connection of the attacker's: c answers on
     * b's rendezvous socket, for that other connection */
    int fd2 = raw_connect(m_c.wire);
    ASSERT_GE(fd2, 0);
    m_raw.push_back(fd2);
    std::vector<uint8_t> body(f.payload, f.payload + f.length);
    ASSERT_TRUE(raw_send(fd2, frame(APTUS_FRAME_TYPE_PROVE_REQ, body)));
    ASSERT_TRUE(wait_for([&] { return m_b.wire->stats.pid_unproven == 1; }));
    EXPECT_EQ(0, m_b.wire->ops->peer_pid(victim_conn));
    EXPECT_EQ(0u, m_b.wire->stats.pid_proven);
}
