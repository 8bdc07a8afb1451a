/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD-SR wire format (see ud_sr_proto.h).
 */
#include "ud_sr_proto.h"

#include "le.h"

#include <stdio.h>
#include <string.h>

static int aptus_ud_sr_has_msg_len(uint8_t type, uint8_t flags)
{
    return (type == APTUS_UD_SR_TYPE_DATA) &&
           ((flags & (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) ==
            APTUS_UD_SR_F_FIRST);
}

static int aptus_ud_sr_has_data_ext(uint8_t type, uint8_t flags)
{
    return aptus_ud_sr_has_msg_len(type, flags) ||
           ((type == APTUS_UD_SR_TYPE_DATA) && (flags & APTUS_UD_SR_F_CRC));
}

static int aptus_ud_sr_has_sack(uint8_t type, uint8_t flags)
{
    return (type == APTUS_UD_SR_TYPE_ACK) && (flags & APTUS_UD_SR_F_SACK);
}

/* Inline here: the parser calls it for every datagram. */
static inline size_t aptus_ud_sr_hdr_len_inl(const aptus_ud_sr_pkt_t *pkt)
{
    size_t len = APTUS_UD_SR_HDR_LEN;

    if (aptus_ud_sr_has_sack(pkt->type, pkt->flags)) {
        len += pkt->sack_words * APTUS_UD_SR_EXT_LEN;
    }
    if (aptus_ud_sr_has_data_ext(pkt->type, pkt->flags)) {
        len += APTUS_UD_SR_EXT_LEN;
    }
    return len;
}

size_t aptus_ud_sr_hdr_len(const aptus_ud_sr_pkt_t *pkt)
{
    return aptus_ud_sr_hdr_len_inl(pkt);
}

size_t aptus_ud_sr_build(void *buf, const aptus_ud_sr_pkt_t *pkt)
{
    uint8_t *p = buf;
    unsigned i;

    p += aptus_ud_sr_build_hdr(p, pkt->dest_key, pkt->src_key, pkt->dest_token,
                               pkt->src_token, pkt->psn, pkt->ack, pkt->type,
                               pkt->am_id, pkt->flags, pkt->conn_id);

    if (aptus_ud_sr_has_sack(pkt->type, pkt->flags)) {
        for (i = 0; i < pkt->sack_words; ++i) {
            aptus_put64(p, pkt->sack[i]);
            p += APTUS_UD_SR_EXT_LEN;
        }
    }
    if (aptus_ud_sr_has_data_ext(pkt->type, pkt->flags)) {
        aptus_put32(p, aptus_ud_sr_has_msg_len(pkt->type, pkt->flags)
                           ? pkt->msg_len
                           : 0);
        aptus_put32(p + 4, (pkt->flags & APTUS_UD_SR_F_CRC) ? pkt->crc : 0);
        p += APTUS_UD_SR_EXT_LEN;
    }
    return (size_t)(p - (uint8_t *)buf);
}

aptus_ud_sr_parse_status_t aptus_ud_sr_parse(const void *buf, size_t len,
                                             int check_crc,
                                             aptus_ud_sr_pkt_t *pkt)
{
    const uint8_t *p = buf;
    size_t hdr_len;
    unsigned i;

    if (len < APTUS_UD_SR_HDR_LEN) {
        return APTUS_UD_SR_PARSE_TRUNCATED;
    }

    pkt->dest_key   = aptus_get64(p + 0);
    pkt->src_key    = aptus_get64(p + 8);
    pkt->dest_token = aptus_get32(p + 16);
    pkt->src_token  = aptus_get32(p + 20);
    pkt->psn        = aptus_get16(p + 24);
    pkt->ack        = aptus_get16(p + 26);
    pkt->type       = p[28] & ((1u << APTUS_UD_SR_TYPE_BITS) - 1);
    pkt->flags      = p[29];
    pkt->am_id      = p[28] >> APTUS_UD_SR_TYPE_BITS;
    pkt->conn_id    = aptus_get16(p + 30);
    pkt->sack_words = 0;
    pkt->msg_len    = 0;
    pkt->crc        = 0;

    if (pkt->flags & ~APTUS_UD_SR_F_KNOWN) {
        return APTUS_UD_SR_PARSE_BAD_FLAGS;
    }
    if (pkt->conn_id >= APTUS_UD_SR_CONN_MAX) {
        return APTUS_UD_SR_PARSE_BAD_CONN;
    }

    switch (pkt->type) {
    case APTUS_UD_SR_TYPE_DATA:
        if (pkt->am_id >= ((pkt->flags & APTUS_UD_SR_F_INTERNAL)
                               ? APTUS_UD_SR_INTERNAL_MAX
                               : APTUS_UD_SR_AM_ID_MAX)) {
            return APTUS_UD_SR_PARSE_BAD_AM_ID;
        }
        if (pkt->flags & APTUS_UD_SR_F_REPLY) {
            return APTUS_UD_SR_PARSE_BAD_FLAGS;
        }
        /* OPEN says exactly that the receiver's token is not known */
        if ((pkt->src_token == 0) ||
            (!(pkt->flags & APTUS_UD_SR_F_OPEN) != (pkt->dest_token != 0))) {
            return APTUS_UD_SR_PARSE_BAD_TOKEN;
        }
        if ((pkt->flags & APTUS_UD_SR_F_NOP) &&
            ((pkt->flags & APTUS_UD_SR_F_INTERNAL) ||
             ((pkt->flags & (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) !=
              (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST)) ||
             (pkt->am_id != 0))) {
            return APTUS_UD_SR_PARSE_BAD_FLAGS;
        }
        break;
    case APTUS_UD_SR_TYPE_ACK:
        if (pkt->flags & APTUS_UD_SR_F_PATH) {
            /* a path probe (psn: its own length, padding after the
             * header) or its answer (psn: the length that arrived) */
            if ((pkt->flags & ~(APTUS_UD_SR_F_PATH | APTUS_UD_SR_F_REPLY)) ||
                (pkt->am_id != 0)) {
                return APTUS_UD_SR_PARSE_BAD_FLAGS;
            }
            if ((pkt->flags & APTUS_UD_SR_F_REPLY)
                    ? ((len != APTUS_UD_SR_HDR_LEN) ||
                       (pkt->psn < APTUS_UD_SR_HDR_LEN))
                    : (pkt->psn != len)) {
                return APTUS_UD_SR_PARSE_BAD_LENGTH;
            }
            pkt->payload     = p + APTUS_UD_SR_HDR_LEN;
            pkt->payload_len = len - APTUS_UD_SR_HDR_LEN;
            return APTUS_UD_SR_PARSE_OK;
        }
        /* fall through */
    case APTUS_UD_SR_TYPE_RESET:
        /* an ACK may ask for one back (flush polls the peer) */
        if ((pkt->flags &
             (APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_CRC |
              APTUS_UD_SR_F_NOP | APTUS_UD_SR_F_INTERNAL)) ||
            ((pkt->type == APTUS_UD_SR_TYPE_RESET) &&
             (pkt->flags & (APTUS_UD_SR_F_ACK_REQ | APTUS_UD_SR_F_REPLY |
                            APTUS_UD_SR_F_SACK)))) {
            return APTUS_UD_SR_PARSE_BAD_FLAGS;
        }
        if (pkt->am_id != 0) {
            return APTUS_UD_SR_PARSE_BAD_AM_ID;
        }
        /* only data asks for the handshake: an ACK is always within an
         * incarnation both ends know; a RESET without the receiver's token
         * abandons the sender's opening */
        if (((pkt->dest_token == 0) && (pkt->type == APTUS_UD_SR_TYPE_ACK)) ||
            (pkt->src_token == 0)) {
            return APTUS_UD_SR_PARSE_BAD_TOKEN;
        }
        if (aptus_ud_sr_has_sack(pkt->type, pkt->flags)) {
            /* the selective map is the rest of the datagram */
            if (len == APTUS_UD_SR_HDR_LEN) {
                return APTUS_UD_SR_PARSE_TRUNCATED;
            }
            if (((len - APTUS_UD_SR_HDR_LEN) % APTUS_UD_SR_EXT_LEN) ||
                (len > APTUS_UD_SR_ACK_MAX_LEN)) {
                return APTUS_UD_SR_PARSE_BAD_LENGTH;
            }
            pkt->sack_words =
                (uint8_t)((len - APTUS_UD_SR_HDR_LEN) / APTUS_UD_SR_EXT_LEN);
        }
        break;
    default:
        return APTUS_UD_SR_PARSE_BAD_TYPE;
    }

    hdr_len = aptus_ud_sr_hdr_len_inl(pkt);
    if (len < hdr_len) {
        return APTUS_UD_SR_PARSE_TRUNCATED;
    }

    p += APTUS_UD_SR_HDR_LEN;
    if (aptus_ud_sr_has_sack(pkt->type, pkt->flags)) {
        for (i = 0; i < pkt->sack_words; ++i) {
            pkt->sack[i] = aptus_get64(p);
            p += APTUS_UD_SR_EXT_LEN;
        }
        if (pkt->sack[0] & 1) {
            /* bit 0 is the cumulative point itself: never held */
            return APTUS_UD_SR_PARSE_BAD_FLAGS;
        }
    }
    if (aptus_ud_sr_has_data_ext(pkt->type, pkt->flags)) {
        pkt->msg_len = aptus_get32(p);
        pkt->crc     = aptus_get32(p + 4);
        p += APTUS_UD_SR_EXT_LEN;
        /* fields that do not apply must be zero */
        if ((!aptus_ud_sr_has_msg_len(pkt->type, pkt->flags) &&
             (pkt->msg_len != 0)) ||
            (!(pkt->flags & APTUS_UD_SR_F_CRC) && (pkt->crc != 0))) {
            return APTUS_UD_SR_PARSE_BAD_LENGTH;
        }
    }

    pkt->payload     = p;
    pkt->payload_len = len - hdr_len;

    if (pkt->type != APTUS_UD_SR_TYPE_DATA) {
        if (pkt->payload_len != 0) {
            return APTUS_UD_SR_PARSE_BAD_LENGTH;
        }
        return APTUS_UD_SR_PARSE_OK;
    }

    if ((pkt->flags & APTUS_UD_SR_F_NOP) && (pkt->payload_len != 0)) {
        return APTUS_UD_SR_PARSE_BAD_LENGTH;
    }
    if (aptus_ud_sr_has_msg_len(pkt->type, pkt->flags)) {
        /* a first fragment that is not also the last must leave more */
        if ((pkt->payload_len == 0) || (pkt->msg_len <= pkt->payload_len)) {
            return APTUS_UD_SR_PARSE_BAD_LENGTH;
        }
    } else if (!(pkt->flags & APTUS_UD_SR_F_FIRST) && (pkt->payload_len == 0)) {
        /* middle and last fragments always carry data */
        return APTUS_UD_SR_PARSE_BAD_LENGTH;
    }

    if (check_crc && (pkt->flags & APTUS_UD_SR_F_CRC) &&
        (aptus_crc32c(0, pkt->payload, pkt->payload_len) != pkt->crc)) {
        return APTUS_UD_SR_PARSE_BAD_CRC;
    }
    return APTUS_UD_SR_PARSE_OK;
}

const char *aptus_ud_sr_parse_status_str(aptus_ud_sr_parse_status_t status)
{
    static const char *names[] = { "ok",        "truncated",  "bad type",
                                   "bad flags", "bad am id",  "bad length",
                                   "bad crc",   "bad stream", "bad token" };

    return (status < APTUS_UD_SR_PARSE_LAST) ? names[status] : "?";
}

int aptus_ud_sr_snprint(const aptus_ud_sr_pkt_t *pkt, char *buf, size_t max)
{
    static const char *types[] = { "?", "DATA", "ACK", "RESET" };
    const char *type =
        (pkt->type <= APTUS_UD_SR_TYPE_RESET) ? types[pkt->type] : types[0];

    return snprintf(buf, max,
                    "%s conn %u tokens %08x<-%08x psn %u ack %u am "
                    "%u%s%s%s%s%s%s%s%s len %zu"
                    " sack 0x%llx%s msg_len %u",
                    type, pkt->conn_id, pkt->dest_token, pkt->src_token,
                    pkt->psn, pkt->ack, pkt->am_id,
                    !(pkt->flags & APTUS_UD_SR_F_FIRST)    ? ""
                    : (pkt->type == APTUS_UD_SR_TYPE_DATA) ? " FIRST"
                                                           : " PATH",
                    (pkt->flags & APTUS_UD_SR_F_LAST) ? " LAST" : "",
                    (pkt->flags & APTUS_UD_SR_F_ACK_REQ) ? " ACK_REQ" : "",
                    !(pkt->flags & APTUS_UD_SR_F_SACK)     ? ""
                    : (pkt->type == APTUS_UD_SR_TYPE_DATA) ? " OPEN"
                                                           : " SACK",
                    (pkt->flags & APTUS_UD_SR_F_CRC) ? " CRC" : "",
                    (pkt->flags & APTUS_UD_SR_F_REPLY) ? " REPLY" : "",
                    (pkt->flags & APTUS_UD_SR_F_NOP) ? " NOP" : "",
                    (pkt->flags & APTUS_UD_SR_F_INTERNAL) ? " INTERNAL" : "",
                    pkt->payload_len,
                    (unsigned long long)(pkt->sack_words ? pkt->sack[0] : 0),
                    (pkt->sack_words > 1) ? "+" : "", pkt->msg_len);
}

static uint32_t aptus_crc32c_table[256];

static void __attribute__((constructor)) aptus_crc32c_init(void)
{
    uint32_t c;
    unsigned i, k;

    for (i = 0; i < 256; ++i) {
        c = i;
        for (k = 0; k < 8; ++k) {
            c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : (c >> 1);
        }
        aptus_crc32c_table[i] = c;
    }
}

uint32_t aptus_crc32c(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    crc = ~crc;
    while (len-- > 0) {
        crc = aptus_crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}
