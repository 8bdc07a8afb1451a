/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the multicast broadcast protocol (src/proto/mcast_window.c)
 * on a deterministic fake multicast network: datagrams wait in per-rank
 * queues with a delivery time; a seeded generator chooses loss,
 * duplication and reordering, and a slow rank drains its queue rarely.
 * Every datagram goes through aptus_mc_hdr_build and aptus_mc_hdr_parse.
 * MC_TRACE=1 in the environment prints every datagram sent and received.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/mcast_window.h"
}

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <queue>
#include <random>
#include <vector>

namespace
{

const uint64_t job_key = 0x5eed0000c0ffee01ull;

aptus_mc_config_t test_config()
{
    aptus_mc_config_t cfg;

    aptus_mc_config_default(&cfg);
    cfg.window       = 16;
    cfg.ack_every    = 4;
    cfg.frag_size    = 256;
    cfg.max_msg      = 2048;
    cfg.ack_delay_us = 100;
    cfg.rto_min_us   = 200;
    cfg.rto_max_us   = 20000;
    cfg.rto_init_us  = 500;
    return cfg;
}

struct net_params {
    double data_loss     = 0;  /* per receiver of a multicast */
    double p2p_loss      = 0;  /* point-to-point, repairs and control */
    double dup           = 0;  /* a datagram arrives twice */
    uint32_t delay_us    = 10; /* one way */
    uint32_t jitter_us   = 0;  /* extra delay, 0 .. jitter: reorders */
    int slow_rank        = -1; /* drains its queue every slow_period steps */
    uint32_t slow_period = 1;
    double foreign       = 0; /* another job's datagram on the group */
};

struct datagram {
    uint64_t at;
    uint64_t serial;
    std::vector<uint8_t> bytes;
    bool operator<(const datagram &o) const
    {
        return (at != o.at) ? (at > o.at) : (serial > o.serial);
    }
};

uint8_t msg_byte(uint32_t seq, uint32_t i)
{
    return (uint8_t)(seq * 131u + i * 7u + 1u);
}

class sim;

struct rank_ctx {
    sim *s;
    uint32_t rank;
};

class sim
{
  public:
    sim(uint32_t n, const aptus_mc_config_t &cfg, const net_params &np,
        uint64_t seed)
        : m_n(n), m_cfg(cfg), m_np(np), m_rng(seed), m_w(n), m_ctx(n), m_q(n),
          m_delivered(n, 0)
    {
        static const aptus_mc_ops_t ops = { op_mcast, op_send, op_deliver };

        for (uint32_t r = 0; r < n; ++r) {
            m_ctx[r] = rank_ctx{ this, r };
            EXPECT_EQ(APTUS_MC_OK,
                      aptus_mc_window_init(&m_w[r], &cfg, n, r, job_key, &ops,
                                           &m_ctx[r]));
        }
    }

    ~sim()
    {
        for (auto &w : m_w) {
            aptus_mc_window_cleanup(&w);
        }
    }

    /* The program every rank runs: broadcast k from roots[k], k = 0 ..
     * count - 1, each rank in order; a rank is the root of k only once it
     * delivered k - 1 (MPI's collective order). Returns false on a hang. */
    bool run(const std::vector<uint32_t> &roots,
             const std::vector<uint32_t> &lens, uint64_t max_steps = 400000)
    {
        uint32_t count = roots.size();

        m_roots = roots;
        m_lens  = lens;
        for (uint64_t step = 0; step < max_steps; ++step) {
            bool done = true;
            m_now += 5;
            for (uint32_t r = 0; r < m_n; ++r) {
                if (((int)r == m_np.slow_rank) &&
                    (step % m_np.slow_period != 0)) {
                    done = done && (m_delivered[r] == count);
                    continue; /* busy elsewhere: no progress at all */
                }
                drain(r);
                aptus_mc_window_progress(&m_w[r], m_now);
                uint32_t k = m_delivered[r];
                if ((k < count) && (roots[k] == r)) {
                    try_bcast(r, k);
                }
                done = done && (m_delivered[r] == count);
            }
            if (done) {
                return true;
            }
        }
        return false;
    }

    /* Let everything in flight arrive (the slow rank too). */
    void flush()
    {
        for (int i = 0; i < 100; ++i) {
            m_now += 5;
            for (uint32_t r = 0; r < m_n; ++r) {
                drain(r);
            }
        }
    }

    /* Run the timers until no rank's root timer may act; false if one
     * still may after max_steps. */
    bool settle(uint64_t max_steps = 20000)
    {
        for (uint64_t step = 0; step < max_steps; ++step) {
            bool pending = false;
            m_now += 5;
            for (uint32_t r = 0; r < m_n; ++r) {
                drain(r);
                aptus_mc_window_progress(&m_w[r], m_now);
                pending = pending || aptus_mc_window_root_pending(&m_w[r]);
            }
            if (!pending) {
                return true;
            }
        }
        return false;
    }

    aptus_mc_window_t &w(uint32_t r)
    {
        return m_w[r];
    }

    uint64_t now() const
    {
        return m_now;
    }

