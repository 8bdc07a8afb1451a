/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: reliable multicast broadcast, the protocol (wire format in
 * mcast_proto.h).
 *
 * Pure protocol logic, free of MPI, sockets and UCX. The caller owns the
 * wire and the clock (microseconds on a monotonic clock, passed in): it
 * parses what arrives (aptus_mc_hdr_parse) and hands it to
 * aptus_mc_window_recv, calls aptus_mc_window_progress now and then, and
 * sends what the callbacks give it: a multicast, a datagram to one rank,
 * a message to deliver. One aptus_mc_window_t per rank and communicator.
 *
 * After Liu, Mamidala and Panda, "Fast and Scalable MPI-Level Broadcast
 * using InfiniBand's Hardware Multicast Support", IPDPS 2004:
 *
 * - Sliding window (section 4.2, 5.1): the root copies the message into
 *   one of W slots, multicasts it and returns at once. The sequence counts
 *   the communicator's broadcasts whatever their root (MPI orders
 *   collectives), so one window serves every root, and a slot is reused
 *   only when every rank holds its message. Every datagram carries the
 *   sender's knowledge of that point (the stable field), so a new root
 *   knows its credit without asking; a root whose window is full polls
 *   the co-roots that hold it back. A slow receiver therefore stops the
 *   roots W messages ahead of it instead of being overrun (section 5.4).
 * - Co-roots (section 4.3): ranks form groups of consecutive ranks; the
 *   first of each is its co-root. A co-root acknowledges every message to
 *   its root at once (REPORT), collects the lazy ACKs of its group and
 *   reports the group's point with them. Groups do not move with the root,
 *   so a leaf always acknowledges to the same rank, cumulatively over
 *   messages of any root.
 * - Lazy, skewed ACKs (section 4.4): a leaf acknowledges once per M
 *   messages, when (seq mod M) == (rank mod M), so a group's ACKs spread
 *   over M messages; at the latest ack_delay after a message arrived (the
 *   paper's "timeout and explicit ACK"); and any datagram it sends carries
 *   the acknowledgement (aptus_mc_window_piggyback for the caller's own).
 * - Repair (section 5.3, with the timeout the paper left as future work):
 *   a co-root (for its leaves) or a root (for the co-roots) that lacks an
 *   acknowledgement covering a message after a retransmission timeout
 *   sends the message point-to-point to exactly the ranks that lack it.
 *   The timeout follows the measured round trip (RFC 6298: srtt + 4
 *   rttvar within [rto_min, rto_max], doubling per unanswered repair),
 *   plus ack_delay for lazy leaves. A receiver that sees a hole (a later
 *   message arrived) asks at once (NACK), which repairs faster than the
 *   timeout. Selective maps (sack) keep held messages from being resent.
 * - Large messages (section 4.5): above max_msg the caller falls back to
 *   point-to-point (PMPI_Bcast); below, a message takes up to
 *   APTUS_MC_MAX_FRAGS datagrams of frag_size bytes.
 *
 * Receivers deliver in order, once: early messages wait in their slot,
 * duplicates are dropped and counted. A message is delivered (the callback
 * is called) when it and all before it are here; the MPI layer copies it
 * to the user's buffer or keeps it for the matching MPI_Bcast.
 */
#ifndef APTUS_MCAST_WINDOW_H_
#define APTUS_MCAST_WINDOW_H_

#include "mcast_proto.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_MC_WINDOW_MAX 4096u /* far below 2^31: serial order holds */

/*
 * Defaults and why:
 * - group_size 0 (auto): G = round(sqrt(N * M)), at least 2. Per broadcast
 *   the root handles one REPORT from each of the N/G co-roots, and a
 *   co-root about G/M lazy ACKs from its group; the two loads are equal at
 *   N/G = G/M. (The paper's model in section 7.2, root time T_um log(n/s)
 *   + T_pack s, charges the root a binomial tree to the co-roots; here the
 *   co-roots take the data from the multicast and only acknowledge, so the
 *   root pays per co-root, not per tree level.) N = 1024, M = 8 gives 91
 *   ranks a group, 12 co-roots; N = 32 gives 16, 2 co-roots.
 * - ack_every M = 8: the paper's Aggregate10 halved the ACK work with
 *   M = 10; 8 keeps M <= W / 2 for small windows so that an ACK is on its
 *   way before the window fills, and divides evenly.
 * - window W = 64 slots: about as many broadcasts as fit in a few round
 *   trips at small sizes, times max_msg bytes of memory (64 x 8 KiB).
 */
#define APTUS_MC_DEFAULT_WINDOW    64u
#define APTUS_MC_DEFAULT_ACK_EVERY 8u

typedef struct aptus_mc_config {
    uint32_t window;       /* W: message slots per rank */
    uint32_t group_size;   /* ranks per group, co-root included; 0: auto */
    uint32_t ack_every;    /* M: a leaf acknowledges every M messages
                              (1: at once, the eager scheme) */
    uint32_t frag_size;    /* payload bytes per datagram */
    uint32_t max_msg;      /* larger messages: point-to-point fallback */
    uint32_t ack_delay_us; /* a lazy ACK waits at most this long */
    uint32_t rto_min_us;   /* retransmission timeout bounds */
    uint32_t rto_max_us;
    uint32_t rto_init_us; /* before the first round-trip sample */
} aptus_mc_config_t;

/* Fills cfg with the defaults above (frag_size 1024, max_msg 8192,
 * ack_delay 200 us, rto 200 us .. 100 ms, initial 1 ms). */
void aptus_mc_config_default(aptus_mc_config_t *cfg);

/* NULL when the configuration is consistent for comm_size ranks, else a
 * message naming the field at fault. */
const char *aptus_mc_config_check(const aptus_mc_config_t *cfg,
                                  uint32_t comm_size);

/* The group size cfg gives for comm_size ranks (resolves 0: auto). */
uint32_t aptus_mc_group_size(const aptus_mc_config_t *cfg, uint32_t comm_size);

/* ---- what the protocol asks the caller to do ---------------------------- */

typedef struct aptus_mc_ops {
    /* Multicast hdr (built with aptus_mc_hdr_build) and payload. */
    void (*mcast)(void *arg, const aptus_mc_hdr_t *hdr, const void *payload);
    /* Send hdr and payload to rank dest, point-to-point. */
    void (*send)(void *arg, uint32_t dest, const aptus_mc_hdr_t *hdr,
                 const void *payload);
    /* Message seq from root, in order, once; data is valid during the
     * call. Not called on the root for its own messages. */
    void (*deliver)(void *arg, uint32_t seq, uint32_t root, const void *data,
                    uint32_t len);
} aptus_mc_ops_t;

typedef struct aptus_mc_stats {
    uint64_t bcasts;        /* messages this rank multicast as root */
    uint64_t window_full;   /* bcast refused: no credit */
    uint64_t delivered;     /* messages delivered */
    uint64_t duplicates;    /* datagrams already held or delivered */
    uint64_t early;         /* messages complete before their turn */
    uint64_t out_of_window; /* datagrams too far ahead to hold: dropped */
    uint64_t malformed;     /* valid header, inconsistent with the config
                               or with other fragments: dropped */
    uint64_t acks_sent;     /* explicit ACKs (leaf) */
    uint64_t nacks_sent;
    uint64_t reports_sent;
    uint64_t polls_sent;
    uint64_t repairs_sent; /* messages resent point-to-point */
    uint64_t rtt_samples;
} aptus_mc_stats_t;

/* ---- state -------------------------------------------------------------- */

/* A rank this one is responsible for: a leaf of its group (co-root), a
 * co-root (root). */
typedef struct aptus_mc_child {
    uint32_t rank;
    uint32_t ack;       /* holds every message below */
    uint32_t sack;      /* bit i: holds ack + i */
    uint32_t group_ack; /* co-roots: their group holds every message below */
    uint64_t rtx_time;  /* last repair sent, usec */
    uint32_t rtx_upto;  /* fast repairs went out below this at rtx_time */
    uint64_t poll_time; /* last poll sent, usec */
    uint8_t backoff;    /* repairs without progress */
    uint8_t poll_backoff;
} aptus_mc_child_t;

enum {
    APTUS_MC_SLOT_EMPTY    = 0,
    APTUS_MC_SLOT_PARTIAL  = 1, /* some fragments here */
    APTUS_MC_SLOT_COMPLETE = 2, /* all here: held, delivered or retained */
};

typedef struct aptus_mc_slot {
    uint64_t frags;   /* fragments here */
    uint64_t time_us; /* completed (receiver) or multicast (root) */
    uint32_t seq;
    uint32_t root;
    uint32_t len;
    uint16_t nfrag;
    uint8_t state;
    uint8_t repaired; /* sent again at least once (Karn: no RTT sample) */
} aptus_mc_slot_t;

typedef struct aptus_mc_window {
    aptus_mc_config_t cfg;
    aptus_mc_ops_t ops;
    void *arg;
    uint64_t key;
    uint32_t comm_size;
    uint32_t rank;
    uint32_t group_size;
    uint32_t ngroups;
    uint32_t coroot;   /* my group's co-root (me if I am one) */
    uint32_t nmembers; /* co-root: leaves in my group */

    aptus_mc_slot_t *slots;    /* W */
    uint8_t *data;             /* W * max_msg */
    aptus_mc_child_t *members; /* co-root: my group's leaves */
    aptus_mc_child_t *coroots; /* every group's co-root (as a root) */

    uint32_t have;           /* every message below is here and delivered */
    uint32_t lo;             /* slots hold messages lo .. lo + W - 1 */
    uint32_t stable;         /* every rank holds every message below */
    uint32_t own_last;       /* my latest message as a root, if any */
    uint32_t group_ack;      /* co-root: my group holds every message below */
    uint32_t group_reported; /* group_ack in my latest REPORT */
    uint32_t group_root;     /* root of message group_ack - 1 */
    uint8_t has_own;         /* own_last is valid */

    uint64_t ack_due;    /* leaf: explicit ACK at this time (0: none) */
    uint32_t acked;      /* leaf: latest ack my co-root was sent */
    uint32_t nack_first; /* leaf: hole of the latest NACK */
    uint64_t nack_time;
    uint64_t report_time; /* co-root: latest REPORT */

    uint32_t srtt_us; /* 0: no sample yet */
    uint32_t rttvar_us;
    uint8_t rto_backoff; /* Karn: timeouts since the last valid sample */

    aptus_mc_stats_t stats;
} aptus_mc_window_t;

typedef enum {
    APTUS_MC_OK = 0,
    APTUS_MC_ERR_CONFIG, /* see aptus_mc_config_check */
    APTUS_MC_ERR_NOMEM,
    APTUS_MC_ERR_TOO_BIG, /* above max_msg: use the point-to-point path */
    APTUS_MC_ERR_FULL,    /* no credit: progress and try again */
    APTUS_MC_ERR_ORDER,   /* this sequence is another root's: the ranks do
                             not call the broadcasts in the same order */
    APTUS_MC_ERR_LAST
} aptus_mc_status_t;

const char *aptus_mc_status_str(aptus_mc_status_t status);

/* Allocates the slots and state once (nothing later). rank < comm_size. */
aptus_mc_status_t aptus_mc_window_init(aptus_mc_window_t *w,
                                       const aptus_mc_config_t *cfg,
                                       uint32_t comm_size, uint32_t rank,
                                       uint64_t key, const aptus_mc_ops_t *ops,
                                       void *arg);

void aptus_mc_window_cleanup(aptus_mc_window_t *w);

static inline int aptus_mc_window_is_coroot(const aptus_mc_window_t *w)
{
    return w->coroot == w->rank;
}

/* The co-root of rank r's group. */
static inline uint32_t aptus_mc_coroot_of(const aptus_mc_window_t *w,
                                          uint32_t r)
{
    return (r / w->group_size) * w->group_size;
}

/* Root: multicast len bytes as the next message; the data is copied, the
 * buffer is free on return. *seq_p gets its sequence. ERR_FULL: no slot
 * (progress and retry), ERR_TOO_BIG: use the fallback. */
aptus_mc_status_t aptus_mc_window_bcast(aptus_mc_window_t *w, const void *buf,
                                        uint32_t len, uint64_t now_us,
                                        uint32_t *seq_p);

typedef enum {
    APTUS_MC_RECV_OK,            /* new: taken (maybe delivered) */
    APTUS_MC_RECV_EARLY,         /* new, past a hole: held */
    APTUS_MC_RECV_DUPLICATE,     /* had it: dropped */
    APTUS_MC_RECV_OUT_OF_WINDOW, /* too far ahead: dropped */
    APTUS_MC_RECV_CONTROL,       /* a control message, processed */
    APTUS_MC_RECV_MALFORMED,     /* inconsistent: dropped */
    APTUS_MC_RECV_LAST
} aptus_mc_recv_status_t;

const char *aptus_mc_recv_status_str(aptus_mc_recv_status_t status);

/* A datagram the caller parsed with this window's key and size. */
aptus_mc_recv_status_t aptus_mc_window_recv(aptus_mc_window_t *w,
                                            const aptus_mc_hdr_t *hdr,
                                            uint64_t now_us);

/* Timers: lazy ACKs, repairs, reports, polls. Call at least every
 * rto_min_us / 2 while anything is outstanding. */
void aptus_mc_window_progress(aptus_mc_window_t *w, uint64_t now_us);

/* Piggybacking on the caller's own traffic to rank dest: returns 1 and
 * sets *ack_p when dest is the rank my acknowledgement goes to (then the
 * pending lazy ACK counts as sent: put *ack_p in that message), 0 when
 * there is nothing for dest. */
/* Whether a timer of mine as a root may still act: a co-root that lacks one
 * of my messages (a repair), or one whose group has not reported a message
 * of mine I still hold (a poll). Once every co-root holds my messages and
 * I hold none unreported, the co-roots answer for their groups and the
 * stable point arrives with the next broadcast. */
int aptus_mc_window_root_pending(const aptus_mc_window_t *w);

int aptus_mc_window_piggyback(aptus_mc_window_t *w, uint32_t dest,
                              uint32_t *ack_p);

/* An acknowledgement from rank src found in the caller's own traffic. */
void aptus_mc_window_ack_in(aptus_mc_window_t *w, uint32_t src, uint32_t ack,
                            uint64_t now_us);

/* Current retransmission timeout, usec: srtt + 4 rttvar (rto_init before
 * a sample) within the bounds, doubled per timeout since the last valid
 * sample (Karn's rule keeps the backed-off value until then). */
uint32_t aptus_mc_window_rto(const aptus_mc_window_t *w);

/* Whether a root may multicast now (what bcast would not refuse). */
int aptus_mc_window_can_bcast(const aptus_mc_window_t *w);

#ifdef __cplusplus
}
#endif

#endif
