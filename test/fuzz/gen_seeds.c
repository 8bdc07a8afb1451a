/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the seed corpora of the fuzz targets, well-formed inputs of
 * every kind each parser accepts (a fuzzer mutates from there). Writes
 * DIR/<target>/seed-NNN; contrib/fuzz.sh --seed runs it.
 *
 *   gen_seeds DIR
 */
#include "proto/fp_proto.h"
#include "proto/mcast_proto.h"
#include "proto/rc_sr_proto.h"
#include "proto/ud_sr_proto.h"
#include "proto/veloblock.h"
#include "proto/zcopy.h"
#include "wire/sock/sock_frame.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *g_dir;

static void put(const char *target, const void *data, size_t len)
{
    static unsigned n;
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", g_dir, target);
    if ((mkdir(path, 0755) != 0) && (errno != EEXIST)) {
        perror(path);
        return;
    }
    snprintf(path, sizeof(path), "%s/%s/seed-%03u", g_dir, target, n++);
    f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        return;
    }
    fwrite(data, 1, len, f);
    fclose(f);
}

static void ud_sr_seeds(void)
{
    static const uint8_t flags[] = {
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST,
        APTUS_UD_SR_F_FIRST,
        APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_ACK_REQ,
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_OPEN |
            APTUS_UD_SR_F_CRC,
        APTUS_UD_SR_F_NOP,
        APTUS_UD_SR_F_FIRST | APTUS_UD_SR_F_LAST | APTUS_UD_SR_F_INTERNAL,
    };
    uint8_t buf[APTUS_UD_SR_ACK_MAX_LEN + 64];
    aptus_ud_sr_pkt_t pkt;
    size_t len;
    unsigned i, w;

    /* DATA of each kind, ACKs with a selective map of 1 and of 16 words,
     * and a RESET */
    for (i = 0; i < sizeof(flags) + 3; ++i) {
        memset(&pkt, 0, sizeof(pkt));
        pkt.dest_key = 0x1122334455667788ull;
        pkt.src_key  = 0x99aabbccddeeff01ull;
        pkt.psn      = 7 + i;
        pkt.ack      = 3;
        pkt.conn_id  = i;
        pkt.am_id    = 1;
        pkt.msg_len  = 4096;
        if (i < sizeof(flags)) {
            pkt.type  = APTUS_UD_SR_TYPE_DATA;
            pkt.flags = flags[i];
        } else if (i < sizeof(flags) + 2) {
            pkt.type  = APTUS_UD_SR_TYPE_ACK;
            pkt.am_id = 0;
            pkt.flags = APTUS_UD_SR_F_SACK;
            pkt.sack_words =
                (i == sizeof(flags)) ? 1 : APTUS_UD_SR_SACK_WORDS_MAX;
            for (w = 0; w < pkt.sack_words; ++w) {
                pkt.sack[w] = 0x5a5a5a5a5a5a5a5aull << (w % 3);
            }
            pkt.sack[0] &= ~1ull; /* the cumulative point is never held */
        } else {
            pkt.type  = APTUS_UD_SR_TYPE_RESET;
            pkt.am_id = 0;
        }
        /* the incarnation: data with OPEN does not know the receiver's */
        pkt.dest_token = (pkt.flags & APTUS_UD_SR_F_OPEN) &&
                                 (pkt.type == APTUS_UD_SR_TYPE_DATA)
                             ? 0
                             : 0x01020304u;
        pkt.src_token  = 0x0a0b0c0du;
        len            = aptus_ud_sr_build(buf, &pkt);
        if ((pkt.type == APTUS_UD_SR_TYPE_DATA) &&
            !(pkt.flags & APTUS_UD_SR_F_NOP)) {
            memset(buf + len, 0xab, 32);
            len += 32;
        }
        put("ud_sr", buf, len);
    }
}

static size_t rc_frame(uint8_t *p, unsigned kind, uint8_t am_id,
                       const void *body, size_t body_len)
{
    aptus_frame_hdr_pack(p, APTUS_FRAME_TYPE_MSG, APTUS_RC_HDR_LEN + body_len);
    aptus_rc_hdr_pack(p + 4, kind, am_id, 5);
    memcpy(p + 4 + APTUS_RC_HDR_LEN, body, body_len);
    return 4 + APTUS_RC_HDR_LEN + body_len;
}

