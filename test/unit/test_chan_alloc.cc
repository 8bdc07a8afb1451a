/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: allocation of RC and fast-path channels under caps: the
 * earning rule, agreement of both sides, refusal, simultaneous requests,
 * demotion with hysteresis, and a randomized many-process simulation in
 * which no process ever holds more than its caps.
 */
#include "proto/chan_alloc.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

namespace
{

aptus_alloc_config_t test_config()
{
    aptus_alloc_config_t c;
    memset(&c, 0, sizeof(c));
    c.max[APTUS_ALLOC_RC] = 16;
    c.max[APTUS_ALLOC_FP] = 8;
    c.window_us           = 100000;
    c.rc_msgs             = 64;
    c.rc_bytes            = 1 << 20;
    c.fp_msgs             = 128;
    c.fp_max_size         = 2048;
    c.request_timeout_us  = 1000000;
    c.backoff_us          = 500000;
    c.idle_us             = 2000000;
    c.hold_us             = 1000000;
    return c;
}

/* n messages of size bytes at one per microsecond; the first action. */
aptus_alloc_action_t send_n(aptus_alloc_t &a, aptus_alloc_peer_t &p, int n,
                            size_t size, uint64_t &now,
                            aptus_alloc_kind_t &kind,
                            aptus_alloc_kind_t used = APTUS_ALLOC_KIND_LAST)
{
    aptus_alloc_action_t act = APTUS_ALLOC_ACT_NONE;
    for (int i = 0; i < n; ++i) {
        aptus_alloc_kind_t k;
        aptus_alloc_action_t r =
            aptus_alloc_sent(&a, &p, size, used, now++, &k);
        if ((r != APTUS_ALLOC_ACT_NONE) && (act == APTUS_ALLOC_ACT_NONE)) {
            act  = r;
            kind = k;
        }
    }
    return act;
}

/* Two processes, each with the other as a peer. */
struct two_sides {
    aptus_alloc_config_t c = test_config();
    aptus_alloc_t a, b;
    aptus_alloc_peer_t a_to_b, b_to_a;
    uint64_t now = 0;

    two_sides()
    {
        aptus_alloc_init(&a, &c);
        aptus_alloc_init(&b, &c);
        aptus_alloc_peer_init(&a_to_b, now);
        aptus_alloc_peer_init(&b_to_a, now);
    }

    /* a earns a connection to b, b grants it, a opens it */
    void rc_up()
    {
        aptus_alloc_kind_t kind;
        ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST,
                  send_n(a, a_to_b, 64, 100, now, kind));
        ASSERT_EQ(APTUS_ALLOC_ACT_GRANT,
                  aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_RC, now));
        ASSERT_EQ(APTUS_ALLOC_ACT_OPEN,
                  aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_RC, 1, now));
    }
};

} // namespace

TEST(chan_alloc, configuration_is_checked)
{
    aptus_alloc_config_t c = test_config();
    EXPECT_EQ(nullptr, aptus_alloc_config_check(&c));
    c.max[APTUS_ALLOC_FP] = 17;
    EXPECT_NE(nullptr, aptus_alloc_config_check(&c));
    c           = test_config();
    c.window_us = 0;
    EXPECT_NE(nullptr, aptus_alloc_config_check(&c));
    c          = test_config();
    c.rc_msgs  = 0;
    c.rc_bytes = 0;
    EXPECT_NE(nullptr, aptus_alloc_config_check(&c));
}

TEST(chan_alloc, a_connection_is_earned_by_sustained_traffic)
{
    aptus_alloc_config_t c = test_config();
    aptus_alloc_t a;
    aptus_alloc_peer_t p;
    uint64_t now = 1000;
    aptus_alloc_kind_t kind;
    aptus_alloc_init(&a, &c);
    aptus_alloc_peer_init(&p, now);

    /* 63 messages in a window: not yet; the window restarts the count */
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, send_n(a, p, 63, 100, now, kind));
    now += c.window_us;
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, send_n(a, p, 63, 100, now, kind));
    /* the 64th in one window earns it */
    EXPECT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, p, 1, 100, now, kind));
    EXPECT_EQ(APTUS_ALLOC_RC, kind);
    EXPECT_EQ(1u, a.used[APTUS_ALLOC_RC]);
    /* asked once: no second request while it waits */
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, send_n(a, p, 100, 100, now, kind));

    /* bytes earn it too */
    aptus_alloc_peer_t q;
    aptus_alloc_peer_init(&q, now);
    EXPECT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, q, 2, 512 * 1024, now, kind));
    EXPECT_EQ(APTUS_ALLOC_RC, kind);
    EXPECT_EQ(2u, a.used[APTUS_ALLOC_RC]);
}

