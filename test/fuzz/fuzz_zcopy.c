/*
 * UCX-Aptus fuzz target: UD-ZCopy's data header and control messages
 * (proto/zcopy.h). An accepted message encodes back to the same length,
 * and a copied payload lies inside the input.
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
        if (aptus_zc_msg_len(&msg) <= sizeof(out)) {
            FUZZ_CHECK(aptus_zc_msg_build(out, &msg) == aptus_zc_msg_len(&msg));
        }
    }
    return 0;
}
