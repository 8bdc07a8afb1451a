/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-SR wire format and credit flow control (see
 * rc_sr_proto.h).
 */
#include "rc_sr_proto.h"
#include "le.h"

void aptus_rc_hdr_pack(uint8_t *hdr, unsigned kind, uint8_t am_id,
                       uint16_t credits)
{
    hdr[0] = (uint8_t)kind;
    hdr[1] = am_id;
    aptus_put16(hdr + 2, credits);
}

int aptus_rc_msg_parse(const uint8_t *payload, size_t length,
                       aptus_rc_msg_t *msg)
{
    if (length < APTUS_RC_HDR_LEN) {
        return -1;
    }
    msg->kind        = payload[0];
    msg->am_id       = payload[1];
    msg->credits     = aptus_get16(payload + 2);
    msg->body        = payload + APTUS_RC_HDR_LEN;
    msg->body_length = length - APTUS_RC_HDR_LEN;
    switch (msg->kind) {
    case APTUS_RC_KIND_AM:
        return 0;
    case APTUS_RC_KIND_HELLO:
        return (msg->body_length == APTUS_RC_HELLO_LEN) ? 0 : -1;
    case APTUS_RC_KIND_SWITCH:
        return (msg->body_length == APTUS_RC_SWITCH_LEN) ? 0 : -1;
    case APTUS_RC_KIND_CREDIT:
    case APTUS_RC_KIND_NOP:
    case APTUS_RC_KIND_BYE:
    case APTUS_RC_KIND_SWITCH_ACK:
        return (msg->body_length == 0) ? 0 : -1;
    default:
        return -1;
    }
}

void aptus_rc_hello_pack(uint8_t *body, const aptus_rc_hello_t *hello)
{
    aptus_put32(body, APTUS_RC_HELLO_MAGIC);
    aptus_put64(body + 4, hello->key);
    aptus_put64(body + 12, hello->src_key);
    aptus_put16(body + 20, hello->credits);
    aptus_put16(body + 22, hello->version);
    aptus_put32(body + 24, hello->src_port);
    aptus_put16(body + 28, hello->tag);
    aptus_put32(body + 30, hello->conn_id);
}

int aptus_rc_hello_parse(const aptus_rc_msg_t *msg, aptus_rc_hello_t *hello)
{
    if ((msg->kind != APTUS_RC_KIND_HELLO) ||
        (msg->body_length != APTUS_RC_HELLO_LEN) ||
        (aptus_get32(msg->body) != APTUS_RC_HELLO_MAGIC)) {
        return -1;
    }
    hello->key      = aptus_get64(msg->body + 4);
    hello->src_key  = aptus_get64(msg->body + 12);
    hello->credits  = aptus_get16(msg->body + 20);
    hello->version  = aptus_get16(msg->body + 22);
    hello->src_port = aptus_get32(msg->body + 24);
    hello->tag      = aptus_get16(msg->body + 28);
    hello->conn_id  = aptus_get32(msg->body + 30);
    if ((hello->version != APTUS_RC_VERSION) || (hello->credits == 0)) {
        return -1;
    }
    return 0;
}

void aptus_rc_credits_init(aptus_rc_credits_t *fc, uint32_t tx_initial,
                           uint32_t grant)
{
    fc->tx          = tx_initial;
    fc->owed        = 0;
    fc->grant       = grant;
    fc->explicit_at = (grant + 1) / 2;
}

int aptus_rc_credits_returned(aptus_rc_credits_t *fc, uint32_t credits,
                              uint32_t tx_limit)
{
    if (credits > tx_limit - fc->tx) {
        return 0;
    }
    fc->tx += credits;
    return 1;
}