TEST(chan_alloc, both_sides_agree_before_a_channel_is_used)
{
    two_sides t;
    aptus_alloc_t &a = t.a, &b = t.b;
    aptus_alloc_peer_t &a_to_b = t.a_to_b, &b_to_a = t.b_to_a;
    uint64_t &now = t.now;
    aptus_alloc_kind_t kind;

    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, a_to_b, 64, 100, now, kind));
    EXPECT_EQ(APTUS_ALLOC_REQUESTED, a_to_b.slot[APTUS_ALLOC_RC].state);
    EXPECT_EQ(APTUS_ALLOC_ACT_GRANT,
              aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_RC, now));
    EXPECT_EQ(APTUS_ALLOC_GRANTED, b_to_a.slot[APTUS_ALLOC_RC].state);
    EXPECT_EQ(APTUS_ALLOC_ACT_OPEN,
              aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_RC, 1, now));
    EXPECT_EQ(APTUS_ALLOC_GRANTED, a_to_b.slot[APTUS_ALLOC_RC].state);
    EXPECT_EQ(1u, a.used[APTUS_ALLOC_RC]);
    EXPECT_EQ(1u, b.used[APTUS_ALLOC_RC]);

    /* then the fast path, earned by small messages over RC */
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST,
              send_n(a, a_to_b, 128, 64, now, kind, APTUS_ALLOC_RC));
    EXPECT_EQ(APTUS_ALLOC_FP, kind);
    EXPECT_EQ(APTUS_ALLOC_ACT_GRANT,
              aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_FP, now));
    EXPECT_EQ(APTUS_ALLOC_ACT_OPEN,
              aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_FP, 1, now));
}

TEST(chan_alloc, simultaneous_requests_take_one_slot_each)
{
    two_sides t;
    aptus_alloc_t &a = t.a, &b = t.b;
    aptus_alloc_peer_t &a_to_b = t.a_to_b, &b_to_a = t.b_to_a;
    uint64_t &now = t.now;
    aptus_alloc_kind_t kind;

    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, a_to_b, 64, 100, now, kind));
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(b, b_to_a, 64, 100, now, kind));
    /* each request crosses the other: each is the other's grant */
    EXPECT_EQ(APTUS_ALLOC_ACT_GRANT,
              aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_RC, now));
    EXPECT_EQ(APTUS_ALLOC_ACT_GRANT,
              aptus_alloc_requested(&a, &a_to_b, APTUS_ALLOC_RC, now));
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE,
              aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_RC, 1, now));
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE,
              aptus_alloc_answered(&b, &b_to_a, APTUS_ALLOC_RC, 1, now));
    EXPECT_EQ(1u, a.used[APTUS_ALLOC_RC]);
    EXPECT_EQ(1u, b.used[APTUS_ALLOC_RC]);
    EXPECT_EQ(APTUS_ALLOC_GRANTED, a_to_b.slot[APTUS_ALLOC_RC].state);
    EXPECT_EQ(APTUS_ALLOC_GRANTED, b_to_a.slot[APTUS_ALLOC_RC].state);
}