    /* what the checks found */
    unsigned errors          = 0; /* wrong order, bytes or root */
    unsigned false_repairs   = 0; /* repair to a rank that had it */
    unsigned repairs         = 0;
    uint64_t max_ahead       = 0; /* root seq - least have, at a bcast */
    unsigned foreign_sent    = 0;
    unsigned foreign_dropped = 0;
    unsigned parse_errors    = 0;
    std::map<uint8_t, uint64_t> sent_by_type;
    /* explicit, not requested ACKs per (co-root, ack value) */
    std::map<std::pair<uint32_t, uint32_t>, unsigned> acks_per_slot;
    /* repairs sent per (destination, seq) */
    std::map<std::pair<uint32_t, uint32_t>, unsigned> repair_to;

    uint64_t control_sent() const
    {
        uint64_t n = 0;
        for (auto &kv : sent_by_type) {
            if (!aptus_mc_type_has_data(kv.first)) {
                n += kv.second;
            }
        }
        return n;
    }

  private:
    static void op_mcast(void *arg, const aptus_mc_hdr_t *hdr,
                         const void *payload)
    {
        rank_ctx *c = (rank_ctx *)arg;
        c->s->on_mcast(c->rank, hdr, payload);
    }

    static void op_send(void *arg, uint32_t dest, const aptus_mc_hdr_t *hdr,
                        const void *payload)
    {
        rank_ctx *c = (rank_ctx *)arg;
        c->s->on_send(c->rank, dest, hdr, payload);
    }

    static void op_deliver(void *arg, uint32_t seq, uint32_t root,
                           const void *data, uint32_t len)
    {
        rank_ctx *c = (rank_ctx *)arg;
        c->s->on_deliver(c->rank, seq, root, data, len);
    }

    std::vector<uint8_t> encode(const aptus_mc_hdr_t *hdr, const void *payload)
    {
        std::vector<uint8_t> b(aptus_mc_len(hdr));
        aptus_mc_hdr_build(b.data(), hdr);
        if (hdr->payload_len) {
            memcpy(b.data() + APTUS_MC_HDR_LEN, payload, hdr->payload_len);
        }
        return b;
    }

    double coin()
    {
        return std::uniform_real_distribution<double>(0, 1)(m_rng);
    }

    void post(uint32_t dest, const std::vector<uint8_t> &b, double loss,
              bool may_dup = true)
    {
        if (coin() < loss) {
            return;
        }
        int copies = (may_dup && (coin() < m_np.dup)) ? 2 : 1;
        for (int i = 0; i < copies; ++i) {
            uint64_t at = m_now + m_np.delay_us;
            if (m_np.jitter_us) {
                at += m_rng() % (m_np.jitter_us + 1);
            }
            m_q[dest].push(datagram{ at, m_serial++, b });
        }
    }

    void on_mcast(uint32_t from, const aptus_mc_hdr_t *hdr, const void *payload)
    {
        std::vector<uint8_t> b = encode(hdr, payload);
        sent_by_type[hdr->type]++;
        for (uint32_t r = 0; r < m_n; ++r) {
            if (r != from) {
                post(r, b, m_np.data_loss);
            }
        }
        if (coin() < m_np.foreign) {
            /* someone else's broadcast on the same group */
            aptus_mc_hdr_t other = *hdr;
            other.key ^= 0xffff;
            foreign_sent += m_n - 1;
            for (uint32_t r = 0; r < m_n; ++r) {
                if (r != from) {
                    post(r, encode(&other, payload), 0, false);
                }
            }
        }
    }

    bool holds(uint32_t r, uint32_t seq)
    {
        const aptus_mc_window_t &w = m_w[r];
        const aptus_mc_slot_t &s   = w.slots[seq % w.cfg.window];
        return aptus_mc_seq_lt(seq, w.have) ||
               ((s.state == APTUS_MC_SLOT_COMPLETE) && (s.seq == seq));
    }

    void on_send(uint32_t from, uint32_t dest, const aptus_mc_hdr_t *hdr,
                 const void *payload)
    {
        EXPECT_LT(dest, m_n);
        EXPECT_NE(from, dest);
        sent_by_type[hdr->type]++;
        if ((hdr->type == APTUS_MC_TYPE_REPAIR) && (hdr->frag == 0)) {
            repairs++;
            repair_to[{ dest, hdr->seq }]++;
            if (holds(dest, hdr->seq)) {
                false_repairs++;
                if (getenv("MC_TRACE")) {
                    printf("%llu FALSE repair %u -> %u seq %u\n",
                           (unsigned long long)m_now, from, dest, hdr->seq);
                }
            }
        }
        if (getenv("MC_TRACE")) {
            char line[200];
            aptus_mc_hdr_snprint(hdr, line, sizeof(line));
            printf("%llu %u -> %u: %s\n", (unsigned long long)m_now, from, dest,
                   line);
        }
        if ((hdr->type == APTUS_MC_TYPE_ACK) &&
            !(hdr->flags & APTUS_MC_F_REPLY)) {
            acks_per_slot[{ dest, hdr->ack }]++;
        }
        post(dest, encode(hdr, payload), m_np.p2p_loss);
    }

    void on_deliver(uint32_t r, uint32_t seq, uint32_t root, const void *data,
                    uint32_t len)
    {
        const uint8_t *p = (const uint8_t *)data;
        bool ok          = (seq == m_delivered[r]) && (seq < m_roots.size()) &&
                  (root == m_roots[seq]) && (len == m_lens[seq]);
        for (uint32_t i = 0; ok && (i < len); ++i) {
            ok = (p[i] == msg_byte(seq, i));
        }
        if (!ok) {
            if (errors++ < 5) {
                ADD_FAILURE()
                    << "rank " << r << " got seq " << seq << " (expected "
                    << m_delivered[r] << ") root " << root << " len " << len;
            }
        }
        m_delivered[r]++;
    }

