/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the aptus UCT transport, the hybrid of Koop et al.,
 * "MVAPICH-Aptus: Scalable High-Performance Multi-Transport MPI over
 * InfiniBand", IPDPS 2008.
 *
 * Every peer is reached over UD (UD-SR eager, UD-ZCopy gets); the send rule
 * chain picks, per message, among the channels already allocated to the
 * peer; RC connections (RC-SR eager + RC-RDMA) go on demand to the peers
 * whose traffic earns them, under a per-process cap that both sides agree
 * to before a connection is used, and are demoted when they go idle.
 *
 * An endpoint is a UD stream: the UCT endpoint and the per-peer state of
 * aptus live in the stream's headroom, so a peer the process only hears
 * from has the same state. Every active message ends in an 8-byte trailer:
 * its sequence number, shared by all channels, and the sender's own
 * receive point (every message of the peer's before it is in). The
 * receiver delivers in sequence order, holding early arrivals (a copy)
 * until the gap is filled, and drops the copies it keeps of messages sent
 * over RC that the receive point confirms. A trailer, not a header, leaves
 * the user's headroom and alignment of received data exactly as the
 * channels give them.
 */
#ifndef UCT_APTUS_TL_H_
#define UCT_APTUS_TL_H_

#include "uct/base/aptus_iface.h"
#include "uct/base/aptus_md.h"
#include "uct/base/aptus_stats.h"
#include "uct/ud/ud_base.h"
#include "uct/rc/rc_params.h"
#include "channel/rc_rdma_chan.h"
#include "proto/chan_alloc.h"
#include "channel/rc_fp_chan.h"
#include "proto/send_rules.h"
#include "proto/xorder.h"
#include "proto/le.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/array.inl>
#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>

#define UCT_APTUS_TL_NAME          "aptus"
#define UCT_APTUS_TL_CONFIG_PREFIX "APTUS_"
#define UCT_APTUS_TRAILER_LEN      8
/* The UD stream's internal message id of the allocation protocol. */
#define UCT_APTUS_CTL_MSG_ID 2
#define UCT_APTUS_CTL_LEN    8

/* Allocation messages, over the peer's UD stream:
 *  0      1      2           4                     8
 *  +------+------+-----------+---------------------+
 *  | type | kind | rc credits| rc port             |
 *  +------+------+-----------+---------------------+
 * REQUEST and GRANT carry the credits the sender grants a connection and
 * its RC listening port (the wire's opaque 32-bit port, wire_dev.h: a
 * verbs QP number takes 24 bits), both little-endian, so either side can
 * connect without the other's interface address. */
typedef enum uct_aptus_ctl_type {
    UCT_APTUS_CTL_REQUEST = 1, /* the sender reserved a slot: do you? */
    UCT_APTUS_CTL_GRANT   = 2, /* yes: both hold a slot, the channel is on */
    UCT_APTUS_CTL_REFUSE  = 3, /* no room: stay on UD */
    UCT_APTUS_CTL_DEMOTE  = 4, /* the sender gave its slot back */
    UCT_APTUS_CTL_XACK    = 5, /* every message before this sequence number
                                  is in (body: uint32 at byte 4): copies
                                  kept for a resend may go */
    /* The fast path (aptus_tl_fp.c): */
    UCT_APTUS_CTL_FP_CREDIT = 6, /* bytes freed in the block named by the
                                    nonce at byte 2 (uint32 at byte 4) */
    UCT_APTUS_CTL_FP_DONE = 7,   /* the sender stopped writing into the block
                                    named at byte 2: drain it, it is free */
    UCT_APTUS_CTL_FP_BLOCK = 8   /* a block the peer may write into (its
                                    own layout, UCT_APTUS_FP_BLOCK_LEN) */
} uct_aptus_ctl_type_t;

/* FP_BLOCK: [type][0][nonce LE16][size LE32][address LE64][pid LE32]
 * [host LE64][token LE64: the wire's key of the block, verbs' rkey] */
#define UCT_APTUS_FP_BLOCK_LEN 36
/* A fast-path message is the RC-FP channel's header (fp_proto.h: the
 * piggybacked credits of the block the receiver writes into the sender),
 * the user's header and payload, the trailer. */

/* The sending side of a peer's fast path: the RC-FP channel's peer (the
 * peer's block), allocated when the peer gives one. */
typedef struct uct_aptus_tl_fp_tx {
    aptus_fp_peer_t peer;
    struct uct_aptus_tl_ep *ep;
    uint16_t nonce;       /* the peer's name of its block */
    uint8_t connected;    /* peer is the channel's */
    uint8_t waiting;      /* the grant waits for the RC connection's proof */
    aptus_fp_geom_t geom; /* the grant's */
    aptus_mem_key_t key;
} uct_aptus_tl_fp_tx_t;

typedef struct uct_aptus_tl_iface_config {
    uct_iface_config_t super;
    uct_ud_sr_params_t ud; /* the UD channels', as ud_sr's */
    uct_rc_params_t rc;    /* the RC channels', as rc_sr's, under RC_ */
    char *send_rules;
    unsigned max_rc;
    unsigned max_fp;
    unsigned fp_msgs;
    size_t fp_block_size;
    double alloc_window;
    unsigned rc_msgs;
    size_t rc_bytes;
    double request_timeout;
    double backoff;
    double idle;
    double hold;
    unsigned reorder_max;
} uct_aptus_tl_iface_config_t;

/* The iface address: both ports and the key that names the interface on
 * both channels (the wire's device address carries the IP). */
typedef struct uct_aptus_tl_iface_addr {
    uint8_t ud_port[4]; /* the wire's opaque ports (wire_dev.h), LE */
    uint8_t rc_port[4];
    uint64_t key;
    uint16_t rc_credits;
    uint16_t ud_mtu;  /* the largest datagram it takes */
    uint64_t host_id; /* whose memory its one-sided operations reach */
} UCS_S_PACKED uct_aptus_tl_iface_addr_t;

typedef struct uct_aptus_tl_ep uct_aptus_tl_ep_t;

/* Endpoints the interface visits from progress: a dynamic array. */
UCS_ARRAY_DECLARE_TYPE(uct_aptus_tl_ep_list, unsigned, uct_aptus_tl_ep_t *);
UCS_ARRAY_IMPL(uct_aptus_tl_ep_list, unsigned, uct_aptus_tl_ep_t *,
               static UCS_F_ALWAYS_INLINE);
typedef ucs_array_t(uct_aptus_tl_ep_list) uct_aptus_tl_ep_list_t;

/* Append ep; 0 when no memory is left (the caller copes, as for a list it
 * could not grow). */
static inline int uct_aptus_tl_ep_list_add(uct_aptus_tl_ep_list_t *list,
                                           uct_aptus_tl_ep_t *ep)
{
    if (ucs_array_append(uct_aptus_tl_ep_list, list) != UCS_OK) {
        return 0;
    }
    *ucs_array_last(list) = ep;
    return 1;
}

/* Remove the entry at index (the last one takes its place). */
static inline void uct_aptus_tl_ep_list_remove(uct_aptus_tl_ep_list_t *list,
                                               unsigned index)
{
    ucs_array_elem(list, index) = *ucs_array_last(list);
    ucs_array_set_length(list, ucs_array_length(list) - 1);
}

/* Remove ep, if it is there. */
static inline void uct_aptus_tl_ep_list_del(uct_aptus_tl_ep_list_t *list,
                                            uct_aptus_tl_ep_t *ep)
{
    unsigned i;

    for (i = 0; i < ucs_array_length(list); ++i) {
        if (ucs_array_elem(list, i) == ep) {
            uct_aptus_tl_ep_list_remove(list, i);
            return;
        }
    }
}

/* A peer's RC connection, while it holds an RC slot. */
typedef struct uct_aptus_tl_rc {
    aptus_rc_link_t link;
    uct_aptus_tl_ep_t *ep;
    int connected; /* link is ours (connected, or the peer's shared) */
} uct_aptus_tl_rc_t;

enum {
    UCT_APTUS_EP_USER     = 1u << 1, /* handed out as a UCT endpoint */
    UCT_APTUS_EP_IN_MAP   = 1u << 2, /* its (key, stream) is in rc_peers */
    UCT_APTUS_EP_CTL_LIST = 1u << 3, /* on the iface's owed-control list */
    UCT_APTUS_EP_XACK     = 1u << 4, /* on the iface's XACK list */
    UCT_APTUS_EP_RESEND   = 1u << 5, /* on the iface's resend list */
    UCT_APTUS_EP_FENCED   = 1u << 6, /* later operations wait for the
                                        writes over UD issued before */
    UCT_APTUS_EP_REMOTE = 1u << 7    /* the wire cannot reach its memory
                                        (another host): no fast path */
};

/* A message sent over RC, kept until the peer says it is in: if the
 * connection breaks first, it goes again over UD (the receiver drops what
 * it had already, by its sequence number). */
typedef struct uct_aptus_tl_copy {
    ucs_queue_elem_t queue;
    uint32_t seq;
    uint32_t length; /* trailer included */
    uint8_t am_id;
    uint8_t data[];
} uct_aptus_tl_copy_t;

/* Where the last refused send waited: pending requests queue there. */
enum {
    UCT_APTUS_BLOCKED_UD    = 0,
    UCT_APTUS_BLOCKED_RC    = 1,
    UCT_APTUS_BLOCKED_FLUSH = 2 /* a flush was refused: its request waits
                                   whatever the windows say */
};

/* What a peer with traffic holds besides its sequence numbers: allocated on
 * first use (uct_aptus_tl_ep_init_state) and freed again once the peer has
 * been idle for half the UD timeout with nothing in flight or queued
 * (uct_aptus_tl_ep_shrink_progress), so that thousands of peers that never
 * send, or no longer do, cost the endpoint below and nothing more. */
typedef struct uct_aptus_tl_active {
    uct_aptus_tl_ep_t *ep;
    ucs_list_link_t list;  /* iface->active_peers */
    uint64_t last_use_us;  /* the UD channel's clock at the last message */
    uct_aptus_tl_rc_t *rc; /* NULL: no RC connection */
    aptus_xorder_rx_t xrx; /* its next is the endpoint's rx_next meanwhile */
    aptus_alloc_peer_t alloc;
    /* Control messages not sent yet (the stream's window was full): the
     * allocation's, in the order they were made, one per kind, each
     * (type | kind << 4), 0 ending the list; and a bit (type - 1) per
     * fast-path message, built from the endpoint's state when sent. */
    uint8_t ctl_alloc[APTUS_ALLOC_KIND_LAST];
    uint8_t ctl_owed;
    uint16_t fp_done_nonce;      /* FP_DONE owed for this block */
    uint32_t rc_rx_unacked;      /* received over RC since the last XACK */
    uint32_t rc_rx_since_ms;     /* ... the first of them, clock in ms */
    uct_aptus_tl_fp_tx_t *fp_tx; /* NULL: no block of the peer's */
    aptus_fp_block_t *fp_rx;     /* NULL: no block of ours */
    uint64_t tx_msgs[APTUS_CHAN_LAST]; /* statistics per channel, while
                                          active (the interface's add up) */
    uint64_t tx_bytes[APTUS_CHAN_LAST];
    ucs_arbiter_group_t pending; /* requests waiting for any channel */
    ucs_queue_head_t rc_unacked; /* sent over RC, not confirmed yet */
    ucs_queue_head_t resend;     /* to send again over UD, first */
} uct_aptus_tl_active_t;

/* Per-peer state in front of the UD stream (the stream's headroom): all
 * that a peer without traffic costs beside the stream. */
struct uct_aptus_tl_ep {
    uct_base_ep_t super;
    uct_aptus_tl_active_t *act; /* NULL: idle, nothing allocated */
    aptus_xorder_tx_t xtx;
    uint32_t rx_next; /* the receive point while idle (act->xrx.next else) */
    uint32_t rc_port; /* the peer's, learned from its interface address or
                         its allocation messages (wire_dev.h: opaque) */
    uint16_t rc_credits;
    uint8_t flags;
    uint8_t blocked;
    aptus_ud_peer_t peer;
};

/* A message's trailer: its sequence number, then the receive point. */
static inline void uct_aptus_tl_trailer_pack(void *trailer,
                                             const uct_aptus_tl_ep_t *ep)
{
    uint8_t *p = (uint8_t *)trailer;

    aptus_put32(p, ep->xtx.next);
    aptus_put32(p + 4, ep->act->xrx.next);
}

static inline uct_aptus_tl_ep_t *uct_aptus_tl_ep_of_peer(aptus_ud_peer_t *peer)
{
    return ucs_container_of(peer, uct_aptus_tl_ep_t, peer);
}

/* RC peers by (remote key, stream): where a message on a connection the
 * peer opened, and no endpoint of ours took yet, belongs. */
KHASH_MAP_INIT_INT64(uct_aptus_rc_peers, uct_aptus_tl_ep_t *)

/* The map's key for (remote interface key, stream): streams of one
 * interface never collide (an odd multiplier is a bijection); pairs of two
 * random keys could, so a lookup checks the endpoint it finds. */
static inline uint64_t uct_aptus_tl_rc_map_key_of(uint64_t key, uint16_t stream)
{
    return key ^ ((uint64_t)stream * 0x9e3779b97f4a7c15ull);
}

/* Message size classes of the statistics: up to 64 B, then powers of 4
 * up to 1 MB, then larger. */
#define UCT_APTUS_SIZE_CLASSES 9

static inline unsigned uct_aptus_size_class(size_t size)
{
    unsigned c = 0;
    size_t limit;

    for (limit = 64; (size > limit) && (c < UCT_APTUS_SIZE_CLASSES - 1);
         limit *= 4) {
        ++c;
    }
    return c;
}

typedef struct uct_aptus_tl_stats {
    uint64_t tx_msgs[APTUS_CHAN_LAST];
    uint64_t tx_bytes[APTUS_CHAN_LAST];
    /* messages per channel by size class: the paper's channel usage by
     * message size */
    uint64_t tx_by_size[APTUS_CHAN_LAST][UCT_APTUS_SIZE_CLASSES];
    uint64_t rx_in_order;
    uint64_t rx_held; /* arrived early: copied and held */
    uint64_t rx_held_bytes;
    uint64_t rx_duplicates;
    uint64_t rx_reorder_full;
    uint64_t rx_malformed;
    uint64_t rx_unknown_link;
    uint64_t ctl_sent;
    uint64_t ctl_received;
    uint64_t ctl_deferred;
    uint64_t rc_connects;
    uint64_t rc_closed;
    uint64_t rc_failed;
    uint64_t rc_fallbacks; /* broken connections whose messages went on
                              over UD */
    uint64_t resent;       /* messages sent again over UD */
    uint64_t xacks_sent;
    uint64_t xacks_spared;   /* XACKs owed that a trailer carried instead */
    uint64_t fp_credit_msgs; /* explicit FP_CREDIT messages sent */
    uint64_t fp_refused_no_block; /* granted slot, no free block */
    uint64_t fp_blocks_orphaned;
    uint64_t ud_polls_shared; /* datagram socket reads the RC check spared */
    uint64_t kept_now;        /* copies kept for a resend */
    uint64_t kept_bytes;
    uint64_t peers_activated; /* active states allocated */
    uint64_t peers_shrunk;    /* ... freed again for idleness */
    unsigned max_held;        /* most messages held for one peer */
} uct_aptus_tl_stats_t;

/* am_zcopy over UD: the trailer must live as long as the datagrams that
 * may be sent again, so it travels with a completion of our own. */
typedef struct uct_aptus_tl_zcomp {
    uct_completion_t comp;
    uct_completion_t *user;
    uint8_t trailer[UCT_APTUS_TRAILER_LEN];
} uct_aptus_tl_zcomp_t;

typedef struct uct_aptus_tl_iface {
    uct_base_iface_t super;
    uct_ud_base_t ud; /* the datagram wire, UD-SR and UD-ZCopy */
    aptus_rc_chan_t rc;
    aptus_rc_rdma_chan_t rdma;
    aptus_conn_wire_t *conn;
    char dev_name[UCT_DEVICE_NAME_MAX];
    aptus_rule_chain_t rules;
    aptus_alloc_t alloc;
    int rma; /* RC-RDMA used where a peer has RC */
    unsigned reorder_max;
    size_t max_short; /* am_short: UCT header and payload */
    void *bounce;     /* am_bcopy packs here when the size picks */
    ucs_arbiter_t pending;
    uct_aptus_tl_ep_t *dispatching; /* its pending requests may send */
    size_t rx_headroom;             /* the user's */
    size_t am_align;
    size_t am_align_offset;
    khash_t(uct_aptus_rc_peers) rc_peers;
    uct_aptus_tl_ep_list_t ctl_list;    /* peers owing control messages */
    uct_aptus_tl_ep_list_t xack_list;   /* peers owing an XACK */
    uct_aptus_tl_ep_list_t resend_list; /* peers with messages to resend */
    uct_aptus_tl_ep_list_t rc_list;     /* peers holding RC (idle checks) */
    uint64_t next_check_us;
    ucs_mpool_t zcomp_mp; /* am_zcopy over UD: trailer + completion */
    ucs_mpool_t keep_mp;  /* copies kept for a resend, one RC message
                             each: pages are touched as far as a copy
                             goes, and a malloc and free per message over
                             RC cost more than the copy */
    uct_recv_desc_t held_release;
    double bandwidth;    /* of the get: RC-RDMA or UD-ZCopy */
    aptus_fp_chan_t fpc; /* RC-FP: blocks of MAX_FP, UD carries control */
    uint16_t fp_next_nonce;
    unsigned rc_idle_tick; /* progress calls since the connections' poll */
    ucs_list_link_t active_peers; /* uct_aptus_tl_active_t of peers with
                                     traffic */
    unsigned num_active;          /* ... how many */
    uint64_t shrink_us;           /* idle this long, a peer's state goes */
    uint64_t next_shrink_us;
    int ud_watched; /* the connections' readiness check covers UD's socket */
    int ud_ready;   /* ... and found input there */
    uct_aptus_tl_stats_t stats;
} uct_aptus_tl_iface_t;

extern ucs_config_field_t uct_aptus_tl_iface_config_table[];

/* Set up a peer's active state on first use (inline: every message
 * asks); 0 when there is no memory for it. */
int uct_aptus_tl_ep_init_state_slow(uct_aptus_tl_iface_t *iface,
                                    uct_aptus_tl_ep_t *ep);

static inline int uct_aptus_tl_ep_init_state(uct_aptus_tl_iface_t *iface,
                                             uct_aptus_tl_ep_t *ep)
{
    if (ucs_unlikely(ep->act == NULL)) {
        return uct_aptus_tl_ep_init_state_slow(iface, ep);
    }
    ep->act->last_use_us = iface->ud.chan.now_us;
    return 1;
}

/* Free the active state of peers idle for shrink_us with nothing in
 * flight, queued or allocated (from progress, a few times per period). */
unsigned uct_aptus_tl_ep_shrink_progress(uct_aptus_tl_iface_t *iface,
                                         uint64_t now_us);
/* Free the peer's active state whatever it holds (the peer goes). */
void uct_aptus_tl_ep_free_state(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep);
/* Bytes the peers' active states hold now. */
size_t uct_aptus_tl_active_bytes(const uct_aptus_tl_iface_t *iface);

/* Which of the peer's channels may carry a message now (a mask of
 * APTUS_RULE_BIT). */
unsigned uct_aptus_tl_ep_allocated(uct_aptus_tl_iface_t *iface,
                                   uct_aptus_tl_ep_t *ep);

/* The peer's RC link, connected (or taken over) if not yet; NULL when it
 * cannot be used. */
aptus_rc_link_t *uct_aptus_tl_ep_rc_link(uct_aptus_tl_iface_t *iface,
                                         uct_aptus_tl_ep_t *ep);

/* A message of size bytes went to the peer over chan: count it, and ask
 * for a channel when the traffic earns one. */
void uct_aptus_tl_ep_sent(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                          aptus_chan_type_t chan, size_t size);

/* Close the peer's RC connection (what was sent on it is still
 * delivered). */
void uct_aptus_tl_ep_rc_close(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep);

void uct_aptus_tl_iface_queue_failure(uct_aptus_tl_iface_t *iface,
                                      aptus_ud_peer_t *peer,
                                      ucs_status_t status);
void uct_aptus_tl_iface_forget_failure(uct_aptus_tl_iface_t *iface,
                                       aptus_ud_peer_t *peer);

/* Receive side (aptus_tl_rx.c): a message of either channel, trailer
 * included; flags are UCT's (UCT_CB_PARAM_FLAG_DESC when it may be kept). */
ucs_status_t uct_aptus_tl_rx(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                             uint8_t am_id, void *data, size_t length,
                             unsigned flags);
/* Messages still held for a peer that goes away are dropped. */
void uct_aptus_tl_rx_drop_held(uct_aptus_tl_iface_t *iface,
                               uct_aptus_tl_ep_t *ep);
void uct_aptus_tl_held_release(uct_recv_desc_t *self, void *desc);

/* Keeping RC messages until confirmed, and sending them again over UD when
 * their connection breaks (aptus_tl_resend.c). */
void uct_aptus_tl_rc_keep(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                          const aptus_chan_send_t *send, uint32_t seq);
void uct_aptus_tl_rc_received(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep);
void uct_aptus_tl_xack_recv(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                            uint32_t next);
void uct_aptus_tl_rc_fallback(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep);
unsigned uct_aptus_tl_resend_progress(uct_aptus_tl_iface_t *iface);
void uct_aptus_tl_resend_forget(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep);

/* Control messages, the hub (aptus_tl_ctl.c): send one (owed and sent
 * from progress when the stream's window is full), and receive one. */
void uct_aptus_tl_ctl_send(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                           uct_aptus_ctl_type_t type, aptus_alloc_kind_t kind);
unsigned uct_aptus_tl_ctl_progress(uct_aptus_tl_iface_t *iface);

static inline int uct_aptus_tl_ctl_owes(const uct_aptus_tl_active_t *act)
{
    return (act->ctl_alloc[0] != 0) || (act->ctl_owed != 0);
}

ucs_status_t uct_aptus_tl_ctl_recv(uct_aptus_tl_iface_t *iface,
                                   uct_aptus_tl_ep_t *ep, const void *data,
                                   size_t length);

/* Allocation protocol (aptus_tl_alloc.c). */
void uct_aptus_tl_alloc_recv(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                             const uint8_t *msg, size_t length);
unsigned uct_aptus_tl_alloc_progress(uct_aptus_tl_iface_t *iface,
                                     uint64_t now_us);
void uct_aptus_tl_alloc_forget(uct_aptus_tl_iface_t *iface,
                               uct_aptus_tl_ep_t *ep);

/* The fast path (aptus_tl_fp.c): blocks under MAX_FP, Veloblock rings. */
ucs_status_t uct_aptus_tl_fp_init(uct_aptus_tl_iface_t *iface,
                                  const uct_aptus_tl_iface_config_t *config);
void uct_aptus_tl_fp_cleanup(uct_aptus_tl_iface_t *iface);
/* Give the peer a block of ours and tell it (FP_BLOCK); 0: none free. */
int uct_aptus_tl_fp_open(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep);
/* The FP slot went (demoted, refused, released): stop writing into the
 * peer's block and tell it (FP_DONE). */
void uct_aptus_tl_fp_sync(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep);
/* Attach to the peer's block once the RC connection's peer is proven (a
 * grant that comes first waits in fp_tx->waiting). */
void uct_aptus_tl_fp_attach(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep);

/* The wire cannot reach the peer's memory (its address names another
 * host, or the RC connection's proof failed): it never earns a fast path,
 * and its requests for one are refused. */
void uct_aptus_tl_ep_set_remote(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep);
void uct_aptus_tl_fp_forget(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep);
/* Control messages of the fast path (type 6 to 8). */
void uct_aptus_tl_fp_ctl_recv(uct_aptus_tl_iface_t *iface,
                              uct_aptus_tl_ep_t *ep, const uint8_t *msg,
                              size_t length);
/* Build the control message of type (FP_CREDIT, FP_DONE, FP_BLOCK) into
 * msg (UCT_APTUS_FP_BLOCK_LEN); returns its length, 0 when moot now. */
size_t uct_aptus_tl_fp_ctl_pack(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep, unsigned type,
                                uint8_t *msg);
/* An active message into the peer's block: UCS_OK, or
 * UCS_ERR_NO_RESOURCE (no room, or the block cannot be reached: another
 * channel takes it). */
ucs_status_t uct_aptus_tl_fp_send(uct_aptus_tl_iface_t *iface,
                                  uct_aptus_tl_ep_t *ep, uint8_t id,
                                  const void *header, size_t header_length,
                                  const struct iovec *iov, unsigned iovcnt);
/* Poll the fast-path blocks; inline, since on most calls there is none. */
static inline unsigned uct_aptus_tl_fp_progress(uct_aptus_tl_iface_t *iface)
{
    if (ucs_likely((iface->fpc.num_active == 0) &&
                   ucs_arbiter_is_empty(&iface->fpc.pending))) {
        return 0;
    }
    return aptus_fp_chan_progress(&iface->fpc);
}

/* An FP_CREDIT went: the credits it carried are the peer's. */
void uct_aptus_tl_fp_credits_sent(uct_aptus_tl_iface_t *iface,
                                  uct_aptus_tl_ep_t *ep);

static inline int uct_aptus_tl_fp_usable(const uct_aptus_tl_ep_t *ep)
{
    return (ep->act->fp_tx != NULL) && ep->act->fp_tx->peer.attached &&
           (ep->act->alloc.slot[APTUS_ALLOC_FP].state == APTUS_ALLOC_GRANTED);
}

/* Endpoint operations (aptus_tl_ep.c). */
ucs_status_t uct_aptus_tl_ep_create(const uct_ep_params_t *params,
                                    uct_ep_h *ep_p);
void uct_aptus_tl_ep_destroy(uct_ep_h tl_ep);
ucs_status_t uct_aptus_tl_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                      uint64_t header, const void *payload,
                                      unsigned length);