TEST(chan_alloc, a_peer_at_its_cap_refuses_and_the_asker_stays_on_ud)
{
    aptus_alloc_config_t c = test_config();
    c.max[APTUS_ALLOC_RC]  = 1;
    c.max[APTUS_ALLOC_FP]  = 1;
    aptus_alloc_t a, b;
    aptus_alloc_peer_t a_to_b, b_to_x, b_to_a;
    uint64_t now = 0;
    aptus_alloc_kind_t kind;
    aptus_alloc_init(&a, &c);
    aptus_alloc_init(&b, &c);
    aptus_alloc_peer_init(&a_to_b, now);
    aptus_alloc_peer_init(&b_to_x, now);
    aptus_alloc_peer_init(&b_to_a, now);

    /* b's one RC slot goes to x */
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(b, b_to_x, 64, 100, now, kind));
    /* b may not even ask for a: its cap is reached */
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, send_n(b, b_to_a, 200, 100, now, kind));
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, a_to_b, 64, 100, now, kind));
    EXPECT_EQ(APTUS_ALLOC_ACT_REFUSE,
              aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_RC, now));
    EXPECT_EQ(1u, b.used[APTUS_ALLOC_RC]);
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE,
              aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_RC, 0, now));
    EXPECT_EQ(0u, a.used[APTUS_ALLOC_RC]);
    EXPECT_EQ(1u, a.stats.refused[APTUS_ALLOC_RC]);
    /* it asks again only after the backoff */
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, send_n(a, a_to_b, 200, 100, now, kind));
    now += c.backoff_us;
    EXPECT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, a_to_b, 64, 100, now, kind));
    /* a fast path without RC is refused */
    aptus_alloc_peer_t fresh;
    aptus_alloc_peer_init(&fresh, now);
    EXPECT_EQ(APTUS_ALLOC_ACT_REFUSE,
              aptus_alloc_requested(&a, &fresh, APTUS_ALLOC_FP, now));
}

TEST(chan_alloc, idle_channels_are_demoted_with_hysteresis)
{
    two_sides t;
    aptus_alloc_config_t &c = t.c;
    aptus_alloc_t &a = t.a, &b = t.b;
    aptus_alloc_peer_t &a_to_b = t.a_to_b, &b_to_a = t.b_to_a;
    uint64_t &now = t.now;
    aptus_alloc_kind_t kind;
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, a_to_b, 64, 100, now, kind));
    aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_RC, now);
    aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_RC, 1, now);
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST,
              send_n(a, a_to_b, 128, 64, now, kind, APTUS_ALLOC_RC));
    aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_FP, now);
    ASSERT_EQ(APTUS_ALLOC_ACT_OPEN,
              aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_FP, 1, now));

    /* in use: nothing goes */
    for (int i = 0; i < 50; ++i) {
        now += c.idle_us / 10;
        send_n(a, a_to_b, 1, 64, now, kind, APTUS_ALLOC_FP);
        EXPECT_EQ(APTUS_ALLOC_ACT_NONE,
                  aptus_alloc_check(&a, &a_to_b, now, &kind));
    }
    /* idle: the fast path goes first, then the connection */
    now += c.idle_us;
    ASSERT_EQ(APTUS_ALLOC_ACT_DEMOTE,
              aptus_alloc_check(&a, &a_to_b, now, &kind));
    EXPECT_EQ(APTUS_ALLOC_FP, kind);
    aptus_alloc_release(&b, &b_to_a, APTUS_ALLOC_FP, now);
    ASSERT_EQ(APTUS_ALLOC_ACT_DEMOTE,
              aptus_alloc_check(&a, &a_to_b, now, &kind));
    EXPECT_EQ(APTUS_ALLOC_RC, kind);
    aptus_alloc_release(&b, &b_to_a, APTUS_ALLOC_RC, now);
    EXPECT_EQ(0u, a.used[APTUS_ALLOC_RC] + a.used[APTUS_ALLOC_FP]);
    EXPECT_EQ(0u, b.used[APTUS_ALLOC_RC] + b.used[APTUS_ALLOC_FP]);

    /* hysteresis: heavy traffic right after does not bring it back ... */
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, send_n(a, a_to_b, 500, 100, now, kind));
    /* ... until hold_us passed and it is earned again */
    now += c.hold_us;
    EXPECT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, a_to_b, 64, 100, now, kind));

    /* a channel younger than hold_us stays even when idle */
    aptus_alloc_requested(&b, &b_to_a, APTUS_ALLOC_RC, now);
    aptus_alloc_answered(&a, &a_to_b, APTUS_ALLOC_RC, 1, now);
    c.idle_us = 10;
    a.config  = c;
    now += c.hold_us / 2;
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, aptus_alloc_check(&a, &a_to_b, now, &kind));
    now += c.hold_us / 2;
    EXPECT_EQ(APTUS_ALLOC_ACT_DEMOTE,
              aptus_alloc_check(&a, &a_to_b, now, &kind));
}