    void drain(uint32_t r)
    {
        aptus_mc_limits_t lim = { job_key, m_n };

        while (!m_q[r].empty() && (m_q[r].top().at <= m_now)) {
            datagram d = m_q[r].top();
            aptus_mc_hdr_t h;
            m_q[r].pop();
            aptus_mc_parse_status_t st =
                aptus_mc_hdr_parse(d.bytes.data(), d.bytes.size(), &lim, &h);
            if (st == APTUS_MC_PARSE_FOREIGN) {
                foreign_dropped++;
                continue;
            }
            if (st != APTUS_MC_PARSE_OK) {
                parse_errors++;
                continue;
            }
            aptus_mc_recv_status_t rs =
                aptus_mc_window_recv(&m_w[r], &h, m_now);
            if (getenv("MC_TRACE")) {
                char line[200];
                aptus_mc_hdr_snprint(&h, line, sizeof(line));
                printf("%llu %u <- %s: %s (have %u lo %u stable %u)\n",
                       (unsigned long long)m_now, r, line,
                       aptus_mc_recv_status_str(rs), m_w[r].have, m_w[r].lo,
                       m_w[r].stable);
            }
        }
    }

    void try_bcast(uint32_t r, uint32_t k)
    {
        std::vector<uint8_t> buf(m_lens[k]);
        uint32_t seq = ~0u;

        for (uint32_t i = 0; i < buf.size(); ++i) {
            buf[i] = msg_byte(k, i);
        }
        if (m_w[r].have != k) {
            return; /* not yet delivered k - 1 */
        }
        aptus_mc_status_t st =
            aptus_mc_window_bcast(&m_w[r], buf.data(), buf.size(), m_now, &seq);
        if (st == APTUS_MC_ERR_FULL) {
            return;
        }
        ASSERT_EQ(APTUS_MC_OK, st);
        ASSERT_EQ(k, seq);
        uint32_t least = k;
        for (uint32_t o = 0; o < m_n; ++o) {
            least = std::min(least, m_w[o].have);
        }
        max_ahead = std::max<uint64_t>(max_ahead, k - least);
        m_delivered[r]++;
    }

    uint32_t m_n;
    aptus_mc_config_t m_cfg;
    net_params m_np;
    std::mt19937_64 m_rng;
    std::vector<aptus_mc_window_t> m_w;
    std::vector<rank_ctx> m_ctx;
    std::vector<std::priority_queue<datagram>> m_q;
    std::vector<uint32_t> m_delivered;
    std::vector<uint32_t> m_roots, m_lens;
    uint64_t m_now    = 1000000;
    uint64_t m_serial = 0;
};

/* count broadcasts from a few roots, lengths from empty to max_msg (some
 * of several datagrams) */
void make_program(uint32_t n, uint32_t count, uint32_t max_msg, uint64_t seed,
                  std::vector<uint32_t> *roots, std::vector<uint32_t> *lens)
{
    std::mt19937_64 rng(seed);
    uint32_t nroots = std::min<uint32_t>(n, 3);
    std::vector<uint32_t> pool;

    for (uint32_t i = 0; i < nroots; ++i) {
        pool.push_back((uint32_t)(rng() % n));
    }
    roots->clear();
    lens->clear();
    for (uint32_t k = 0; k < count; ++k) {
        /* runs of one root, then another, as applications do */
        roots->push_back(pool[(k / 20) % nroots]);
        uint32_t pick = rng() % 10;
        lens->push_back(pick < 6 ? (uint32_t)(rng() % 200)
                                 : (pick < 9 ? (uint32_t)(rng() % (max_msg + 1))
                                             : max_msg));
    }
}

} // namespace

/* ---- configuration ------------------------------------------------------ */

TEST(mcast_window, config_check_names_the_field)
{
    aptus_mc_config_t cfg = test_config(), bad;

    EXPECT_EQ(nullptr, aptus_mc_config_check(&cfg, 32));
    EXPECT_NE(nullptr, aptus_mc_config_check(&cfg, 0));

    bad        = cfg;
    bad.window = 1;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "WINDOW"));
    bad           = cfg;
    bad.ack_every = cfg.window / 2 + 1;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "ACK_EVERY"));
    bad.ack_every = 0;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "ACK_EVERY"));
    bad            = cfg;
    bad.group_size = 9;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "GROUP_SIZE"));
    bad         = cfg;
    bad.max_msg = cfg.frag_size * 64 + 1;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "MAX_MSG"));
    bad           = cfg;
    bad.frag_size = 0;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "FRAG_SIZE"));
    bad            = cfg;
    bad.rto_max_us = cfg.rto_min_us - 1;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "RTO_MAX"));
    bad             = cfg;
    bad.rto_init_us = cfg.rto_max_us + 1;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "RTO_INIT"));
    bad              = cfg;
    bad.ack_delay_us = 0;
    EXPECT_NE(nullptr, strstr(aptus_mc_config_check(&bad, 8), "ACK_DELAY"));

    aptus_mc_window_t w;
    aptus_mc_ops_t ops = {};
    bad.window         = 0;
    EXPECT_EQ(APTUS_MC_ERR_CONFIG,
              aptus_mc_window_init(&w, &bad, 8, 0, job_key, &ops, nullptr));
    EXPECT_EQ(APTUS_MC_ERR_CONFIG,
              aptus_mc_window_init(&w, &cfg, 8, 8, job_key, &ops, nullptr));
}

