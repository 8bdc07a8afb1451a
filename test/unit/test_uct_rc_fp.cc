/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rc_fp transport at the UCT level: two or more interfaces in one
 * process over the sock wire (TCP and process_vm_writev). Mixed sizes in
 * order across the fast path and RC-SR in each ring mode, also when the
 * receiver falls behind and credits run out; the per-process cap with
 * refused peers on RC-SR; the block released when its sender goes; memory
 * per channel; malformed control and active message ids dropped and
 * counted; bad settings refused.
 */
#include "numa_fake.h"
#include "rc_fp_fixture.h"

#include <sys/wait.h>

namespace
{

class uct_rc_fp_mode : public uct_rc_fp,
                       public ::testing::WithParamInterface<std::string>
{
};

} // namespace

TEST_P(uct_rc_fp_mode, mixed_sizes_in_order_across_fast_path_and_rc_sr)
{
    setup_pair(
        { { "MODE", GetParam() }, { "THRESH", "4" }, { "MAX_MSG", "4k" } });
    auto sent = send_mixed(m_a, 3000, 1);
    expect_received(m_b, sent);
    auto a = stats(m_a), b = stats(m_b);
    EXPECT_EQ(1u, a["fp_granted"] + a["fp_refused"]);
    EXPECT_EQ(1u, b["fp_granted"]);
    /* two slots: the receiver, which progresses only when the sender
     * must wait, returns them too late for most messages (the paper's
     * point about Original-Reduced) */
    EXPECT_GT(a["fp_tx_msgs"],
              (GetParam() == "original_reduced") ? 100u : 1000u);
    EXPECT_EQ(a["fp_tx_msgs"], b["fp_rx_msgs"]);
    EXPECT_EQ(3000u - a["fp_tx_msgs"], a["tx_msgs"] - a["fp_requests"] -
                                           a["fp_released"]); /* the rest */
    EXPECT_GT(b["fp_rx_held_for_order"] + a["fp_no_credit"], 0u);
    EXPECT_EQ(0u, b["fp_rx_corrupt"]);
    if (GetParam() == "original_reduced") {
        /* two slots: the sender runs out of credit all the time */
        EXPECT_GT(a["fp_no_credit"], 0u);
    }
    close(m_a);
    close(m_b);
}

TEST_P(uct_rc_fp_mode, ping_pong_returns_credits_with_the_answers)
{
    /* each answer carries the slots (bytes) its question freed: no
     * explicit credit message, and the two slots of Original-Reduced do
     * not run dry */
    setup_pair({ { "MODE", GetParam() }, { "THRESH", "1" } });
    const unsigned rounds = 600;
    for (unsigned i = 0; i < rounds; ++i) {
        std::vector<uint8_t> q = pattern(i, 8 + (i * 131) % 1500);
        send(m_a, m_a.ep, q, i % 2);
        ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == i + 1; }));
        send(m_b, m_b.ep, q, i % 2);
        ASSERT_TRUE(wait_for([&] { return rx_count(m_a) == i + 1; }));
    }
    for (unsigned i = 0; i < rounds; ++i) {
        std::vector<uint8_t> q = pattern(i, 8 + (i * 131) % 1500);
        ASSERT_EQ(q, m_b.rx.msgs[i]);
        ASSERT_EQ(q, m_a.rx.msgs[i]);
    }
    auto a = stats(m_a), b = stats(m_b);
    for (auto *s : { &a, &b }) {
        EXPECT_EQ(0u, (*s)["fp_credit_msgs_sent"]);
        EXPECT_EQ(0u, (*s)["fp_no_credit"]);
        EXPECT_GT((*s)["fp_credits_piggybacked"], 0u);
        EXPECT_GT((*s)["fp_tx_msgs"], rounds - 10);
    }
    EXPECT_EQ(a["fp_credits_piggybacked"], b["fp_credits_piggyback_received"]);
    EXPECT_EQ(b["fp_credits_piggybacked"], a["fp_credits_piggyback_received"]);
    close(m_a);
    close(m_b);
}

INSTANTIATE_TEST_SUITE_P(modes, uct_rc_fp_mode,
                         ::testing::Values("veloblock", "original",
                                           "original_reduced"));

