/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-ZCopy protocol logic (see zcopy.h).
 */
#include "zcopy.h"

#include "le.h"

#include <string.h>

void aptus_zc_data_build(void *hdr, const aptus_zc_data_t *data)
{
    uint8_t *p = hdr;

    aptus_put64(p + 0, data->key);
    aptus_put32(p + 8, data->xfer);
    aptus_put32(p + 12, data->index);
    aptus_put32(p + 16, data->seq);
}

int aptus_zc_data_parse(const void *buf, size_t len, aptus_zc_data_t *data)
{
    const uint8_t *p = buf;

    if ((len < APTUS_ZC_HDR_LEN) || (aptus_get32(p + 16) == 0)) {
        return -1;
    }
    data->key   = aptus_get64(p + 0);
    data->xfer  = aptus_get32(p + 8);
    data->index = aptus_get32(p + 12);
    data->seq   = aptus_get32(p + 16);
    return 0;
}

/* Control messages: type, 3 zero bytes, xfer, then the body. */
#define APTUS_ZC_MSG_HDR   8u
#define APTUS_ZC_REQ_LEN   (APTUS_ZC_MSG_HDR + 64u)
#define APTUS_ZC_DONE_LEN  (APTUS_ZC_MSG_HDR + 8u)
#define APTUS_ZC_COPY_HDR  (APTUS_ZC_MSG_HDR + 8u)
#define APTUS_ZC_WRITE_LEN (APTUS_ZC_MSG_HDR + 40u)

size_t aptus_zc_msg_len(const aptus_zc_msg_t *msg)
{
    switch (msg->type) {
    case APTUS_ZC_MSG_REQ:
        return APTUS_ZC_REQ_LEN;
    case APTUS_ZC_MSG_CREDIT:
        return APTUS_ZC_MSG_HDR + 12u + 8u * (size_t)msg->credit.num_ranges;
    case APTUS_ZC_MSG_COPY:
        return APTUS_ZC_COPY_HDR;
    case APTUS_ZC_MSG_WRITE:
        return APTUS_ZC_WRITE_LEN;
    case APTUS_ZC_MSG_PUT:
        return APTUS_ZC_PUT_HDR;
    default:
        return APTUS_ZC_DONE_LEN;
    }
}

size_t aptus_zc_msg_build(void *buf, const aptus_zc_msg_t *msg)
{
    uint8_t *p = buf;
    unsigned i;

    memset(p, 0, APTUS_ZC_MSG_HDR);
    p[0] = msg->type;
    aptus_put32(p + 4, msg->xfer);
    p += APTUS_ZC_MSG_HDR;

    switch (msg->type) {
    case APTUS_ZC_MSG_REQ:
        aptus_put32(p + 0, msg->req.flags);
        aptus_put32(p + 4, msg->req.payload);
        aptus_put64(p + 8, msg->req.remote_addr);
        aptus_put64(p + 16, msg->req.length);
        aptus_put64(p + 24, msg->req.token);
        memcpy(p + 32, msg->req.ctx_addr, APTUS_ZC_ADDR_LEN);
        aptus_put32(p + 52, msg->req.edge);
        aptus_put64(p + 56, msg->req.ctx_key);
        break;
    case APTUS_ZC_MSG_CREDIT:
        aptus_put32(p + 0, msg->credit.edge);
        aptus_put32(p + 4, msg->credit.seen_seq);
        aptus_put32(p + 8, msg->credit.num_ranges);
        for (i = 0; i < msg->credit.num_ranges; ++i) {
            aptus_put32(p + 12 + 8 * i, msg->credit.ranges[i].first);
            aptus_put32(p + 16 + 8 * i, msg->credit.ranges[i].last);
        }
        break;
    case APTUS_ZC_MSG_COPY:
        aptus_put64(p, msg->copy.offset);
        break;
    case APTUS_ZC_MSG_WRITE:
        aptus_put64(p + 0, msg->write.dest_addr);
        aptus_put64(p + 8, msg->write.length);
        aptus_put64(p + 16, msg->write.dest_token);
        aptus_put64(p + 24, msg->write.src_addr);
        aptus_put64(p + 32, msg->write.src_token);
        break;
    case APTUS_ZC_MSG_PUT:
        aptus_put64(p + 0, msg->put.dest_addr);
        aptus_put64(p + 8, msg->put.dest_token);
        break;
    default: /* DONE, ERROR, WDONE */
        aptus_put32(p + 0, (uint32_t)msg->done.status);
        aptus_put32(p + 4, 0);
        break;
    }
    return aptus_zc_msg_len(msg);
}