TEST(mcast_window, default_group_size_balances_root_and_coroots)
{
    aptus_mc_config_t cfg;

    aptus_mc_config_default(&cfg);
    EXPECT_EQ(nullptr, aptus_mc_config_check(&cfg, 1024));
    EXPECT_EQ(8u, cfg.ack_every);
    /* sqrt(N * M): 1024 * 8 -> 90.5 -> 91; 32 * 8 -> 16; 2 ranks: 2 */
    EXPECT_EQ(91u, aptus_mc_group_size(&cfg, 1024));
    EXPECT_EQ(16u, aptus_mc_group_size(&cfg, 32));
    EXPECT_EQ(2u, aptus_mc_group_size(&cfg, 2));
    EXPECT_EQ(1u, aptus_mc_group_size(&cfg, 1));
    cfg.group_size = 5;
    EXPECT_EQ(5u, aptus_mc_group_size(&cfg, 1024));
}

TEST(mcast_window, status_strings)
{
    for (int s = 0; s < APTUS_MC_ERR_LAST; ++s) {
        EXPECT_STRNE("?", aptus_mc_status_str((aptus_mc_status_t)s));
    }
    for (int s = 0; s < APTUS_MC_RECV_LAST; ++s) {
        EXPECT_STRNE("?", aptus_mc_recv_status_str((aptus_mc_recv_status_t)s));
    }
}

/* ---- small cases, driven by hand ---------------------------------------- */

namespace
{

struct capture {
    std::vector<aptus_mc_hdr_t> mcast, sent;
    std::vector<uint32_t> dest;
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<std::pair<uint32_t, std::vector<uint8_t>>> delivered;
};

void cap_mcast(void *arg, const aptus_mc_hdr_t *h, const void *p)
{
    capture *c = (capture *)arg;
    c->mcast.push_back(*h);
    c->payloads.emplace_back((const uint8_t *)p,
                             (const uint8_t *)p + h->payload_len);
}

void cap_send(void *arg, uint32_t dest, const aptus_mc_hdr_t *h, const void *)
{
    capture *c = (capture *)arg;
    c->sent.push_back(*h);
    c->dest.push_back(dest);
}

void cap_deliver(void *arg, uint32_t seq, uint32_t, const void *d, uint32_t len)
{
    capture *c = (capture *)arg;
    c->delivered.emplace_back(
        seq,
        std::vector<uint8_t>((const uint8_t *)d, (const uint8_t *)d + len));
}

const aptus_mc_ops_t cap_ops = { cap_mcast, cap_send, cap_deliver };

aptus_mc_hdr_t data_for(uint32_t seq, uint32_t root, const uint8_t *payload,
                        uint16_t len)
{
    aptus_mc_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.type        = APTUS_MC_TYPE_DATA;
    h.flags       = APTUS_MC_F_ACK;
    h.key         = job_key;
    h.seq         = seq;
    h.ack         = seq + 1;
    h.root        = root;
    h.sender      = root;
    h.msg_len     = len;
    h.nfrag       = 1;
    h.payload_len = len;
    h.payload     = payload;
    return h;
}

} // namespace

TEST(mcast_window, too_big_falls_back_and_full_window_refuses)
{
    aptus_mc_config_t cfg = test_config();
    aptus_mc_window_t w;
    capture cap;
    uint8_t buf[4096] = { 0 };
    uint32_t seq;

    cfg.window     = 4;
    cfg.ack_every  = 2;
    cfg.group_size = 4; /* one group, co-root 0 */
    ASSERT_EQ(APTUS_MC_OK,
              aptus_mc_window_init(&w, &cfg, 4, 1, job_key, &cap_ops, &cap));
    EXPECT_EQ(APTUS_MC_ERR_TOO_BIG,
              aptus_mc_window_bcast(&w, buf, cfg.max_msg + 1, 10, &seq));
    for (uint32_t k = 0; k < 4; ++k) {
        ASSERT_EQ(APTUS_MC_OK, aptus_mc_window_bcast(&w, buf, 300, 10, &seq));
        EXPECT_EQ(k, seq);
    }
    EXPECT_EQ(8u, cap.mcast.size()); /* 300 bytes: two datagrams each */
    EXPECT_EQ(APTUS_MC_ERR_FULL, aptus_mc_window_bcast(&w, buf, 1, 20, &seq));
    /* it asked the co-root (rank 0, one group of 4) where its group is */
    ASSERT_EQ(1u, cap.sent.size());
    EXPECT_EQ(APTUS_MC_TYPE_POLL, cap.sent[0].type);
    EXPECT_EQ(0u, cap.dest[0]);
    /* and not again before a timeout */
    EXPECT_EQ(APTUS_MC_ERR_FULL, aptus_mc_window_bcast(&w, buf, 1, 30, &seq));
    EXPECT_EQ(1u, cap.sent.size());

    /* the co-root reports its whole group has 0 and 1: two slots free */
    aptus_mc_hdr_t rep;
    memset(&rep, 0, sizeof(rep));
    rep.type      = APTUS_MC_TYPE_REPORT;
    rep.flags     = APTUS_MC_F_ACK | APTUS_MC_F_REPLY;
    rep.key       = job_key;
    rep.ack       = 4;
    rep.group_ack = 2;
    rep.sender    = 0;
    EXPECT_EQ(APTUS_MC_RECV_CONTROL, aptus_mc_window_recv(&w, &rep, 40));
    EXPECT_EQ(2u, w.stable);
    EXPECT_EQ(APTUS_MC_OK, aptus_mc_window_bcast(&w, buf, 1, 50, &seq));
    EXPECT_EQ(APTUS_MC_OK, aptus_mc_window_bcast(&w, buf, 1, 50, &seq));
    EXPECT_EQ(APTUS_MC_ERR_FULL, aptus_mc_window_bcast(&w, buf, 1, 50, &seq));
    aptus_mc_window_cleanup(&w);
}

