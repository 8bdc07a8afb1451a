/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-SR wire format and credit flow control.
 *
 * A reliable connection carries a byte stream; the connection wire cuts it
 * into frames, and the RC-SR channel puts one header into every message
 * frame. Both parsers face the network, so they are pure and fuzzed
 * (test/unit/test_rc_sr_proto.cc).
 *
 * Frame (connection wire):
 *   uint32  bits 0..23: payload length; bits 24..31: frame type
 *   payload
 * Types: MSG (a message of the channel above), IMM (the 4-byte immediate of
 * a write-with-immediate, whose data was written one-sided before it).
 *
 * Message header (RC-SR channel), at the start of a MSG payload:
 *  0      1      2        4
 *  +------+------+--------+---------------------+
 *  | kind | am_id| credits| body ...            |
 *  +------+------+--------+---------------------+
 * credits: messages of the reverse direction the sender of this frame has
 *          consumed since it last said so (piggybacked credit return).
 * Kinds:
 *   AM      body: the active message (UCT header and payload)
 *   CREDIT  no body: an explicit credit return
 *   HELLO   body: uint32 magic, uint64 key of the interface connected to,
 *           uint64 key of the connecting interface, uint16 credits granted
 *           for the reverse direction, uint16 version, uint16 the
 *           connecting interface's port (as in its address), uint16 tag
 *           (opaque to the channel: which of the connecting interface's
 *           peers the connection serves; rc_sr sends 0, aptus the UD stream
 *           number), uint32 connection id (the connecting side's name for
 *           it);
 *           first message of a connection. The connecting interface's
 *           identity lets the accepting side use the same connection for
 *           its own endpoint to it.
 *   NOP     no body: a keepalive check
 *   BYE     no body: the sender's endpoint on this connection is gone (it
 *           still receives on it until the other side is done too)
 *   SWITCH  body: uint32 connection id. Two interfaces connected to each
 *           other at once: the one with the larger (key, port) gives up its
 *           connection for the other's, named by its id. Sent last on the
 *           connection given up: what came before it is delivered first.
 *   SWITCH_ACK  no body: sent on the connection kept once the SWITCH
 *           arrived; from then on both directions use it.
 * The frame header and the message header together are 8 bytes, so a
 * payload received at an 8-byte aligned place stays aligned.
 * All fields are little-endian.
 */
#ifndef APTUS_RC_SR_PROTO_H_
#define APTUS_RC_SR_PROTO_H_

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
 * The target serves reads in the order they came. */
#define APTUS_FRAME_TYPE_WRITE     2
#define APTUS_FRAME_TYPE_READ_REQ  3
#define APTUS_FRAME_TYPE_READ_RESP 4
#define APTUS_FRAME_TYPE_READ_ERR  5
#define APTUS_FRAME_TYPE_FENCE_ACK 6
#define APTUS_FRAME_WRITE_HDR_LEN  16
#define APTUS_FRAME_READ_REQ_LEN   24
/* Proof of the peer's process (same host only), the first frame each side
 * sends on a connection:
 *   PROVE_REQ  name u64 (of the sender's local rendezvous socket, which
 *              only the sender's network namespace reaches), challenge
 *              (16 bytes, random)
 *   PROVE_ANS  no body: the receiver of a PROVE_REQ has answered it on the
 *              local socket if it could (the challenge, and its own view
 *              of this connection's addresses); the asker decides then.
 * The wire (not this module) says what the local socket is. */
#define APTUS_FRAME_TYPE_PROVE_REQ 7
#define APTUS_FRAME_TYPE_PROVE_ANS 8
#define APTUS_FRAME_CHALLENGE_LEN  16
#define APTUS_FRAME_PROVE_REQ_LEN  (8 + APTUS_FRAME_CHALLENGE_LEN)

#define APTUS_RC_HDR_LEN     4
#define APTUS_RC_HELLO_LEN   32
#define APTUS_RC_SWITCH_LEN  4
#define APTUS_RC_HELLO_MAGIC 0x52435352u /* "RCSR" */
#define APTUS_RC_VERSION     2
#define APTUS_RC_MAX_CREDITS UINT16_MAX

