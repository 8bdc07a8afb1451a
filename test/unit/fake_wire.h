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
}

#include <deque>
#include <functional>
#include <map>
#include <vector>

struct fake_dgram {
    unsigned from;
    unsigned to;
    std::vector<uint8_t> data;
};

enum fake_verdict { FAKE_PASS, FAKE_DROP, FAKE_DUP, FAKE_HOLD };

class fake_net;

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
    fake_wire *create(size_t mtu = 2048);

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
    unsigned sent = 0, dropped = 0;

    static uint64_t now;
    static uint64_t clock()
    {
        return now;
    }
};

const aptus_wire_addr_t &fake_addr(unsigned id);

#endif