TEST(mcast_window, early_held_delivered_in_order_duplicates_counted)
{
    aptus_mc_config_t cfg = test_config();
    aptus_mc_window_t w;
    capture cap;
    uint8_t a[3] = { 1, 2, 3 }, b[2] = { 4, 5 }, c[1] = { 6 };

    /* rank 3 of 4 in groups of 2: a leaf whose co-root is 2 */
    cfg.group_size = 2;
    ASSERT_EQ(APTUS_MC_OK,
              aptus_mc_window_init(&w, &cfg, 4, 3, job_key, &cap_ops, &cap));
    aptus_mc_hdr_t h2 = data_for(2, 0, c, 1), h1 = data_for(1, 0, b, 2),
                   h0 = data_for(0, 0, a, 3);
    EXPECT_EQ(APTUS_MC_RECV_EARLY, aptus_mc_window_recv(&w, &h2, 100));
    /* a hole under it: NACK to the co-root at once */
    ASSERT_EQ(1u, cap.sent.size());
    EXPECT_EQ(APTUS_MC_TYPE_NACK, cap.sent[0].type);
    EXPECT_EQ(2u, cap.dest[0]);
    EXPECT_EQ(0u, cap.sent[0].ack);
    EXPECT_EQ(1u << 2, cap.sent[0].sack);
    EXPECT_EQ(APTUS_MC_RECV_DUPLICATE, aptus_mc_window_recv(&w, &h2, 101));
    EXPECT_EQ(APTUS_MC_RECV_EARLY, aptus_mc_window_recv(&w, &h1, 102));
    EXPECT_EQ(0u, cap.delivered.size());
    EXPECT_EQ(1u, cap.sent.size()); /* same hole: no second NACK yet */
    EXPECT_EQ(APTUS_MC_RECV_OK, aptus_mc_window_recv(&w, &h0, 103));
    ASSERT_EQ(3u, cap.delivered.size());
    EXPECT_EQ(0u, cap.delivered[0].first);
    EXPECT_EQ(std::vector<uint8_t>(a, a + 3), cap.delivered[0].second);
    EXPECT_EQ(1u, cap.delivered[1].first);
    EXPECT_EQ(2u, cap.delivered[2].first);
    EXPECT_EQ(APTUS_MC_RECV_DUPLICATE, aptus_mc_window_recv(&w, &h0, 104));
    EXPECT_EQ(2u, w.stats.duplicates);
    EXPECT_EQ(3u, w.stats.delivered);
    EXPECT_EQ(2u, w.stats.early);
    /* rank 3, M = 4: crossing seq 3 would ack; 0..2 do not, so the ACK is
     * due ack_delay after the first message the co-root was not told of
     * (seq 1, held early at 102) */
    EXPECT_EQ(1u, cap.sent.size());
    aptus_mc_window_progress(&w, 102 + cfg.ack_delay_us - 1);
    EXPECT_EQ(1u, cap.sent.size());
    aptus_mc_window_progress(&w, 102 + cfg.ack_delay_us);
    ASSERT_EQ(2u, cap.sent.size());
    EXPECT_EQ(APTUS_MC_TYPE_ACK, cap.sent[1].type);
    EXPECT_EQ(3u, cap.sent[1].ack);

    /* too far ahead: dropped, counted */
    aptus_mc_hdr_t far = data_for(3 + cfg.window, 0, c, 1);
    EXPECT_EQ(APTUS_MC_RECV_OUT_OF_WINDOW, aptus_mc_window_recv(&w, &far, 200));
    /* a fragment that does not fit this configuration */
    aptus_mc_hdr_t odd = data_for(3, 0, c, 1);
    odd.nfrag          = 2;
    EXPECT_EQ(APTUS_MC_RECV_MALFORMED, aptus_mc_window_recv(&w, &odd, 200));
    aptus_mc_window_cleanup(&w);
}

TEST(mcast_window, skewed_ack_fires_on_own_residue)
{
    aptus_mc_config_t cfg = test_config();
    uint8_t x             = 0;

    cfg.group_size = 8;
    for (uint32_t r = 1; r < 8; ++r) {
        aptus_mc_window_t w;
        capture cap;
        ASSERT_EQ(APTUS_MC_OK, aptus_mc_window_init(&w, &cfg, 8, r, job_key,
                                                    &cap_ops, &cap));
        std::vector<uint32_t> acked_at;
        for (uint32_t s = 0; s < 12; ++s) {
            aptus_mc_hdr_t h = data_for(s, 0, &x, 1);
            size_t before    = cap.sent.size();
            aptus_mc_window_recv(&w, &h, 10 + s);
            if (cap.sent.size() > before) {
                EXPECT_EQ(APTUS_MC_TYPE_ACK, cap.sent.back().type);
                acked_at.push_back(s);
            }
        }
        /* one ACK per M messages, on seq == rank (mod M) */
        std::vector<uint32_t> want;
        for (uint32_t s = 0; s < 12; ++s) {
            if (s % cfg.ack_every == r % cfg.ack_every) {
                want.push_back(s);
            }
        }
        EXPECT_EQ(want, acked_at) << "rank " << r;
        aptus_mc_window_cleanup(&w);
    }
}

