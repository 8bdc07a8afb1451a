/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: allocation of RC and fast-path channels (see chan_alloc.h).
 */
#include "chan_alloc.h"

#include <string.h>

const char *aptus_alloc_config_check(const aptus_alloc_config_t *config)
{
    if (config->max[APTUS_ALLOC_FP] > config->max[APTUS_ALLOC_RC]) {
        return "MAX_FP must not exceed MAX_RC (a fast path needs RC)";
    }
    if (config->window_us == 0) {
        return "the traffic window must be positive";
    }
    if ((config->rc_msgs == 0) && (config->rc_bytes == 0)) {
        return "RC needs a message or byte threshold";
    }
    if (config->request_timeout_us == 0) {
        return "the request timeout must be positive";
    }
    return NULL;
}

void aptus_alloc_init(aptus_alloc_t *alloc, const aptus_alloc_config_t *config)
{
    memset(alloc, 0, sizeof(*alloc));
    alloc->config = *config;
}

void aptus_alloc_peer_init(aptus_alloc_peer_t *peer, uint64_t now_us)
{
    memset(peer, 0, sizeof(*peer));
    peer->window_start_us = now_us;
}

/* Time from 'then' to 'now'. The transport stamps uses with a fresh clock
 * while it may check with the time its progress call began, so 'then' can
 * be a little after 'now': that is "just now", never "long ago". */
static inline uint64_t aptus_alloc_since(uint64_t now_us, uint64_t then_us)
{
    return ((int64_t)(now_us - then_us) > 0) ? (now_us - then_us) : 0;
}

static void aptus_alloc_set(aptus_alloc_slot_t *slot, aptus_alloc_state_t state,
                            uint64_t now_us)
{
    slot->state       = state;
    slot->since_us    = now_us;
    slot->last_use_us = now_us;
}

/* Take a slot under the cap; 0 when the cap is reached. */
static int aptus_alloc_reserve(aptus_alloc_t *alloc, aptus_alloc_kind_t kind)
{
    if (alloc->used[kind] >= alloc->config.max[kind]) {
        return 0;
    }
    alloc->used[kind]++;
    if (alloc->used[kind] > alloc->stats.peak[kind]) {
        alloc->stats.peak[kind] = alloc->used[kind];
    }
    return 1;
}

/* Give a held slot back; the peer waits 'wait_us' before asking again. */
static void aptus_alloc_free(aptus_alloc_t *alloc, aptus_alloc_peer_t *peer,
                             aptus_alloc_kind_t kind, uint64_t now_us,
                             uint64_t wait_us)
{
    aptus_alloc_slot_t *slot = &peer->slot[kind];

    if (slot->state != APTUS_ALLOC_NONE) {
        alloc->used[kind]--;
    }
    slot->state         = APTUS_ALLOC_NONE;
    slot->since_us      = now_us;
    slot->not_before_us = now_us + wait_us;
}

/* The peer holds (or grants) a slot for this pair: take ours, if the cap
 * allows and, for a fast path, RC is on. Returns 0 when it cannot. */
static int aptus_alloc_take(aptus_alloc_t *alloc, aptus_alloc_peer_t *peer,
                            aptus_alloc_kind_t kind, uint64_t now_us)
{
    if (peer->slot[kind].barred ||
        ((kind == APTUS_ALLOC_FP) &&
         (peer->slot[APTUS_ALLOC_RC].state != APTUS_ALLOC_GRANTED)) ||
        !aptus_alloc_reserve(alloc, kind)) {
        return 0;
    }
    aptus_alloc_set(&peer->slot[kind], APTUS_ALLOC_GRANTED, now_us);
    alloc->stats.granted[kind]++;
    return 1;
}

static int aptus_alloc_earned(const aptus_alloc_t *alloc,
                              const aptus_alloc_peer_t *peer,
                              aptus_alloc_kind_t kind, uint64_t now_us)
{
    const aptus_alloc_config_t *cfg = &alloc->config;

    if ((peer->slot[kind].state != APTUS_ALLOC_NONE) ||
        peer->slot[kind].barred || (now_us < peer->slot[kind].not_before_us)) {
        return 0;
    }
    if (kind == APTUS_ALLOC_RC) {
        return ((cfg->rc_msgs > 0) && (peer->msgs >= cfg->rc_msgs)) ||
               ((cfg->rc_bytes > 0) && (peer->bytes >= cfg->rc_bytes));
    }
    return (peer->slot[APTUS_ALLOC_RC].state == APTUS_ALLOC_GRANTED) &&
           (cfg->fp_msgs > 0) && (peer->small_msgs >= cfg->fp_msgs);
}

aptus_alloc_action_t aptus_alloc_sent(aptus_alloc_t *alloc,
                                      aptus_alloc_peer_t *peer, size_t size,
                                      aptus_alloc_kind_t used_kind,
                                      uint64_t now_us,
                                      aptus_alloc_kind_t *kind_p)
{
    aptus_alloc_kind_t kind;

    if (aptus_alloc_since(now_us, peer->window_start_us) >=
        alloc->config.window_us) {
        peer->window_start_us = now_us;
        peer->msgs            = 0;
        peer->small_msgs      = 0;
        peer->bytes           = 0;
    }
    peer->msgs++;
    peer->bytes += size;
    if (size <= alloc->config.fp_max_size) {
        peer->small_msgs++;
    }
    if (used_kind == APTUS_ALLOC_FP) {
        /* the fast path rides on the connection: both are in use */
        peer->slot[APTUS_ALLOC_FP].last_use_us = now_us;
        peer->slot[APTUS_ALLOC_RC].last_use_us = now_us;
    } else if (used_kind == APTUS_ALLOC_RC) {
        peer->slot[APTUS_ALLOC_RC].last_use_us = now_us;
    }

    for (kind = APTUS_ALLOC_RC; kind < APTUS_ALLOC_KIND_LAST; ++kind) {
        if (aptus_alloc_earned(alloc, peer, kind, now_us) &&
            aptus_alloc_reserve(alloc, kind)) {
            aptus_alloc_set(&peer->slot[kind], APTUS_ALLOC_REQUESTED, now_us);
            alloc->stats.requested[kind]++;
            *kind_p = kind;
            return APTUS_ALLOC_ACT_REQUEST;
        }
    }
    return APTUS_ALLOC_ACT_NONE;
}

