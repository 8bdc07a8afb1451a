/*
 * The deterministic fake wire (see fake_wire.h).
 */
#include "fake_wire.h"

#include <cstring>
#include <cstdio>
#include <cstdlib>

uint64_t fake_net::now = 1000000;

static unsigned fake_addr_id(const aptus_wire_addr_t *addr)
{
    unsigned id;
    memcpy(&id, addr->raw, sizeof(id));
    return id;
}

const aptus_wire_addr_t &fake_addr(unsigned id)
{
    static std::map<unsigned, aptus_wire_addr_t> addrs;
    aptus_wire_addr_t &a = addrs[id];
    memset(&a, 0, sizeof(a));
    memcpy(a.raw, &id, sizeof(id));
    return a;
}

static ucs_status_t fake_send(aptus_dgram_wire_t *w, const aptus_dgram_tx_t *tx,
                              unsigned count, unsigned *sent_p)
{
    fake_wire *fw = reinterpret_cast<fake_wire *>(w);
    for (unsigned i = 0; i < count; ++i) {
        fake_dgram d;
        d.from = fw->id;
        d.to   = fake_addr_id(tx[i].dst);
        for (unsigned j = 0; j < tx[i].iovcnt; ++j) {
            const uint8_t *p = (const uint8_t *)tx[i].iov[j].iov_base;
            d.data.insert(d.data.end(), p, p + tx[i].iov[j].iov_len);
        }
        if (d.data.size() > w->mtu) {
            fprintf(stderr, "fake wire: datagram of %zu > mtu %zu\n",
                    d.data.size(), w->mtu);
            abort();
        }
        w->stats.tx_dgrams++;
        w->stats.tx_bytes += d.data.size();
        fw->net->in_flight.push_back(d);
        fw->net->sent++;
    }
    *sent_p = count;
    return UCS_OK;
}

static unsigned fake_recv(aptus_dgram_wire_t *w, aptus_dgram_rx_t *rx,
                          unsigned count)
{
    fake_wire *fw = reinterpret_cast<fake_wire *>(w);
    unsigned n    = 0;
    fw->recv_calls++;
    while ((n < count) && !fw->inbox.empty()) {
        fake_dgram &d = fw->inbox.front();
        memcpy(rx[n].buf, d.data.data(), d.data.size());
        rx[n].length = d.data.size();
        rx[n].src    = fake_addr(d.from);
        w->stats.rx_dgrams++;
        fw->inbox.pop_front();
        ++n;
    }
    return n;
}

static unsigned fake_progress(aptus_dgram_wire_t *w, uint64_t now)
{
    return 0;
}

static const char *fake_addr_str(const aptus_wire_addr_t *addr, char *buf,
                                 size_t max)
{
    snprintf(buf, max, "fake:%u", fake_addr_id(addr));
    return buf;
}

static int fake_event_fd(aptus_dgram_wire_t *w)
{
    return -1;
}

static void fake_close(aptus_dgram_wire_t *w)
{
    fake_wire *fw = reinterpret_cast<fake_wire *>(w);
    fw->net->wires.erase(fw->id);
    delete fw;
}

static const aptus_dgram_wire_ops_t fake_ops = {
    fake_send,     fake_recv,     fake_progress,
    fake_addr_str, fake_event_fd, fake_close,
};

fake_net::fake_net()
{
    now = 1000000;
}

fake_net::~fake_net()
{
    /* wires are closed by their owners */
}

fake_wire *fake_net::create(size_t mtu)
{
    static unsigned next_id = 1;
    fake_wire *fw           = new fake_wire();
    memset(&fw->super, 0, sizeof(fw->super));
    fw->super.ops  = &fake_ops;
    fw->super.mtu  = mtu;
    fw->net        = this;
    fw->id         = next_id++;
    fw->super.addr = fake_addr(fw->id);
    wires[fw->id]  = fw;
    return fw;
}

unsigned fake_net::deliver()
{
    unsigned n = 0;
    std::deque<fake_dgram> batch;
    batch.swap(in_flight);
    for (fake_dgram &d : batch) {
        fake_verdict v = FAKE_PASS;
        if (filter) {
            aptus_ud_sr_pkt_t pkt;
            memset(&pkt, 0, sizeof(pkt));
            aptus_ud_sr_parse(d.data.data(), d.data.size(), 0, &pkt);
            v = filter(d, pkt);
        }
        auto it = wires.find(d.to);
        if ((v == FAKE_DROP) || (it == wires.end())) {
            ++dropped;
            continue;
        }
        if (v == FAKE_HOLD) {
            held.push_back(d);
            continue;
        }
        it->second->inbox.push_back(d);
        ++n;
        if (v == FAKE_DUP) {
            it->second->inbox.push_back(d);
            ++n;
        }
    }
    return n;
}

void fake_net::release_held()
{
    for (fake_dgram &d : held) {
        in_flight.push_back(d);
    }
    held.clear();
}
