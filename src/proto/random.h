/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the one source of keys and tokens: the OS CSPRNG.
 *
 * Interface keys keep forged datagrams and connections out, registration
 * and zero-copy tokens keep strangers out of memory: a value derived from
 * the time, the pid or a counter can be guessed, these cannot. Free of
 * UCX; getrandom(2) only.
 */
#ifndef APTUS_RANDOM_H_
#define APTUS_RANDOM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fill buf with len bytes from the OS CSPRNG, through interrupted and
 * short reads. 0, or -1 with errno set when the OS gives none. */
int aptus_random_bytes(void *buf, size_t len);

/* A non-zero random value; 0 only when the OS gives no randomness (the
 * caller fails what needed it: there is no weaker fallback). */
uint32_t aptus_random32(void);
uint64_t aptus_random64(void);

#ifdef __cplusplus
}
#endif

#endif