TEST_F(uct_rc_fp, receiver_that_falls_behind_gets_everything_in_order)
{
    setup_pair({ { "THRESH", "1" } });
    /* the fast path opens, then bursts fill the block: what finds no
     * credit goes over RC-SR, and the receiver puts it behind what the
     * block holds */
    auto sent = send_mixed(m_a, 50, 2);
    expect_received(m_b, sent);
    std::vector<std::vector<uint8_t>> burst;
    for (unsigned i = 0; i < 2000; ++i) {
        burst.push_back(pattern(7000 + i, 40 + i % 200));
        /* no progress between sends: only when a send must wait */
        send(m_a, m_a.ep, burst.back(), i % 2);
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) >= 50 + burst.size(); }));
    for (size_t i = 0; i < burst.size(); ++i) {
        ASSERT_EQ(burst[i], m_b.rx.msgs[50 + i]) << i;
    }
    auto a = stats(m_a);
    EXPECT_GT(a["fp_no_credit"], 0u);
    EXPECT_GT(a["fp_tx_msgs"], 0u);
    EXPECT_GT(stats(m_b)["fp_credit_msgs_sent"], 0u);
}

TEST_F(uct_rc_fp, cap_holds_and_refused_senders_stay_on_rc_sr)
{
    const unsigned senders = 3;
    std::vector<entity> s(senders);
    ASSERT_EQ(UCS_OK, open(m_b, { { "MAX_CHANNELS", "1" } }));
    for (auto &e : s) {
        ASSERT_EQ(UCS_OK, open(e, { { "THRESH", "2" } }));
        connect(e, m_b);
    }
    for (unsigned round = 0; round < 200; ++round) {
        for (unsigned k = 0; k < senders; ++k) {
            std::vector<uint8_t> msg = pattern(round, 64);
            msg[0]                   = (uint8_t)k;
            memcpy(msg.data() + 1, &round, sizeof(round));
            send(s[k], s[k].ep, msg, round % 3);
        }
        progress();
        EXPECT_LE(iface(m_b)->num_rx, 1u);
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) >= 200 * senders; }));
    std::vector<unsigned> next(senders, 0);
    for (auto &msg : m_b.rx.msgs) {
        unsigned round;
        memcpy(&round, msg.data() + 1, sizeof(round));
        ASSERT_EQ(next[msg[0]]++, round) << "sender " << (int)msg[0];
    }
    auto b = stats(m_b);
    EXPECT_EQ(1u, b["fp_rx_peak"]);
    EXPECT_EQ(1u, b["fp_granted"]);
    EXPECT_EQ(senders - 1, b["fp_refused"]);
    unsigned on_fp = 0;
    for (auto &e : s) {
        on_fp += stats(e)["fp_tx_msgs"] > 0;
        close(e);
    }
    EXPECT_EQ(1u, on_fp);
    close(m_b);
}

TEST_F(uct_rc_fp, block_goes_back_when_its_sender_goes)
{
    setup_pair({ { "THRESH", "1" } });
    auto sent = send_mixed(m_a, 20, 3);
    expect_received(m_b, sent);
    ASSERT_EQ(1u, iface(m_b)->num_rx);
    uct_ep_destroy(m_a.ep);
    m_a.ep = nullptr;
    EXPECT_TRUE(wait_for([&] { return iface(m_b)->num_rx == 0; }, 10));
    EXPECT_EQ(1u, stats(m_a)["fp_released"]);
}

/* A fast-path block is mapped on the node of the device (here: what a
 * fake sysfs says of lo) before it is first touched. */
TEST_F(uct_rc_fp, fast_path_blocks_go_on_the_devices_node)
{
    numa_fake fake;
    fake.set("net", "lo", "1");
    setup_pair({ { "THRESH", "1" } });
    auto sent = send_mixed(m_a, 20, 3);
    expect_received(m_b, sent);
    ASSERT_EQ(1u, iface(m_b)->num_rx);
    unsigned blocks = 0, others = 0;
    for (const numa_bind_call &c : numa_fake_calls()) {
        others += (c.node != 1);
        blocks += (c.length == iface(m_b)->fpc.geom.size) && (c.node == 1);
    }
    EXPECT_EQ(1u, blocks); /* beside the receive pools' chunks */
    EXPECT_EQ(0u, others);
}