int aptus_zc_msg_parse(const void *buf, size_t len, aptus_zc_msg_t *msg)
{
    const uint8_t *p = buf;
    unsigned i;

    if ((len < APTUS_ZC_MSG_HDR) || (p[1] | p[2] | p[3])) {
        return -1;
    }
    msg->type = p[0];
    msg->xfer = aptus_get32(p + 4);
    p += APTUS_ZC_MSG_HDR;
    len -= APTUS_ZC_MSG_HDR;

    switch (msg->type) {
    case APTUS_ZC_MSG_REQ:
        if (len != APTUS_ZC_REQ_LEN - APTUS_ZC_MSG_HDR) {
            return -1;
        }
        msg->req.flags       = aptus_get32(p + 0);
        msg->req.payload     = aptus_get32(p + 4);
        msg->req.remote_addr = aptus_get64(p + 8);
        msg->req.length      = aptus_get64(p + 16);
        msg->req.token       = aptus_get64(p + 24);
        memcpy(msg->req.ctx_addr, p + 32, APTUS_ZC_ADDR_LEN);
        msg->req.edge    = aptus_get32(p + 52);
        msg->req.ctx_key = aptus_get64(p + 56);
        if ((msg->req.flags & ~APTUS_ZC_REQ_COPY) || (msg->req.length == 0) ||
            (msg->req.remote_addr + msg->req.length < msg->req.remote_addr)) {
            return -1;
        }
        if (!(msg->req.flags & APTUS_ZC_REQ_COPY) &&
            ((msg->req.payload == 0) || (msg->req.edge == 0) ||
             ((msg->req.length + msg->req.payload - 1) / msg->req.payload >
              UINT32_MAX))) {
            return -1;
        }
        return 0;
    case APTUS_ZC_MSG_CREDIT:
        if (len < 12) {
            return -1;
        }
        msg->credit.edge       = aptus_get32(p + 0);
        msg->credit.seen_seq   = aptus_get32(p + 4);
        msg->credit.num_ranges = aptus_get32(p + 8);
        if ((msg->credit.num_ranges > APTUS_ZC_MAX_RANGES) ||
            (len != 12u + 8u * msg->credit.num_ranges)) {
            return -1;
        }
        for (i = 0; i < msg->credit.num_ranges; ++i) {
            msg->credit.ranges[i].first = aptus_get32(p + 12 + 8 * i);
            msg->credit.ranges[i].last  = aptus_get32(p + 16 + 8 * i);
            if (msg->credit.ranges[i].first >= msg->credit.ranges[i].last) {
                return -1;
            }
        }
        return 0;
    case APTUS_ZC_MSG_WRITE:
        if (len != APTUS_ZC_WRITE_LEN - APTUS_ZC_MSG_HDR) {
            return -1;
        }
        msg->write.dest_addr  = aptus_get64(p + 0);
        msg->write.length     = aptus_get64(p + 8);
        msg->write.dest_token = aptus_get64(p + 16);
        msg->write.src_addr   = aptus_get64(p + 24);
        msg->write.src_token  = aptus_get64(p + 32);
        if ((msg->write.length == 0) ||
            (msg->write.dest_addr + msg->write.length < msg->write.dest_addr) ||
            (msg->write.src_addr + msg->write.length < msg->write.src_addr)) {
            return -1;
        }
        return 0;
    case APTUS_ZC_MSG_DONE:
    case APTUS_ZC_MSG_ERROR:
    case APTUS_ZC_MSG_WDONE:
        if ((len != APTUS_ZC_DONE_LEN - APTUS_ZC_MSG_HDR) ||
            (aptus_get32(p + 4) != 0)) {
            return -1;
        }
        msg->done.status = (int32_t)aptus_get32(p);
        return 0;
    case APTUS_ZC_MSG_COPY:
        if (len <= APTUS_ZC_COPY_HDR - APTUS_ZC_MSG_HDR) {
            return -1;
        }
        msg->copy.offset = aptus_get64(p);
        msg->copy.data   = p + 8;
        msg->copy.length = len - 8;
        if (msg->copy.offset + msg->copy.length < msg->copy.offset) {
            return -1;
        }
        return 0;
    case APTUS_ZC_MSG_PUT:
        if (len < APTUS_ZC_PUT_HDR - APTUS_ZC_MSG_HDR) {
            return -1;
        }
        msg->put.dest_addr  = aptus_get64(p + 0);
        msg->put.dest_token = aptus_get64(p + 8);
        msg->put.data       = p + 16;
        msg->put.length     = len - 16;
        if (msg->put.dest_addr + msg->put.length < msg->put.dest_addr) {
            return -1;
        }
        return 0;
    default:
        return -1;
    }
}

