/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-FP channel: the RDMA-write fast path of M. J. Koop,
 * A. P. Sampat, D. K. Panda, "Veloblock: Efficient and Scalable RDMA Fast
 * Path for InfiniBand", behind the one channel interface (chan.h).
 *
 * A fast-path channel joins a sender and a receiver: a block of the
 * receiver's memory (aptus_fp_block_t, 32 KB by default) and the sender's
 * view of it (aptus_fp_peer_t: the ring's fill state, the key it writes
 * with). The sender writes each message with one ordered one-sided write
 * (the wire's write_ordered: on the sock wire process_vm_writev, same host
 * only); the receiver polls one byte of each block it gave (progress) and
 * hands the message over in place (the deliver upcall, which names the
 * block and so the peer). Freed space goes back as credits, piggybacked
 * on fast-path messages going the other way (the peer's back block), or
 * through the transport's own control message once a quarter piled up
 * (the credits_owed upcall).
 *
 * How a block is asked for, granted and given back is the transport's:
 * rc_fp does it over RC-SR (REQUEST/GRANT/RELEASE), aptus over its UD
 * stream under the channel allocator's caps. The channel owns the data
 * path: rings, writes, polling, credits, order with the carrier, memory.
 *
 * Order with the carrier channel: a message carries the number of
 * messages its sender had sent over the carrier (RC-SR) on this channel's
 * account before it (aptus_fp_peer_t.before, which the transport counts),
 * and the receiver holds it until it has delivered as many
 * (aptus_fp_chan_block_carried). A transport with its own order (aptus's
 * sequence numbers) never counts, and the word stays 0.
 *
 * Blocks are mapped on first use and kept until the channel is cleaned up,
 * never given back to the allocator while a peer might still write into
 * them: a block the transport closes is reused, a late write from a peer
 * that was not told lands in memory nobody polls.
 */
#ifndef APTUS_RC_FP_CHAN_H_
#define APTUS_RC_FP_CHAN_H_

#include "chan.h"
#include "proto/fp_proto.h"

#include <ucs/datastruct/arbiter.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    APTUS_FP_BLOCK_FREE,
    APTUS_FP_BLOCK_ACTIVE, /* a peer writes into it: polled */
    APTUS_FP_BLOCK_ORPHAN  /* its owner went while the peer may still
                              write: not polled, not reused */
};

/* A block of this process that one peer writes into. */
typedef struct aptus_fp_block {
    aptus_fp_rx_t ring;
    uint8_t *mem;      /* NULL until first used */
    void *memh;        /* the wire's registration while granted, or NULL */
    uint64_t token;    /* its key's token (the rkey on verbs) */
    void *owner;       /* the transport's object for the peer */
    uint64_t peer_key; /* the writer's interface */
    uint16_t nonce;    /* the name of this channel that credits carry */
    uint8_t state;
    uint8_t failed;
    uint32_t delivered; /* messages handed over */
    uint32_t carried;   /* carrier messages delivered on its account */
} aptus_fp_block_t;

/* The sending side of a channel: the peer's block, as this side fills it.
 * Embedded in the transport's endpoint. */
typedef struct aptus_fp_peer {
    aptus_fp_tx_t ring;
    aptus_mem_key_t key;         /* the block, as the wire writes it */
    uint8_t *mirror;             /* fixed-slot modes: the sender's copy */
    uint64_t peer_key;           /* the receiver's interface */
    uint16_t nonce;              /* the block's name, as credits carry it */
    uint8_t attached;            /* the block is known: messages may go */
    uint32_t before;             /* carrier messages sent on its account */
    uint32_t sent;               /* messages written into the block */
    uint32_t slot;               /* in the channel's table of senders */
    ucs_status_t status;         /* UCS_OK, or the peer failed */
    aptus_fp_block_t *back;      /* the block it writes back into: its credits
                                    ride along (NULL: none) */
    void *carrier_peer;          /* the carrier's peer: its health is ours */
    ucs_arbiter_group_t pending; /* requests waiting for credits */
} aptus_fp_peer_t;