TEST_F(uct_rc_fp, memory_per_channel_in_each_mode)
{
    struct {
        const char *mode;
        uint64_t recv, send;
    } modes[] = { { "veloblock", 32768, 0 },
                  { "original", 262144, 262144 },
                  { "original_reduced", 16384, 16384 } };
    for (auto &m : modes) {
        m_b.rx.msgs.clear();
        setup_pair({ { "MODE", m.mode }, { "THRESH", "1" } });
        auto sent = send_mixed(m_a, 10, 4);
        expect_received(m_b, sent);
        /* the sender's share is held once the grant is in */
        ASSERT_TRUE(wait_for([&] { return stats(m_a)["fp_tx_channels"] == 1; }))
            << m.mode;
        auto a = stats(m_a), b = stats(m_b);
        EXPECT_EQ(m.recv, b["fp_recv_bytes_per_channel"]) << m.mode;
        EXPECT_EQ(m.send, a["fp_send_bytes_per_channel"]) << m.mode;
        EXPECT_EQ(m.recv, b["fp_bytes_now"]) << m.mode;
        EXPECT_EQ(m.send, a["fp_bytes_now"]) << m.mode;
        close(m_a);
        close(m_b);
    }
}

TEST_F(uct_rc_fp, malformed_control_and_bad_ids_are_dropped_and_counted)
{
    setup_pair();
    aptus_rc_link_t *link = &ucs_derived_of(m_a.ep, uct_rc_sr_ep_t)->link;
    uint8_t junk[7]       = { 9, 1, 2, 3, 4, 5, 6 };
    aptus_chan_send_t s;
    aptus_chan_send_copy(&s, APTUS_FP_CTL_AM, NULL, 0, junk, sizeof(junk));
    ASSERT_EQ(UCS_OK, (ucs_status_t)aptus_rc_chan_send(&iface(m_a)->super.chan,
                                                       link, &s));
    aptus_chan_send_copy(&s, 40, NULL, 0, junk, sizeof(junk)); /* no such id */
    ASSERT_EQ(UCS_OK, (ucs_status_t)aptus_rc_chan_send(&iface(m_a)->super.chan,
                                                       link, &s));
    aptus_chan_send_copy(&s, 1, NULL, 0, junk, 3); /* shorter than a trailer */
    ASSERT_EQ(UCS_OK, (ucs_status_t)aptus_rc_chan_send(&iface(m_a)->super.chan,
                                                       link, &s));
    ASSERT_TRUE(wait_for([&] {
        auto b = stats(m_b);
        return (b["fp_ctl_malformed"] == 1) && (b["rx_bad_am_id"] == 2);
    }));
    EXPECT_EQ(0u, rx_count(m_b));
    auto sent = send_mixed(m_a, 30, 5); /* the connection still serves */
    expect_received(m_b, sent);
}

TEST_F(uct_rc_fp, corrupt_block_fails_the_peer_not_silently)
{
    /* a flag that is no flag in the block: reported, never followed, and
     * the peer's connections fail so that the user hears of it */
    setup_pair({ { "THRESH", "1" } });
    std::vector<uint8_t> d = pattern(1, 64);
    for (unsigned i = 0; i < 20; ++i) {
        send(m_a, m_a.ep, d, 1);
        ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == i + 1; }));
    }
    ASSERT_EQ(1u, iface(m_b)->num_rx);
    ASSERT_GT(stats(m_a)["fp_tx_msgs"], 0u);
    aptus_fp_block_t *blk       = iface(m_b)->rx[0]->block;
    blk->mem[blk->ring.vb.slot] = 0x77; /* the byte the receiver polls */
    ASSERT_TRUE(wait_for([&] { return m_b.err.count.load() > 0; }, 10));
    EXPECT_EQ(1u, stats(m_b)["fp_rx_corrupt"]);
    EXPECT_EQ(20u, rx_count(m_b)); /* nothing delivered from garbage */
}

TEST_F(uct_rc_fp, bad_settings_are_refused)
{
    EXPECT_NE(UCS_OK, open(m_a, { { "MODE", "original" }, { "SLOTS", "0" } }));
    EXPECT_NE(UCS_OK, open(m_a, { { "BLOCK_SIZE", "16" } }));
    EXPECT_NE(UCS_OK, open(m_a, { { "MAX_CHANNELS", "0" } }));
    EXPECT_NE(UCS_OK, open(m_a, { { "WIRE_POLL", "0" } }));
    EXPECT_NE(UCS_OK, open(m_a, { { "WIRE_POLL", "-1" } })); /* 4294967295 */
    EXPECT_NE(UCS_OK, open(m_a, { { "WIRE_POLL", "1025" } }));
}

