/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: round-trip time estimation and retransmission timeout
 * (RFC 6298), shared by the protocols that retransmit: the UD-SR window
 * and the multicast broadcast. Pure: the caller keeps the two figures in
 * its own state and passes them in.
 */
#ifndef APTUS_RTT_H_
#define APTUS_RTT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fold a sample (usec) into the smoothed RTT and its variation; an srtt of
 * 0 means "no sample yet", so it never becomes 0 once sampled. */
static inline void aptus_rtt_sample(uint32_t *srtt_us, uint32_t *rttvar_us,
                                    uint64_t rtt_us)
{
    uint32_t r = (rtt_us > UINT32_MAX / 2) ? UINT32_MAX / 2 : (uint32_t)rtt_us;
    uint32_t err;

    if (r == 0) {
        r = 1;
    }
    if (*srtt_us == 0) {
        *srtt_us   = r;
        *rttvar_us = r / 2;
        return;
    }
    err        = (*srtt_us > r) ? (*srtt_us - r) : (r - *srtt_us);
    *rttvar_us = *rttvar_us - (*rttvar_us >> 2) + (err >> 2);
    *srtt_us   = *srtt_us - (*srtt_us >> 3) + (r >> 3);
    if (*srtt_us == 0) {
        *srtt_us = 1;
    }
}

/* The timeout before backoff: srtt + 4 rttvar within [min, max], or init
 * before the first sample. */
static inline uint32_t aptus_rtt_rto(uint32_t srtt_us, uint32_t rttvar_us,
                                     uint32_t init_us, uint32_t min_us,
                                     uint32_t max_us)
{
    uint64_t rto;

    if (srtt_us == 0) {
        return init_us;
    }
    rto = (uint64_t)srtt_us + 4 * (uint64_t)rttvar_us;
    if (rto < min_us) {
        rto = min_us;
    }
    return (rto > max_us) ? max_us : (uint32_t)rto;
}

/* NULL when the bounds are consistent, else what is wrong (the names are
 * the configuration's: RTO_MIN, RTO_MAX, RTO_INIT). */
static inline const char *
aptus_rtt_bounds_check(uint32_t min_us, uint32_t max_us, uint32_t init_us)
{
    if (min_us == 0) {
        return "RTO_MIN must be positive";
    }
    if (max_us < min_us) {
        return "RTO_MAX must not be below RTO_MIN";
    }
    if ((init_us < min_us) || (init_us > max_us)) {
        return "RTO_INIT must lie between RTO_MIN and RTO_MAX";
    }
    return NULL;
}

#ifdef __cplusplus
}
#endif

#endif
