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
#include "../proto/fp_proto.h"

#define UCT_RC_FP_TL_NAME "rc_fp"

typedef struct uct_rc_fp_iface_config {
    uct_rc_sr_iface_config_t super;
    unsigned max_channels;
    unsigned thresh;
    int mode;
    size_t block_size;
    unsigned slots;
    size_t slot_size;
    size_t max_msg;
} uct_rc_fp_iface_config_t;

enum {
    UCT_RC_FP_TX_NONE,      /* not asked yet */
    UCT_RC_FP_TX_REQUESTED, /* REQUEST sent */
    UCT_RC_FP_TX_ON,        /* granted: messages go into the block */
    UCT_RC_FP_TX_OFF        /* refused, unreachable or failed: RC-SR only */
};

/* The sending side of an endpoint's fast path. */
typedef struct uct_rc_fp_tx {
    uint8_t state;
    uint16_t nonce;      /* this side's name of the channel (0: none) */
    uint32_t eligible;   /* messages small enough, before asking */
    uint32_t rc_sent;    /* RC-SR messages sent since the REQUEST */
    uint32_t fp_sent;    /* messages written into the block */
    uint32_t slot;       /* in the interface's table of sending channels */
    aptus_fp_tx_t ring;
    aptus_mem_key_t key; /* the block, as the wire writes it */
    uint8_t *mirror;     /* fixed modes: the sender's copy of the slots */
} uct_rc_fp_tx_t;

typedef struct uct_rc_fp_ep {
    uct_rc_sr_ep_t super;
    uct_rc_fp_tx_t fp;
} uct_rc_fp_ep_t;

/* The receiving side of one channel: a block this process gave a peer. */
typedef struct uct_rc_fp_rx {
    uint32_t peer_key; /* the sender's interface */
    uint16_t nonce;    /* the sender's name of the channel */
    uint8_t credit_owed;
    uint8_t grant_owed; /* the answer found no room yet: from progress */
    uint8_t failed;
    uint8_t released;  /* the sender is done after fp_total messages */
    uint32_t fp_total;
    uint32_t rc_delivered; /* RC-SR messages delivered on its account */
    uint32_t fp_delivered;
    aptus_fp_rx_t ring;
    uint8_t *mem;
} uct_rc_fp_rx_t;

typedef struct uct_rc_fp_stats {
    uint64_t tx_msgs, tx_bytes;   /* over the fast path */
    uint64_t eligible;            /* messages small enough for it */
    uint64_t no_credit;           /* ... that went over RC-SR for credit */
    uint64_t requests, granted, refused, unreachable, released;
    uint64_t rx_msgs, rx_bytes, rx_held_for_order, rx_corrupt;
    uint64_t credit_msgs_sent, credit_msgs_received, credits_returned;
    uint64_t credits_piggybacked, credits_piggyback_received;
    uint64_t ctl_malformed, ctl_unknown;
    uint64_t write_failures;
    uint64_t rx_peak, tx_peak;
    uint64_t polls, poll_channels; /* progress calls, channels they polled */
} uct_rc_fp_stats_t;

typedef struct uct_rc_fp_iface {
    uct_rc_sr_iface_t super;
    aptus_fp_geom_t geom;
    unsigned max_channels;
    unsigned thresh;
    uint32_t max_msg; /* fast-path payload, UCT header included */
    uint64_t host_id;
    uint16_t next_nonce;
    uint32_t credit_quarter;
    uct_rc_fp_rx_t **rx; /* channels this process gives, num_rx in use */
    unsigned num_rx;
    uct_rc_fp_ep_t **tx; /* endpoints sending over a fast path */
    unsigned num_tx;
    struct {
        uint32_t peer_key;
        uint16_t nonce;
    } *refusals; /* refusals that found no room yet (max_channels) */
    unsigned num_refusals;
    struct {
        uint32_t peer_key;
        uint16_t nonce;
        uint32_t fp_total;
    } *releases; /* RELEASEs of endpoints gone before they could go */
    unsigned num_releases;
    int answers_owed;
    uint8_t *scratch; /* Veloblock images are built here */
    int delivering;   /* an FP message is being handed to the user */
    uct_rc_fp_stats_t stats;
} uct_rc_fp_iface_t;

extern ucs_config_field_t uct_rc_fp_iface_config_table[];

/* rc_sr's receive path on an rc_fp interface: control, order, trailer. */
ucs_status_t uct_rc_fp_deliver_rc(uct_rc_sr_iface_t *iface,
                                  aptus_rc_link_t *link, uint8_t am_id,
                                  void *data, size_t length,
                                  aptus_conn_buf_t *buf, int at_start);

/* Poll every channel this process gives. */
unsigned uct_rc_fp_iface_poll(uct_rc_sr_iface_t *iface);

/* Statistics (including rc_sr's), as printed. */
unsigned uct_rc_fp_iface_stats(uct_rc_fp_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max);

ucs_status_t uct_rc_fp_ep_create(const uct_ep_params_t *params,
                                 uct_ep_h *ep_p);
void uct_rc_fp_ep_destroy(uct_ep_h tl_ep);
ucs_status_t uct_rc_fp_ep_am_short(uct_ep_h tl_ep, uint8_t id,
                                   uint64_t header, const void *payload,
                                   unsigned length);
ssize_t uct_rc_fp_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                              uct_pack_callback_t pack_cb, void *arg,
                              unsigned flags);
ucs_status_t uct_rc_fp_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id,
                                   const void *header, unsigned header_length,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   unsigned flags, uct_completion_t *comp);

/* Free the receiving channel at index i (its sender is done or gone). */
void uct_rc_fp_rx_free(uct_rc_fp_iface_t *iface, unsigned i);

/* The channel peer_key writes into this process, if it has one with
 * credits to return (the first found). */
uct_rc_fp_rx_t *uct_rc_fp_rx_of_peer(uct_rc_fp_iface_t *iface,
                                     uint32_t peer_key);

/* Credits that came with a message for the sending channel nonce to
 * peer_key. */
void uct_rc_fp_credit_in(uct_rc_fp_iface_t *iface, uint32_t peer_key,
                         uint16_t nonce, uint32_t credits);

#endif