TEST(mcast_window, piggyback_counts_as_the_lazy_ack)
{
    aptus_mc_config_t cfg = test_config();
    aptus_mc_window_t w;
    capture cap;
    uint8_t x = 0;
    uint32_t ack;

    cfg.group_size = 4;
    ASSERT_EQ(APTUS_MC_OK,
              aptus_mc_window_init(&w, &cfg, 8, 6, job_key, &cap_ops, &cap));
    aptus_mc_hdr_t h = data_for(0, 0, &x, 1);
    aptus_mc_window_recv(&w, &h, 10);
    EXPECT_EQ(0, aptus_mc_window_piggyback(&w, 0, &ack)); /* not my co-root */
    ASSERT_EQ(1, aptus_mc_window_piggyback(&w, 4, &ack));
    EXPECT_EQ(1u, ack);
    aptus_mc_window_progress(&w, 10 + 10 * cfg.ack_delay_us);
    EXPECT_EQ(0u, cap.sent.size()); /* nothing left to acknowledge */
    aptus_mc_window_cleanup(&w);
}

TEST(mcast_window, coroot_collects_group_and_repairs_only_the_laggard)
{
    aptus_mc_config_t cfg = test_config();
    aptus_mc_window_t w;
    capture cap;
    uint8_t x[5] = { 9, 8, 7, 6, 5 };

    /* rank 4 is co-root of {4, 5, 6, 7}; root 0 */
    cfg.group_size = 4;
    ASSERT_EQ(APTUS_MC_OK,
              aptus_mc_window_init(&w, &cfg, 8, 4, job_key, &cap_ops, &cap));
    ASSERT_EQ(3u, w.nmembers);
    aptus_mc_hdr_t h = data_for(0, 0, x, 5);
    EXPECT_EQ(APTUS_MC_RECV_OK, aptus_mc_window_recv(&w, &h, 1000));
    /* prompt report to the root */
    ASSERT_EQ(1u, cap.sent.size());
    EXPECT_EQ(APTUS_MC_TYPE_REPORT, cap.sent[0].type);
    EXPECT_EQ(0u, cap.dest[0]);
    EXPECT_EQ(1u, cap.sent[0].ack);
    EXPECT_EQ(0u, cap.sent[0].group_ack);

    /* 5 and 7 acknowledge, 6 stays silent */
    aptus_mc_window_ack_in(&w, 5, 1, 1050);
    aptus_mc_window_ack_in(&w, 7, 1, 1060);
    EXPECT_EQ(0u, w.group_ack);
    size_t before = cap.sent.size();
    /* no repair before rto + ack_delay */
    aptus_mc_window_progress(&w, 1000 + cfg.rto_init_us + cfg.ack_delay_us - 1);
    EXPECT_EQ(before, cap.sent.size());
    aptus_mc_window_progress(&w, 1000 + cfg.rto_init_us + cfg.ack_delay_us);
    ASSERT_EQ(before + 1, cap.sent.size());
    EXPECT_EQ(APTUS_MC_TYPE_REPAIR, cap.sent.back().type);
    EXPECT_EQ(6u, cap.dest.back());
    EXPECT_TRUE(cap.sent.back().flags & APTUS_MC_F_ACK_REQ);
    /* backoff: not again at once */
    aptus_mc_window_progress(&w, 1000 + cfg.rto_init_us + cfg.ack_delay_us + 1);
    EXPECT_EQ(before + 1, cap.sent.size());

    /* 6 answers: the group is complete, reported to the root */
    aptus_mc_hdr_t ack;
    memset(&ack, 0, sizeof(ack));
    ack.type   = APTUS_MC_TYPE_ACK;
    ack.flags  = APTUS_MC_F_ACK | APTUS_MC_F_REPLY;
    ack.key    = job_key;
    ack.ack    = 1;
    ack.sender = 6;
    EXPECT_EQ(APTUS_MC_RECV_CONTROL, aptus_mc_window_recv(&w, &ack, 1800));
    EXPECT_EQ(1u, w.group_ack);
    EXPECT_EQ(APTUS_MC_TYPE_REPORT, cap.sent.back().type);
    EXPECT_EQ(1u, cap.sent.back().group_ack);
    EXPECT_EQ(1u, w.stats.rtt_samples); /* the repair's round trip */
    aptus_mc_window_cleanup(&w);
}

/* A leaf's NACK is repaired at once even where the round trip is long: the
 * wait for what may still be on its way is half a round trip, but at most
 * half the smallest timeout (a busy host's round trip of milliseconds made
 * every hole wait for a timeout: 1% loss cut broadcasts per second 20x). */