/* The transport checks with the time its progress call began, while the
 * messages sent from inside that call are stamped later: a channel used
 * "after" the check's clock was used just now, and stays (a halo exchange
 * lost its busy connections one hold period after they came up). */
TEST(chan_alloc, a_use_stamped_after_the_check_time_keeps_the_channel)
{
    two_sides t;
    aptus_alloc_t &a           = t.a;
    aptus_alloc_peer_t &a_to_b = t.a_to_b;
    uint64_t &now              = t.now;
    aptus_alloc_kind_t kind;
    ASSERT_NO_FATAL_FAILURE(t.rc_up());

    for (int i = 0; i < 100; ++i) {
        uint64_t check_at = now + t.c.hold_us / 10;
        now               = check_at + 3; /* sent within the progress call */
        send_n(a, a_to_b, 1, 100000, now, kind, APTUS_ALLOC_RC);
        ASSERT_EQ(APTUS_ALLOC_ACT_NONE,
                  aptus_alloc_check(&a, &a_to_b, check_at, &kind))
            << "check " << i;
    }
    EXPECT_EQ(0u, a.stats.demoted[APTUS_ALLOC_RC]);
    EXPECT_EQ(APTUS_ALLOC_GRANTED, a_to_b.slot[APTUS_ALLOC_RC].state);
}

TEST(chan_alloc, unanswered_request_gives_its_slot_back)
{
    aptus_alloc_config_t c = test_config();
    aptus_alloc_t a;
    aptus_alloc_peer_t p;
    uint64_t now = 0;
    aptus_alloc_kind_t kind;
    aptus_alloc_init(&a, &c);
    aptus_alloc_peer_init(&p, now);
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST, send_n(a, p, 64, 100, now, kind));
    now += c.request_timeout_us;
    EXPECT_EQ(APTUS_ALLOC_ACT_NONE, aptus_alloc_check(&a, &p, now, &kind));
    EXPECT_EQ(0u, a.used[APTUS_ALLOC_RC]);
    EXPECT_EQ(1u, a.stats.expired[APTUS_ALLOC_RC]);
    /* a late grant takes a slot again when there is room */
    EXPECT_EQ(APTUS_ALLOC_ACT_OPEN,
              aptus_alloc_answered(&a, &p, APTUS_ALLOC_RC, 1, now));
    EXPECT_EQ(1u, a.used[APTUS_ALLOC_RC]);
}

/* A fast path to a peer whose memory the wire cannot reach (another
 * host): barred, it is never asked for however small and many the
 * messages, the peer's requests are refused, and a slot held for it goes
 * back. RC to that peer is untouched. */
TEST(chan_alloc, a_barred_fast_path_is_never_asked_for_nor_granted)
{
    two_sides s;
    ASSERT_NO_FATAL_FAILURE(s.rc_up());
    aptus_alloc_kind_t kind;
    /* b earns the fast path and asks; a has since learnt b is remote */
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST,
              send_n(s.b, s.b_to_a, 128, 64, s.now, kind, APTUS_ALLOC_RC));
    EXPECT_EQ(APTUS_ALLOC_FP, kind);
    aptus_alloc_bar(&s.a, &s.a_to_b, APTUS_ALLOC_FP, s.now);
    EXPECT_EQ(APTUS_ALLOC_ACT_REFUSE,
              aptus_alloc_requested(&s.a, &s.a_to_b, APTUS_ALLOC_FP, s.now));
    EXPECT_EQ(1u, s.a.stats.refusals[APTUS_ALLOC_FP]);
    EXPECT_EQ(1u, s.a.stats.barred[APTUS_ALLOC_FP]);

    /* a sends small messages over RC for a long time: never a request */
    for (int round = 0; round < 20; ++round) {
        EXPECT_EQ(APTUS_ALLOC_ACT_NONE,
                  send_n(s.a, s.a_to_b, 1000, 64, s.now, kind, APTUS_ALLOC_RC));
        s.now += s.c.hold_us;
    }
    EXPECT_EQ(0u, s.a.stats.requested[APTUS_ALLOC_FP]);
    EXPECT_EQ(0u, s.a.used[APTUS_ALLOC_FP]);
    EXPECT_EQ(APTUS_ALLOC_GRANTED, s.a_to_b.slot[APTUS_ALLOC_RC].state);

    /* a late GRANT of a request a made before it knew: let go at once */
    aptus_alloc_peer_t p;
    aptus_alloc_peer_init(&p, s.now);
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST,
              send_n(s.a, p, 64, 64, s.now, kind)); /* RC */
    ASSERT_EQ(APTUS_ALLOC_ACT_OPEN,
              aptus_alloc_answered(&s.a, &p, APTUS_ALLOC_RC, 1, s.now));
    ASSERT_EQ(APTUS_ALLOC_ACT_REQUEST,
              send_n(s.a, p, 128, 64, s.now, kind, APTUS_ALLOC_RC));
    ASSERT_EQ(APTUS_ALLOC_FP, kind);
    ASSERT_EQ(1u, s.a.used[APTUS_ALLOC_FP]);
    aptus_alloc_bar(&s.a, &p, APTUS_ALLOC_FP, s.now);
    EXPECT_EQ(0u, s.a.used[APTUS_ALLOC_FP]);
    EXPECT_EQ(APTUS_ALLOC_ACT_DEMOTE,
              aptus_alloc_answered(&s.a, &p, APTUS_ALLOC_FP, 1, s.now));
    EXPECT_EQ(0u, s.a.used[APTUS_ALLOC_FP]);
}

