/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: what the rc_fp transport adds to the wire, pure logic.
 *
 * A fast-path message (the ring's payload) starts with
 *   am_id (1) | rc_before (LE32)
 * rc_before: the messages the sender had sent over RC-SR on this channel's
 * account before this one (the receiver delivers it once it has delivered
 * as many). An RC-SR message of an rc_fp endpoint ends with
 *   nonce (LE16) | fp_before (LE32)
 * nonce: the sender's name of its fast-path channel to the receiver (0:
 * none asked for); fp_before: the messages it had written into that
 * channel before this one (the receiver takes them from the block first).
 * Between them, messages to one endpoint arrive in the order they were
 * sent whatever path each took.
 *
 * Control messages travel over RC-SR with an internal active message id
 * (APTUS_FP_CTL_AM | type): REQUEST (sender -> receiver: give me a block),
 * GRANT (the block: address, geometry, owner, key), REFUSE, CREDIT (receiver ->
 * sender: freed credits), RELEASE (sender -> receiver: done with the
 * block, after fp_total messages).
 */
#ifndef APTUS_FP_PROTO_H_
#define APTUS_FP_PROTO_H_

#include "fp_ring.h"
#include "le.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_FP_MSG_HDR_LEN 11
#define APTUS_FP_TRAILER_LEN 6
#define APTUS_FP_CTL_AM      0x80 /* internal: never a user's id (< 32) */
#define APTUS_FP_CTL_MAX_LEN 48

typedef enum aptus_fp_ctl_type {
    APTUS_FP_CTL_REQUEST = 1,
    APTUS_FP_CTL_GRANT   = 2,
    APTUS_FP_CTL_REFUSE  = 3,
    APTUS_FP_CTL_CREDIT  = 4,
    APTUS_FP_CTL_RELEASE = 5,
    APTUS_FP_CTL_LAST
} aptus_fp_ctl_type_t;

typedef struct aptus_fp_ctl {
    uint8_t type;
    uint16_t nonce;
    union {
        struct {
            uint64_t host_id; /* the sender's: the block must be reachable */
        } request;
        struct {
            uint8_t mode;
            uint32_t size, slots, slot_size;
            uint64_t address;
            uint32_t pid;
            uint64_t host_id;
            uint64_t token; /* the block's key (verbs: its rkey), or 0 */
        } grant;
        struct {
            uint32_t credits;
        } credit;
        struct {
            uint32_t fp_total; /* messages written into the block */
        } release;
    };
} aptus_fp_ctl_t;

/* A fast-path message's header: [am_id][rc_before LE32][credit_nonce LE16]
 * [credits LE32]: credits freed in the channel the receiver writes back
 * into the sender's block, named by the receiver's nonce for it (the
 * paper's piggyback; 0 credits: none). */
static inline void aptus_fp_msg_hdr_pack(uint8_t *hdr, uint8_t am_id,
                                         uint32_t rc_before,
                                         uint16_t credit_nonce,
                                         uint32_t credits)
{
    hdr[0] = am_id;
    aptus_put32(hdr + 1, rc_before);
    aptus_put16(hdr + 5, credit_nonce);
    aptus_put32(hdr + 7, credits);
}

typedef struct aptus_fp_msg_hdr {
    uint8_t am_id;
    uint16_t credit_nonce;
    uint32_t rc_before;
    uint32_t credits;
} aptus_fp_msg_hdr_t;

/* 0, or -1 when the message is shorter than its header or names an id no
 * user may have (>= max_am_id). */
int aptus_fp_msg_hdr_parse(const uint8_t *msg, uint32_t length,
                           unsigned max_am_id, aptus_fp_msg_hdr_t *hdr);

void aptus_fp_trailer_pack(uint8_t *trailer, uint16_t nonce,
                           uint32_t fp_before);

/* The trailer at the end of data[0 .. length); -1 when too short. */
int aptus_fp_trailer_parse(const uint8_t *data, size_t length, uint16_t *nonce,
                           uint32_t *fp_before);

/* Encode into buf (APTUS_FP_CTL_MAX_LEN); returns the length. */
size_t aptus_fp_ctl_pack(uint8_t *buf, const aptus_fp_ctl_t *ctl);

/* Decode and validate (known type, exact length, a geometry that makes a
 * ring); 0 or -1. */
int aptus_fp_ctl_parse(const uint8_t *buf, size_t length, aptus_fp_ctl_t *ctl);

#ifdef __cplusplus
}
#endif

#endif