TEST(mcast_window, a_nack_is_repaired_at_once_on_a_slow_network)
{
    aptus_mc_config_t cfg = test_config();
    aptus_mc_window_t w;
    capture cap;
    uint8_t x[5] = { 1, 2, 3, 4, 5 };

    cfg.group_size = 4; /* rank 4 is co-root of {4, 5, 6, 7}; root 0 */
    ASSERT_EQ(APTUS_MC_OK,
              aptus_mc_window_init(&w, &cfg, 8, 4, job_key, &cap_ops, &cap));
    w.srtt_us        = 20000; /* a round trip of 20 ms */
    aptus_mc_hdr_t h = data_for(0, 0, x, 5);
    ASSERT_EQ(APTUS_MC_RECV_OK, aptus_mc_window_recv(&w, &h, 1000));
    h = data_for(1, 0, x, 5);
    ASSERT_EQ(APTUS_MC_RECV_OK, aptus_mc_window_recv(&w, &h, 1000));

    /* leaf 5 holds 1, lacks 0 */
    aptus_mc_hdr_t nack;
    memset(&nack, 0, sizeof(nack));
    nack.type         = APTUS_MC_TYPE_NACK;
    nack.flags        = APTUS_MC_F_ACK;
    nack.key          = job_key;
    nack.ack          = 0;
    nack.sack         = 1u << 1;
    nack.sender       = 5;
    auto repairs_to_5 = [&]() {
        unsigned n = 0;
        for (size_t i = 0; i < cap.sent.size(); ++i) {
            n += (cap.sent[i].type == APTUS_MC_TYPE_REPAIR) &&
                 (cap.dest[i] == 5) && (cap.sent[i].seq == 0);
        }
        return n;
    };
    /* sooner than half the smallest timeout: it may be on its way */
    aptus_mc_window_recv(&w, &nack, 1000 + cfg.rto_min_us / 2 - 1);
    EXPECT_EQ(0u, repairs_to_5());
    /* later, though far sooner than half the round trip: repaired */
    aptus_mc_window_recv(&w, &nack, 1000 + cfg.rto_min_us / 2);
    EXPECT_EQ(1u, repairs_to_5());
    aptus_mc_window_cleanup(&w);
}

TEST(mcast_window, timeout_follows_measured_round_trip)
{
    /* the same loss on a fast and on a slow network: the repair waits
     * about a round trip of each, not a fixed time */
    uint32_t rto[2];
    const uint32_t delays[2] = { 10, 2000 };

    for (int i = 0; i < 2; ++i) {
        aptus_mc_config_t cfg = test_config();
        net_params np;
        std::vector<uint32_t> roots(200, 0), lens(200, 64);
        cfg.rto_min_us = 50;
        cfg.rto_max_us = 1000000;
        np.delay_us    = delays[i];
        np.data_loss   = 0.02;
        sim s(8, cfg, np, 7);
        ASSERT_TRUE(s.run(roots, lens, 4000000));
        EXPECT_EQ(0u, s.errors);
        EXPECT_GT(s.w(0).stats.rtt_samples, 50u);
        rto[i] = aptus_mc_window_rto(&s.w(0));
        /* srtt near the round trip */
        EXPECT_GE(s.w(0).srtt_us, 2 * delays[i]);
        EXPECT_LE(s.w(0).srtt_us, 2 * delays[i] + 100);
    }
    EXPECT_LT(rto[0], 400u);
    EXPECT_GE(rto[1], 4000u);
}

/* ---- the fake network: many ranks, many roots -------------------------- */

class mcast_window_net
    : public ::testing::TestWithParam<std::tuple<uint32_t, uint64_t>>
{
};

TEST_P(mcast_window_net, every_rank_delivers_every_message_once_in_order)
{
    uint32_t n            = std::get<0>(GetParam());
    uint64_t seed         = std::get<1>(GetParam());
    aptus_mc_config_t cfg = test_config();
    net_params np;
    std::vector<uint32_t> roots, lens;

    np.data_loss   = 0.05;
    np.p2p_loss    = 0.03;
    np.dup         = 0.03;
    np.jitter_us   = 40;
    np.slow_rank   = (int)n - 1;
    np.slow_period = 30;
    np.foreign     = 0.01;
    make_program(n, 300, cfg.max_msg, seed, &roots, &lens);
    sim s(n, cfg, np, seed * 977 + n);
    ASSERT_TRUE(s.run(roots, lens)) << "hung at " << s.now();
    s.flush();
    EXPECT_EQ(0u, s.errors);
    EXPECT_EQ(0u, s.parse_errors);
    EXPECT_EQ(s.foreign_sent, s.foreign_dropped);
    /* the roots never ran more than a window past the slowest rank */
    EXPECT_LT(s.max_ahead, (uint64_t)cfg.window);
    uint64_t dups = 0;
    for (uint32_t r = 0; r < n; ++r) {
        dups += s.w(r).stats.duplicates;
        EXPECT_EQ(0u, s.w(r).stats.malformed);
    }
    if (n > 1) {
        EXPECT_GT(s.repairs, 0u); /* loss happened and was repaired */
        EXPECT_GT(dups, 0u);      /* duplication happened and was dropped */
    }
}

INSTANTIATE_TEST_SUITE_P(mcast, mcast_window_net,
                         ::testing::Combine(::testing::Values(2u, 3u, 5u, 8u,
                                                              13u, 17u, 32u),
                                            ::testing::Values(1u, 2u, 3u)));

/* Once traffic stops, every root's timers go quiet (a progress thread
 * sleeps), although a root that is not the last one to broadcast never
 * hears the final stable point: its co-roots answer for their groups. */