namespace
{

/* Processes exchanging requests, answers and demotions with random
 * delays, each sending mostly to a few heavy peers. */
struct sim {
    enum msg_type { REQ, GRANT, REFUSE, DEMOTE };
    struct msg {
        int from, to;
        msg_type type;
        aptus_alloc_kind_t kind;
        uint64_t at;
    };
    struct proc {
        aptus_alloc_t alloc;
        std::vector<aptus_alloc_peer_t> peers;
    };

    std::vector<proc> procs;
    std::vector<msg> net;
    std::mt19937 rng{ 11 };
    uint64_t now = 0;

    sim(int n, const aptus_alloc_config_t &c) : procs(n)
    {
        for (auto &p : procs) {
            aptus_alloc_init(&p.alloc, &c);
            p.peers.resize(n);
            for (auto &peer : p.peers) {
                aptus_alloc_peer_init(&peer, 0);
            }
        }
    }

    void post(int from, int to, msg_type type, aptus_alloc_kind_t kind)
    {
        net.push_back({ from, to, type, kind, now + 1 + rng() % 3000 });
    }

    void act(int self, int peer, aptus_alloc_action_t a,
             aptus_alloc_kind_t kind)
    {
        switch (a) {
        case APTUS_ALLOC_ACT_REQUEST:
            post(self, peer, REQ, kind);
            break;
        case APTUS_ALLOC_ACT_GRANT:
            post(self, peer, GRANT, kind);
            break;
        case APTUS_ALLOC_ACT_REFUSE:
            post(self, peer, REFUSE, kind);
            break;
        case APTUS_ALLOC_ACT_DEMOTE:
            post(self, peer, DEMOTE, kind);
            break;
        default:
            break;
        }
    }

    void deliver(bool all)
    {
        for (size_t i = 0; i < net.size();) {
            if (!all && (net[i].at > now)) {
                ++i;
                continue;
            }
            msg m = net[i];
            net.erase(net.begin() + i);
            proc &p                = procs[m.to];
            aptus_alloc_peer_t &pp = p.peers[m.from];
            switch (m.type) {
            case REQ:
                act(m.to, m.from,
                    aptus_alloc_requested(&p.alloc, &pp, m.kind, now), m.kind);
                break;
            case GRANT:
            case REFUSE:
                act(m.to, m.from,
                    aptus_alloc_answered(&p.alloc, &pp, m.kind, m.type == GRANT,
                                         now),
                    m.kind);
                break;
            case DEMOTE:
                aptus_alloc_release(&p.alloc, &pp, m.kind, now);
                break;
            }
        }
    }

    void check_caps()
    {
        for (auto &p : procs) {
            for (int k = 0; k < APTUS_ALLOC_KIND_LAST; ++k) {
                unsigned held = 0;
                for (auto &peer : p.peers) {
                    held += peer.slot[k].state != APTUS_ALLOC_NONE;
                }
                ASSERT_EQ(held, p.alloc.used[k]);
                ASSERT_LE(p.alloc.used[k], p.alloc.config.max[k]);
            }
        }
    }
};

} // namespace