static void rc_sr_seeds(void)
{
    uint8_t buf[512], body[APTUS_RC_HELLO_LEN];
    aptus_rc_hello_t hello = { 0x1234, 0x5678, 16, APTUS_RC_VERSION, 9, 0, 1 };
    size_t len             = 0;

    aptus_rc_hello_pack(body, &hello);
    len = rc_frame(buf, APTUS_RC_KIND_HELLO, 0, body, sizeof(body));
    put("rc_sr", buf, len);
    len += rc_frame(buf + len, APTUS_RC_KIND_AM, 3, "hello, world", 12);
    len += rc_frame(buf + len, APTUS_RC_KIND_CREDIT, 0, "", 0);
    len += rc_frame(buf + len, APTUS_RC_KIND_NOP, 0, "", 0);
    put("rc_sr", buf, len);
    len = rc_frame(buf, APTUS_RC_KIND_BYE, 0, "", 0);
    aptus_frame_hdr_pack(buf + len, APTUS_FRAME_TYPE_IMM, APTUS_FRAME_IMM_LEN);
    memset(buf + len + 4, 1, APTUS_FRAME_IMM_LEN);
    put("rc_sr", buf, len + 4 + APTUS_FRAME_IMM_LEN);
}

static void zcopy_seeds(void)
{
    uint8_t buf[1024];
    aptus_zc_msg_t msg;
    aptus_zc_data_t d = { 1, 2, 3, 4 };
    size_t len;
    unsigned t;

    for (t = APTUS_ZC_MSG_REQ; t < APTUS_ZC_MSG_LAST; ++t) {
        memset(&msg, 0, sizeof(msg));
        msg.type = t;
        msg.xfer = 42;
        switch (t) {
        case APTUS_ZC_MSG_REQ:
            msg.req.remote_addr = 0x7f0000001000ull;
            msg.req.length      = 1 << 20;
            msg.req.token       = 0xdeadbeefcafef00dull;
            msg.req.payload     = 2000;
            msg.req.edge        = 64;
            break;
        case APTUS_ZC_MSG_CREDIT:
            msg.credit.edge            = 128;
            msg.credit.seen_seq        = 100;
            msg.credit.num_ranges      = 2;
            msg.credit.ranges[0].first = 3;
            msg.credit.ranges[0].last  = 5;
            msg.credit.ranges[1].first = 9;
            msg.credit.ranges[1].last  = 10;
            break;
        case APTUS_ZC_MSG_WRITE:
            msg.write.length = 65536;
            break;
        case APTUS_ZC_MSG_COPY:
            msg.copy.offset = 4096;
            break;
        case APTUS_ZC_MSG_PUT:
            msg.put.dest_addr  = 0x7f0000002000ull;
            msg.put.dest_token = 0x0123456789abcdefull;
            break;
        default:
            break;
        }
        len = aptus_zc_msg_build(buf, &msg);
        if ((t == APTUS_ZC_MSG_COPY) || (t == APTUS_ZC_MSG_PUT)) {
            memset(buf + len, 0x5a, 16); /* their data follows */
            len += 16;
        }
        put("zcopy", buf, len);
    }
    aptus_zc_data_build(buf, &d);
    put("zcopy", buf, 64);
}

static void fp_seeds(void)
{
    uint8_t buf[8192];
    aptus_fp_ctl_t ctl;
    aptus_vb_tx_t tx;
    aptus_vb_write_t w;
    uint8_t image[4096];
    unsigned t, i;

    for (t = APTUS_FP_CTL_REQUEST; t < APTUS_FP_CTL_LAST; ++t) {
        memset(&ctl, 0, sizeof(ctl));
        ctl.type  = t;
        ctl.nonce = 7;
        if (t == APTUS_FP_CTL_GRANT) {
            ctl.grant.mode    = APTUS_FP_VELOBLOCK;
            ctl.grant.size    = 32768;
            ctl.grant.address = 0x7f0000002000ull;
            ctl.grant.pid     = 1234;
        }
        put("fp", buf, aptus_fp_ctl_pack(buf, &ctl));
    }
    /* a Veloblock block (mode byte 0) holding a few messages */
    memset(buf, 0, sizeof(buf));
    aptus_vb_tx_init(&tx, 4096);
    for (i = 0; i < 5; ++i) {
        uint8_t msg[64];
        memset(msg, i, sizeof(msg));
        aptus_fp_msg_hdr_pack(msg, 1, 0, 0, 0);
        if (aptus_vb_tx_pack(&tx, msg, 16 + 8 * i, image, &w) != APTUS_VB_OK) {
            break;
        }
        aptus_vb_write_local(buf + 1, &w, image);
    }
    buf[0] = 0;
    put("fp", buf, 1 + 4096);
}