typedef struct aptus_fp_chan_upcalls {
    /* A message from block's peer, in place until this returns. UCS_OK:
     * consumed; another status: the message breaks the transport's rules,
     * and the block fails. */
    ucs_status_t (*deliver)(void *arg, aptus_fp_block_t *block, uint8_t am_id,
                            void *data, size_t length);
    /* A quarter of block's credits piled up with nothing going back: the
     * transport sends them (aptus_fp_chan_block_take_credits). */
    void (*credits_owed)(void *arg, aptus_fp_block_t *block);
    /* The block is corrupt (a flag with an impossible length, order counts
     * that disagree, a message refused): a message may be lost, so the
     * peer is to fail. */
    void (*block_failed)(void *arg, aptus_fp_block_t *block, const char *why);
    /* The peer's block cannot be written any more (the write failed, it
     * returned credits it was not given): peer is detached already; the
     * transport tells the receiver and sends over its other channels. */
    void (*peer_lost)(void *arg, aptus_fp_peer_t *peer);
} aptus_fp_chan_upcalls_t;

typedef struct aptus_fp_chan_stats {
    uint64_t tx_msgs, tx_bytes;
    uint64_t no_credit; /* a send found no room */
    uint64_t write_failures;
    uint64_t credits_piggybacked; /* sent on messages */
    uint64_t credits_piggyback_received;
    uint64_t credits_explicit; /* taken for control messages */
    uint64_t credits_bad;      /* more than were used */
    uint64_t credits_unknown;  /* for a channel gone meanwhile */
    uint64_t rx_msgs, rx_bytes;
    uint64_t rx_held_for_order;
    uint64_t rx_corrupt;
    uint64_t polls, poll_blocks;
    uint64_t blocks_peak, senders_peak;
    uint64_t pending_dispatched;
} aptus_fp_chan_stats_t;

typedef struct aptus_fp_chan {
    aptus_chan_t super;
    aptus_conn_wire_t *wire; /* writes into peers' blocks */
    aptus_fp_geom_t geom;    /* of the blocks this process gives */
    uint32_t max_len;        /* payload of the largest message, header in */
    uint32_t credit_quarter;
    aptus_fp_block_t *blocks;
    unsigned max_blocks;
    unsigned num_active;       /* blocks ACTIVE */
    unsigned num_mapped;       /* blocks with memory */
    int numa_node;             /* blocks are mapped there (-1: anywhere) */
    aptus_fp_peer_t **senders; /* attached peers, num_senders of them */
    unsigned max_senders;
    unsigned num_senders;
    uint8_t *scratch; /* a Veloblock image is built here, then a bounce */
    size_t bounce_off, bounce_len;
    ucs_arbiter_t pending;
    aptus_fp_peer_t *dispatching; /* its pending requests are running */
    const aptus_fp_chan_upcalls_t *ops;
    void *arg;
    aptus_fp_chan_stats_t stats;
} aptus_fp_chan_t;

/* The channel interface's operations of RC-FP (chan.h): send into the
 * peer's block, flush (writes are in place when they return), pending
 * requests that wait for credits, and the carrier's health. */
extern const aptus_chan_ops_t aptus_fp_chan_iface_ops;

/* geom: the blocks this process gives (max_blocks of them); max_senders:
 * peers' blocks it may write into at once. carrier: the channel whose
 * peers carry the transport's control and the peer's health. */
ucs_status_t aptus_fp_chan_init(aptus_fp_chan_t *chan,
                                const aptus_fp_geom_t *geom,
                                unsigned max_blocks, unsigned max_senders,
                                aptus_conn_wire_t *wire, aptus_chan_t *carrier,
                                const aptus_fp_chan_upcalls_t *ops, void *arg);

/* Every block's registration with the wire given back: peers' writes into
 * them fail from now on (at the HCA on verbs). Before the wire closes;
 * cleanup does it too. */
void aptus_fp_chan_revoke(aptus_fp_chan_t *chan);

void aptus_fp_chan_cleanup(aptus_fp_chan_t *chan);

/* ---- the receiving side ---- */

/* A free block for peer_key, named nonce, owned by owner; NULL when all
 * max_blocks are taken (or memory ran out). Its memory is zeroed. */
aptus_fp_block_t *aptus_fp_chan_block_open(aptus_fp_chan_t *chan, void *owner,
                                           uint64_t peer_key, uint16_t nonce);

/* The block peer_key names nonce, in any state but FREE; or NULL. */
aptus_fp_block_t *aptus_fp_chan_block_find(aptus_fp_chan_t *chan,
                                           uint64_t peer_key, uint16_t nonce);

/* The block's owner went, and the peer may still write: keep it unused
 * until the transport closes it. */
