/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-SR wire format and credit flow control.
 *
 * A reliable connection carries messages (the sock wire frames them in
 * its byte stream: wire/sock/sock_frame.h), and the RC-SR channel puts one
 * header into every message. The parser faces the network, so it is pure
 * and fuzzed (test/unit/test_rc_sr_proto.cc, test/fuzz/fuzz_rc_sr.c).
 *
 * Message header (RC-SR channel), at the start of a message:
 *  0      1      2        4
 *  +------+------+--------+---------------------+
 *  | kind | am_id| credits| body ...            |
 *  +------+------+--------+---------------------+
 * credits: messages of the reverse direction the sender of this frame has
 *          consumed since it last said so (piggybacked credit return).
 * Kinds:
 *   AM      body: the active message (UCT header and payload)
 *   CREDIT  no body: an explicit credit return
 *   HELLO   body (34 bytes): uint32 magic, uint64 key of the interface
 *           connected to, uint64 key of the connecting interface, uint16
 *           credits granted for the reverse direction, uint16 version,
 *           uint32 the connecting interface's port (as in its address: the
 *           wire's opaque port, wire/wire_dev.h; a verbs QP number takes 24
 *           bits), uint16 tag (opaque to the channel: which of the
 *           connecting interface's peers the connection serves; rc_sr sends
 *           0, aptus the UD stream number), uint32 connection id (the
 *           connecting side's name for it);
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
 * The sock wire's frame header and the message header together are 8
 * bytes, so a payload received at an 8-byte aligned place stays aligned.
 * All fields are little-endian.
 */
#ifndef APTUS_RC_SR_PROTO_H_
#define APTUS_RC_SR_PROTO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_RC_HDR_LEN     4
#define APTUS_RC_HELLO_LEN   34
#define APTUS_RC_SWITCH_LEN  4
#define APTUS_RC_HELLO_MAGIC 0x52435352u /* "RCSR" */
#define APTUS_RC_VERSION     3           /* 3: the port widened to 32 bits */
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
    uint32_t src_port; /* the connecting interface's, opaque */
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
