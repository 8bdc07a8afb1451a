/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus fuzz target: the multicast broadcast header (proto/mcast_proto.h)
 * and the protocol behind it (proto/mcast_window.h). An accepted datagram
 * encodes back to the same bytes and its payload is the rest of the input;
 * then it is fed to a co-root's and a leaf's window, which must neither
 * read nor write outside their buffers (AddressSanitizer) whatever the
 * fields say.
 */
#include "fuzz_common.h"
#include "proto/mcast_window.h"

#include <string.h>

#define FUZZ_MC_KEY   0x6d63617374000001ull /* test/fuzz/gen_seeds.c */
#define FUZZ_MC_RANKS 64u

static void fuzz_mc_mcast(void *arg, const aptus_mc_hdr_t *hdr,
                          const void *payload)
{
    (void)arg;
    FUZZ_CHECK(hdr->payload_len <= 256);
    FUZZ_CHECK((hdr->payload_len == 0) || (payload != NULL));
}

static void fuzz_mc_send(void *arg, uint32_t dest, const aptus_mc_hdr_t *hdr,
                         const void *payload)
{
    (void)arg;
    (void)payload;
    FUZZ_CHECK(dest < FUZZ_MC_RANKS);
    FUZZ_CHECK(hdr->sender < FUZZ_MC_RANKS);
}

static void fuzz_mc_deliver(void *arg, uint32_t seq, uint32_t root,
                            const void *data, uint32_t len)
{
    (void)arg;
    (void)seq;
    FUZZ_CHECK(root < FUZZ_MC_RANKS);
    FUZZ_CHECK(len <= 2048);
    if (len > 0) {
        /* touch the data: ASan checks it lies in the window's buffer */
        volatile uint8_t sum =
            ((const uint8_t *)data)[0] ^ ((const uint8_t *)data)[len - 1];
        (void)sum;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const aptus_mc_ops_t ops       = { fuzz_mc_mcast, fuzz_mc_send,
                                              fuzz_mc_deliver };
    static const aptus_mc_limits_t limits = { FUZZ_MC_KEY, FUZZ_MC_RANKS };
    static uint8_t out[APTUS_MC_HDR_LEN];
    static const uint32_t ranks[] = { 0, 8, 9 }; /* co-roots, a leaf */
    aptus_mc_config_t cfg;
    aptus_mc_window_t w;
    aptus_mc_hdr_t h;
    uint8_t buf[64] = { 0 };
    unsigned i;

    if (aptus_mc_hdr_parse(data, size, &limits, &h) != APTUS_MC_PARSE_OK) {
        return 0;
    }
    FUZZ_CHECK(aptus_mc_len(&h) == size);
    FUZZ_CHECK(h.payload == data + APTUS_MC_HDR_LEN);
    FUZZ_CHECK(aptus_mc_hdr_build(out, &h) == APTUS_MC_HDR_LEN);
    FUZZ_CHECK(memcmp(out, data, APTUS_MC_HDR_LEN) == 0);

    aptus_mc_config_default(&cfg);
    cfg.window     = 16;
    cfg.group_size = 8;
    cfg.frag_size  = 256;
    cfg.max_msg    = 2048;
    for (i = 0; i < sizeof(ranks) / sizeof(ranks[0]); ++i) {
        FUZZ_CHECK(aptus_mc_window_init(&w, &cfg, FUZZ_MC_RANKS, ranks[i],
                                        FUZZ_MC_KEY, &ops,
                                        NULL) == APTUS_MC_OK);
        /* a message of its own first, so that root paths are live */
        if (ranks[i] == 8) {
            FUZZ_CHECK(aptus_mc_window_bcast(&w, buf, sizeof(buf), 1, NULL) ==
                       APTUS_MC_OK);
        }
        (void)aptus_mc_window_recv(&w, &h, 100);
        (void)aptus_mc_window_recv(&w, &h, 200); /* and again: duplicate */
        aptus_mc_window_progress(&w, 100000);
        aptus_mc_window_progress(&w, 10000000);
        FUZZ_CHECK(aptus_mc_seq_le(w.lo, w.have));
        FUZZ_CHECK(aptus_mc_seq_le(w.stable, w.have));
        aptus_mc_window_cleanup(&w);
    }
    return 0;
}