enum {
    APTUS_RC_KIND_AM         = 0,
    APTUS_RC_KIND_CREDIT     = 1,
    APTUS_RC_KIND_HELLO      = 2,
    APTUS_RC_KIND_NOP        = 3,
    APTUS_RC_KIND_BYE        = 4,
    APTUS_RC_KIND_SWITCH     = 5,
    APTUS_RC_KIND_SWITCH_ACK = 6,
    APTUS_RC_KIND_LAST
};

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

/* Parses the frame at buf (avail bytes there). Frames longer than max_len
 * or of an unknown type are BAD. */
aptus_frame_result_t aptus_frame_parse(const uint8_t *buf, size_t avail,
                                       size_t max_len, aptus_frame_t *frame);

/* The name of a frame type, for traces ("MSG", "WRITE", ...; "?" for one
 * no frame has). */
const char *aptus_frame_type_str(unsigned type);

typedef struct aptus_rc_msg {
    unsigned kind;
    uint8_t am_id;
    uint16_t credits;
    const uint8_t *body;
    size_t body_length;
} aptus_rc_msg_t;

typedef struct aptus_rc_hello {
    uint64_t key;     /* of the interface connected to */
    uint64_t src_key; /* of the connecting interface */
    uint16_t credits;
    uint16_t version;
    uint16_t src_port; /* the connecting interface's, opaque */
    uint16_t tag;      /* the connecting endpoint's, opaque (aptus: the UD
                          stream the connection belongs to); 0 for rc_sr */
    uint32_t conn_id;  /* the connecting side's name for the connection */
} aptus_rc_hello_t;

void aptus_rc_hdr_pack(uint8_t *hdr, unsigned kind, uint8_t am_id,
                       uint16_t credits);

/* 0 when the message is well formed, -1 otherwise. */
int aptus_rc_msg_parse(const uint8_t *payload, size_t length,
                       aptus_rc_msg_t *msg);

void aptus_rc_hello_pack(uint8_t *body, const aptus_rc_hello_t *hello);
int aptus_rc_hello_parse(const aptus_rc_msg_t *msg, aptus_rc_hello_t *hello);

/*
 * Credit flow control of one direction of a connection.
 *
 * The receiver grants a number of messages at connection set-up; the
 * sender spends one per message and stops at zero (the message waits, it
 * is never dropped); the receiver counts what it has consumed and returns
 * those credits on its next message to the sender, or in an explicit
 * CREDIT message once half the grant is owed.
 */
typedef struct aptus_rc_credits {
    uint32_t tx;          /* messages this side may still send */
    uint32_t owed;        /* consumed messages not yet returned */
    uint32_t grant;       /* what this side granted the peer */
    uint32_t explicit_at; /* owed credits that call for a CREDIT message */
} aptus_rc_credits_t;

/* tx_initial: what the peer granted us; grant: what we grant the peer. */
void aptus_rc_credits_init(aptus_rc_credits_t *fc, uint32_t tx_initial,
                           uint32_t grant);

static inline int aptus_rc_credits_take(aptus_rc_credits_t *fc)
{
    if (fc->tx == 0) {
        return 0;
    }
    fc->tx--;
    return 1;
}

/* Credits that came back from the peer. Returns 0 when the peer returned
 * more than it could owe (a broken or forged peer). */
int aptus_rc_credits_returned(aptus_rc_credits_t *fc, uint32_t credits,
                              uint32_t tx_limit);

/* A message from the peer was consumed. */
static inline void aptus_rc_credits_consumed(aptus_rc_credits_t *fc)
{
    fc->owed++;
}

/* Credits to piggyback on a message leaving now (they are then no longer
 * owed). */
static inline uint16_t aptus_rc_credits_piggyback(aptus_rc_credits_t *fc)
{
    uint32_t n = fc->owed;

    if (n > APTUS_RC_MAX_CREDITS) {
        n = APTUS_RC_MAX_CREDITS;
    }
    fc->owed -= n;
    return (uint16_t)n;
}

static inline int aptus_rc_credits_need_explicit(const aptus_rc_credits_t *fc)
{
    return fc->owed >= fc->explicit_at;
}

#ifdef __cplusplus
}
#endif

#endif
