/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A deterministic datagram wire for unit tests: datagrams sit "in flight"
 * until the test delivers them, and a per-datagram filter chosen by the
 * test drops, duplicates or holds them. Time is a variable the test moves.
 */
#ifndef APTUS_TEST_FAKE_WIRE_H_
#define APTUS_TEST_FAKE_WIRE_H_

extern "C" {
#include "wire/wire.h"
#include "proto/ud_sr_proto.h"
#include "channel/ud_sr_chan.h"
}

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <vector>

struct fake_dgram {
    unsigned from;
    unsigned to;
    std::vector<uint8_t> data;
    unsigned train = 0; /* nonzero: sent together with send_seg */
};

enum fake_verdict { FAKE_PASS, FAKE_DROP, FAKE_DUP, FAKE_HOLD };

class fake_net;

struct fake_rxq {
    aptus_dgram_rxq_t super;
    fake_net *net;
    unsigned id;
    unsigned depth;
    std::deque<fake_dgram> inbox;
};

struct fake_wire {
    aptus_dgram_wire_t super;
    fake_net *net;
    unsigned id;
    std::deque<fake_dgram> inbox;
    unsigned recv_calls = 0;
};

class fake_net
{
  public:
    fake_net();
    ~fake_net();

    /* A new wire with its own address; the channel owns it after this and
     * closes it through ops->close (which only detaches it). */
    fake_wire *create(size_t mtu = 2048, bool seg = false);

    /* Addresses are handed out from one counter (wires and queues). */
    static unsigned next_id();

    /* Move in-flight datagrams to their destination inboxes through the
     * filter; returns how many arrived. */
    unsigned deliver();

    /* Release held datagrams (FAKE_HOLD) into flight again. */
    void release_held();

    std::function<fake_verdict(const fake_dgram &, const aptus_ud_sr_pkt_t &)>
        filter;

    std::deque<fake_dgram> in_flight;
    std::deque<fake_dgram> held;
    std::map<unsigned, fake_wire *> wires;
    std::map<unsigned, fake_rxq *> rxqs;
    unsigned rxq_overflow = 0; /* dropped: a receive queue was full */
    /* receive queues hand consecutive datagrams of one segmented send over
     * together, as UDP GRO does */
    bool coalesce   = false;
    unsigned trains = 0; /* segmented sends */
    /* send_seg refuses as a kernel or path without UDP GSO does: the wire
     * stops offering it (seg_max_bytes = 0) */
    bool seg_refuse      = false;
    unsigned seg_refused = 0;
    unsigned sent = 0, dropped = 0;

    static uint64_t now;
    static uint64_t clock()
    {
        return now;
    }
};

const aptus_wire_addr_t &fake_addr(unsigned id);

/* A UD-SR channel configuration for tests on the fake wire: short timers
 * in fake time, a small window that fills quickly. */
static inline aptus_ud_chan_config_t fake_chan_config(size_t rx_headroom)
{
    aptus_ud_chan_config_t cfg;

    memset(&cfg, 0, sizeof(cfg));
    cfg.rel.tx_window       = 32;
    cfg.rel.ack_count       = 8;
    cfg.rel.rto_min_us      = 1000;
    cfg.rel.rto_max_us      = 100000;
    cfg.rel.rto_init_us     = 5000;
    cfg.rel.peer_timeout_us = 2000000;
    cfg.rel.probe_min_us    = 400;
    cfg.max_msg             = 16384;
    cfg.max_am_hdr          = 64;
    cfg.rx_pool             = 256;
    cfg.rx_max              = 1024;
    cfg.rx_budget           = 64;
    cfg.rx_headroom         = rx_headroom;
    cfg.rx_batch            = 16;
    cfg.tick_us             = 200;
    cfg.crc                 = 1;
    cfg.max_peers           = 1000000;
    cfg.max_reasm           = 2048;
    cfg.numa_node           = -1;
    return cfg;
}

/* Run rounds until pred holds; false when max_us of fake time passed. */
template <typename Pred, typename Round>
bool fake_run_until(Pred pred, Round round, uint64_t max_us)
{
    uint64_t start = fake_net::now;
    while (!pred()) {
        if (fake_net::now - start > max_us) {
            return false;
        }
        round();
    }
    return true;
}

#endif
