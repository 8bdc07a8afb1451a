/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-ZCopy, zero-copy transfer of large messages over unreliable
 * datagrams (Koop, Jones, Panda, "MVAPICH-Aptus: Scalable High-Performance
 * Multi-Transport MPI over InfiniBand", IPDPS 2008, section 3.2, after Koop
 * et al., "Zero-copy protocol for MPI using InfiniBand unreliable datagram",
 * IEEE Cluster 2007).
 *
 * Pure protocol logic, free of UCX and of any wire. The receiver of the
 * data (the initiator of a get) takes a receive context, a dedicated queue,
 * and posts buffers that point straight into the destination: datagram i
 * lands at offset i * payload. The owner of the data streams datagrams
 * tagged with their index, from the source buffer, inside a window of
 * indices the receiver grants (its receive capacity). The receiver detects
 * loss and misplacement from the tags, asks for exactly what is missing,
 * and completes when every byte is in place.
 *
 * Every datagram also carries the owner's send sequence for the transfer.
 * The receiver reports the highest sequence it saw with its missing list,
 * and the owner resends only missing indices it last sent at or below that
 * sequence: on a wire that keeps order they are lost for sure, while later
 * ones may still be on their way. A tail lost whole is found by the owner:
 * when it has sent everything it may and hears nothing, it sends its
 * latest datagram again as a probe, whose sequence tells the receiver that
 * everything before it was sent. Control messages (request,
 * credit with the missing ranges, done, error, copied data for the
 * fallback) travel over the reliable UD-SR stream between the two.
 *
 * A put (a write) is a get turned around: the writer names its source
 * region with a token made for this one transfer (WRITE), the target checks
 * that the destination is registered with the token it was given, reads
 * the data with a get of its own, and answers WDONE when every byte is in
 * place. The data moves zero-copy, with the same loss recovery.
 *
 * Data datagram: 20 bytes of header, then payload.
 *
 *  0               8       12      16      20
 *  +---------------+-------+-------+-------+---------------------+
 *  | key (64 bit)  | xfer  | index | seq   | payload             |
 *  +---------------+-------+-------+-------+---------------------+
 *  key:   the receive context's key for this transfer, 64 bits from the
 *         OS CSPRNG (anything else is stale or forged and is dropped)
 *  xfer:  the receiver's transfer id
 *  index: position of the payload: byte offset index * payload size
 *  seq:   the owner's send sequence in this transfer, from 1
 * All fields are little-endian.
 */
#ifndef APTUS_ZCOPY_H_
#define APTUS_ZCOPY_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_ZC_HDR_LEN    20u
#define APTUS_ZC_MAX_RANGES 16u /* missing ranges per credit */

/* ---- data datagrams --------------------------------------------------- */

typedef struct aptus_zc_data {
    uint64_t key;
    uint32_t xfer;
    uint32_t index;
    uint32_t seq;
} aptus_zc_data_t;

void aptus_zc_data_build(void *hdr, const aptus_zc_data_t *data);

/* 0 when the header is well formed (length at least the header, a
 * sequence), -1 otherwise. */
int aptus_zc_data_parse(const void *buf, size_t len, aptus_zc_data_t *data);

/* ---- control messages (over the reliable stream) ---------------------- */

typedef enum {
    APTUS_ZC_MSG_REQ    = 1, /* receiver -> owner: send me this region */
    APTUS_ZC_MSG_CREDIT = 2, /* receiver -> owner: window edge, missing */
    APTUS_ZC_MSG_DONE   = 3, /* receiver -> owner: all in place (or gave up) */
    APTUS_ZC_MSG_ERROR  = 4, /* owner -> receiver: cannot serve it */
    APTUS_ZC_MSG_COPY   = 5, /* owner -> receiver: data, copy-based path */
    APTUS_ZC_MSG_WRITE  = 6, /* writer -> target: get this from me */
    APTUS_ZC_MSG_WDONE  = 7, /* target -> writer: your data is in place */
    APTUS_ZC_MSG_PUT    = 8, /* writer -> target: these bytes, there (the
                                small puts; acknowledged by the stream) */
    APTUS_ZC_MSG_LAST
} aptus_zc_msg_type_t;

enum {
    APTUS_ZC_REQ_COPY = 1u << 0 /* send through the reliable stream */
};


#define APTUS_ZC_ADDR_LEN 20 /* wire address of the receive context */

/* A PUT message: type, xfer, destination and token, then the data. */
#define APTUS_ZC_PUT_HDR (8u + 16u)

