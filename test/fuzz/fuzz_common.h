/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: what the libFuzzer targets share. Each target feeds one
 * parser that faces the network (a datagram, a connection's bytes, a
 * control message, a block a peer writes into) with anything, and checks
 * what the parser promises: it accepts or refuses, never reads outside the
 * input (AddressSanitizer), and what it accepts points inside the input
 * and encodes back to the same bytes where the format is canonical.
 */
#ifndef APTUS_FUZZ_COMMON_H_
#define APTUS_FUZZ_COMMON_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A broken promise: report and abort, so libFuzzer keeps the input. */
#define FUZZ_CHECK(_cond)                                                      \
    do {                                                                       \
        if (!(_cond)) {                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                    #_cond);                                                   \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Whether [p, p + len) lies inside [base, base + size). */
static inline int fuzz_inside(const void *p, size_t len, const void *base,
                              size_t size)
{
    const uint8_t *q = p, *b = base;

    return (q >= b) && (q <= b + size) && (len <= (size_t)(b + size - q));
}

#endif
