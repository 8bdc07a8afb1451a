/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus fuzz target: the bytes of an RC-SR connection
 * (wire/sock/sock_frame.h, proto/rc_sr_proto.h): frames one after
 * another, each message and greeting in them. What a frame or message
 * yields lies inside the input; a frame that is not whole asks for more,
 * never reads past the end.
 */
#include "fuzz_common.h"
#include "proto/rc_sr_proto.h"
#include "wire/sock/sock_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t left      = size;
    aptus_frame_result_t res;
    aptus_rc_hello_t hello;
    aptus_frame_t frame;
    aptus_rc_msg_t msg;

    while (left > 0) {
        res = aptus_frame_parse(p, left, 64 * 1024, &frame);
        if (res != APTUS_FRAME_OK) {
            break; /* more needed, or the connection is broken */
        }
        FUZZ_CHECK(fuzz_inside(frame.payload, frame.length, p, left));
        if ((frame.type == APTUS_FRAME_TYPE_MSG) &&
            (aptus_rc_msg_parse(frame.payload, frame.length, &msg) == 0)) {
            FUZZ_CHECK(fuzz_inside(msg.body, msg.body_length, frame.payload,
                                   frame.length));
            (void)aptus_rc_hello_parse(&msg, &hello);
        }
        FUZZ_CHECK(frame.payload + frame.length > p);
        left -= (size_t)(frame.payload + frame.length - p);
        p = frame.payload + frame.length;
    }
    return 0;
}
