/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the receive ring of one RDMA fast-path channel, in the three
 * modes the Veloblock paper measures (M. J. Koop, A. P. Sampat, D. K. Panda,
 * "Veloblock: Efficient and Scalable RDMA Fast Path for InfiniBand"):
 *
 *  - VELOBLOCK: one block, variable-length messages filled from its end
 *    toward its start, byte credits, no sender-side buffer (veloblock.h).
 *  - ORIGINAL: the fixed top-fill design of MVAPICH and Open MPI: N slots
 *    of S bytes on the receiver, each message in a slot of its own from the
 *    slot's start, and a mirror of the N slots on the sender, where the
 *    message is built before it is written (32 x 8 KB on each side).
 *  - ORIGINAL_REDUCED: the same design held to Veloblock's memory: 32 KB
 *    for the channel, both sides counted (2 x 8 KB on each side).
 *
 * A fixed slot holding n payload bytes, written with one write from the
 * slot's start:
 *
 *      0        1 .. 2         3 .. n+2      n+3
 *   +------+--------------+-------------+------+
 *   | head | length (LE16)| payload (n) | tail |
 *   +------+--------------+-------------+------+
 *
 * The receiver polls the head of the next slot, reads the length, and
 * takes the message once the tail behind it is set too (the write stores
 * the tail last); it clears both when it releases the slot. A head or tail
 * that is not 1, or a length that does not fit the slot, is corruption.
 * Credits are slots.
 *
 * Free of UCX and of any wire: the caller moves the bytes and the credits.
 */
#ifndef APTUS_FP_RING_H_
#define APTUS_FP_RING_H_

#include "veloblock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aptus_fp_mode {
    APTUS_FP_VELOBLOCK,
    APTUS_FP_ORIGINAL,
    APTUS_FP_ORIGINAL_REDUCED,
    APTUS_FP_MODE_LAST
} aptus_fp_mode_t;

/* "veloblock", "original", "original_reduced" */
extern const char *const aptus_fp_mode_names[APTUS_FP_MODE_LAST];

#define APTUS_FP_FIXED_OVERHEAD 4 /* head, length, tail */
#define APTUS_FP_FLAG_SET       1

/* The memory of a channel. */
typedef struct aptus_fp_geom {
    aptus_fp_mode_t mode;
    uint32_t size;      /* receive bytes: the block, or slots x slot_size */
    uint32_t slots;     /* fixed modes */
    uint32_t slot_size; /* fixed modes */
} aptus_fp_geom_t;

/* The geometry of a mode: VELOBLOCK takes block_size; ORIGINAL takes
 * slots x slot_size; ORIGINAL_REDUCED fits slots of slot_size into
 * block_size for both sides together (at least one). Returns 0, or -1 with
 * a reason in *why when the numbers make no ring. */
int aptus_fp_geom_make(aptus_fp_mode_t mode, uint32_t block_size,
                       uint32_t slots, uint32_t slot_size,
                       aptus_fp_geom_t *geom, const char **why);

/* Bytes the receiver and the sender hold for one channel. */
static inline uint32_t aptus_fp_recv_bytes(const aptus_fp_geom_t *geom)
{
    return geom->size;
}

static inline uint32_t aptus_fp_send_bytes(const aptus_fp_geom_t *geom)
{
    return (geom->mode == APTUS_FP_VELOBLOCK) ? 0 : geom->size;
}

/* Payload bytes of the largest message. */
uint32_t aptus_fp_max_len(const aptus_fp_geom_t *geom);

/* Credits (bytes or slots) the channel starts with, and a quarter of them:
 * the receiver returns credits explicitly when that many piled up. */
uint32_t aptus_fp_credits_total(const aptus_fp_geom_t *geom);

typedef struct aptus_fp_tx {
    aptus_fp_geom_t geom;
    aptus_vb_tx_t vb; /* VELOBLOCK */
    uint32_t next;    /* fixed: slot of the next message */
    uint32_t credits; /* fixed: free slots */
    uint64_t msgs, no_room;
} aptus_fp_tx_t;

typedef struct aptus_fp_rx {
    aptus_fp_geom_t geom;
    aptus_vb_rx_t vb; /* VELOBLOCK */
    uint32_t next;    /* fixed: the slot polled */
    uint32_t freed;   /* fixed: slots not returned yet */
    uint64_t msgs, corrupt;
} aptus_fp_rx_t;

void aptus_fp_tx_init(aptus_fp_tx_t *tx, const aptus_fp_geom_t *geom);
void aptus_fp_rx_init(aptus_fp_rx_t *rx, const aptus_fp_geom_t *geom);

/*
 * Build a message from iov and say where it goes: *image_p, write->total
 * bytes, to offset write->offset of the receiver's memory. VELOBLOCK builds
 * it in scratch (aptus_vb_image_len of the largest message); the fixed
 * modes in the sender's mirror (aptus_fp_send_bytes). Status as
 * aptus_vb_tx_pack: WRAPPED (write the wrap record, call again), NO_ROOM,
 * TOO_BIG.
 */
aptus_vb_status_t aptus_fp_tx_pack(aptus_fp_tx_t *tx, const struct iovec *iov,
                                   unsigned iovcnt, uint8_t *scratch,
                                   uint8_t *mirror, const uint8_t **image_p,
                                   aptus_vb_write_t *write);

/*
 * The pieces of a write in the order the receiver must see them. One copy
 * need not make its bytes visible in address order (x86 "fast string"
 * stores may appear out of order within one rep movs, which the kernel
 * uses for process_vm_writev; weaker CPUs reorder any stores), so the byte
 * the receiver polls goes in a piece of its own, after the rest:
 *   VELOBLOCK: [zero, payload, length], then the flag (the last byte);
 *   fixed modes: [length, payload], then the tail, then the head (the
 *   first byte, which the receiver polls before it reads the length).
 * Offsets are from the image's start (and from write->offset in the
 * receiver's memory). Returns the number of pieces (1 to
 * APTUS_FP_MAX_PIECES).
 */
#define APTUS_FP_MAX_PIECES 3

typedef struct aptus_fp_piece {
    uint32_t offset;
    uint32_t length;
} aptus_fp_piece_t;

unsigned aptus_fp_write_pieces(const aptus_fp_geom_t *geom,
                               const aptus_vb_write_t *write,
                               aptus_fp_piece_t *pieces);

/* Credits the receiver returned; APTUS_VB_CORRUPT when more than used. */
aptus_vb_status_t aptus_fp_tx_credit(aptus_fp_tx_t *tx, uint32_t credits);

/* Whether a message of len payload bytes would be taken now (no wrap
 * counted: a wrap may still need room). */
int aptus_fp_tx_may_send(const aptus_fp_tx_t *tx, uint32_t len);

/* Poll: OK with the next message (consume it in place, then release),
 * EMPTY, or CORRUPT (fail the channel). */
aptus_vb_status_t aptus_fp_rx_poll(aptus_fp_rx_t *rx, uint8_t *mem,
                                   aptus_vb_msg_t *msg);
void aptus_fp_rx_release(aptus_fp_rx_t *rx, uint8_t *mem,
                         const aptus_vb_msg_t *msg);

/* Credits to return to the sender (and forget). */
uint32_t aptus_fp_rx_take_credits(aptus_fp_rx_t *rx);
uint32_t aptus_fp_rx_pending_credits(const aptus_fp_rx_t *rx);

#ifdef __cplusplus
}
#endif

#endif
