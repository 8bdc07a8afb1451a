/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: allocation of the expensive channels (RC connections and
 * fast-path channels) to the peers that earn them, under per-process caps.
 *
 * Pure logic, free of UCX and of any wire: the transport counts traffic
 * into it, carries its requests and replies to the peer, and opens or
 * closes the channels it decides on.
 *
 * After Koop et al., "MVAPICH-Aptus: Scalable High-Performance
 * Multi-Transport MPI over InfiniBand", IPDPS 2008, section 4.3, which
 * allocates on demand when a peer's traffic passes a threshold, tolerates
 * up to two connections over the cap when both sides ask at once, and
 * never gives a channel back. Here:
 *
 * - The rule: within one window (config.window_us) a peer earns an RC
 *   connection (RC-SR and RC-RDMA) once this process sent it rc_msgs
 *   messages or rc_bytes bytes, and a fast-path channel once it sent it
 *   fp_msgs messages of at most fp_max_size bytes while it has RC. The
 *   counters restart every window, so earning takes sustained traffic.
 * - Agreement: a side reserves a slot under its cap before it asks, and
 *   the peer grants only when it can reserve one too; a refused or
 *   answered-too-late request gives its slot back. When both sides ask at
 *   once, each already holds a slot for the other, and each request is
 *   taken as the other's grant. No side ever holds more channels than its
 *   cap, reserved ones included.
 * - A refused peer stays on UD and asks again only after backoff_us.
 * - Demotion: a channel unused for idle_us, held for at least hold_us,
 *   goes (the peer is told and frees its slot), so the caps follow the
 *   current heavy peers; a peer it was taken from must earn it again and
 *   waits hold_us before asking, so a channel does not flap.
 */
#ifndef APTUS_CHAN_ALLOC_H_
#define APTUS_CHAN_ALLOC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aptus_alloc_kind {
    APTUS_ALLOC_RC, /* an RC connection: RC-SR and RC-RDMA */
    APTUS_ALLOC_FP, /* a fast-path channel (needs RC) */
    APTUS_ALLOC_KIND_LAST
} aptus_alloc_kind_t;

typedef enum aptus_alloc_state {
    APTUS_ALLOC_NONE,      /* on UD */
    APTUS_ALLOC_REQUESTED, /* slot reserved, waiting for the peer */
    APTUS_ALLOC_GRANTED    /* both sides hold a slot: the channel is on */
} aptus_alloc_state_t;

typedef struct aptus_alloc_config {
    unsigned max[APTUS_ALLOC_KIND_LAST]; /* per-process caps (16, 8) */
    uint64_t window_us;
    uint32_t rc_msgs;
    uint64_t rc_bytes;
    uint32_t fp_msgs;
    uint32_t fp_max_size;
    uint64_t request_timeout_us; /* unanswered request gives its slot back */
    uint64_t backoff_us;         /* after a refusal */
    uint64_t idle_us;            /* 0: never demote */
    uint64_t hold_us;            /* shortest life of a channel */
} aptus_alloc_config_t;

typedef struct aptus_alloc_slot {
    uint8_t state;          /* aptus_alloc_state_t */
    uint8_t barred;         /* never with this peer (aptus_alloc_bar) */
    uint64_t since_us;      /* entered this state */
    uint64_t last_use_us;   /* GRANTED: last message over it */
    uint64_t not_before_us; /* NONE: no request before this time */
} aptus_alloc_slot_t;

/* Per-peer state (the transport embeds it in its endpoint). */
typedef struct aptus_alloc_peer {
    uint64_t window_start_us;
    uint32_t msgs;       /* this window */
    uint32_t small_msgs; /* this window, at most fp_max_size */
    uint64_t bytes;      /* this window */
    aptus_alloc_slot_t slot[APTUS_ALLOC_KIND_LAST];
} aptus_alloc_peer_t;

