/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The deterministic fake wire (see fake_wire.h).
 */
#include "fake_wire.h"

#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <algorithm>

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

/* A train: one datagram per segment, each filtered on its own. */
static ucs_status_t fake_send_seg(aptus_dgram_wire_t *w,
                                  const aptus_wire_addr_t *dst,
                                  const struct iovec *iov, unsigned iovcnt,
                                  size_t seg_size)
{
    fake_wire *fw = reinterpret_cast<fake_wire *>(w);
    std::vector<uint8_t> all;
    unsigned train, n = 0;

    if (fw->net->seg_refuse) {
        fw->net->seg_refused++;
        w->seg_max_bytes = 0;
        return UCS_ERR_UNSUPPORTED;
    }
    train = ++fw->net->trains;

    for (unsigned j = 0; j < iovcnt; ++j) {
        const uint8_t *p = (const uint8_t *)iov[j].iov_base;
        all.insert(all.end(), p, p + iov[j].iov_len);
    }
    if ((seg_size > w->mtu) || (all.size() > w->seg_max_bytes)) {
        fprintf(stderr, "fake wire: bad train %zu/%zu\n", seg_size, all.size());
        abort();
    }
    for (size_t off = 0; off < all.size(); off += seg_size, ++n) {
        fake_dgram d;
        size_t len = std::min(seg_size, all.size() - off);
        d.from     = fw->id;
        d.to       = fake_addr_id(dst);
        d.train    = train;
        d.data.assign(all.begin() + off, all.begin() + off + len);
        w->stats.tx_dgrams++;
        w->stats.tx_bytes += len;
        fw->net->in_flight.push_back(d);
        fw->net->sent++;
    }
    if (n > w->seg_max_count) {
        abort();
    }
    return UCS_OK;
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

static std::map<unsigned, unsigned> &fake_nodes();

static ucs_status_t fake_rxq_open(aptus_dgram_wire_t *w, unsigned depth,
                                  aptus_dgram_rxq_t **rxq_p)
{
    fake_wire *fw        = reinterpret_cast<fake_wire *>(w);
    fake_rxq *q          = new fake_rxq();
    q->super.wire        = w;
    q->net               = fw->net;
    q->id                = fake_net::next_id();
    q->depth             = depth;
    q->super.addr        = fake_addr(q->id);
    fw->net->rxqs[q->id] = q;
    fake_nodes()[q->id]  = fw->id;
    *rxq_p               = &q->super;
    return UCS_OK;
}

/* Scatter each datagram (or, coalescing, a run of datagrams of one train
 * with the size of the first, the last possibly shorter) over the posted
 * pieces, in arrival order. */
static unsigned fake_rxq_recv(aptus_dgram_rxq_t *rxq, aptus_dgram_rxv_t *rx,
                              unsigned count)
{
    fake_rxq *q = reinterpret_cast<fake_rxq *>(rxq);
    unsigned n  = 0;
    while ((n < count) && !q->inbox.empty()) {
        std::vector<uint8_t> d = q->inbox.front().data;
        unsigned train         = q->inbox.front().train;
        size_t room = 0, seg = d.size(), segs = 1;
        for (unsigned i = 0; i < rx[n].iovcnt; ++i) {
            room += rx[n].iov[i].iov_len;
        }
        q->inbox.pop_front();
        rxq->wire->stats.rx_dgrams++;
        while (q->net->coalesce && (train != 0) && !q->inbox.empty() &&
               (q->inbox.front().train == train) &&
               (q->inbox.front().data.size() <= seg) && (d.size() % seg == 0) &&
               (d.size() + q->inbox.front().data.size() <= room)) {
            const std::vector<uint8_t> &next = q->inbox.front().data;
            d.insert(d.end(), next.begin(), next.end());
            q->inbox.pop_front();
            rxq->wire->stats.rx_dgrams++;
            ++segs;
        }
        size_t off = 0;
        for (unsigned i = 0; (i < rx[n].iovcnt) && (off < d.size()); ++i) {
            size_t take = std::min(rx[n].iov[i].iov_len, d.size() - off);
            memcpy(rx[n].iov[i].iov_base, d.data() + off, take);
            off += take;
        }
        rx[n].length    = off;
        rx[n].seg_size  = (segs > 1) ? seg : 0;
        rx[n].truncated = off < d.size();
        ++n;
    }
    return n;
}

static void fake_rxq_drain(aptus_dgram_rxq_t *rxq)
{
    reinterpret_cast<fake_rxq *>(rxq)->inbox.clear();
}

static void fake_rxq_close(aptus_dgram_rxq_t *rxq)
{
    fake_rxq *q = reinterpret_cast<fake_rxq *>(rxq);
    q->net->rxqs.erase(q->id);
    delete q;
}

/* The node of every address: a wire is its own, a queue its wire's. */
static std::map<unsigned, unsigned> &fake_nodes()
{
    static std::map<unsigned, unsigned> nodes;
    return nodes;
}

static int fake_same_node(const aptus_wire_addr_t *a,
                          const aptus_wire_addr_t *b)
{
    auto node = [](unsigned id) {
        auto it = fake_nodes().find(id);
        return (it == fake_nodes().end()) ? id : it->second;
    };
    return node(fake_addr_id(a)) == node(fake_addr_id(b));
}

static const aptus_dgram_wire_ops_t fake_ops = {
    fake_send,      fake_recv,      fake_send_seg, fake_progress,
    fake_addr_str,  fake_event_fd,  fake_rxq_open, fake_rxq_recv,
    fake_rxq_drain, fake_rxq_close, fake_close,    fake_same_node,
};

unsigned fake_net::next_id()
{
    static unsigned id = 1;
    return id++;
}

fake_net::fake_net()
{
    now = 1000000;
}

fake_net::~fake_net()
{
    /* wires are closed by their owners */
}

fake_wire *fake_net::create(size_t mtu, bool seg)
{
    fake_wire *fw = new fake_wire();
    memset(&fw->super, 0, sizeof(fw->super));
    fw->super.ops = &fake_ops;
    fw->super.mtu = mtu;
    /* like a loopback device: tests of the path search clear it */
    fw->super.flags = APTUS_DGRAM_WIRE_F_LOCAL;
    if (seg) {
        fw->super.seg_max_bytes = 65507;
        fw->super.seg_max_count = 64;
    }
    fw->net        = this;
    fw->id         = next_id();
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
        if (v == FAKE_DROP) {
            ++dropped;
            continue;
        }
        if (v == FAKE_HOLD) {
            held.push_back(d);
            continue;
        }
        auto rq = rxqs.find(d.to);
        if (rq != rxqs.end()) {
            for (int copies = (v == FAKE_DUP) ? 2 : 1; copies > 0; --copies) {
                if (rq->second->inbox.size() >= rq->second->depth) {
                    ++rxq_overflow; /* like a UD QP out of receives */
                } else {
                    rq->second->inbox.push_back(d);
                    ++n;
                }
            }
            continue;
        }
        auto it = wires.find(d.to);
        if (it == wires.end()) {
            ++dropped;
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
