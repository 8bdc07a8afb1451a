/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the wire format of the reliable multicast broadcast (see
 * mcast_proto.h).
 */
#include "mcast_proto.h"

#include "le.h"

#include <stdio.h>

/* The header is 8-byte aligned and its fields sit where the diagram says. */
typedef char aptus_mc_hdr_len_check[(APTUS_MC_HDR_LEN % 8 == 0) ? 1 : -1];

size_t aptus_mc_hdr_build(void *buf, const aptus_mc_hdr_t *hdr)
{
    uint8_t *p = buf;

    aptus_put16(p + 0, APTUS_MC_MAGIC);
    p[2] = APTUS_MC_VERSION;
    p[3] = hdr->type;
    aptus_put16(p + 4, hdr->flags);
    aptus_put16(p + 6, hdr->payload_len);
    aptus_put64(p + 8, hdr->key);
    aptus_put32(p + 16, hdr->seq);
    aptus_put32(p + 20, (hdr->flags & APTUS_MC_F_ACK) ? hdr->ack : 0);
    aptus_put32(p + 24, hdr->root);
    aptus_put32(p + 28, hdr->sender);
    if (aptus_mc_type_has_data(hdr->type)) {
        aptus_put32(p + 32, hdr->msg_len);
        aptus_put32(p + 36, hdr->offset);
        aptus_put16(p + 40, hdr->frag);
        aptus_put16(p + 42, hdr->nfrag);
    } else {
        aptus_put32(p + 32, (hdr->type == APTUS_MC_TYPE_POLL) ? 0 : hdr->sack);
        aptus_put32(p + 36,
                    (hdr->type == APTUS_MC_TYPE_REPORT) ? hdr->group_ack : 0);
        aptus_put32(p + 40, 0);
    }
    aptus_put32(p + 44, hdr->stable);
    return APTUS_MC_HDR_LEN;
}

/* Flags a type must carry, and those it may carry. */
static const uint16_t aptus_mc_flags_need[APTUS_MC_TYPE_LAST] = {
    [APTUS_MC_TYPE_ACK]    = APTUS_MC_F_ACK,
    [APTUS_MC_TYPE_NACK]   = APTUS_MC_F_ACK,
    [APTUS_MC_TYPE_REPORT] = APTUS_MC_F_ACK,
};

static const uint16_t aptus_mc_flags_allow[APTUS_MC_TYPE_LAST] = {
    [APTUS_MC_TYPE_DATA]   = APTUS_MC_F_ACK,
    [APTUS_MC_TYPE_REPAIR] = APTUS_MC_F_ACK | APTUS_MC_F_ACK_REQ,
    [APTUS_MC_TYPE_ACK]    = APTUS_MC_F_ACK | APTUS_MC_F_REPLY,
    [APTUS_MC_TYPE_NACK]   = APTUS_MC_F_ACK,
    [APTUS_MC_TYPE_REPORT] = APTUS_MC_F_ACK | APTUS_MC_F_REPLY,
    [APTUS_MC_TYPE_POLL]   = APTUS_MC_F_ACK,
};

static aptus_mc_parse_status_t aptus_mc_check_fragment(const aptus_mc_hdr_t *h)
{
    uint64_t end = (uint64_t)h->offset + h->payload_len;

    if ((h->nfrag == 0) || (h->nfrag > APTUS_MC_MAX_FRAGS) ||
        (h->frag >= h->nfrag) || (end > h->msg_len)) {
        return APTUS_MC_PARSE_BAD_FRAGMENT;
    }
    if (h->nfrag == 1) {
        /* a message of one datagram: the payload is all of it (maybe 0) */
        return ((h->offset == 0) && (end == h->msg_len))
                   ? APTUS_MC_PARSE_OK
                   : APTUS_MC_PARSE_BAD_FRAGMENT;
    }
    /* of several: each carries data, the first starts the message, the
     * last ends it, the others end before it */
    if ((h->payload_len == 0) || ((h->frag == 0) != (h->offset == 0)) ||
        ((h->frag == h->nfrag - 1) != (end == h->msg_len))) {
        return APTUS_MC_PARSE_BAD_FRAGMENT;
    }
    return APTUS_MC_PARSE_OK;
}

