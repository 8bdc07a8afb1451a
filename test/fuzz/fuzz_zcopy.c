/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus fuzz target: UD-ZCopy's data header and control messages
 * (proto/zcopy.h). An accepted message encodes back to the same length,
 * and a copied or put payload is exactly the rest of the input.
 */
#include "fuzz_common.h"
#include "proto/zcopy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t out[1 << 17];
    aptus_zc_data_t d;
    aptus_zc_msg_t msg;

    (void)aptus_zc_data_parse(data, size, &d);
    if (aptus_zc_msg_parse(data, size, &msg) == 0) {
        FUZZ_CHECK(aptus_zc_msg_len(&msg) <= size);
        if (msg.type == APTUS_ZC_MSG_COPY) {
            FUZZ_CHECK((const uint8_t *)msg.copy.data >= data);
            FUZZ_CHECK((const uint8_t *)msg.copy.data + msg.copy.length ==
                       data + size);
        } else if (msg.type == APTUS_ZC_MSG_PUT) {
            FUZZ_CHECK((const uint8_t *)msg.put.data >= data);
            FUZZ_CHECK((const uint8_t *)msg.put.data + msg.put.length ==
                       data + size);
        }
        if (aptus_zc_msg_len(&msg) <= sizeof(out)) {
            FUZZ_CHECK(aptus_zc_msg_build(out, &msg) == aptus_zc_msg_len(&msg));
        }
    }
    return 0;
}