aptus_alloc_action_t aptus_alloc_requested(aptus_alloc_t *alloc,
                                           aptus_alloc_peer_t *peer,
                                           aptus_alloc_kind_t kind,
                                           uint64_t now_us)
{
    aptus_alloc_slot_t *slot = &peer->slot[kind];

    switch (slot->state) {
    case APTUS_ALLOC_GRANTED:
        return APTUS_ALLOC_ACT_GRANT; /* a repeated request */
    case APTUS_ALLOC_REQUESTED:
        /* both asked at once: each holds a slot for the other already */
        aptus_alloc_set(slot, APTUS_ALLOC_GRANTED, now_us);
        alloc->stats.granted[kind]++;
        return APTUS_ALLOC_ACT_GRANT;
    default:
        break;
    }
    if (!aptus_alloc_take(alloc, peer, kind, now_us)) {
        alloc->stats.refusals[kind]++;
        return APTUS_ALLOC_ACT_REFUSE;
    }
    return APTUS_ALLOC_ACT_GRANT;
}

aptus_alloc_action_t aptus_alloc_answered(aptus_alloc_t *alloc,
                                          aptus_alloc_peer_t *peer,
                                          aptus_alloc_kind_t kind, int granted,
                                          uint64_t now_us)
{
    aptus_alloc_slot_t *slot = &peer->slot[kind];

    switch (slot->state) {
    case APTUS_ALLOC_REQUESTED:
        if (granted) {
            aptus_alloc_set(slot, APTUS_ALLOC_GRANTED, now_us);
            alloc->stats.granted[kind]++;
            return APTUS_ALLOC_ACT_OPEN;
        }
        alloc->stats.refused[kind]++;
        aptus_alloc_free(alloc, peer, kind, now_us, alloc->config.backoff_us);
        return APTUS_ALLOC_ACT_NONE;
    case APTUS_ALLOC_GRANTED:
        return APTUS_ALLOC_ACT_NONE; /* on already (both asked at once) */
    default:
        break;
    }
    /* the request had expired and its slot went: the peer holds one for
     * us; take ours again if there is room, else tell it to let go */
    if (!granted) {
        return APTUS_ALLOC_ACT_NONE;
    }
    return aptus_alloc_take(alloc, peer, kind, now_us) ? APTUS_ALLOC_ACT_OPEN
                                                       : APTUS_ALLOC_ACT_DEMOTE;
}

aptus_alloc_action_t aptus_alloc_check(aptus_alloc_t *alloc,
                                       aptus_alloc_peer_t *peer,
                                       uint64_t now_us,
                                       aptus_alloc_kind_t *kind_p)
{
    const aptus_alloc_config_t *cfg = &alloc->config;
    aptus_alloc_slot_t *slot;
    int kind;

    /* the fast path first: RC goes only once FP is gone */
    for (kind = APTUS_ALLOC_KIND_LAST - 1; kind >= 0; --kind) {
        slot = &peer->slot[kind];
        if ((slot->state == APTUS_ALLOC_REQUESTED) &&
            (aptus_alloc_since(now_us, slot->since_us) >=
             cfg->request_timeout_us)) {
            alloc->stats.expired[kind]++;
            aptus_alloc_free(alloc, peer, kind, now_us, cfg->backoff_us);
            continue;
        }
        if ((slot->state != APTUS_ALLOC_GRANTED) || (cfg->idle_us == 0) ||
            (aptus_alloc_since(now_us, slot->since_us) < cfg->hold_us) ||
            (aptus_alloc_since(now_us, slot->last_use_us) < cfg->idle_us)) {
            continue;
        }
        if ((kind == APTUS_ALLOC_RC) &&
            (peer->slot[APTUS_ALLOC_FP].state != APTUS_ALLOC_NONE)) {
            continue; /* its fast path still stands */
        }
        alloc->stats.demoted[kind]++;
        aptus_alloc_free(alloc, peer, kind, now_us, cfg->hold_us);
        *kind_p = kind;
        return APTUS_ALLOC_ACT_DEMOTE;
    }
    return APTUS_ALLOC_ACT_NONE;
}

void aptus_alloc_release(aptus_alloc_t *alloc, aptus_alloc_peer_t *peer,
                         aptus_alloc_kind_t kind, uint64_t now_us)
{
    if (kind == APTUS_ALLOC_RC) {
        aptus_alloc_free(alloc, peer, APTUS_ALLOC_FP, now_us,
                         alloc->config.hold_us);
    }
    aptus_alloc_free(alloc, peer, kind, now_us, alloc->config.hold_us);
}

void aptus_alloc_bar(aptus_alloc_t *alloc, aptus_alloc_peer_t *peer,
                     aptus_alloc_kind_t kind, uint64_t now_us)
{
    if (peer->slot[kind].barred) {
        return;
    }
    peer->slot[kind].barred = 1;
    alloc->stats.barred[kind]++;
    if (kind == APTUS_ALLOC_RC) {
        aptus_alloc_bar(alloc, peer, APTUS_ALLOC_FP, now_us);
    }
    aptus_alloc_free(alloc, peer, kind, now_us, alloc->config.hold_us);
}