void aptus_zc_rx_init(aptus_zc_rx_t *rx, uint64_t length, uint32_t payload,
                      uint32_t window, uint64_t *bitmap)
{
    rx->bitmap         = bitmap;
    rx->length         = length;
    rx->payload        = payload;
    rx->count          = aptus_zc_count(length, payload);
    rx->received       = 0;
    rx->lowest_missing = 0;
    rx->highest_seen   = 0;
    rx->window         = window;
    rx->edge_sent      = 0;
    rx->seen_seq       = 0;
    rx->nack_seq       = 0;
    memset(bitmap, 0, aptus_zc_bitmap_words(rx->count) * sizeof(*bitmap));
}

uint32_t aptus_zc_rx_edge(const aptus_zc_rx_t *rx)
{
    uint64_t edge = (uint64_t)rx->lowest_missing + rx->window;

    return (edge > rx->count) ? rx->count : (uint32_t)edge;
}

/* Next missing index at or after 'from' (count if none). */
static uint32_t aptus_zc_next_missing(const aptus_zc_rx_t *rx, uint32_t from,
                                      uint32_t limit)
{
    uint64_t word;

    while (from < limit) {
        word = ~rx->bitmap[from / 64] >> (from % 64);
        if (word != 0) {
            from += __builtin_ctzll(word);
            return (from < limit) ? from : limit;
        }
        from = (from / 64 + 1) * 64;
    }
    return limit;
}

unsigned aptus_zc_rx_plan(const aptus_zc_rx_t *rx, uint32_t *index,
                          unsigned max)
{
    uint32_t edge = aptus_zc_rx_edge(rx), i = rx->lowest_missing;
    unsigned n = 0;

    while (n < max) {
        i = aptus_zc_next_missing(rx, i, edge);
        if (i >= edge) {
            break;
        }
        index[n++] = i++;
    }
    return n;
}

aptus_zc_verdict_t aptus_zc_rx_accept(aptus_zc_rx_t *rx, uint32_t slot_index,
                                      uint32_t pkt_index, uint32_t seq,
                                      uint32_t pkt_len)
{
    if (pkt_index >= rx->count) {
        return APTUS_ZC_OUT_OF_RANGE;
    }
    if (pkt_len != aptus_zc_len(rx, pkt_index)) {
        return APTUS_ZC_BAD_LENGTH;
    }
    if (aptus_zc_seq_after(seq, rx->seen_seq)) {
        rx->seen_seq = seq; /* duplicates count: they show what was sent */
    }
    if (aptus_zc_rx_has(rx, pkt_index)) {
        return APTUS_ZC_DUPLICATE;
    }

    rx->bitmap[pkt_index / 64] |= 1ull << (pkt_index % 64);
    rx->received++;
    if (pkt_index + 1 > rx->highest_seen) {
        rx->highest_seen = pkt_index + 1;
    }
    if (pkt_index == rx->lowest_missing) {
        rx->lowest_missing =
            aptus_zc_next_missing(rx, pkt_index + 1, rx->count);
    }
    return (pkt_index == slot_index) ? APTUS_ZC_PLACED : APTUS_ZC_MISPLACED;
}

unsigned aptus_zc_rx_missing(const aptus_zc_rx_t *rx, uint32_t upto,
                             aptus_zc_range_t *ranges, unsigned max)
{
    uint32_t i = rx->lowest_missing, end;
    unsigned n = 0;
    uint64_t word;

    if (upto > rx->count) {
        upto = rx->count;
    }
    while (n < max) {
        i = aptus_zc_next_missing(rx, i, upto);
        if (i >= upto) {
            break;
        }
        /* the end of this run of missing indices */
        end = i;
        while (end < upto) {
            word = rx->bitmap[end / 64] >> (end % 64);
            if (word != 0) {
                end += __builtin_ctzll(word);
                break;
            }
            end = (end / 64 + 1) * 64;
        }
        if (end > upto) {
            end = upto;
        }
        ranges[n].first = i;
        ranges[n].last  = end;
        ++n;
        i = end;
    }
    return n;
}

void aptus_zc_tx_init(aptus_zc_tx_t *tx, uint32_t count, uint32_t edge,
                      aptus_zc_sent_t *ring, uint32_t ring_size)
{
    uint32_t i;

    tx->count      = count;
    tx->next_new   = 0;
    tx->edge       = (edge > count) ? count : edge;
    tx->num_rtx    = 0;
    tx->next_seq   = 1;
    tx->last_index = 0;
    tx->ring       = ring;
    tx->ring_size  = ring_size;
    for (i = 0; i < ring_size; ++i) {
        ring[i].index = UINT32_MAX; /* nothing sent */
        ring[i].seq   = 0;
    }
}