ssize_t uct_aptus_tl_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                                 uct_pack_callback_t pack_cb, void *arg,
                                 unsigned flags);
ucs_status_t uct_aptus_tl_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                      const void *header,
                                      unsigned header_length,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      unsigned flags, uct_completion_t *comp);
ucs_status_t uct_aptus_tl_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                       unsigned length, uint64_t remote_addr,
                                       uct_rkey_t rkey);
ssize_t uct_aptus_tl_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                                  void *arg, uint64_t remote_addr,
                                  uct_rkey_t rkey);
ucs_status_t uct_aptus_tl_ep_get_bcopy(uct_ep_h tl_ep,
                                       uct_unpack_callback_t unpack_cb,
                                       void *arg, size_t length,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp);
ucs_status_t uct_aptus_tl_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_aptus_tl_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                       size_t iovcnt, uint64_t remote_addr,
                                       uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_aptus_tl_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                         unsigned flags);
void uct_aptus_tl_ep_pending_purge(uct_ep_h tl_ep,
                                   uct_pending_purge_callback_t cb, void *arg);
ucs_status_t uct_aptus_tl_ep_flush(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp);
ucs_status_t uct_aptus_tl_ep_fence(uct_ep_h tl_ep, unsigned flags);
ucs_status_t uct_aptus_tl_ep_check(uct_ep_h tl_ep, unsigned flags,
                                   uct_completion_t *comp);