aptus_mc_parse_status_t aptus_mc_hdr_parse(const void *buf, size_t len,
                                           const aptus_mc_limits_t *limits,
                                           aptus_mc_hdr_t *hdr)
{
    const uint8_t *p = buf;
    uint32_t w32, w36, w40;

    if (len < APTUS_MC_HDR_LEN) {
        return APTUS_MC_PARSE_TRUNCATED;
    }
    if (aptus_get16(p) != APTUS_MC_MAGIC) {
        return APTUS_MC_PARSE_BAD_MAGIC;
    }
    if (p[2] != APTUS_MC_VERSION) {
        return APTUS_MC_PARSE_BAD_VERSION;
    }
    hdr->type        = p[3];
    hdr->flags       = aptus_get16(p + 4);
    hdr->payload_len = aptus_get16(p + 6);
    hdr->key         = aptus_get64(p + 8);
    /* someone else's traffic on a shared group is not an error here: say
     * so before judging fields another version of the job may use */
    if (hdr->key != limits->key) {
        return APTUS_MC_PARSE_FOREIGN;
    }

    hdr->seq       = aptus_get32(p + 16);
    hdr->ack       = aptus_get32(p + 20);
    hdr->root      = aptus_get32(p + 24);
    hdr->sender    = aptus_get32(p + 28);
    w32            = aptus_get32(p + 32);
    w36            = aptus_get32(p + 36);
    w40            = aptus_get32(p + 40);
    hdr->stable    = aptus_get32(p + 44);
    hdr->msg_len   = 0;
    hdr->offset    = 0;
    hdr->frag      = 0;
    hdr->nfrag     = 0;
    hdr->sack      = 0;
    hdr->group_ack = 0;
    hdr->payload   = p + APTUS_MC_HDR_LEN;

    if ((hdr->type == 0) || (hdr->type >= APTUS_MC_TYPE_LAST)) {
        return APTUS_MC_PARSE_BAD_TYPE;
    }
    if ((hdr->flags & ~aptus_mc_flags_allow[hdr->type]) ||
        ((hdr->flags & aptus_mc_flags_need[hdr->type]) !=
         aptus_mc_flags_need[hdr->type])) {
        return APTUS_MC_PARSE_BAD_FLAGS;
    }
    if ((hdr->root >= limits->comm_size) ||
        (hdr->sender >= limits->comm_size) ||
        ((hdr->type == APTUS_MC_TYPE_DATA) && (hdr->sender != hdr->root))) {
        /* a multicast comes from its root; repairs may come from anyone */
        return APTUS_MC_PARSE_BAD_RANK;
    }
    if ((len != APTUS_MC_HDR_LEN + (size_t)hdr->payload_len) ||
        (!aptus_mc_type_has_data(hdr->type) && (hdr->payload_len != 0))) {
        return APTUS_MC_PARSE_BAD_LENGTH;
    }
    if (!(hdr->flags & APTUS_MC_F_ACK) && (hdr->ack != 0)) {
        return APTUS_MC_PARSE_BAD_FIELD;
    }

    switch (hdr->type) {
    case APTUS_MC_TYPE_DATA:
    case APTUS_MC_TYPE_REPAIR:
        hdr->msg_len = w32;
        hdr->offset  = w36;
        hdr->frag    = (uint16_t)(w40 & 0xffff);
        hdr->nfrag   = (uint16_t)(w40 >> 16);
        return aptus_mc_check_fragment(hdr);
    case APTUS_MC_TYPE_POLL:
        return ((w32 | w36 | w40) == 0) ? APTUS_MC_PARSE_OK
                                        : APTUS_MC_PARSE_BAD_FIELD;
    default: /* ACK, NACK, REPORT */
        hdr->sack      = w32;
        hdr->group_ack = w36;
        /* bit 0 is the cumulative point itself, missing by definition */
        if ((w40 != 0) || (hdr->sack & 1) ||
            ((hdr->type != APTUS_MC_TYPE_REPORT) && (w36 != 0))) {
            return APTUS_MC_PARSE_BAD_FIELD;
        }
        return APTUS_MC_PARSE_OK;
    }
}

const char *aptus_mc_parse_status_str(aptus_mc_parse_status_t status)
{
    static const char *names[] = {
        "ok",         "truncated",    "bad magic", "bad version",
        "foreign",    "bad type",     "bad flags", "bad rank",
        "bad length", "bad fragment", "bad field",
    };

    return ((unsigned)status < APTUS_MC_PARSE_LAST) ? names[status] : "?";
}

const char *aptus_mc_type_str(uint8_t type)
{
    static const char *names[] = { "?",    "DATA",   "REPAIR", "ACK",
                                   "NACK", "REPORT", "POLL" };

    return (type < APTUS_MC_TYPE_LAST) ? names[type] : names[0];
}

int aptus_mc_hdr_snprint(const aptus_mc_hdr_t *hdr, char *buf, size_t max)
{
    int n;

    n = snprintf(buf, max, "%s seq %u root %u from %u",
                 aptus_mc_type_str(hdr->type), hdr->seq, hdr->root,
                 hdr->sender);
    if ((n < 0) || ((size_t)n >= max)) {
        return n;
    }
    if (hdr->flags & APTUS_MC_F_ACK) {
        n += snprintf(buf + n, max - n, " ack %u", hdr->ack);
        if ((size_t)n >= max) {
            return n;
        }
    }
    n += snprintf(buf + n, max - n, " stable %u%s%s", hdr->stable,
                  (hdr->flags & APTUS_MC_F_ACK_REQ) ? " ACK_REQ" : "",
                  (hdr->flags & APTUS_MC_F_REPLY) ? " REPLY" : "");
    if ((size_t)n >= max) {
        return n;
    }
    if (aptus_mc_type_has_data(hdr->type)) {
        n += snprintf(buf + n, max - n, " frag %u/%u len %u/%u", hdr->frag,
                      hdr->nfrag, hdr->payload_len, hdr->msg_len);
    } else if (hdr->type != APTUS_MC_TYPE_POLL) {
        n += snprintf(buf + n, max - n, " sack 0x%x", hdr->sack);
        if ((hdr->type == APTUS_MC_TYPE_REPORT) && ((size_t)n < max)) {
            n += snprintf(buf + n, max - n, " group %u", hdr->group_ack);
        }
    }
    return n;
}
