/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's frames, which cut a connection's byte stream
 * into the owner's messages and the wire's own operations. The parser
 * faces the network, so it is pure (no UCX, no sockets) and fuzzed
 * (test/fuzz/fuzz_rc_sr.c, test/unit/test_rc_sr_proto.cc).
 *
 * Frame:
 *   uint32  bits 0..23: payload length; bits 24..31: frame type
 *   payload
 * Types: MSG (a message of the channel above), IMM (the 4-byte immediate of
 * a write-with-immediate, whose data was written one-sided before it).
 * All fields are little-endian.
 */
#ifndef APTUS_SOCK_FRAME_H_
#define APTUS_SOCK_FRAME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_FRAME_HDR_LEN  4
#define APTUS_FRAME_MAX_LEN  ((1u << 24) - 1)
#define APTUS_FRAME_TYPE_MSG 0
#define APTUS_FRAME_TYPE_IMM 1
#define APTUS_FRAME_IMM_LEN  4
/* One-sided operations carried over the connection (a peer on another
 * host, where the wire cannot reach memory directly): what an RC queue
 * pair does in hardware.
 *   WRITE     address u64, token u64, then the data (at least 1 byte)
 *   READ_REQ  address u64, length u64, token u64
 *   READ_RESP the next bytes of the oldest read not yet answered in full
 *   READ_ERR  no body: the oldest such read was refused (outside the
 *             registered region named by the token)
 *   READ_REQ of length 0 is a fence: answered by FENCE_ACK (no body) in
 *             its turn, once every write before it is in place, so that a
 *             write completes when the peer has it, as on RC.
 * The target serves reads in the order they came. WRITE and READ_RESP
 * carry up to APTUS_FRAME_RMA_MAX_LEN bytes whatever the connection's
 * largest message: the receiver places their data straight into the memory
 * the operation names, not into a receive buffer. */
#define APTUS_FRAME_TYPE_WRITE     2
#define APTUS_FRAME_TYPE_READ_REQ  3
#define APTUS_FRAME_TYPE_READ_RESP 4
#define APTUS_FRAME_TYPE_READ_ERR  5
#define APTUS_FRAME_TYPE_FENCE_ACK 6
#define APTUS_FRAME_WRITE_HDR_LEN  16
#define APTUS_FRAME_READ_REQ_LEN   24
#define APTUS_FRAME_RMA_MAX_LEN    (256u * 1024)
/* Proof of the peer's process (same host only), the first frame each side
 * sends on a connection:
 *   PROVE_REQ  name u64 (of the sender's local rendezvous socket, which
 *              only the sender's network namespace reaches), challenge
 *              (16 bytes, random)
 *   PROVE_ANS  no body: the receiver of a PROVE_REQ has answered it on the
 *              local socket if it could (the challenge, and its own view
 *              of this connection's addresses); the asker decides then.
 * sock_conn_prove.c says what the local socket is. */
#define APTUS_FRAME_TYPE_PROVE_REQ 7
#define APTUS_FRAME_TYPE_PROVE_ANS 8
#define APTUS_FRAME_CHALLENGE_LEN  16
#define APTUS_FRAME_PROVE_REQ_LEN  (8 + APTUS_FRAME_CHALLENGE_LEN)

/* Result of looking at the start of a received byte stream. */
typedef enum {
    APTUS_FRAME_OK,      /* a whole frame is there */
    APTUS_FRAME_PARTIAL, /* more bytes are needed */
    APTUS_FRAME_BAD      /* not a frame of ours: the connection is broken */
} aptus_frame_result_t;

typedef struct aptus_frame {
    unsigned type;
    size_t length; /* payload bytes */
    const uint8_t *payload;
} aptus_frame_t;

void aptus_frame_hdr_pack(uint8_t *hdr, unsigned type, size_t length);

/* The largest payload a frame of type may carry on a connection whose
 * largest message is max_len. */
size_t aptus_frame_max_payload(unsigned type, size_t max_len);

/* Parses the frame at buf (avail bytes there). Frames longer than their
 * type's aptus_frame_max_payload() or of an unknown type are BAD. On
 * PARTIAL with a whole header there, type and length are set (the header
 * is valid): the receiver of a large one-sided frame places its payload as
 * it comes. */
aptus_frame_result_t aptus_frame_parse(const uint8_t *buf, size_t avail,
                                       size_t max_len, aptus_frame_t *frame);

/* The name of a frame type, for traces ("MSG", "WRITE", ...; "?" for one
 * no frame has). */
const char *aptus_frame_type_str(unsigned type);

#ifdef __cplusplus
}
#endif

#endif