typedef struct aptus_alloc_stats {
    uint64_t requested[APTUS_ALLOC_KIND_LAST];
    uint64_t granted[APTUS_ALLOC_KIND_LAST];  /* channels that came on */
    uint64_t refused[APTUS_ALLOC_KIND_LAST];  /* our requests refused */
    uint64_t refusals[APTUS_ALLOC_KIND_LAST]; /* requests we refused */
    uint64_t demoted[APTUS_ALLOC_KIND_LAST];
    uint64_t expired[APTUS_ALLOC_KIND_LAST]; /* unanswered requests */
    uint64_t barred[APTUS_ALLOC_KIND_LAST];  /* peers it can never serve */
    unsigned peak[APTUS_ALLOC_KIND_LAST];
} aptus_alloc_stats_t;

typedef struct aptus_alloc {
    aptus_alloc_config_t config;
    unsigned used[APTUS_ALLOC_KIND_LAST]; /* REQUESTED + GRANTED slots */
    aptus_alloc_stats_t stats;
} aptus_alloc_t;

/* What the transport must do after a call. */
typedef enum aptus_alloc_action {
    APTUS_ALLOC_ACT_NONE,
    APTUS_ALLOC_ACT_REQUEST, /* send the peer a request for the kind */
    APTUS_ALLOC_ACT_GRANT,   /* answer the peer's request: granted; open */
    APTUS_ALLOC_ACT_REFUSE,  /* answer the peer's request: refused */
    APTUS_ALLOC_ACT_OPEN,    /* granted both ways: open the channel */
    APTUS_ALLOC_ACT_DEMOTE   /* tell the peer, then close the channel */
} aptus_alloc_action_t;

/* NULL, or what is wrong with the configuration. */
const char *aptus_alloc_config_check(const aptus_alloc_config_t *config);

void aptus_alloc_init(aptus_alloc_t *alloc, const aptus_alloc_config_t *config);
void aptus_alloc_peer_init(aptus_alloc_peer_t *peer, uint64_t now_us);

/* A message of 'size' bytes goes to peer over channel kind 'used_kind'
 * (APTUS_ALLOC_KIND_LAST: over UD). Returns REQUEST with *kind_p when the
 * peer has just earned a channel and a slot was reserved for it. */
aptus_alloc_action_t aptus_alloc_sent(aptus_alloc_t *alloc,
                                      aptus_alloc_peer_t *peer, size_t size,
                                      aptus_alloc_kind_t used_kind,
                                      uint64_t now_us,
                                      aptus_alloc_kind_t *kind_p);

/* The peer asks for a channel of 'kind': GRANT (a slot is held for it;
 * when this side had asked too, the channel is on) or REFUSE. */
aptus_alloc_action_t aptus_alloc_requested(aptus_alloc_t *alloc,
                                           aptus_alloc_peer_t *peer,
                                           aptus_alloc_kind_t kind,
                                           uint64_t now_us);

/* The peer answered our request: OPEN, or NONE (refused, or the request
 * had expired: the slot is free again). */
aptus_alloc_action_t aptus_alloc_answered(aptus_alloc_t *alloc,
                                          aptus_alloc_peer_t *peer,
                                          aptus_alloc_kind_t kind, int granted,
                                          uint64_t now_us);

/* Timers of one peer: an unanswered request expires, an idle channel is
 * demoted (DEMOTE with *kind_p; its slot is free when this returns).
 * Call it for each peer now and then. */
aptus_alloc_action_t aptus_alloc_check(aptus_alloc_t *alloc,
                                       aptus_alloc_peer_t *peer,
                                       uint64_t now_us,
                                       aptus_alloc_kind_t *kind_p);

/* The peer gave the channel up (its demotion), or the channel failed, or
 * the endpoint goes: its slot is free; FP goes with RC. */
void aptus_alloc_release(aptus_alloc_t *alloc, aptus_alloc_peer_t *peer,
                         aptus_alloc_kind_t kind, uint64_t now_us);

/* The channel kind can never serve this peer (a fast path to a peer whose
 * memory the wire cannot reach: another host): the peer never earns it,
 * its requests are refused, and a slot it holds or asked for is freed
 * (the caller closes what was open). */
void aptus_alloc_bar(aptus_alloc_t *alloc, aptus_alloc_peer_t *peer,
                     aptus_alloc_kind_t kind, uint64_t now_us);

#ifdef __cplusplus
}
#endif

#endif
