/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: little-endian fields in wire formats, at any alignment.
 */
#ifndef APTUS_LE_H_
#define APTUS_LE_H_

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void aptus_put16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, sizeof(v));
}

static inline void aptus_put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof(v));
}

static inline void aptus_put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof(v));
}

static inline uint16_t aptus_get16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return le16toh(v);
}

static inline uint32_t aptus_get32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return le32toh(v);
}

static inline uint64_t aptus_get64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

#endif