typedef struct aptus_zc_range {
    uint32_t first; /* missing indices first .. last-1 */
    uint32_t last;
} aptus_zc_range_t;

typedef struct aptus_zc_msg {
    uint8_t type;
    uint32_t xfer;
    union {
        struct {
            uint32_t flags;
            uint64_t remote_addr; /* in the owner's memory */
            uint64_t length;
            uint64_t token; /* the owner's registration token */
            uint8_t ctx_addr[APTUS_ZC_ADDR_LEN];
            uint64_t ctx_key;
            uint32_t payload; /* bytes per datagram */
            uint32_t edge;    /* initial window: indices below it */
        } req;
        struct {
            uint32_t edge;
            uint32_t seen_seq; /* highest sequence received */
            uint32_t num_ranges;
            aptus_zc_range_t ranges[APTUS_ZC_MAX_RANGES];
        } credit;
        struct {
            uint64_t dest_addr; /* in the target's memory */
            uint64_t length;
            uint64_t dest_token; /* the target's registration token */
            uint64_t src_addr;   /* in the writer's memory */
            uint64_t src_token;  /* exported for this write only */
        } write;
        struct {
            int32_t status; /* 0: success, else an error code */
        } done;             /* also ERROR and WDONE */
        struct {
            uint64_t offset;
            const void *data;
            size_t length;
        } copy;
        struct {
            uint64_t dest_addr;  /* in the target's memory */
            uint64_t dest_token; /* the target's registration token */
            const void *data;    /* parse: points into the message */
            size_t length;
        } put;
    };
} aptus_zc_msg_t;

/* Encoded length of msg (COPY, PUT: header only, data follows). */
size_t aptus_zc_msg_len(const aptus_zc_msg_t *msg);

/* Encode msg into buf (at least aptus_zc_msg_len bytes); returns length. */
size_t aptus_zc_msg_build(void *buf, const aptus_zc_msg_t *msg);

/* Decode and validate; 0 on success, -1 if malformed. COPY: msg->copy.data
 * points into buf. */
int aptus_zc_msg_parse(const void *buf, size_t len, aptus_zc_msg_t *msg);

/* ---- receiver state --------------------------------------------------- */

typedef enum {
    APTUS_ZC_PLACED,       /* landed where it belongs */
    APTUS_ZC_MISPLACED,    /* landed in another slot: move it */
    APTUS_ZC_DUPLICATE,    /* already in place */
    APTUS_ZC_OUT_OF_RANGE, /* index beyond the transfer */
    APTUS_ZC_BAD_LENGTH    /* payload length does not fit the index */
} aptus_zc_verdict_t;

typedef struct aptus_zc_rx {
    uint64_t *bitmap; /* caller's, aptus_zc_bitmap_words() words */
    uint64_t length;
    uint32_t payload;
    uint32_t count; /* datagrams in the transfer */
    uint32_t received;
    uint32_t lowest_missing;
    uint32_t highest_seen; /* one past the highest index received */
    uint32_t window;       /* datagrams the receive queue holds */
    uint32_t edge_sent;    /* window edge last granted */
    uint32_t seen_seq;     /* highest send sequence received */
    uint32_t nack_seq;     /* seen_seq when missing ranges were last sent */
} aptus_zc_rx_t;