extern "C" void uct_rc_fp_ep_handle_ctl(uct_rc_fp_iface_t *iface,
                                        aptus_rc_link_t *link,
                                        const aptus_fp_ctl_t *ctl);

/* The edited-key attack on the fast path: a GRANT whose pid names another
 * process of the same user (a forked child that never loaded a transport
 * of its own) and an address in it. The sender holds the grant to the
 * connection's proven peer: refused, counted, the fast path off, nothing
 * written into the child, and the messages go over RC-SR. */
TEST_F(uct_rc_fp, grant_naming_another_process_refused)
{
    setup_pair({ { "THRESH", "3" } });
    std::vector<std::vector<uint8_t>> sent;
    for (unsigned i = 0; i < 2; ++i) {
        sent.push_back(pattern(i, 64));
        send(m_a, m_a.ep, sent.back(), 1);
    }
    ASSERT_TRUE(wait_for([&] { return rx_count(m_b) == 2; }));
    /* the third asks for the block; the real GRANT waits for b's progress */
    sent.push_back(pattern(2, 64));
    send(m_a, m_a.ep, sent.back(), 1);
    uct_rc_fp_ep_t *ep = ucs_derived_of(m_a.ep, uct_rc_fp_ep_t);
    ASSERT_EQ(UCT_RC_FP_TX_REQUESTED, ep->fp.state);

    const aptus_fp_geom_t &geom = iface(m_b)->fpc.geom;
    std::vector<uint8_t> block(geom.size, 0xee);
    const std::vector<uint8_t> orig = block;
    int to_child[2];
    ASSERT_EQ(0, pipe(to_child));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        char c;
        ::close(to_child[1]);
        if (::read(to_child[0], &c, 1) != 1) {
            _exit(2);
        }
        _exit((block == orig) ? 0 : 1);
    }
    ::close(to_child[0]);

    aptus_fp_ctl_t ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.type            = APTUS_FP_CTL_GRANT;
    ctl.nonce           = ep->fp.nonce;
    ctl.grant.mode      = geom.mode;
    ctl.grant.size      = geom.size;
    ctl.grant.slots     = geom.slots;
    ctl.grant.slot_size = geom.slot_size;
    ctl.grant.address   = (uintptr_t)block.data();
    ctl.grant.pid       = child;
    ctl.grant.host_id   = iface(m_b)->host_id;
    uint64_t refused    = stats(m_a)["pid_refused"];
    uct_rc_fp_ep_handle_ctl(iface(m_a), &ep->super.link, &ctl);
    EXPECT_EQ(refused + 1, stats(m_a)["pid_refused"]);
    EXPECT_EQ(UCT_RC_FP_TX_OFF, ep->fp.state);
    EXPECT_EQ(0u, stats(m_a)["fp_granted"]);

    /* the real GRANT comes too late; everything goes over RC-SR */
    for (unsigned i = 3; i < 40; ++i) {
        sent.push_back(pattern(i, 64));
        send(m_a, m_a.ep, sent.back(), i % 3);
    }
    expect_received(m_b, sent);
    EXPECT_EQ(0u, stats(m_a)["fp_tx_msgs"]);
    EXPECT_EQ(orig, block);

    ASSERT_EQ(1, ::write(to_child[1], "x", 1));
    ::close(to_child[1]);
    int wstatus = 0;
    ASSERT_EQ(child, waitpid(child, &wstatus, 0));
    EXPECT_TRUE(WIFEXITED(wstatus) && (WEXITSTATUS(wstatus) == 0))
        << "the child's memory changed";
}

/* The legitimate grant: the peer's own pid, proven by the kernel on the
 * connection -- the fast path carries the small messages. */
TEST_F(uct_rc_fp, grant_of_the_proven_peer_accepted)
{
    setup_pair({ { "THRESH", "1" } });
    auto sent = send_mixed(m_a, 200, 3);
    expect_received(m_b, sent);
    auto a = stats(m_a);
    EXPECT_EQ(1u, a["fp_granted"]);
    EXPECT_GT(a["fp_tx_msgs"], 0u);
    EXPECT_EQ(0u, a["pid_refused"]);
    EXPECT_GE(a["pid_proven"], 1u);
}
