/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus fuzz target: what a fast-path peer controls (proto/fp_proto.h,
 * proto/fp_ring.h): the control messages, a message's header and trailer,
 * and the block itself, which the peer may fill with anything. Polling
 * such a block delivers messages inside it or reports corruption, and
 * always ends.
 */
#include "fuzz_common.h"
#include "proto/fp_proto.h"

#include <string.h>

static void fuzz_block(const uint8_t *data, size_t size, aptus_fp_mode_t mode)
{
    static uint8_t block[8192];
    aptus_fp_geom_t geom;
    aptus_vb_status_t st;
    aptus_fp_rx_t rx;
    aptus_vb_msg_t msg;
    const char *why;
    uint32_t bsize;
    unsigned k;

    bsize = (mode == APTUS_FP_VELOBLOCK) ? 4096 : 8192;
    if (aptus_fp_geom_make(mode, bsize, (mode == APTUS_FP_ORIGINAL) ? 8 : 0,
                           1024, &geom, &why) != 0) {
        return;
    }
    memset(block, 0, geom.size);
    memcpy(block, data, (size < geom.size) ? size : geom.size);
    aptus_fp_rx_init(&rx, &geom);
    for (k = 0; k < 4096; ++k) {
        st = aptus_fp_rx_poll(&rx, block, &msg);
        if (st != APTUS_VB_OK) {
            break; /* empty, or corrupt: never followed */
        }
        FUZZ_CHECK(fuzz_inside(msg.data, msg.length, block, geom.size));
        aptus_fp_rx_release(&rx, block, &msg);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t out[APTUS_FP_CTL_MAX_LEN];
    aptus_fp_msg_hdr_t hdr;
    aptus_fp_ctl_t ctl;
    uint32_t before;
    uint16_t nonce;

    if (aptus_fp_ctl_parse(data, size, &ctl) == 0) {
        FUZZ_CHECK(aptus_fp_ctl_pack(out, &ctl) == size);
        FUZZ_CHECK(memcmp(out, data, size) == 0);
    }
    (void)aptus_fp_msg_hdr_parse(data, (uint32_t)size, 32, &hdr);
    (void)aptus_fp_trailer_parse(data, size, &nonce, &before);
    if (size > 0) {
        fuzz_block(data + 1, size - 1, (aptus_fp_mode_t)(data[0] % 3));
    }
    return 0;
}