static void send_rules_seeds(void)
{
    static const char *chains[] = {
        "{<=2048 rc_fp},{<=2008 ud_sr},{<=8192 rc_sr},{<=8192 ud_sr},"
        "{any rc_rdma},{any ud_zcopy}",
        "{peers<=16&>1k rc_sr},{any ud_sr}",
        "{<=32k rc_sr},{any ud_zcopy}",
        "{any ud_sr}",
    };
    unsigned i;

    for (i = 0; i < sizeof(chains) / sizeof(chains[0]); ++i) {
        put("send_rules", chains[i], strlen(chains[i]));
    }
}

/* Every kind of multicast broadcast datagram, with the key and the size of
 * communicator that test/fuzz/fuzz_mcast.c parses with. */
static void mcast_seeds(void)
{
    static const struct {
        uint8_t type;
        uint16_t flags;
        uint32_t msg_len, offset;
        uint16_t frag, nfrag, payload_len;
    } kinds[] = {
        { APTUS_MC_TYPE_DATA, APTUS_MC_F_ACK, 64, 0, 0, 1, 64 },
        { APTUS_MC_TYPE_DATA, APTUS_MC_F_ACK, 0, 0, 0, 1, 0 },
        { APTUS_MC_TYPE_DATA, APTUS_MC_F_ACK, 600, 256, 1, 3, 256 },
        { APTUS_MC_TYPE_DATA, APTUS_MC_F_ACK, 600, 512, 2, 3, 88 },
        { APTUS_MC_TYPE_REPAIR, APTUS_MC_F_ACK | APTUS_MC_F_ACK_REQ, 100, 0, 0,
          1, 100 },
        { APTUS_MC_TYPE_ACK, APTUS_MC_F_ACK, 0, 0, 0, 0, 0 },
        { APTUS_MC_TYPE_ACK, APTUS_MC_F_ACK | APTUS_MC_F_REPLY, 0, 0, 0, 0, 0 },
        { APTUS_MC_TYPE_NACK, APTUS_MC_F_ACK, 0, 0, 0, 0, 0 },
        { APTUS_MC_TYPE_REPORT, APTUS_MC_F_ACK, 0, 0, 0, 0, 0 },
        { APTUS_MC_TYPE_POLL, APTUS_MC_F_ACK, 0, 0, 0, 0, 0 },
    };
    uint8_t buf[APTUS_MC_HDR_LEN + 256];
    aptus_mc_hdr_t h;
    unsigned i;

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
        memset(&h, 0, sizeof(h));
        h.type        = kinds[i].type;
        h.flags       = kinds[i].flags;
        h.key         = 0x6d63617374000001ull; /* fuzz_mcast.c */
        h.seq         = 1;
        h.ack         = 1;
        h.root        = (h.type == APTUS_MC_TYPE_DATA) ? 9 : 0;
        h.sender      = 9;
        h.msg_len     = kinds[i].msg_len;
        h.offset      = kinds[i].offset;
        h.frag        = kinds[i].frag;
        h.nfrag       = kinds[i].nfrag;
        h.payload_len = kinds[i].payload_len;
        h.sack        = (h.type == APTUS_MC_TYPE_NACK) ? 0x6 : 0;
        h.group_ack   = (h.type == APTUS_MC_TYPE_REPORT) ? 1 : 0;
        aptus_mc_hdr_build(buf, &h);
        memset(buf + APTUS_MC_HDR_LEN, 0x3c, h.payload_len);
        put("mcast", buf, aptus_mc_len(&h));
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    ud_sr_seeds();
    rc_sr_seeds();
    zcopy_seeds();
    fp_seeds();
    send_rules_seeds();
    mcast_seeds();
    return 0;
}
