/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the rc_fp UCT transport: rc_sr plus the RDMA fast path of
 * M. J. Koop, A. P. Sampat, D. K. Panda, "Veloblock: Efficient and Scalable
 * RDMA Fast Path for InfiniBand".
 *
 * After UCX_RC_FP_THRESH messages small enough for it, an endpoint asks
 * its peer for a fast-path channel: a block of the peer's memory (32 KB by
 * default) that this side writes each message into with one one-sided
 * write (process_vm_writev on the sock wire: same host only), and that the
 * peer polls one byte of. A process gives at most UCX_RC_FP_MAX_CHANNELS
 * blocks and sends into at most as many; a refused endpoint stays on
 * RC-SR. Messages too large for the block, or without credit, go over
 * RC-SR; both paths carry counts of the other (fp_proto.h), so that the
 * receiver delivers them in the order they were sent.
 *
 * Why the flag written last is seen last: one copy does not make its
 * bytes visible in address order (the kernel copies process_vm_writev
 * data with rep movs, whose "fast string" stores may appear out of order
 * on x86; weaker CPUs reorder any stores). So the byte the receiver polls
 * is written as a piece of its own after the rest of the message, in the
 * same call (aptus_fp_write_pieces, the wire's write_ordered): Veloblock's
 * flag after [zero, payload, length]; the fixed slot's head after
 * [length, payload] and the tail. Pieces are separate copies in the
 * kernel, and x86 keeps the stores of one instruction before those of a
 * later one (TSO); elsewhere each piece is its own call with a full fence
 * between. The reader loads the polled byte with acquire ordering
 * (aptus_fp_rx_poll), so its loads of the message are not hoisted above
 * it. test_fp_vm_write hammers this across two processes.
 */
#ifndef UCT_RC_FP_H_
#define UCT_RC_FP_H_

#include "rc_sr_iface.h"
#include "rc_sr_ep.h"
#include "channel/rc_fp_chan.h"

#define UCT_RC_FP_TL_NAME       "rc_fp"
#define UCT_RC_FP_CONFIG_PREFIX "RC_FP_"

typedef struct uct_rc_fp_iface_config {
    uct_rc_sr_iface_config_t super;
    unsigned max_channels;
    unsigned thresh;
    int mode;
    size_t block_size;
    unsigned slots;
    size_t slot_size;
    size_t max_msg;
    unsigned wire_poll;
} uct_rc_fp_iface_config_t;

enum {
    UCT_RC_FP_TX_NONE,      /* not asked yet */
    UCT_RC_FP_TX_REQUESTED, /* REQUEST sent */
    UCT_RC_FP_TX_ON,        /* granted: messages go into the block */
    UCT_RC_FP_TX_OFF        /* refused, unreachable or failed: RC-SR only */
};

/* The sending side of an endpoint's fast path: its control state; the
 * data path is the RC-FP channel's peer (the channel counts the RC-SR
 * messages sent on its account, and those written into the block). */
typedef struct uct_rc_fp_tx {
    uint8_t state;
    uint16_t nonce;    /* this side's name of the channel (0: none) */
    uint32_t eligible; /* messages small enough, before asking */
    uint32_t rc_early; /* RC-SR messages sent after asking, before the
                          grant: the channel counts from there */
    uint32_t slot;     /* in the interface's table of requesters */
    aptus_fp_peer_t peer;
} uct_rc_fp_tx_t;

typedef struct uct_rc_fp_ep {
    uct_rc_sr_ep_t super;
    uct_rc_fp_tx_t fp;
} uct_rc_fp_ep_t;

/* The receiving side of one channel: a block this process gave a peer
 * (the channel's block, owned by this record). */
typedef struct uct_rc_fp_rx {
    aptus_fp_block_t *block;
    uint64_t peer_key; /* the sender's interface */
    uint16_t nonce;    /* the sender's name of the channel */
    uint8_t credit_owed;
    uint8_t grant_owed; /* the answer found no room yet: from progress */
    uint8_t released;   /* the sender is done after fp_total messages */
    uint32_t fp_total;
} uct_rc_fp_rx_t;

/* Control-plane counters; the data path's are the channel's. */
typedef struct uct_rc_fp_stats {
    uint64_t eligible; /* messages small enough for it */
    uint64_t requests, granted, refused, unreachable, released;
    uint64_t credit_msgs_sent, credit_msgs_received;
    uint64_t ctl_malformed, ctl_unknown;
    uint64_t rx_peak, tx_peak;
} uct_rc_fp_stats_t;

typedef struct uct_rc_fp_iface {
    uct_rc_sr_iface_t super;
    aptus_fp_chan_t fpc; /* the RC-FP channel; RC-SR is its carrier */
    unsigned max_channels;
    unsigned thresh;
    uint32_t max_msg;   /* fast-path payload, UCT header included */
    unsigned wire_poll; /* with blocks to poll: the connections every Nth */
    unsigned wire_tick;
    uint64_t host_id;
    uint16_t next_nonce;
    uct_rc_fp_rx_t **rx; /* channels this process gives, num_rx in use */
    unsigned num_rx;
    uct_rc_fp_ep_t **tx; /* endpoints that asked for or have a channel */
    unsigned num_tx;
    struct {
        uint64_t peer_key;
        uint16_t nonce;
    } * refusals; /* refusals that found no room yet (max_channels) */
    unsigned num_refusals;
    struct {
        uint64_t peer_key;
        uint16_t nonce;
        uint32_t fp_total;
    } * releases; /* RELEASEs of endpoints gone before they could go */
    unsigned num_releases;
    int answers_owed;
    uct_rc_fp_stats_t stats;
} uct_rc_fp_iface_t;

extern ucs_config_field_t uct_rc_fp_iface_config_table[];

/* Statistics (including rc_sr's), as printed. */
unsigned uct_rc_fp_iface_stats(uct_rc_fp_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max);

ucs_status_t uct_rc_fp_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
void uct_rc_fp_ep_destroy(uct_ep_h tl_ep);
ucs_status_t uct_rc_fp_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                   const void *payload, unsigned length);
ssize_t uct_rc_fp_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                              uct_pack_callback_t pack_cb, void *arg,
                              unsigned flags);
ucs_status_t uct_rc_fp_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                   const void *header, unsigned header_length,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp);

/* Free the receiving channel at index i (its sender is done or gone). */
void uct_rc_fp_rx_free(uct_rc_fp_iface_t *iface, unsigned i);

/* The block peer_key writes into this process, if it has one with credits
 * to return (the first found): they ride on a message going back. */
aptus_fp_block_t *uct_rc_fp_back_block(uct_rc_fp_iface_t *iface,
                                       uint64_t peer_key);

/* The endpoint's connection failed: so did its fast path (rc_sr's
 * link_failed hook). */
void uct_rc_fp_link_failed(uct_rc_sr_iface_t *iface, aptus_rc_link_t *link,
                           ucs_status_t status);

/* The channel's upcall: a requester's block can no longer be written. */
void uct_rc_fp_peer_lost(void *arg, aptus_fp_peer_t *peer);

#endif