static void aptus_zc_tx_queue(aptus_zc_tx_t *tx, uint32_t first, uint32_t last)
{
    unsigned i, j;

    /* merge with any overlapping or adjacent range already queued */
    for (i = 0; i < tx->num_rtx;) {
        if ((first <= tx->rtx[i].last) && (tx->rtx[i].first <= last)) {
            first = (tx->rtx[i].first < first) ? tx->rtx[i].first : first;
            last  = (tx->rtx[i].last > last) ? tx->rtx[i].last : last;
            for (j = i + 1; j < tx->num_rtx; ++j) {
                tx->rtx[j - 1] = tx->rtx[j];
            }
            tx->num_rtx--;
        } else {
            ++i;
        }
    }
    if (tx->num_rtx < APTUS_ZC_MAX_RANGES) {
        tx->rtx[tx->num_rtx].first = first;
        tx->rtx[tx->num_rtx].last  = last;
        tx->num_rtx++;
    }
    /* else: dropped; the probe brings the receiver's list again */
}

/* Whether index went out after seen_seq (and may still be on its way). */
static int aptus_zc_tx_in_flight(const aptus_zc_tx_t *tx, uint32_t index,
                                 uint32_t seen_seq)
{
    const aptus_zc_sent_t *s;

    if (tx->ring_size == 0) {
        return 0;
    }
    s = &tx->ring[index % tx->ring_size];
    return (s->index == index) && aptus_zc_seq_after(s->seq, seen_seq);
}

void aptus_zc_tx_credit(aptus_zc_tx_t *tx, uint32_t edge,
                        const aptus_zc_range_t *ranges, unsigned num_ranges,
                        uint32_t seen_seq)
{
    uint32_t i, first, last, run;
    unsigned r;

    if (edge > tx->count) {
        edge = tx->count;
    }
    if (edge > tx->edge) {
        tx->edge = edge;
    }
    for (r = 0; r < num_ranges; ++r) {
        first = ranges[r].first;
        last  = (ranges[r].last < tx->next_new) ? ranges[r].last : tx->next_new;
        /* queue the runs of indices that are lost for sure */
        for (i = first; i < last;) {
            if (aptus_zc_tx_in_flight(tx, i, seen_seq)) {
                ++i;
                continue;
            }
            for (run = i + 1;
                 (run < last) && !aptus_zc_tx_in_flight(tx, run, seen_seq);
                 ++run) {
            }
            aptus_zc_tx_queue(tx, i, run);
            i = run;
        }
    }
}

int aptus_zc_tx_next(aptus_zc_tx_t *tx, uint32_t *index, uint32_t *seq)
{
    aptus_zc_sent_t *s;
    unsigned j;

    if (tx->num_rtx > 0) {
        *index = tx->rtx[0].first++;
        if (tx->rtx[0].first >= tx->rtx[0].last) {
            for (j = 1; j < tx->num_rtx; ++j) {
                tx->rtx[j - 1] = tx->rtx[j];
            }
            tx->num_rtx--;
        }
    } else if (tx->next_new < tx->edge) {
        *index = tx->next_new++;
    } else {
        return 0;
    }

    *seq = tx->next_seq++;
    if (tx->next_seq == 0) {
        tx->next_seq = 1; /* 0 is never stamped */
    }
    tx->last_index = *index;
    if (tx->ring_size != 0) {
        s        = &tx->ring[*index % tx->ring_size];
        s->index = *index;
        s->seq   = *seq;
    }
    return 1;
}

int aptus_zc_tx_peek(const aptus_zc_tx_t *tx, uint32_t *index)
{
    if (tx->num_rtx > 0) {
        *index = tx->rtx[0].first;
        return 1;
    }
    if (tx->next_new < tx->edge) {
        *index = tx->next_new;
        return 1;
    }
    return 0;
}

void aptus_zc_tx_unsend(aptus_zc_tx_t *tx, uint32_t index)
{
    if (tx->ring_size != 0) {
        /* never went out: a missing list may name it at any time */
        tx->ring[index % tx->ring_size].index = UINT32_MAX;
    }
    aptus_zc_tx_queue(tx, index, index + 1);
}

int aptus_zc_tx_probe(aptus_zc_tx_t *tx)
{
    if ((tx->next_new == 0) || (tx->num_rtx > 0)) {
        return 0; /* nothing sent yet, or resends already queued */
    }
    aptus_zc_tx_queue(tx, tx->last_index, tx->last_index + 1);
    return 1;
}