TEST(chan_alloc, many_processes_never_exceed_their_caps)
{
    aptus_alloc_config_t c = test_config();
    c.max[APTUS_ALLOC_RC]  = 4;
    c.max[APTUS_ALLOC_FP]  = 2;
    c.window_us            = 20000;
    c.rc_msgs              = 20;
    c.fp_msgs              = 30;
    c.request_timeout_us   = 2500; /* some requests expire in flight */
    c.backoff_us           = 5000;
    c.idle_us              = 30000;
    c.hold_us              = 10000;
    const int n            = 24;
    sim s(n, c);
    std::vector<std::vector<int>> heavy(n);
    for (int i = 0; i < n; ++i) {
        for (int h = 0; h < 6; ++h) {
            heavy[i].push_back((i + 1 + h * 3) % n);
        }
    }
    for (int step = 0; step < 400000; ++step) {
        s.now += 2;
        int self = s.rng() % n;
        /* the heavy set moves every 100,000 steps, so channels must move */
        int peer = (s.rng() % 10 < 8)
                       ? heavy[self][(s.rng() % 3 + step / 100000) % 6]
                       : (int)(s.rng() % n);
        if (peer == self) {
            continue;
        }
        aptus_alloc_peer_t &pp = s.procs[self].peers[peer];
        aptus_alloc_kind_t used =
            (pp.slot[APTUS_ALLOC_FP].state == APTUS_ALLOC_GRANTED)
                ? APTUS_ALLOC_FP
            : (pp.slot[APTUS_ALLOC_RC].state == APTUS_ALLOC_GRANTED)
                ? APTUS_ALLOC_RC
                : APTUS_ALLOC_KIND_LAST;
        aptus_alloc_kind_t kind = APTUS_ALLOC_KIND_LAST;
        size_t size             = (s.rng() % 4 == 0) ? 65536 : 256;
        aptus_alloc_action_t a  = aptus_alloc_sent(&s.procs[self].alloc, &pp,
                                                   size, used, s.now, &kind);
        s.act(self, peer, a, kind);
        if (step % 64 == 0) {
            int q = s.rng() % n;
            for (int o = 0; o < n; ++o) {
                if (o != q) {
                    a = aptus_alloc_check(&s.procs[q].alloc,
                                          &s.procs[q].peers[o], s.now, &kind);
                    s.act(q, o, a, kind);
                }
            }
        }
        s.deliver(false);
        if (step % 1000 == 0) {
            s.check_caps();
            if (HasFatalFailure()) {
                return;
            }
        }
    }
    /* quiet: everything in flight arrives; both sides agree on each pair */
    s.deliver(true);
    s.check_caps();
    uint64_t granted = 0, demoted = 0, refused = 0;
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
            for (int k = 0; k < APTUS_ALLOC_KIND_LAST; ++k) {
                EXPECT_EQ(
                    s.procs[i].peers[j].slot[k].state == APTUS_ALLOC_GRANTED,
                    s.procs[j].peers[i].slot[k].state == APTUS_ALLOC_GRANTED)
                    << i << "-" << j << " kind " << k << " states "
                    << (int)s.procs[i].peers[j].slot[k].state << "/"
                    << (int)s.procs[j].peers[i].slot[k].state << " rc "
                    << (int)s.procs[i].peers[j].slot[0].state << "/"
                    << (int)s.procs[j].peers[i].slot[0].state;
            }
        }
        granted += s.procs[i].alloc.stats.granted[APTUS_ALLOC_RC];
        demoted += s.procs[i].alloc.stats.demoted[APTUS_ALLOC_RC];
        refused += s.procs[i].alloc.stats.refusals[APTUS_ALLOC_RC];
        EXPECT_EQ(c.max[APTUS_ALLOC_RC],
                  s.procs[i].alloc.stats.peak[APTUS_ALLOC_RC]);
    }
    /* the caps were contended, and the channels followed the traffic */
    EXPECT_GT(granted, 0u);
    EXPECT_GT(demoted, 0u);
    EXPECT_GT(refused, 0u);
}
