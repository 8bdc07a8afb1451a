/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the rc_fp wire formats (see fp_proto.h).
 */
#include "fp_proto.h"
#include "le.h"

#include <string.h>

int aptus_fp_msg_hdr_parse(const uint8_t *msg, uint32_t length,
                           unsigned max_am_id, aptus_fp_msg_hdr_t *hdr)
{
    if ((length < APTUS_FP_MSG_HDR_LEN) || (msg[0] >= max_am_id)) {
        return -1;
    }
    hdr->am_id        = msg[0];
    hdr->rc_before    = aptus_get32(msg + 1);
    hdr->credit_nonce = aptus_get16(msg + 5);
    hdr->credits      = aptus_get32(msg + 7);
    return 0;
}

void aptus_fp_trailer_pack(uint8_t *trailer, uint16_t nonce, uint32_t fp_before)
{
    aptus_put16(trailer, nonce);
    aptus_put32(trailer + 2, fp_before);
}

int aptus_fp_trailer_parse(const uint8_t *data, size_t length, uint16_t *nonce,
                           uint32_t *fp_before)
{
    const uint8_t *t;

    if (length < APTUS_FP_TRAILER_LEN) {
        return -1;
    }
    t          = data + length - APTUS_FP_TRAILER_LEN;
    *nonce     = aptus_get16(t);
    *fp_before = aptus_get32(t + 2);
    return 0;
}

/* type (1), zero (1), nonce (LE16), then the body */
#define APTUS_FP_CTL_HDR 4

static size_t aptus_fp_ctl_body_len(uint8_t type)
{
    switch (type) {
    case APTUS_FP_CTL_REQUEST:
        return 8;
    case APTUS_FP_CTL_GRANT:
        return 1 + 3 + 4 + 4 + 4 + 8 + 4 + 8 + 8; /* mode, pad, ... */
    case APTUS_FP_CTL_REFUSE:
        return 0;
    case APTUS_FP_CTL_CREDIT:
    case APTUS_FP_CTL_RELEASE:
        return 4;
    default:
        return SIZE_MAX;
    }
}

size_t aptus_fp_ctl_pack(uint8_t *buf, const aptus_fp_ctl_t *ctl)
{
    uint8_t *p = buf + APTUS_FP_CTL_HDR;

    buf[0] = ctl->type;
    buf[1] = 0;
    aptus_put16(buf + 2, ctl->nonce);
    switch (ctl->type) {
    case APTUS_FP_CTL_REQUEST:
        aptus_put64(p, ctl->request.host_id);
        break;
    case APTUS_FP_CTL_GRANT:
        p[0] = ctl->grant.mode;
        p[1] = p[2] = p[3] = 0;
        aptus_put32(p + 4, ctl->grant.size);
        aptus_put32(p + 8, ctl->grant.slots);
        aptus_put32(p + 12, ctl->grant.slot_size);
        aptus_put64(p + 16, ctl->grant.address);
        aptus_put32(p + 24, ctl->grant.pid);
        aptus_put64(p + 28, ctl->grant.host_id);
        aptus_put64(p + 36, ctl->grant.token);
        break;
    case APTUS_FP_CTL_CREDIT:
        aptus_put32(p, ctl->credit.credits);
        break;
    case APTUS_FP_CTL_RELEASE:
        aptus_put32(p, ctl->release.fp_total);
        break;
    default:
        break;
    }
    return APTUS_FP_CTL_HDR + aptus_fp_ctl_body_len(ctl->type);
}

int aptus_fp_ctl_parse(const uint8_t *buf, size_t length, aptus_fp_ctl_t *ctl)
{
    const uint8_t *p = buf + APTUS_FP_CTL_HDR;
    aptus_fp_geom_t geom;
    const char *why;

    if ((length < APTUS_FP_CTL_HDR) || (buf[1] != 0) ||
        (length - APTUS_FP_CTL_HDR != aptus_fp_ctl_body_len(buf[0]))) {
        return -1;
    }
    memset(ctl, 0, sizeof(*ctl));
    ctl->type  = buf[0];
    ctl->nonce = aptus_get16(buf + 2);
    if (ctl->nonce == 0) {
        return -1;
    }
    switch (ctl->type) {
    case APTUS_FP_CTL_REQUEST:
        ctl->request.host_id = aptus_get64(p);
        return 0;
    case APTUS_FP_CTL_GRANT:
        if (p[1] | p[2] | p[3]) {
            return -1;
        }
        ctl->grant.mode      = p[0];
        ctl->grant.size      = aptus_get32(p + 4);
        ctl->grant.slots     = aptus_get32(p + 8);
        ctl->grant.slot_size = aptus_get32(p + 12);
        ctl->grant.address   = aptus_get64(p + 16);
        ctl->grant.pid       = aptus_get32(p + 24);
        ctl->grant.host_id   = aptus_get64(p + 28);
        ctl->grant.token     = aptus_get64(p + 36);
        /* the geometry must be one this side would make itself */
        if ((ctl->grant.mode >= APTUS_FP_MODE_LAST) ||
            (aptus_fp_geom_make((ctl->grant.mode == APTUS_FP_VELOBLOCK)
                                    ? APTUS_FP_VELOBLOCK
                                    : APTUS_FP_ORIGINAL,
                                ctl->grant.size, ctl->grant.slots,
                                ctl->grant.slot_size, &geom, &why) != 0) ||
            (geom.size != ctl->grant.size) ||
            (ctl->grant.address + ctl->grant.size < ctl->grant.address)) {
            return -1;
        }
        return 0;
    case APTUS_FP_CTL_REFUSE:
        return 0;
    case APTUS_FP_CTL_CREDIT:
        ctl->credit.credits = aptus_get32(p);
        return 0;
    case APTUS_FP_CTL_RELEASE:
        ctl->release.fp_total = aptus_get32(p);
        return 0;
    default:
        return -1;
    }
}