TEST(mcast_window, a_root_goes_quiet_once_the_coroots_hold_its_messages)
{
    for (uint32_t n : { 4u, 9u }) {
        aptus_mc_config_t cfg = test_config();
        net_params np;
        std::vector<uint32_t> roots, lens;

        make_program(n, 200, cfg.max_msg, 5, &roots, &lens);
        sim s(n, cfg, np, 11 * n);
        ASSERT_TRUE(s.run(roots, lens)) << "hung at " << s.now();
        EXPECT_TRUE(s.settle()) << n << " ranks";
        unsigned behind = 0;
        for (uint32_t r = 0; r < n; ++r) {
            const aptus_mc_window_t &w = s.w(r);
            behind += w.has_own && aptus_mc_seq_le(w.stable, w.own_last);
        }
        /* the case this is about happened: a root that never learnt */
        EXPECT_GT(behind, 0u) << n << " ranks";
    }
}

TEST(mcast_window, repairs_go_only_to_ranks_that_lack_the_message)
{
    /* multicast loss only (ACKs arrive, nothing reorders): a repair to a
     * rank that already had the message would be a protocol fault */
    for (uint32_t n : { 4u, 9u, 24u }) {
        for (uint64_t seed = 1; seed <= 3; ++seed) {
            aptus_mc_config_t cfg = test_config();
            net_params np;
            std::vector<uint32_t> roots, lens;
            np.data_loss = 0.08;
            make_program(n, 300, cfg.max_msg, seed, &roots, &lens);
            sim s(n, cfg, np, seed);
            ASSERT_TRUE(s.run(roots, lens));
            EXPECT_EQ(0u, s.errors);
            EXPECT_GT(s.repairs, 10u);
            EXPECT_EQ(0u, s.false_repairs) << n << " ranks, seed " << seed;
            /* and nobody got one message repaired twice */
            for (auto &kv : s.repair_to) {
                EXPECT_EQ(1u, kv.second)
                    << "to " << kv.first.first << " seq " << kv.first.second;
            }
        }
    }
}

TEST(mcast_window, slow_receiver_throttles_the_root)
{
    aptus_mc_config_t cfg = test_config();
    net_params np;
    std::vector<uint32_t> roots(400, 0), lens(400, 100);

    np.slow_rank   = 5;
    np.slow_period = 200; /* 1 ms between drains */
    sim s(8, cfg, np, 11);
    ASSERT_TRUE(s.run(roots, lens));
    EXPECT_EQ(0u, s.errors);
    EXPECT_LT(s.max_ahead, (uint64_t)cfg.window);
    EXPECT_GE(s.max_ahead, (uint64_t)cfg.window / 2); /* it did run ahead */
    EXPECT_GT(s.w(0).stats.window_full, 0u);
    /* held back, not overrun: nothing was dropped for lack of room */
    EXPECT_EQ(0u, s.w(5).stats.out_of_window);
}

TEST(mcast_window, skewed_acks_spread_over_m_messages)
{
    aptus_mc_config_t cfg = test_config();
    net_params np;
    const uint32_t n = 32, count = 400;
    std::vector<uint32_t> roots(count, 0), lens(count, 32);

    cfg.group_size = 16;
    cfg.window     = 64;
    cfg.ack_every  = 8;
    sim s(n, cfg, np, 5);
    ASSERT_TRUE(s.run(roots, lens));
    EXPECT_EQ(0u, s.errors);
    /* per co-root and acknowledged point, how many ACKs came in; the tail
     * (the timer flush after the last broadcast) is left out */
    unsigned most = 0, total = 0;
    for (auto &kv : s.acks_per_slot) {
        if (kv.first.second + 2 * cfg.ack_every < count) {
            most = std::max(most, kv.second);
            total += kv.second;
        }
    }
    /* 15 leaves a group, M = 8: about 2 per message, never the group */
    EXPECT_LE(most, (15u + cfg.ack_every - 1) / cfg.ack_every + 1);
    EXPECT_GT(total, 0u);
}

TEST(mcast_window, lazy_acks_cut_control_traffic)
{
    uint64_t per_bcast[2];
    const uint32_t ms[2] = { 1, 8 };
    const uint32_t n = 32, count = 300;

    for (int i = 0; i < 2; ++i) {
        aptus_mc_config_t cfg = test_config();
        net_params np;
        std::vector<uint32_t> roots, lens;
        cfg.window     = 64;
        cfg.group_size = 8;
        cfg.ack_every  = ms[i];
        make_program(n, count, cfg.max_msg, 3, &roots, &lens);
        sim s(n, cfg, np, 3);
        ASSERT_TRUE(s.run(roots, lens));
        EXPECT_EQ(0u, s.errors);
        per_bcast[i] = s.control_sent() * 100 / count;
        RecordProperty(i ? "lazy_ctl_per_100_bcasts"
                         : "eager_ctl_per_100_bcasts",
                       (int)per_bcast[i]);
        std::printf("[ mcast    ] M=%u: %.2f control messages per broadcast"
                    " (%u ranks, groups of 8)\n",
                    ms[i], per_bcast[i] / 100.0, n);
    }
    /* eager: 28 leaf ACKs + 3 reports a broadcast; lazy: 28/8 + 3 */
    EXPECT_GT(per_bcast[0], 2500u);
    EXPECT_LT(per_bcast[1] * 3, per_bcast[0]);
}
