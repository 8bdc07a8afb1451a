/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD-SR channel (Koop et al., "MVAPICH-Aptus", IPDPS 2008,
 * section 3.1; Friedley et al., "Scalable High Performance Message Passing
 * over InfiniBand for Open MPI", KiCC 2007, section 4).
 *
 * Reliable, ordered active messages over an unreliable datagram wire, with
 * constant state per peer and no per-peer buffers: every receive buffer comes
 * from one pool, as on a UD QP, which grows while the user holds received
 * messages, up to a ceiling. The channel owns the peers (one per
 * stream to a remote interface), the reliability window of each (pure logic
 * in proto/rel_window), segmentation and reassembly above the datagram MTU,
 * ACK and retransmission timers, pending queues and flush.
 *
 * The ud_sr UCT transport is a thin layer over this object; the aptus
 * transport composes it with the RC channels. The caller serialises all
 * calls (the UCT layer holds the worker's async lock).
 */
#ifndef APTUS_UD_SR_CHAN_H_
#define APTUS_UD_SR_CHAN_H_

#include "chan.h"
#include "proto/rel_window.h"
#include "proto/ud_sr_proto.h"
#include "base/aptus_mpool.h"
#include "wire/wire.h"

#include <uct/api/uct.h>
#include <uct/base/uct_iface.h>
#include <ucs/async/async.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/array.h>
#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/datastruct/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aptus_ud_chan aptus_ud_chan_t;
typedef struct aptus_ud_peer aptus_ud_peer_t;
typedef struct aptus_ud_peer_ext aptus_ud_peer_ext_t;

#define APTUS_UD_MAX_IOV                                                       \
    6 /* iovs per message: one datagram holds our header, the copied           \
         header, and these */
/* Streams (endpoints at once) to one remote interface: the header's
 * 16-bit stream number. Failed streams are reclaimed, so this bounds the
 * endpoints alive together, not those ever created. */
#define APTUS_UD_MAX_CONN APTUS_UD_SR_CONN_MAX

typedef struct aptus_ud_chan_config {
    aptus_rel_config_t rel;
    size_t max_msg;      /* largest message, segmented above MTU */
    size_t max_am_hdr;   /* am_zcopy header bytes */
    unsigned rx_pool;    /* receive descriptors allocated at a time */
    unsigned rx_max;     /* ceiling of the receive pool (descriptors the
                            application may hold, plus those posted) */
    unsigned rx_budget;  /* deferred messages delivered per progress call */
    size_t tx_max_bytes; /* the window is full at this many payload bytes
                            in flight too (0: datagrams alone bound it) */
    size_t tx_all_bytes; /* payload bytes in flight to all peers together
                            before sends wait (0: no bound) */
    size_t am_align;     /* received payload: (data + am_align_offset) is a */
    size_t am_align_offset; /* multiple of am_align (0 or 1: no demand) */
    size_t rx_headroom;     /* bytes UCT users need before payload */
    unsigned rx_batch;      /* datagrams per receive call */
    uint32_t tick_us;       /* ACK delay and timer granularity */
    int crc;                /* end-to-end CRC-32C on payloads */
    unsigned max_peers;     /* streams this channel may hold */
    unsigned max_reasm;     /* messages being reassembled at once (started,
                               not complete): what peers can pin without
                               finishing a message */
    size_t peer_headroom;   /* owner's bytes in front of every peer (the
                               ud_sr transport keeps its endpoint there) */
    const char *var_prefix; /* the owner's configuration prefix ("UD_SR_"),
                               to name settings in messages; NULL: "UD_SR_" */
    int numa_node;          /* receive buffers go on this node (-1: any) */
} aptus_ud_chan_config_t;

/* Messages between the channels of two interfaces (UD-ZCopy's control):
 * delivered in stream order to this handler instead of the user's. The
 * handler consumes the data before it returns; UCS_ERR_BUSY in async
 * context defers it, like a sync-only active message. */
typedef ucs_status_t (*aptus_ud_internal_cb_t)(void *arg, aptus_ud_peer_t *peer,
                                               uint8_t id, const void *data,
                                               size_t length, int is_async);

/* internal messages carry this bit in the descriptor's am_id */
#define APTUS_UD_AM_INTERNAL 0x80

/* Upcalls into the transport that owns the channel. */
typedef struct aptus_ud_chan_ops {
    /* A complete message, in order. data has rx_headroom bytes before it and
     * may be kept (return UCS_INPROGRESS, release with
     * uct_iface_release_desc(data - rx_headroom)). Return UCS_ERR_BUSY when
     * it cannot be handled in async context; it is then queued and handed
     * over again from aptus_ud_chan_progress(..., 0). */
    ucs_status_t (*deliver)(void *arg, aptus_ud_peer_t *peer, uint8_t am_id,
                            void *data, size_t length, unsigned flags,
                            int is_async);
    /* The peer stopped answering (or reset the stream). Called once, from
     * the context that found out; outstanding sends are already completed
     * with 'status'. */
    void (*peer_failed)(void *arg, aptus_ud_peer_t *peer, ucs_status_t status);
    /* The peer's memory goes back to the pool (optional): the owner's state
     * in its headroom (zeroed when the peer was created) ends here. */
    void (*peer_free)(void *arg, aptus_ud_peer_t *peer);
} aptus_ud_chan_ops_t;

enum {
    APTUS_UD_PEER_USER      = 1u << 0, /* handed out as a UCT endpoint */
    APTUS_UD_PEER_FAILED    = 1u << 1, /* dead stream: tombstone */
    APTUS_UD_PEER_IN_ACK    = 1u << 2, /* on this batch's immediate-ACK list */
    APTUS_UD_PEER_FLUSH     = 1u << 3, /* has flush requests waiting */
    APTUS_UD_PEER_REPORTED  = 1u << 4, /* failure queued for the user */
    APTUS_UD_PEER_IN_SOON   = 1u << 5, /* on the next-progress ACK list */
    APTUS_UD_PEER_QUIET     = 1u << 6, /* failed by the user's own cancel */
    APTUS_UD_PEER_DEAD      = 1u << 7, /* on the reclaim list */
    APTUS_UD_PEER_USER_GONE = 1u << 8, /* its endpoint was destroyed */
    APTUS_UD_PEER_HEARD     = 1u << 9, /* confirmed: a datagram came with this
                                          side's token and the remote's, so
                                          both ends know the incarnation */
    APTUS_UD_PEER_OPENING = 1u << 10   /* opened by the remote, unconfirmed,
                                          no endpoint: in chan->opening */
};

/* A peer's datagram size is one of the channel's size classes, named by
 * index in the top bits of its flags (so it costs the peer no bytes). */
#define APTUS_UD_PEER_CLASS_SHIFT 11
#define APTUS_UD_DG_CLASSES       32

/* Datagram sizes of the path search: the first size used towards a peer
 * on a link (IPv6's minimum MTU less IP and UDP headers), and Ethernet's,
 * tried when a jumbo size is lost on the way. */
#define APTUS_UD_PATH_BASE     1232
#define APTUS_UD_PATH_ETHERNET 1452
/* Size for streams a peer opened before an endpoint here named its size
 * (they carry ACKs and control messages until then). */
#define APTUS_UD_PATH_UNKNOWN 512
/* A probe goes this many times, PATH_PROBE_US apart doubling, before the
 * size is given up as lost on the path. */
#define APTUS_UD_PATH_TRIES    4
#define APTUS_UD_PATH_PROBE_US 20000
#define APTUS_UD_PATH_PAD_MAX  65536 /* the largest probe */

typedef struct aptus_ud_dg_class {
    uint32_t mtu;    /* datagram bytes */
    uint32_t single; /* payload of a one-datagram message */
    uint32_t first;  /* payload of the first of several (the others: single) */
} aptus_ud_dg_class_t;

/*
 * A peer's send window: opened by its first send, given back (its PSN and
 * RTT parked in the peer) when the channel's tick finds nothing in flight
 * and the peer leaves the active set. A peer is active while it has one.
 */
typedef struct aptus_ud_peer_win {
    aptus_rel_tx_t tx;
    uint32_t tx_bytes; /* payload bytes of the datagrams in the window */
} aptus_ud_peer_win_t;

/*
 * Per-peer state: the whole cost of a peer that is not sending. A plain
 * object: the owner keeps what it needs in the config's peer_headroom
 * bytes in front of it (the ud_sr transport, its UCT endpoint), so an
 * endpoint costs this struct and the headroom, nothing else.
 */
struct aptus_ud_peer {
    aptus_ud_peer_ext_t *ext; /* held packets, reassembly, pending */
    aptus_ud_peer_win_t *win; /* send window; NULL: nothing sent lately */
    aptus_rel_rx_t rx;
    aptus_wire_addr_t addr;       /* remote interface on the wire */
    aptus_rel_tx_parked_t parked; /* the window's PSN and RTT while win is
                                     NULL (in the padding before remote_key) */
    uint64_t remote_key;          /* remote interface key (incarnation) */
    uint32_t active_idx;          /* slot in chan->active, or UINT32_MAX */
    uint16_t conn_id;
    uint16_t flags;
    uint32_t local_token;  /* this side's incarnation of the stream */
    uint32_t remote_token; /* the remote side's; 0 until it is known */
};

/* Rare per-peer state, allocated only while in use. */
struct aptus_ud_peer_ext {
    aptus_ud_peer_t *peer;
    struct aptus_ud_rx_desc *held; /* out-of-order packets, PSN order */
    struct aptus_ud_rx_desc *held_tail;
    aptus_rel_rx_map_t held_map;  /* the window's map of them */
    struct aptus_ud_reasm *reasm; /* message being reassembled */
    ucs_arbiter_group_t pending;  /* uct_pending_req_t waiting for window */
    uint64_t path_due_us;         /* the next probe goes then */
    uint16_t path_probe;          /* datagram size being probed, 0: none */
    uint16_t path_want;   /* the size both ends take (the search's top) */
    uint8_t path_tries;   /* probes of path_probe sent */
    uint32_t opening_idx; /* with APTUS_UD_PEER_OPENING: its ring slot */
};

/* Common head of a received message awaiting delivery. */
typedef struct aptus_ud_rx_msg {
    uct_recv_desc_t release; /* uct_iface_release_desc lands here */
    ucs_queue_elem_t queue;  /* deferred-delivery queue */
    aptus_ud_peer_t *peer;
    void *data;
    uint32_t length;
    uint8_t am_id;
} aptus_ud_rx_msg_t;

/* A received datagram (its buffer follows at chan->rx_dgram_offset). */
typedef struct aptus_ud_rx_desc {
    aptus_ud_rx_msg_t msg;
    struct aptus_ud_rx_desc *next; /* held list */
    uint32_t msg_len;
    uint16_t psn;
    uint8_t flags;
} aptus_ud_rx_desc_t;

/* A message reassembled from fragments (data at chan->reasm_data_offset). */
typedef struct aptus_ud_reasm {
    aptus_ud_rx_msg_t msg;
    uint32_t offset;
} aptus_ud_reasm_t;

typedef struct aptus_ud_tx_msg aptus_ud_tx_msg_t;

/* One datagram of a message in the reliability window. */
typedef struct aptus_ud_tx_frag {
    aptus_rel_txe_t rel;
    aptus_ud_tx_msg_t *msg;
    uint32_t offset;
    uint16_t length;
    uint8_t flags; /* APTUS_UD_SR_F_FIRST / LAST */
} aptus_ud_tx_frag_t;

enum {
    APTUS_UD_TX_TINY  = 0, /* one datagram, up to APTUS_UD_TINY_PAYLOAD */
    APTUS_UD_TX_SMALL = 1, /* one datagram, payload inline */
    APTUS_UD_TX_LARGE = 2, /* several datagrams */
    APTUS_UD_TX_POOLS
};

/* Payload of the buffers most messages take, whatever the MTU: a send or a
 * receive that fits is copied into one, so that a large datagram size
 * costs memory only to messages that use it (a window of 1024 small
 * messages in flight, or 100,000 unexpected ones held by the application,
 * cost 2 KiB each, not the MTU). */
#define APTUS_UD_TINY_PAYLOAD    2048
#define APTUS_UD_RX_COPY_CLASSES 2

/* A message being sent: payload inline (short, bcopy) or in the user's
 * buffers (zcopy: iov[0] is our copy of the AM header). */
struct aptus_ud_tx_msg {
    uct_completion_t *comp;
    void *owned; /* payload copied at endpoint destroy */
    ucs_status_t status;
    uint32_t length;
    uint16_t frags_left;
    uint16_t num_frags;
    uint8_t am_id;
    uint8_t iovcnt; /* 0: payload at data() */
    uint8_t pool;
    uint8_t hdr_flags; /* added to every fragment (NOP) */
    struct iovec iov[APTUS_UD_MAX_IOV + 1];
    aptus_ud_tx_frag_t frags[];
};

typedef struct aptus_ud_chan_stats {
    uint64_t tx_msgs, tx_bytes, tx_data_dgrams, tx_acks, tx_resets;
    uint64_t tx_retransmits, tx_fast_retransmits, tx_window_full, tx_probes;
    uint64_t tx_all_full;     /* a send waited for the interface's bound */
    uint64_t tx_trains;       /* segmented sends of a message's datagrams */
    uint64_t tx_train_dgrams; /* datagrams that went in them */
    uint64_t rx_msgs, rx_bytes, rx_data_dgrams, rx_acks;
    uint64_t rx_duplicates, rx_held, rx_out_of_window, rx_deferred;
    uint64_t rx_bad_key, rx_malformed, rx_bad_crc, rx_bad_ack;
    uint64_t rx_unknown_stream, rx_dead_stream, rx_no_buffer, rx_peer_limit;
    uint64_t rx_pool_exhausted; /* a receive buffer was wanted at RX_MAX */
    uint64_t rx_reasm_limit;    /* a first fragment refused at MAX_REASM */
    uint64_t rx_copied_small;   /* small messages moved out of a datagram
                                   buffer larger than 2 KiB */
    uint64_t rx_kept_large;     /* ones that kept the datagram buffer: the
                                   small buffers were at their ceiling */
    uint64_t rx_hold_limit;     /* a datagram past a hole not held: the
                                   receive buffers left must take holes */
    uint64_t peers_created, peers_failed, peers_reclaimed;
    uint64_t path_probes;  /* path probes sent */
    uint64_t path_raised;  /* a peer's datagram size went up: confirmed */
    uint64_t path_lost;    /* a size lost on the path: every probe of it
                              went unanswered, a smaller one is used */
    uint64_t path_replies; /* probes of peers answered */
    /* Incarnations (see ud_sr_proto.h): */
    uint64_t rx_opening;      /* data asking for the handshake, answered
                                 and not delivered */
    uint64_t tx_open_resends; /* datagrams sent again once the handshake
                                 completed (they went before it) */
    uint64_t rx_stale;        /* datagrams of another incarnation: a
                                 replay, a late duplicate or a forgery */
    uint64_t rx_challenges;   /* an opening on a confirmed stream: asked
                                 the known incarnation whether it lives */
    uint64_t open_refused;    /* openings refused: the address has
                                 APTUS_UD_OPENING_PER_ADDR unconfirmed */
    uint64_t open_evicted;    /* unconfirmed streams dropped, oldest first,
                                 at APTUS_UD_OPENING_MAX */
    uint64_t pending_dispatched, pending_async, checks;
} aptus_ud_chan_stats_t;

static inline khint_t aptus_ud_peer_hash(const aptus_ud_peer_t *peer)
{
    const uint32_t *w = (const uint32_t *)peer->addr.raw;
    khint_t h =
        (khint_t)(peer->remote_key ^ (peer->remote_key >> 32)) * 0x9e3779b1u ^
        peer->conn_id;
    unsigned i;

    for (i = 0; i < APTUS_WIRE_ADDR_LEN / 4; ++i) {
        h = (h ^ w[i]) * 0x01000193u;
    }
    return h ^ (h >> 16);
}

static inline int aptus_ud_peer_equal(const aptus_ud_peer_t *a,
                                      const aptus_ud_peer_t *b)
{
    return (a->remote_key == b->remote_key) && (a->conn_id == b->conn_id) &&
           !memcmp(a->addr.raw, b->addr.raw, APTUS_WIRE_ADDR_LEN);
}

KHASH_INIT(aptus_ud_peers, aptus_ud_peer_t *, char, 0, aptus_ud_peer_hash,
           aptus_ud_peer_equal)
/* Unconfirmed streams per remote address (by a hash of it: a collision
 * only shares a limit). */
KHASH_MAP_INIT_INT64(aptus_ud_opening, uint32_t)

/* Streams a remote side opened that are not confirmed yet (the receiving
 * half of a handshake) cost state before the opener has proven anything:
 * at most this many per interface, the oldest dropped for a new one, and
 * at most APTUS_UD_OPENING_PER_ADDR from one address (more are refused;
 * a genuine opener retries). A confirmed stream leaves the count within a
 * round trip, so only a flood of openings ever meets the bounds, or as
 * many genuine peers opening at once: an evicted genuine opener is reset,
 * so the ring holds the 10,000 peers of a large job opening together
 * (128 KiB of pointers, made at the first opening). */
#define APTUS_UD_OPENING_MAX      16384
#define APTUS_UD_OPENING_PER_ADDR 1024
/* Tokens drawn from the OS at once (one system call per so many streams) */
#define APTUS_UD_TOKEN_BATCH 32

typedef uint64_t (*aptus_ud_clock_t)(void);

/* Most datagrams of one message in one segmented send (UDP GSO): the
 * kernel's UDP_MAX_SEGMENTS on older kernels. */
#define APTUS_UD_TX_TRAIN_MAX 64

/* Datagrams built in one go (a whole message, a retransmit burst). */
typedef struct aptus_ud_tx_batch {
    unsigned count;
    unsigned max;
    aptus_dgram_tx_t *tx;
    struct iovec *iov;       /* max * APTUS_DGRAM_MAX_IOV */
    uint8_t *hdrs;           /* max * APTUS_UD_SR_ACK_MAX_LEN */
    struct iovec *train_iov; /* APTUS_UD_TX_TRAIN_MAX * APTUS_DGRAM_MAX_IOV:
                                one train's datagrams end to end */
} aptus_ud_tx_batch_t;

/* Completions to run later, in the order they were added. */
typedef struct aptus_ud_comp {
    uct_completion_t *comp;
    ucs_status_t status;
} aptus_ud_comp_t;

UCS_ARRAY_DECLARE_TYPE(aptus_ud_comps, unsigned, aptus_ud_comp_t)

typedef struct aptus_ud_comp_list {
    ucs_array_t(aptus_ud_comps) comps;
    unsigned first; /* next to run */
} aptus_ud_comp_list_t;

/* Runs comp at once only when there is no memory to keep it. */
void aptus_ud_comp_list_add(aptus_ud_comp_list_t *list, uct_completion_t *comp,
                            ucs_status_t status);

/* Runs them all, those added meanwhile too; returns how many. */
unsigned aptus_ud_comp_list_dispatch_slow(aptus_ud_comp_list_t *list);

static inline unsigned aptus_ud_comp_list_dispatch(aptus_ud_comp_list_t *list)
{
    return ucs_array_is_empty(&list->comps)
               ? 0
               : aptus_ud_comp_list_dispatch_slow(list);
}

void aptus_ud_comp_list_cleanup(aptus_ud_comp_list_t *list);

/* Sets of peers the channel walks: the active, those due a deferred ACK,
 * the dead waiting to be freed. */
UCS_ARRAY_DECLARE_TYPE(aptus_ud_peer_ptrs, unsigned, aptus_ud_peer_t *)
typedef ucs_array_t(aptus_ud_peer_ptrs) aptus_ud_peer_set_t;


struct aptus_ud_chan {
    aptus_chan_t super;
    aptus_ud_chan_config_t config;
    aptus_dgram_wire_t *wire;
    ucs_async_context_t *async; /* NULL: caller is single-threaded */
    const aptus_ud_chan_ops_t *ops;
    void *ops_arg;
    aptus_ud_internal_cb_t internal_cb;
    void *internal_arg;
    aptus_ud_clock_t clock; /* usec, monotonic */
    uint64_t local_key;
    size_t single_payload; /* payload of a one-datagram msg */
    size_t first_payload;  /* ...of the first of several */
    size_t frag_payload;   /* ...of the others */
    /* datagram sizes towards peers (class 0: the wire's own), see
     * APTUS_UD_PEER_CLASS_SHIFT */
    aptus_ud_dg_class_t dg_class[APTUS_UD_DG_CLASSES];
    unsigned num_dg_class;
    size_t min_dg; /* no class is smaller (SEG_SIZE fits TX_WINDOW) */

    khash_t(aptus_ud_peers) peers;
    /* unconfirmed streams the remote sides opened: a ring, oldest first
     * (holes are NULL), and their count per address */
    aptus_ud_peer_t **opening;
    unsigned opening_head;
    unsigned opening_span; /* slots from head to the newest, holes too */
    unsigned num_opening;
    khash_t(aptus_ud_opening) opening_per_addr;
    uint32_t tokens[APTUS_UD_TOKEN_BATCH];
    unsigned num_tokens;
    aptus_ud_peer_set_t active; /* peers with timers or ACKs due */
    aptus_ud_peer_t *last_peer; /* the last one a datagram was for: most
                                   come from the peer the one before came
                                   from, and a hit skips the hash */
    aptus_ud_peer_t **ack_list; /* immediate ACKs for this batch */
    unsigned num_ack;
    aptus_ud_peer_set_t soon_list; /* ACKs for the next progress call */

    ucs_mpool_t peer_mp;
    /* Peers' rare state (held packets, reassembly, pending, path search)
     * is malloc'ed, not pooled: a pool keeps what thousands of peers used
     * once, and this is taken once per spell of such state, not per
     * datagram. */
    unsigned num_ext;
    unsigned num_win; /* peers' send windows open (malloc'ed too) */
    ucs_mpool_t tx_mp[APTUS_UD_TX_POOLS];
    ucs_mpool_t rx_mp; /* datagram buffers, posted to the wire */
    /* Buffers a message much smaller than a datagram is copied into on
     * arrival, by size class (2 KiB, half a datagram): what the user keeps
     * costs at most 4x its size, not the MTU. */
    struct {
        ucs_mpool_t mp;
        size_t max;                     /* payload it takes */
        struct aptus_ud_rx_desc *spare; /* taken before a delivery */
    } rx_copy[APTUS_UD_RX_COPY_CLASSES];
    unsigned rx_copy_num;
    unsigned rx_held;     /* datagram buffers held past holes, all peers */
    unsigned rx_held_max; /* ... at most: the rest receives the holes */
    ucs_mpool_t reasm_mp;
    ucs_mpool_t flush_mp;
    size_t rx_dgram_offset;
    size_t reasm_data_offset;
    uint64_t next_due_us;  /* a peer's probe or timeout may be due then:
                              progress runs the timers no later */
    unsigned reasm_active; /* reassemblies started (or held first fragments
                              reserved for), not complete */
    size_t tx_data_offset[APTUS_UD_TX_POOLS];

    aptus_dgram_rx_t *rx_slots; /* posted receive buffers, first */
    unsigned rx_posted;

    ucs_queue_head_t deferred; /* in order, waiting for sync context */
    int rx_pool_reported;      /* the RX_MAX error was printed */
    struct {
        aptus_wire_addr_t addr; /* the last remote interface connected to */
        uint64_t remote_key;
        unsigned conn_id; /* streams below are held by endpoints */
    } connect_hint;
    aptus_ud_peer_set_t dead; /* failed, endpoint gone: to free */
    ucs_queue_head_t flush_reqs;
    ucs_arbiter_t pending;
    int in_pending;
    aptus_ud_tx_batch_t batch;

    /* completions found in async context run from the user's progress */
    int in_async;
    /* Set by an owner whose own readiness check just found the socket
     * empty: the next progress call does not read it (one system call
     * fewer), then reads again. */
    int rx_skip_poll;
    aptus_ud_comp_list_t async_comps;

    uint64_t now_us;
    uint64_t last_tick_us;
    uint64_t last_sync_us; /* last progress from the user */
    uint64_t tx_msg_bytes; /* payload bytes in flight, all peers */
    aptus_ud_chan_stats_t stats;
};


/* The channel interface's operations of UD-SR (chan.h). */
extern const aptus_chan_ops_t aptus_ud_chan_iface_ops;

/* Where a UD-SR peer is (aptus_chan_peer_connect's remote): the stream
 * found or made is the lowest to that interface with no endpoint yet. */
typedef struct aptus_ud_remote {
    const aptus_wire_addr_t *addr;
    uint64_t remote_key; /* the interface's identity */
    size_t mtu;          /* the largest datagram it takes (its address
                            says); the smaller of the two ends' is used
                            once the path is seen to carry it */
} aptus_ud_remote_t;

/* Returns NULL if the configuration fits the wire, else a message. */
const char *aptus_ud_chan_config_check(const aptus_ud_chan_config_t *config,
                                       size_t wire_mtu);

ucs_status_t aptus_ud_chan_init(aptus_ud_chan_t *chan,
                                const aptus_ud_chan_config_t *config,
                                aptus_dgram_wire_t *wire,
                                ucs_async_context_t *async,
                                const aptus_ud_chan_ops_t *ops, void *ops_arg,
                                aptus_ud_clock_t clock, uint64_t local_key);

/* Drops everything outstanding (completions get UCS_ERR_CANCELED). */
void aptus_ud_chan_cleanup(aptus_ud_chan_t *chan);

/* Largest payloads, for iface_query. */
size_t aptus_ud_chan_max_short(const aptus_ud_chan_t *chan);

static inline void aptus_ud_chan_set_internal(aptus_ud_chan_t *chan,
                                              aptus_ud_internal_cb_t cb,
                                              void *arg)
{
    chan->internal_cb  = cb;
    chan->internal_arg = arg;
}

/* Send an internal message: hdr and data concatenated (at most max_msg).
 * Returns the length, UCS_ERR_NO_RESOURCE (window full: retry from
 * progress), or an error. Not held back by the user's pending requests. */
ssize_t aptus_ud_chan_send_internal(aptus_ud_chan_t *chan,
                                    aptus_ud_peer_t *peer, uint8_t id,
                                    const void *hdr, size_t hdr_len,
                                    const void *data, size_t data_len);

/* Find the stream a new endpoint should use to (addr, remote_key): the
 * lowest stream that has no endpoint yet, created if needed. */
ucs_status_t aptus_ud_chan_peer_connect(aptus_ud_chan_t *chan,
                                        const aptus_wire_addr_t *addr,
                                        uint64_t remote_key, size_t remote_mtu,
                                        aptus_ud_peer_t **peer_p);

/* The datagram size class of peer, and its size in bytes. */
static inline const aptus_ud_dg_class_t *
aptus_ud_peer_class(const aptus_ud_chan_t *chan, const aptus_ud_peer_t *peer)
{
    return &chan->dg_class[peer->flags >> APTUS_UD_PEER_CLASS_SHIFT];
}

static inline size_t aptus_ud_peer_mtu(const aptus_ud_chan_t *chan,
                                       const aptus_ud_peer_t *peer)
{
    return aptus_ud_peer_class(chan, peer)->mtu;
}

/* The endpoint is gone; data already accepted is still delivered. */
void aptus_ud_chan_peer_disconnect(aptus_ud_chan_t *chan,
                                   aptus_ud_peer_t *peer);

/* UCS_OK / length: accepted. UCS_INPROGRESS: zcopy accepted, comp later.
 * UCS_ERR_NO_RESOURCE: window full or pending requests queued. */
ssize_t aptus_ud_chan_send(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                           const aptus_chan_send_t *send);

/* Receive, deliver, acknowledge, retransmit. is_async: called from the
 * async timer (sync-only handlers are deferred). Returns events handled. */
unsigned aptus_ud_chan_progress(aptus_ud_chan_t *chan, int is_async);

ucs_status_t aptus_ud_chan_pending_add(aptus_ud_chan_t *chan,
                                       aptus_ud_peer_t *peer,
                                       uct_pending_req_t *req, unsigned flags);

void aptus_ud_chan_pending_purge(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                 uct_pending_purge_callback_t cb, void *arg);

/* Make sure a silent peer is noticed: send a reliable no-op, unless data
 * is outstanding anyway (uct_ep_check, UCP's keepalive). */
ucs_status_t aptus_ud_chan_check(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer);

/* Fail the stream now, as if the peer had stopped answering
 * (uct_ep_invalidate): outstanding sends and flushes complete with an
 * error and the failure is reported through ops->peer_failed. */
void aptus_ud_chan_peer_invalidate(aptus_ud_chan_t *chan,
                                   aptus_ud_peer_t *peer);

ucs_status_t aptus_ud_chan_flush(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                 unsigned flags, uct_completion_t *comp);

ucs_status_t aptus_ud_chan_flush_all(aptus_ud_chan_t *chan, unsigned flags,
                                     uct_completion_t *comp);

/* Memory a peer costs, exactly: struct, pool element header, and its share
 * of the lookup table at the current size. */
size_t aptus_ud_chan_peer_bytes(const aptus_ud_chan_t *chan);

/* Bytes of send buffers (messages in flight and those kept for reuse) and
 * of receive buffers (datagrams, small-message copies, reassembly) the
 * channel has allocated: its pools keep what they grew to. */
void aptus_ud_chan_buf_bytes(const aptus_ud_chan_t *chan, size_t *tx_p,
                             size_t *rx_p);

/* Failed peers whose endpoint is gone are freed once nothing refers to
 * them; returns how many were freed. Runs from progress too. */
unsigned aptus_ud_chan_reclaim(aptus_ud_chan_t *chan);

/* Number of peers (streams) the channel holds. */
static inline unsigned aptus_ud_chan_num_peers(const aptus_ud_chan_t *chan)
{
    return kh_size(&chan->peers);
}

/* Nothing the peer was sent waits for an acknowledgement. */
/* What is in flight to all peers together is bounded too (TX_MAX_BYTES):
 * per-peer windows alone let a process with many peers park a window's
 * bytes for each of them in send buffers (63 peers x 4 MB at 64 ranks).
 * One message may pass the bound. Sends wait without a peer's window
 * being full, so pending requests stay scheduled and are tried again. */
static inline int aptus_ud_chan_tx_all_full(const aptus_ud_chan_t *chan)
{
    return ucs_unlikely(chan->tx_msg_bytes >= chan->config.tx_all_bytes);
}

static inline int aptus_ud_peer_tx_idle(const aptus_ud_peer_t *peer)
{
    return (peer->win == NULL) || aptus_rel_tx_is_idle(&peer->win->tx);
}

/* The PSN of the next datagram sent to the peer, and the first one not
 * acknowledged yet. */
static inline aptus_psn_t aptus_ud_peer_next_psn(const aptus_ud_peer_t *peer)
{
    return (peer->win == NULL) ? peer->parked.next_psn : peer->win->tx.next_psn;
}

static inline aptus_psn_t aptus_ud_peer_acked_psn(const aptus_ud_peer_t *peer)
{
    return (peer->win == NULL) ? peer->parked.next_psn
                               : peer->win->tx.acked_psn;
}

/* The smoothed round trip to the peer, usec (0: never measured). */
static inline uint32_t aptus_ud_peer_srtt_us(const aptus_ud_peer_t *peer)
{
    return (peer->win == NULL) ? aptus_rel_tx_parked_srtt_us(&peer->parked)
                               : peer->win->tx.srtt_us;
}

static inline int aptus_ud_peer_is_failed(const aptus_ud_peer_t *peer)
{
    return peer->flags & APTUS_UD_PEER_FAILED;
}

#ifdef __cplusplus
}
#endif

#endif