ucs_status_t uct_aptus_tl_ep_invalidate(uct_ep_h tl_ep, unsigned flags);

/* Endpoint operations (aptus_tl_ep.c, aptus_tl_rma.c). */
#define UCT_APTUS_ENTER(_iface) UCS_ASYNC_BLOCK((_iface)->super.worker->async)
#define UCT_APTUS_LEAVE(_iface) UCS_ASYNC_UNBLOCK((_iface)->super.worker->async)

static inline uct_aptus_tl_iface_t *uct_aptus_tl_ep_iface(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep->iface, uct_aptus_tl_iface_t);
}

static inline uct_aptus_tl_ep_t *uct_aptus_tl_ep(uct_ep_h tl_ep)
{
    return ucs_derived_of(tl_ep, uct_aptus_tl_ep_t);
}

/* The channel the rule chain picks for a message of size to ep, among
 * those the peer has now but the ones in but. */
static inline aptus_chan_type_t
uct_aptus_tl_select_but(uct_aptus_tl_iface_t *iface, uct_aptus_tl_ep_t *ep,
                        unsigned kind, size_t size, unsigned but)
{
    aptus_chan_type_t chan;
    unsigned rule;

    /* the rule channels are numbered as the channel interface's */
    chan = (aptus_chan_type_t)aptus_rule_chain_select(
        &iface->rules, kind, size, aptus_ud_chan_num_peers(&iface->ud.chan),
        uct_aptus_tl_ep_allocated(iface, ep) & ~but, &rule);
    if (ucs_unlikely(chan == APTUS_CHAN_RC_FP) &&
        (ep->flags & UCT_APTUS_EP_REMOTE)) {
        chan = APTUS_CHAN_RC_SR; /* the fast path's rules, over RC-SR */
    }
    if ((chan == APTUS_CHAN_RC_SR) &&
        (size + UCT_APTUS_TRAILER_LEN > iface->rc.config.max_msg)) {
        /* a rule allows more than an RC message holds (RC_SEG_SIZE) */
        return APTUS_CHAN_UD_SR;
    }
    return chan;
}

