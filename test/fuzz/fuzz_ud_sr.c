/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus fuzz target: a UD-SR datagram (proto/ud_sr_proto.h), with and
 * without the CRC check. An accepted datagram's payload lies inside it,
 * and its header encodes back to the bytes it was parsed from.
 */
#include "fuzz_common.h"
#include "proto/ud_sr_proto.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t hdr[APTUS_UD_SR_ACK_MAX_LEN];
    aptus_ud_sr_pkt_t pkt;
    size_t len;
    int crc;

    for (crc = 0; crc <= 1; ++crc) {
        if (aptus_ud_sr_parse(data, size, crc, &pkt) != APTUS_UD_SR_PARSE_OK) {
            continue;
        }
        FUZZ_CHECK(fuzz_inside(pkt.payload, pkt.payload_len, data, size));
        len = aptus_ud_sr_hdr_len(&pkt);
        FUZZ_CHECK(len + pkt.payload_len == size);
        FUZZ_CHECK(aptus_ud_sr_build(hdr, &pkt) == len);
        FUZZ_CHECK(memcmp(hdr, data, len) == 0);
    }
    return 0;
}
