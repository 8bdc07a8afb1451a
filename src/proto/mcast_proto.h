/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the wire format of the reliable multicast broadcast.
 *
 * One 48-byte header for every datagram of the broadcast protocol (the
 * multicast data, its point-to-point repairs and the control messages),
 * and a parser that validates a datagram before any state is touched:
 * this is the code that faces the network, so it is pure and fuzzed
 * (test/fuzz/fuzz_mcast.c). The protocol itself is in mcast_window.h.
 *
 * Design after Liu, Mamidala and Panda, "Fast and Scalable MPI-Level
 * Broadcast using InfiniBand's Hardware Multicast Support", IPDPS 2004
 * (sections 4 and 5): sequence numbers for ordering and duplicates,
 * acknowledgements piggybacked on every message, a co-root hierarchy for
 * ACK collection, point-to-point retransmission.
 *
 *  0     2   3    4     6      8               16    20    24    28
 *  +-----+---+----+-----+------+---------------+-----+-----+-----+------+
 *  |magic|ver|type|flags|pl len| key (64 bit)  | seq | ack |root |sender|
 *  +-----+---+----+-----+------+---------------+-----+-----+-----+------+
 *  28      32               36               40     42      44      48
 *  +-------+----------------+----------------+------+-------+-------+
 *  |       | msg_len | sack | offset | group | frag | nfrag | stable|
 *  +-------+----------------+----------------+------+-------+-------+
 *  payload (DATA, REPAIR only) ...
 *
 * magic, ver: APTUS_MC_MAGIC, APTUS_MC_VERSION.
 * key:     the job and communicator (64 bits the caller derives, e.g. a
 *          random job id hashed with the communicator's context id). A
 *          datagram with another key is someone else's: the parser says
 *          APTUS_MC_PARSE_FOREIGN so that the caller drops and counts it
 *          apart from corrupt ones (a shared multicast group is normal).
 * seq:     DATA, REPAIR: the message's sequence number. Sequence numbers
 *          count the broadcasts of the communicator, whatever their root:
 *          MPI matches collectives in the order they are called, so one
 *          sequence gives every rank the order, and the root of seq s has
 *          itself every message before s. Control messages: the message
 *          they answer or wait for (a timing aid; not validated).
 * ack:     with APTUS_MC_F_ACK, the sender's cumulative acknowledgement:
 *          it holds every message before this one. Carried by every
 *          datagram the protocol sends (the paper's piggybacking), so a
 *          multicast or a repair also acknowledges; zero without the flag.
 * root:    the root of the message (DATA, REPAIR), the root concerned
 *          (control). sender: the rank that sent this datagram.
 * DATA, REPAIR:
 *   msg_len  the whole message, offset and frag the place of this payload
 *   nfrag    datagrams in the message (at most APTUS_MC_MAX_FRAGS)
 * ACK, NACK, REPORT:
 *   sack     bit i: the sender holds message (ack + i) out of order (bit 0,
 *            the first missing one, is never set)
 *   group    REPORT: the co-root's whole group holds every message below
 * stable:    the sender knows that every rank holds every message below
 *            this (the window base); it travels on every datagram so that
 *            ranks learn it without asking.
 * All fields are little-endian; the header is a multiple of 8 bytes so
 * the payload stays 8-byte aligned in a receive buffer.
 */
#ifndef APTUS_MCAST_PROTO_H_
#define APTUS_MCAST_PROTO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_MC_HDR_LEN   48u
#define APTUS_MC_MAGIC     0x4d41u /* "AM" on the wire */
#define APTUS_MC_VERSION   1u
#define APTUS_MC_MAX_FRAGS 64u /* a message's datagrams fit a 64-bit map */
#define APTUS_MC_SACK_BITS 32u

typedef enum {
    APTUS_MC_TYPE_DATA   = 1, /* root -> everyone, multicast */
    APTUS_MC_TYPE_REPAIR = 2, /* root or co-root -> one rank that lacks it */
    APTUS_MC_TYPE_ACK    = 3, /* leaf -> its co-root, lazy */
    APTUS_MC_TYPE_NACK   = 4, /* receiver -> its repairer: a hole, now */
    APTUS_MC_TYPE_REPORT = 5, /* co-root -> root: its own and its group's
                                 acknowledgement, also the answer to POLL */
    APTUS_MC_TYPE_POLL = 6,   /* root -> co-root: report to me */
    APTUS_MC_TYPE_LAST
} aptus_mc_type_t;

enum {
    APTUS_MC_F_ACK     = 1u << 0, /* the ack field is valid */
    APTUS_MC_F_ACK_REQ = 1u << 1, /* REPAIR: acknowledge at once */
    APTUS_MC_F_REPLY   = 1u << 2, /* ACK, REPORT: answers ACK_REQ or POLL */
    APTUS_MC_F_KNOWN   = 0x7
};

typedef struct aptus_mc_hdr {
    uint8_t type;
    uint16_t flags;
    uint16_t payload_len;
    uint64_t key;
    uint32_t seq;
    uint32_t ack;
    uint32_t root;
    uint32_t sender;
    uint32_t msg_len;   /* DATA, REPAIR */
    uint32_t offset;    /* DATA, REPAIR */
    uint16_t frag;      /* DATA, REPAIR */
    uint16_t nfrag;     /* DATA, REPAIR */
    uint32_t sack;      /* ACK, NACK, REPORT */
    uint32_t group_ack; /* REPORT */
    uint32_t stable;
    const uint8_t *payload; /* parse: points into the datagram */
} aptus_mc_hdr_t;

/* What the receiver knows to validate a datagram with. */
typedef struct aptus_mc_limits {
    uint64_t key;       /* this job and communicator */
    uint32_t comm_size; /* ranks are below this */
} aptus_mc_limits_t;

typedef enum {
    APTUS_MC_PARSE_OK = 0,
    APTUS_MC_PARSE_TRUNCATED,   /* shorter than the header */
    APTUS_MC_PARSE_BAD_MAGIC,   /* not this protocol */
    APTUS_MC_PARSE_BAD_VERSION, /* this protocol, another version */
    APTUS_MC_PARSE_FOREIGN,     /* well formed, another job/communicator */
    APTUS_MC_PARSE_BAD_TYPE,
    APTUS_MC_PARSE_BAD_FLAGS,    /* unknown bits or not allowed on the type */
    APTUS_MC_PARSE_BAD_RANK,     /* root or sender outside the communicator */
    APTUS_MC_PARSE_BAD_LENGTH,   /* datagram length is not header + payload,
                                    or payload on a control message */
    APTUS_MC_PARSE_BAD_FRAGMENT, /* fragment outside its message */
    APTUS_MC_PARSE_BAD_FIELD,    /* a field that does not apply is not zero */
    APTUS_MC_PARSE_LAST
} aptus_mc_parse_status_t;

/* Datagram length of hdr: the header and its payload. */
static inline size_t aptus_mc_len(const aptus_mc_hdr_t *hdr)
{
    return APTUS_MC_HDR_LEN + hdr->payload_len;
}

/* Whether the type carries message data. */
static inline int aptus_mc_type_has_data(uint8_t type)
{
    return (type == APTUS_MC_TYPE_DATA) || (type == APTUS_MC_TYPE_REPAIR);
}

/* Write the header of hdr into buf (APTUS_MC_HDR_LEN bytes); the payload is
 * not copied. Fields that do not apply to the type are written as zero.
 * Returns APTUS_MC_HDR_LEN. */
size_t aptus_mc_hdr_build(void *buf, const aptus_mc_hdr_t *hdr);

/* Validate and decode a datagram of len bytes. On success hdr->payload
 * points into buf. Nothing in hdr is meaningful on failure except for
 * APTUS_MC_PARSE_FOREIGN, where hdr->key and the fields before it hold. */
aptus_mc_parse_status_t aptus_mc_hdr_parse(const void *buf, size_t len,
                                           const aptus_mc_limits_t *limits,
                                           aptus_mc_hdr_t *hdr);

const char *aptus_mc_parse_status_str(aptus_mc_parse_status_t status);

const char *aptus_mc_type_str(uint8_t type);

/* One line for traces, e.g.
 * "DATA seq 12 root 0 from 0 ack 13 stable 4 frag 0/1 len 64/64". */
int aptus_mc_hdr_snprint(const aptus_mc_hdr_t *hdr, char *buf, size_t max);

/* Serial-number arithmetic (RFC 1982) on 32-bit sequence numbers. */
static inline int aptus_mc_seq_lt(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;
}

static inline int aptus_mc_seq_le(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) <= 0;
}

#ifdef __cplusplus
}
#endif

#endif
