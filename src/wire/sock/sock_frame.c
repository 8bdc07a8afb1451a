/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's frames (see sock_frame.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_frame.h"
#include "proto/le.h"

void aptus_frame_hdr_pack(uint8_t *hdr, unsigned type, size_t length)
{
    aptus_put32(hdr, ((uint32_t)type << 24) | (uint32_t)length);
}

size_t aptus_frame_max_payload(unsigned type, size_t max_len)
{
    if ((type == APTUS_FRAME_TYPE_WRITE) ||
        (type == APTUS_FRAME_TYPE_READ_RESP)) {
        return (max_len > APTUS_FRAME_RMA_MAX_LEN) ? max_len
                                                   : APTUS_FRAME_RMA_MAX_LEN;
    }
    return max_len;
}

aptus_frame_result_t aptus_frame_parse(const uint8_t *buf, size_t avail,
                                       size_t max_len, aptus_frame_t *frame)
{
    uint32_t word;

    if (avail < APTUS_FRAME_HDR_LEN) {
        return APTUS_FRAME_PARTIAL;
    }
    word          = aptus_get32(buf);
    frame->type   = word >> 24;
    frame->length = word & APTUS_FRAME_MAX_LEN;
    switch (frame->type) {
    case APTUS_FRAME_TYPE_MSG:
        if (frame->length > max_len) {
            return APTUS_FRAME_BAD;
        }
        break;
    case APTUS_FRAME_TYPE_IMM:
        if (frame->length != APTUS_FRAME_IMM_LEN) {
            return APTUS_FRAME_BAD;
        }
        break;
    case APTUS_FRAME_TYPE_WRITE:
        if ((frame->length <= APTUS_FRAME_WRITE_HDR_LEN) ||
            (frame->length > aptus_frame_max_payload(frame->type, max_len))) {
            return APTUS_FRAME_BAD;
        }
        break;
    case APTUS_FRAME_TYPE_READ_REQ:
        if (frame->length != APTUS_FRAME_READ_REQ_LEN) {
            return APTUS_FRAME_BAD;
        }
        break;
    case APTUS_FRAME_TYPE_READ_RESP:
        if ((frame->length == 0) ||
            (frame->length > aptus_frame_max_payload(frame->type, max_len))) {
            return APTUS_FRAME_BAD;
        }
        break;
    case APTUS_FRAME_TYPE_PROVE_REQ:
        if (frame->length != APTUS_FRAME_PROVE_REQ_LEN) {
            return APTUS_FRAME_BAD;
        }
        break;
    case APTUS_FRAME_TYPE_READ_ERR:
    case APTUS_FRAME_TYPE_FENCE_ACK:
    case APTUS_FRAME_TYPE_PROVE_ANS:
        if (frame->length != 0) {
            return APTUS_FRAME_BAD;
        }
        break;
    default:
        return APTUS_FRAME_BAD;
    }
    if (avail - APTUS_FRAME_HDR_LEN < frame->length) {
        return APTUS_FRAME_PARTIAL;
    }
    frame->payload = buf + APTUS_FRAME_HDR_LEN;
    return APTUS_FRAME_OK;
}

const char *aptus_frame_type_str(unsigned type)
{
    static const char *names[] = { "MSG",       "IMM",       "WRITE",
                                   "READ_REQ",  "READ_RESP", "READ_ERR",
                                   "FENCE_ACK", "PROVE_REQ", "PROVE_ANS" };

    return (type < sizeof(names) / sizeof(names[0])) ? names[type] : "?";
}
