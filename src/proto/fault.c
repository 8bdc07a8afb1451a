/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: datagram fault injector decisions (see fault.h).
 */
#include "fault.h"

#include <stddef.h>

const char *aptus_fault_config_check(const aptus_fault_config_t *config)
{
    const struct {
        const char *name;
        double value;
    } rates[]  = { { "FAULT_DROP", config->drop },
                   { "FAULT_DUP", config->dup },
                   { "FAULT_REORDER", config->reorder },
                   { "FAULT_DELAY", config->delay } };
    double sum = 0;
    unsigned i;

    for (i = 0; i < sizeof(rates) / sizeof(rates[0]); ++i) {
        if (!(rates[i].value >= 0.0) || (rates[i].value > 1.0)) {
            return rates[i].name;
        }
        sum += rates[i].value;
    }
    if (sum > 1.0) {
        return "FAULT_DROP+FAULT_DUP+FAULT_REORDER+FAULT_DELAY (sum above 1)";
    }
    return NULL;
}

/* splitmix64: small, fast, and good enough to pick fault events. */
static uint64_t aptus_fault_next(aptus_fault_t *fault)
{
    uint64_t z = (fault->state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void aptus_fault_init(aptus_fault_t *fault, const aptus_fault_config_t *config)
{
    unsigned i;

    fault->config  = *config;
    fault->state   = config->seed;
    fault->enabled = (config->drop > 0) || (config->dup > 0) ||
                     (config->reorder > 0) || (config->delay > 0);
    for (i = 0; i < APTUS_FAULT_LAST; ++i) {
        fault->count[i] = 0;
    }
}

aptus_fault_action_t aptus_fault_decide(aptus_fault_t *fault)
{
    aptus_fault_action_t action;
    double r, edge;

    if (!fault->enabled) {
        return APTUS_FAULT_PASS;
    }

    /* 53 random bits -> uniform in [0, 1) */
    r = (double)(aptus_fault_next(fault) >> 11) * (1.0 / 9007199254740992.0);

    if (r < (edge = fault->config.drop)) {
        action = APTUS_FAULT_DROP;
    } else if (r < (edge += fault->config.dup)) {
        action = APTUS_FAULT_DUPLICATE;
    } else if (r < (edge += fault->config.reorder)) {
        action = APTUS_FAULT_REORDER;
    } else if (r < (edge += fault->config.delay)) {
        action = APTUS_FAULT_DELAY;
    } else {
        action = APTUS_FAULT_PASS;
    }
    fault->count[action]++;
    return action;
}

const char *aptus_fault_action_name(aptus_fault_action_t action)
{
    static const char *names[] = { "pass", "drop", "duplicate", "reorder",
                                   "delay" };

    return (action < APTUS_FAULT_LAST) ? names[action] : "?";
}
