/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the Veloblock ring of the RDMA fast path, pure logic.
 *
 * M. J. Koop, A. P. Sampat, D. K. Panda, "Veloblock: Efficient and
 * Scalable RDMA Fast Path for InfiniBand" (README, [Koop-Veloblock]): each
 * fast-path channel is one block of receive memory that the sender fills
 * with one-sided writes, bottom-fill: messages of any length are packed one
 * after the other from the block's
 * end toward its start, so a small block (32 KB) holds many small
 * messages, and the sender needs no mirror of it.
 *
 * Layout of one message of n payload bytes, written with one write that
 * ends at the current poll slot q (inclusive) and grows toward the start:
 *
 *     q-n-3      q-n-2 .. q-3     q-2 .. q-1     q
 *   +--------+-----------------+--------------+------+
 *   |   0    |  payload (n)    | length (LE16)| flag |
 *   +--------+-----------------+--------------+------+
 *
 * The flag (non-zero) is the last byte written and the one the receiver
 * polls; the first byte is a zero that becomes the next message's poll
 * slot (the next write ends on it). A message that does not fit above the
 * block's start is preceded by a one-byte WRAP flag at q, and the sender
 * continues at the block's end, whose slot the receiver cleared when it
 * consumed the message there. Space goes back to the sender as byte
 * credits, freed in the order it was spent, a slot only after it was
 * read: a full trip around the block costs exactly its size.
 *
 * The receiver never follows a corrupted ring: a flag that is neither
 * MSG nor WRAP, or a length that does not fit below the slot, is
 * reported and the channel must be failed.
 *
 * Free of UCX and of any wire: the caller moves the bytes (RDMA write,
 * process_vm_writev) and carries the credits.
 */
#ifndef APTUS_VELOBLOCK_H_
#define APTUS_VELOBLOCK_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_VB_OVERHEAD 3     /* zero byte + length; the flag reuses a slot */
#define APTUS_VB_MAX_LEN  65535 /* payload bytes of one message */
#define APTUS_VB_MIN_SIZE 64
#define APTUS_VB_MAX_SIZE (1u << 30)

enum { APTUS_VB_FLAG_EMPTY = 0, APTUS_VB_FLAG_MSG = 1, APTUS_VB_FLAG_WRAP = 2 };

typedef enum aptus_vb_status {
    APTUS_VB_OK,
    APTUS_VB_WRAPPED, /* tx: a wrap record was made; write it, call again */
    APTUS_VB_EMPTY,   /* rx: nothing has arrived */
    APTUS_VB_NO_ROOM, /* tx: not enough credits now */
    APTUS_VB_TOO_BIG, /* tx: never fits this block */
    APTUS_VB_CORRUPT  /* rx: a flag or length the sender cannot have made;
                         tx: credits beyond what was used */
} aptus_vb_status_t;

/* One write to make: image[0 .. total) goes to block offset .. +total. */
typedef struct aptus_vb_write {
    uint32_t offset;
    uint32_t total;
} aptus_vb_write_t;

typedef struct aptus_vb_tx {
    uint32_t size;
    uint32_t slot;    /* poll slot the next write ends on */
    uint32_t credits; /* bytes the sender may use */
    uint64_t msgs, wraps, no_room;
} aptus_vb_tx_t;

typedef struct aptus_vb_rx {
    uint32_t size;
    uint32_t slot;  /* the byte polled */
    uint32_t freed; /* credits not returned yet */
    uint64_t msgs, wraps, corrupt;
} aptus_vb_rx_t;

/* A received message, in place in the block. */
typedef struct aptus_vb_msg {
    const uint8_t *data;
    uint32_t length;
} aptus_vb_msg_t;

/* 0 when size makes a ring (APTUS_VB_MIN_SIZE .. APTUS_VB_MAX_SIZE). */
int aptus_vb_size_check(uint32_t size);

void aptus_vb_tx_init(aptus_vb_tx_t *tx, uint32_t size);
void aptus_vb_rx_init(aptus_vb_rx_t *rx, uint32_t size);

/* Payload bytes of the largest message the block can take. */
static inline uint32_t aptus_vb_max_len(uint32_t size)
{
    uint32_t max = size - 1 - APTUS_VB_OVERHEAD;

    return (max < APTUS_VB_MAX_LEN) ? max : APTUS_VB_MAX_LEN;
}

/* Bytes of the image of a message of len payload bytes. */
static inline uint32_t aptus_vb_image_len(uint32_t len)
{
    return len + APTUS_VB_OVERHEAD + 1;
}

/*
 * Make the image of a message (payload of len bytes, gathered from
 * payload) in image[], of aptus_vb_image_len(len) bytes, and say where it
 * goes. APTUS_VB_WRAPPED: the image is a one-byte wrap record instead;
 * write it, then call again for the message. Credits are taken for what
 * is returned.
 */
aptus_vb_status_t aptus_vb_tx_pack(aptus_vb_tx_t *tx, const void *payload,
                                   uint32_t len, uint8_t *image,
                                   aptus_vb_write_t *write);

/* The same, with the payload gathered from iov. */
aptus_vb_status_t aptus_vb_tx_pack_iov(aptus_vb_tx_t *tx,
                                       const struct iovec *iov, unsigned iovcnt,
                                       uint8_t *image, aptus_vb_write_t *write);

/* Bytes of iov (UINT32_MAX when more), and their copy to dest. */
uint32_t aptus_vb_iov_len(const struct iovec *iov, unsigned iovcnt);
void aptus_vb_gather(uint8_t *dest, const struct iovec *iov, unsigned iovcnt);

/* Credits the receiver returned; APTUS_VB_CORRUPT when more than used. */
aptus_vb_status_t aptus_vb_tx_credit(aptus_vb_tx_t *tx, uint32_t bytes);

/*
 * Poll the block: APTUS_VB_OK with the next message (consume it, then
 * aptus_vb_rx_release), APTUS_VB_EMPTY, or APTUS_VB_CORRUPT. Wrap records
 * are followed here. The flag is read with acquire ordering: what the
 * writer stored before it is visible once it is.
 */
aptus_vb_status_t aptus_vb_rx_poll(aptus_vb_rx_t *rx, uint8_t *block,
                                   aptus_vb_msg_t *msg);

/* The message poll returned is consumed: its bytes become credits. */
void aptus_vb_rx_release(aptus_vb_rx_t *rx, uint8_t *block,
                         const aptus_vb_msg_t *msg);

/* Credits to return to the sender (and forget). */
static inline uint32_t aptus_vb_rx_take_credits(aptus_vb_rx_t *rx)
{
    uint32_t freed = rx->freed;

    rx->freed = 0;
    return freed;
}

/* A local write of an image, flag stored last with release ordering: what
 * a wire must guarantee of its one-sided write (for tests, and for a wire
 * that copies in process). */
void aptus_vb_write_local(uint8_t *block, const aptus_vb_write_t *write,
                          const uint8_t *image);

#ifdef __cplusplus
}
#endif

#endif
