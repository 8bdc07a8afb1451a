/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: datagram fault injector decisions.
 *
 * Pure logic: a seeded generator picks, for every datagram a wire sends,
 * whether to pass it, drop it, send it twice, hold it back behind the next
 * one (reorder) or delay it. The wire applies the verdict; tests and users
 * rehearsing loss get the same sequence for the same seed.
 */
#ifndef APTUS_FAULT_H_
#define APTUS_FAULT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_fault_config {
    double drop; /* probabilities in [0, 1], their sum at most 1 */
    double dup;
    double reorder;
    double delay;
    uint32_t delay_us; /* how long a delayed datagram is held */
    uint64_t seed;
} aptus_fault_config_t;

typedef enum {
    APTUS_FAULT_PASS,
    APTUS_FAULT_DROP,
    APTUS_FAULT_DUPLICATE,
    APTUS_FAULT_REORDER,
    APTUS_FAULT_DELAY,
    APTUS_FAULT_LAST
} aptus_fault_action_t;

typedef struct aptus_fault {
    aptus_fault_config_t config;
    uint64_t state;
    int enabled;
    uint64_t count[APTUS_FAULT_LAST]; /* decisions taken */
} aptus_fault_t;

/* Returns NULL when valid, else a message naming the offending field. */
const char *aptus_fault_config_check(const aptus_fault_config_t *config);

void aptus_fault_init(aptus_fault_t *fault, const aptus_fault_config_t *config);

aptus_fault_action_t aptus_fault_decide(aptus_fault_t *fault);

static inline int aptus_fault_enabled(const aptus_fault_t *fault)
{
    return fault->enabled;
}

const char *aptus_fault_action_name(aptus_fault_action_t action);

#ifdef __cplusplus
}
#endif

#endif
