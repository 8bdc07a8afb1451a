/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: keys and tokens from the OS CSPRNG (see random.h).
 */
#include "random.h"

#include <errno.h>
#include <sys/random.h>

int aptus_random_bytes(void *buf, size_t len)
{
    unsigned char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

uint32_t aptus_random32(void)
{
    uint32_t v;

    do {
        if (aptus_random_bytes(&v, sizeof(v)) != 0) {
            return 0;
        }
    } while (v == 0);
    return v;
}

uint64_t aptus_random64(void)
{
    uint64_t v;

    do {
        if (aptus_random_bytes(&v, sizeof(v)) != 0) {
            return 0;
        }
    } while (v == 0);
    return v;
}
