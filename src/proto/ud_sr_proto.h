/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD-SR wire format.
 *
 * One header for every datagram of the UD-SR channel, its flag bits and
 * optional extensions, and a parser that validates a datagram before any
 * state is touched: this is the code that faces the network, so it is pure
 * and fuzzed (test/unit/test_ud_sr_proto.cc).
 *
 *  0               8               16      20      24    26    28     29    30
 *  +---------------+---------------+-------+-------+-----+-----+------+-----+------+
 *  |dest key       |src key        |dest   |src    | psn | ack |am_id |flags|
 * conn |
 *  |(64 bit)       |(64 bit)       |token  |token  |     |     |<<2 | |     | |
 *  |               |               |(32)   |(32)   |     |     |type  |     | |
 *  +---------------+---------------+-------+-------+-----+-----+------+-----+------+
 *  extensions ..., payload ...
 *
 * dest key: the receiving interface's random key (64 bits from the OS
 *           CSPRNG); anything else is a stray or forged datagram and is
 *           dropped.
 * src key:  the sender's interface key (its incarnation); the receiver
 *           answers with it as the dest key.
 * tokens:   the stream's incarnation. Each end draws a random non-zero
 *           token when its side of a stream begins; a datagram carries the
 *           receiver's token (dest, 0 while the sender does not know it
 *           yet) and the sender's (src). A receiver takes a datagram into a
 *           stream only when the dest token is its own for that stream and
 *           the src token the one it learned, so a datagram of an earlier
 *           incarnation, replayed byte for byte, matches nothing. A stream
 *           opens with a handshake: data with dest token 0 (and the OPEN
 *           flag) is never delivered; the receiver answers it with an ACK
 *           carrying both tokens (REPLY, psn: "resend what you sent before
 *           this"), and the sender's data flows once it has the receiver's
 *           token, which it echoes on every datagram after. A RESET
 *           without the receiver's token abandons the sender's opening.
 * type:     the low 2 bits of byte 28; the active message id (below 32)
 *           takes the 6 bits above, so that the stream number gets 16 bits.
 * conn:     stream number between the two interfaces (several UCT endpoints
 *           to one peer interface get one stream each), 0 to 65534.
 * psn:      this packet's sequence number (DATA). On an ACK that asks for
 *           an acknowledgement (ACK_REQ, a probe) or answers one (REPLY):
 *           the request's coverage, "every PSN before this was sent".
 * ack:      cumulative acknowledgement of the reverse stream: the next PSN
 *           the sender of this packet expects. Carried by every packet.
 * Path probes (ACK with PATH): a datagram of the size the sender wants to
 *           use on the path, psn = its whole length, the rest padding; it
 *           touches no stream. The receiver answers with ACK PATH|REPLY,
 *           psn = the length it received, no payload: that size crosses
 *           the path (packetization-layer path MTU discovery, as in
 *           RFC 8899, since a switch that drops large frames says nothing).
 * Extensions, 8 bytes each so that every header is a multiple of 8 and the
 * payload stays 8-byte aligned in the receive buffer:
 *   SACK      uint64[n] on an ACK only, the rest of the datagram: the
 *                      selective map, 1 to 16 words, bit i of word j =
 *                      (ack + 64 j + i) held by the receiver (bit 0 of
 *                      word 0, the cumulative point itself, never set);
 *                      as many words as reach the highest held packet.
 *   DATA_EXT  uint32   total message length (first fragment of several,
 *                      else 0) and
 *             uint32   CRC-32C of the payload (with the CRC flag, else 0);
 *                      present on DATA when either applies.
 * All fields are little-endian.
 */
#ifndef APTUS_UD_SR_PROTO_H_
#define APTUS_UD_SR_PROTO_H_

#include "le.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_UD_SR_HDR_LEN        32u
#define APTUS_UD_SR_EXT_LEN        8u
#define APTUS_UD_SR_SACK_WORDS_MAX 16u /* a window of 1024 datagrams */
/* Longest header of a DATA datagram, and the longest ACK */
#define APTUS_UD_SR_HDR_MAX_LEN (APTUS_UD_SR_HDR_LEN + APTUS_UD_SR_EXT_LEN)
#define APTUS_UD_SR_ACK_MAX_LEN                                                \
    (APTUS_UD_SR_HDR_LEN + APTUS_UD_SR_SACK_WORDS_MAX * APTUS_UD_SR_EXT_LEN)
#define APTUS_UD_SR_AM_ID_MAX    32u    /* UCT_AM_ID_MAX */
#define APTUS_UD_SR_INTERNAL_MAX 8u     /* internal message ids */
#define APTUS_UD_SR_CONN_MAX     65535u /* stream numbers 0 .. CONN_MAX - 1 */
#define APTUS_UD_SR_TYPE_BITS    2u

typedef enum {
    APTUS_UD_SR_TYPE_DATA  = 1, /* an active message or a fragment of one */
    APTUS_UD_SR_TYPE_ACK   = 2, /* acknowledgement only */
    APTUS_UD_SR_TYPE_RESET = 3  /* "this stream is dead here": fail it */
} aptus_ud_sr_type_t;

enum {
    APTUS_UD_SR_F_FIRST = 1u << 0,    /* first fragment of a message */
    APTUS_UD_SR_F_PATH  = 1u << 0,    /* ACK: a path probe, or with REPLY
                                         its answer (no other flag) */
    APTUS_UD_SR_F_LAST    = 1u << 1,  /* last fragment of a message */
    APTUS_UD_SR_F_ACK_REQ = 1u << 2,  /* acknowledge at once */
    APTUS_UD_SR_F_SACK    = 1u << 3,  /* ACK: SACK extension present */
    APTUS_UD_SR_F_OPEN    = 1u << 3,  /* DATA: dest token 0, the sender does
                                         not know the receiver's token yet:
                                         it asks for the handshake, and the
                                         data is not delivered */
    APTUS_UD_SR_F_CRC   = 1u << 4,    /* CRC extension present */
    APTUS_UD_SR_F_REPLY = 1u << 5,    /* ACK answering an ACK_REQ (psn: its
                                         coverage) */
    APTUS_UD_SR_F_NOP = 1u << 6,      /* reliable DATA with nothing to deliver
                                         (endpoint check, keepalive) */
    APTUS_UD_SR_F_INTERNAL = 1u << 7, /* DATA for the channels themselves: am
                                         id is an internal message id */
    APTUS_UD_SR_F_KNOWN = 0xff
};

typedef struct aptus_ud_sr_pkt {
    uint64_t dest_key;
    uint64_t src_key;
    uint32_t dest_token; /* 0: not known to the sender (DATA with OPEN) */
    uint32_t src_token;
    uint16_t psn;
    uint16_t ack;
    uint8_t type;
    uint8_t flags;
    uint8_t am_id;
    uint16_t conn_id;
    uint8_t sack_words; /* with APTUS_UD_SR_F_SACK: 1 .. SACK_WORDS_MAX */
    uint64_t sack[APTUS_UD_SR_SACK_WORDS_MAX]; /* sack_words of them */
    uint32_t msg_len;       /* valid on a FIRST fragment without LAST */
    uint32_t crc;           /* valid with APTUS_UD_SR_F_CRC */
    const uint8_t *payload; /* parse: points into the datagram */
    size_t payload_len;
} aptus_ud_sr_pkt_t;

typedef enum {
    APTUS_UD_SR_PARSE_OK = 0,
    APTUS_UD_SR_PARSE_TRUNCATED, /* shorter than its header says */
    APTUS_UD_SR_PARSE_BAD_TYPE,
    APTUS_UD_SR_PARSE_BAD_FLAGS, /* unknown bits or a combination not allowed */
    APTUS_UD_SR_PARSE_BAD_AM_ID,
    APTUS_UD_SR_PARSE_BAD_LENGTH, /* payload where none may be, or MSG_LEN */
    APTUS_UD_SR_PARSE_BAD_CRC,
    APTUS_UD_SR_PARSE_BAD_CONN,  /* stream number out of range */
    APTUS_UD_SR_PARSE_BAD_TOKEN, /* a token missing, or OPEN disagreeing */
    APTUS_UD_SR_PARSE_LAST
} aptus_ud_sr_parse_status_t;

/* Length of the header and extensions that pkt's flags call for. */
size_t aptus_ud_sr_hdr_len(const aptus_ud_sr_pkt_t *pkt);

/* Write the 32-byte header without extensions: all a DATA datagram needs
 * when it is not the first of several fragments and carries no CRC, and
 * inline for the send path. aptus_ud_sr_build() writes it the same way. */
static inline size_t
aptus_ud_sr_build_hdr(uint8_t *p, uint64_t dest_key, uint64_t src_key,
                      uint32_t dest_token, uint32_t src_token, uint16_t psn,
                      uint16_t ack, uint8_t type, uint8_t am_id, uint8_t flags,
                      uint16_t conn_id)
{
    aptus_put64(p + 0, dest_key);
    aptus_put64(p + 8, src_key);
    aptus_put32(p + 16, dest_token);
    aptus_put32(p + 20, src_token);
    aptus_put16(p + 24, psn);
    aptus_put16(p + 26, ack);
    p[28] = (uint8_t)(type | (am_id << APTUS_UD_SR_TYPE_BITS));
    p[29] = flags;
    aptus_put16(p + 30, conn_id);
    return APTUS_UD_SR_HDR_LEN;
}

/* Write the header and extensions of pkt into buf (at least
 * APTUS_UD_SR_HDR_MAX_LEN bytes for DATA, APTUS_UD_SR_ACK_MAX_LEN for an
 * ACK); the payload is not copied. The CRC
 * extension takes pkt->crc as given. Returns the header length. */
size_t aptus_ud_sr_build(void *buf, const aptus_ud_sr_pkt_t *pkt);

/* Validate and decode a datagram of len bytes. On success pkt->payload
 * points into buf. With check_crc, a CRC extension is verified. */
aptus_ud_sr_parse_status_t aptus_ud_sr_parse(const void *buf, size_t len,
                                             int check_crc,
                                             aptus_ud_sr_pkt_t *pkt);

const char *aptus_ud_sr_parse_status_str(aptus_ud_sr_parse_status_t status);

/* One-line description for traces, e.g.
 * "DATA psn 12 ack 7 conn 0 am 3 FIRST|LAST len 64". */
int aptus_ud_sr_snprint(const aptus_ud_sr_pkt_t *pkt, char *buf, size_t max);

/* CRC-32C (Castagnoli), continuing from crc (start with 0). */
uint32_t aptus_crc32c(uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