static inline aptus_chan_type_t uct_aptus_tl_select(uct_aptus_tl_iface_t *iface,
                                                    uct_aptus_tl_ep_t *ep,
                                                    unsigned kind, size_t size)
{
    return uct_aptus_tl_select_but(iface, ep, kind, size, 0);
}

/* A fence is in force until the writes over UD before it are in place at
 * the peer (those over RC are in place when they return). */
int uct_aptus_tl_ep_fence_holds(uct_aptus_tl_iface_t *iface,
                                uct_aptus_tl_ep_t *ep);

/* Statistics (aptus_tl_stats.c): the interface's, as printed (returns
 * the number of entries); the lines by size and by peer, printed to dest. */
unsigned uct_aptus_tl_iface_stats(uct_aptus_tl_iface_t *iface,
                                  uct_aptus_stat_t *stats, unsigned max);
void uct_aptus_tl_iface_print_sizes(uct_aptus_tl_iface_t *iface,
                                    const char *dest);
void uct_aptus_tl_iface_print_peers(uct_aptus_tl_iface_t *iface,
                                    const char *dest);

/* Settings (aptus_tl_config.c): checked before anything opens, then the
 * rule chain and the allocator made from them. */
ucs_status_t
uct_aptus_tl_iface_check_config(const aptus_wire_dev_ops_t *wdev,
                                const uct_aptus_tl_iface_config_t *config);
ucs_status_t
uct_aptus_tl_iface_rules(uct_aptus_tl_iface_t *iface,
                         const uct_aptus_tl_iface_config_t *config);
ucs_status_t
uct_aptus_tl_iface_alloc_init(uct_aptus_tl_iface_t *iface,
                              const uct_aptus_tl_iface_config_t *config);

#endif