/* Sequence a is later than b (they wrap). */
static inline int aptus_zc_seq_after(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

static inline uint32_t aptus_zc_count(uint64_t length, uint32_t payload)
{
    return (uint32_t)((length + payload - 1) / payload);
}

static inline size_t aptus_zc_bitmap_words(uint32_t count)
{
    return (count + 63) / 64;
}

/* bitmap must hold aptus_zc_bitmap_words(aptus_zc_count(length, payload))
 * words; it is cleared here. length > 0, payload > 0, window > 0. */
void aptus_zc_rx_init(aptus_zc_rx_t *rx, uint64_t length, uint32_t payload,
                      uint32_t window, uint64_t *bitmap);

static inline uint64_t aptus_zc_offset(const aptus_zc_rx_t *rx, uint32_t index)
{
    return (uint64_t)index * rx->payload;
}

static inline uint32_t aptus_zc_len(const aptus_zc_rx_t *rx, uint32_t index)
{
    return (index + 1 < rx->count)
               ? rx->payload
               : (uint32_t)(rx->length - (uint64_t)index * rx->payload);
}

static inline int aptus_zc_rx_has(const aptus_zc_rx_t *rx, uint32_t index)
{
    return (rx->bitmap[index / 64] >> (index % 64)) & 1;
}

static inline int aptus_zc_rx_complete(const aptus_zc_rx_t *rx)
{
    return rx->received == rx->count;
}

/* The owner may send indices below this. */
uint32_t aptus_zc_rx_edge(const aptus_zc_rx_t *rx);

/* Whether the window moved enough to tell the owner: a quarter of it, or
 * up to the end of the transfer (which may be less than a quarter away). */
static inline int aptus_zc_rx_want_credit(const aptus_zc_rx_t *rx)
{
    uint32_t edge    = aptus_zc_rx_edge(rx);
    uint32_t quarter = (rx->window >= 4) ? rx->window / 4 : 1;

    return (edge - rx->edge_sent >= quarter) ||
           ((edge == rx->count) && (rx->edge_sent < rx->count));
}

/* Missing indices, lowest first, below the edge, to post receive buffers
 * for; returns how many (at most max). */
unsigned aptus_zc_rx_plan(const aptus_zc_rx_t *rx, uint32_t *index,
                          unsigned max);

/* A datagram with index pkt_index, send sequence seq and payload length
 * pkt_len arrived in the buffer posted for slot_index: classify it, and
 * account for it if it is new (PLACED or MISPLACED). */
aptus_zc_verdict_t aptus_zc_rx_accept(aptus_zc_rx_t *rx, uint32_t slot_index,
                                      uint32_t pkt_index, uint32_t seq,
                                      uint32_t pkt_len);

/* Whether a missing list is worth sending now: indices are missing below
 * one that arrived, and datagrams arrived since the last list (without
 * new arrivals the owner would resend nothing new). */
static inline int aptus_zc_rx_want_nack(const aptus_zc_rx_t *rx)
{
    return (rx->highest_seen > rx->lowest_missing) &&
           aptus_zc_seq_after(rx->seen_seq, rx->nack_seq);
}

/* Ranges of indices still missing below 'upto' (highest seen, or the edge
 * when the stream stalled); returns how many ranges (at most max). */
unsigned aptus_zc_rx_missing(const aptus_zc_rx_t *rx, uint32_t upto,
                             aptus_zc_range_t *ranges, unsigned max);

/* ---- owner (sender) state --------------------------------------------- */

/* The sequence an index was last sent with, kept for the indices in play
 * (a ring of at least the receiver's window; older ones count as lost). */
typedef struct aptus_zc_sent {
    uint32_t index;
    uint32_t seq;
} aptus_zc_sent_t;

typedef struct aptus_zc_tx {
    uint32_t count;
    uint32_t next_new; /* next index never sent */
    uint32_t edge;     /* may send indices below this */
    uint32_t num_rtx;  /* ranges to resend */
    aptus_zc_range_t rtx[APTUS_ZC_MAX_RANGES];
    uint32_t next_seq;     /* stamped on the next datagram */
    uint32_t last_index;   /* index of the latest datagram */
    aptus_zc_sent_t *ring; /* caller's, ring_size entries */
    uint32_t ring_size;
} aptus_zc_tx_t;

/* The ring size that covers a receiver window of 'edge' (the first
 * credit) for a transfer of count datagrams. */
static inline uint32_t aptus_zc_tx_ring_size(uint32_t count, uint32_t edge)
{
    return (edge < count) ? edge : count;
}

void aptus_zc_tx_init(aptus_zc_tx_t *tx, uint32_t count, uint32_t edge,
                      aptus_zc_sent_t *ring, uint32_t ring_size);

/* A credit: the edge only moves forward; of the missing ranges, indices
 * sent at or below seen_seq are queued for resending (merged with what is
 * queued); those sent later may still be on their way. */
void aptus_zc_tx_credit(aptus_zc_tx_t *tx, uint32_t edge,
                        const aptus_zc_range_t *ranges, unsigned num_ranges,
                        uint32_t seen_seq);

/* The next index to send and the sequence to stamp on it: resends first,
 * then new ones inside the window. Returns 0 when nothing may be sent. */
int aptus_zc_tx_next(aptus_zc_tx_t *tx, uint32_t *index, uint32_t *seq);

/* The wire did not take index after all: it goes again first. */
void aptus_zc_tx_unsend(aptus_zc_tx_t *tx, uint32_t index);

/* Nothing to send and nothing heard: send the latest datagram again, so
 * that its sequence reaches the receiver. Returns 0 if nothing was sent. */
int aptus_zc_tx_probe(aptus_zc_tx_t *tx);

/* What aptus_zc_tx_next would return, without taking it. */
int aptus_zc_tx_peek(const aptus_zc_tx_t *tx, uint32_t *index);

#ifdef __cplusplus
}
#endif

#endif