void aptus_fp_chan_block_orphan(aptus_fp_chan_t *chan, aptus_fp_block_t *block);

/* The peer stopped writing (or is gone): the block is free again. */
void aptus_fp_chan_block_close(aptus_fp_chan_t *chan, aptus_fp_block_t *block);

/* Hand over the messages the block holds, up to target delivered in all
 * (UINT32_MAX: as many as are there and in order). Returns the count. A
 * target not reached, when the block is empty, fails it: the carrier said
 * those messages were written before its own. */
unsigned aptus_fp_chan_block_drain(aptus_fp_chan_t *chan,
                                   aptus_fp_block_t *block, uint32_t target);

/* A carrier message sent on the block's account was delivered (the next
 * fast-path messages may follow it). */
static inline void aptus_fp_chan_block_carried(aptus_fp_block_t *block)
{
    block->carried++;
}

/* Credits to send now in the transport's control message (and forget). */
uint32_t aptus_fp_chan_block_take_credits(aptus_fp_chan_t *chan,
                                          aptus_fp_block_t *block);

/* Where the writer finds the block. */
void aptus_fp_chan_block_key(const aptus_fp_chan_t *chan,
                             const aptus_fp_block_t *block,
                             aptus_mem_key_t *key);

/* ---- the sending side ---- */

/* The peer's block (aptus_chan_peer_connect's remote; the storage is the
 * caller's aptus_fp_peer_t): messages may go into it once connected. */
typedef struct aptus_fp_remote {
    uint64_t peer_key;           /* the receiver's interface */
    void *carrier_peer;          /* its peer on the carrier: its health */
    const aptus_fp_geom_t *geom; /* of the block */
    const aptus_mem_key_t *key;  /* where it is (the grant's word) */
    aptus_conn_t *conn;          /* a connection to the receiver: whose
                                    process the wire proved it is, which the
                                    key must name (NULL: none, unreachable) */
    uint16_t nonce;              /* its name, as credits carry it */
    uint32_t before;             /* carrier messages already sent on its
                                    account (named before it was given) */
} aptus_fp_remote_t;

void aptus_fp_peer_init(aptus_fp_peer_t *peer, uint64_t peer_key,
                        void *carrier_peer);

/* The peer's block is geom at key, named nonce: messages may go. The key
 * is checked against conn's proven peer (the wire's key_check).
 * UCS_ERR_UNREACHABLE: the wire cannot write there (another host, no
 * proof); UCS_ERR_NO_RESOURCE: conn's proof is on its way (ask again);
 * UCS_ERR_INVALID_ADDR: the key names another process than conn's
 * peer (counted in the wire's pid_refused); UCS_ERR_EXCEEDS_LIMIT:
 * max_senders are attached; UCS_ERR_NO_MEMORY. */
ucs_status_t aptus_fp_peer_attach(aptus_fp_chan_t *chan, aptus_fp_peer_t *peer,
                                  const aptus_fp_geom_t *geom,
                                  const aptus_mem_key_t *key,
                                  aptus_conn_t *conn, uint16_t nonce);

/* No more writes into the peer's block (pending requests are purged by
 * the transport first). */
void aptus_fp_peer_detach(aptus_fp_chan_t *chan, aptus_fp_peer_t *peer);

/* The peer failed (its carrier did): sends and flushes return status. */
void aptus_fp_peer_fail(aptus_fp_chan_t *chan, aptus_fp_peer_t *peer,
                        ucs_status_t status);

/* Credits peer_key returned for the block it names nonce. Returns 0, or
 * -1 when no attached peer has that block. */
int aptus_fp_chan_credit_in(aptus_fp_chan_t *chan, uint64_t peer_key,
                            uint16_t nonce, uint32_t credits);

/* A message of length payload bytes (header included) may be written now. */
static inline int aptus_fp_peer_may_send(const aptus_fp_peer_t *peer,
                                         uint32_t length)
{
    return peer->attached &&
           aptus_fp_tx_may_send(&peer->ring, APTUS_FP_MSG_HDR_LEN + length);
}

/* Poll every ACTIVE block, dispatch requests that found credits. */
unsigned aptus_fp_chan_progress(aptus_fp_chan_t *chan);

/* Bytes this process holds for the channel: blocks mapped, senders'
 * mirrors. */
uint64_t aptus_fp_chan_bytes(const aptus_fp_chan_t *chan);

#ifdef __cplusplus
}
#endif

#endif
