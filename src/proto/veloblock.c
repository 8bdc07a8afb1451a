/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the Veloblock ring of the RDMA fast path (see veloblock.h).
 */
#include "veloblock.h"
#include "le.h"

#include <string.h>

uint32_t aptus_vb_iov_len(const struct iovec *iov, unsigned iovcnt)
{
    size_t len = 0;
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        len += iov[i].iov_len;
    }
    return (len > UINT32_MAX) ? UINT32_MAX : (uint32_t)len;
}

void aptus_vb_gather(uint8_t *dest, const struct iovec *iov, unsigned iovcnt)
{
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        if (iov[i].iov_len > 0) {
            memcpy(dest, iov[i].iov_base, iov[i].iov_len);
            dest += iov[i].iov_len;
        }
    }
}

int aptus_vb_size_check(uint32_t size)
{
    return ((size >= APTUS_VB_MIN_SIZE) && (size <= APTUS_VB_MAX_SIZE)) ? 0
                                                                        : -1;
}

void aptus_vb_tx_init(aptus_vb_tx_t *tx, uint32_t size)
{
    memset(tx, 0, sizeof(*tx));
    tx->size    = size;
    tx->slot    = size - 1; /* the block starts zeroed */
    tx->credits = size;
}

void aptus_vb_rx_init(aptus_vb_rx_t *rx, uint32_t size)
{
    memset(rx, 0, sizeof(*rx));
    rx->size = size;
    rx->slot = size - 1;
}

aptus_vb_status_t aptus_vb_tx_pack(aptus_vb_tx_t *tx, const void *payload,
                                   uint32_t len, uint8_t *image,
                                   aptus_vb_write_t *write)
{
    struct iovec iov = { (void *)payload, len };

    return aptus_vb_tx_pack_iov(tx, &iov, 1, image, write);
}

aptus_vb_status_t aptus_vb_tx_pack_iov(aptus_vb_tx_t *tx,
                                       const struct iovec *iov, unsigned iovcnt,
                                       uint8_t *image, aptus_vb_write_t *write)
{
    uint32_t len  = aptus_vb_iov_len(iov, iovcnt);
    uint32_t cost = len + APTUS_VB_OVERHEAD;
    uint32_t fresh;

    /* Credits count fresh bytes, spent top-down in the same order the
     * receiver frees them: a message spends the bytes below its slot (the
     * slot is the previous message's zero byte, spent with it), except at
     * the top of the block, where the slot is fresh too; a wrap spends what
     * is left below its slot. The receiver frees a message's bytes above its
     * zero byte when it releases it, and the zero byte with the message
     * after it (or the wrap): a slot is never reused before it was read. */
    if (len > aptus_vb_max_len(tx->size)) {
        return APTUS_VB_TOO_BIG;
    }
    if (cost > tx->slot) {
        /* not above the block's start: a wrap record, then the top */
        if (tx->credits < tx->slot) {
            tx->no_room++;
            return APTUS_VB_NO_ROOM;
        }
        image[0]      = APTUS_VB_FLAG_WRAP;
        write->offset = tx->slot;
        write->total  = 1;
        tx->credits -= tx->slot;
        tx->slot = tx->size - 1;
        tx->wraps++;
        return APTUS_VB_WRAPPED;
    }
    fresh = cost + (tx->slot == tx->size - 1);
    if (tx->credits < fresh) {
        tx->no_room++;
        return APTUS_VB_NO_ROOM;
    }
    write->offset = tx->slot - cost;
    write->total  = cost + 1;
    image[0]      = 0; /* the next message's slot */
    aptus_vb_gather(image + 1, iov, iovcnt);
    aptus_put16(image + 1 + len, (uint16_t)len);
    image[cost] = APTUS_VB_FLAG_MSG;
    tx->credits -= fresh;
    tx->slot -= cost;
    tx->msgs++;
    return APTUS_VB_OK;
}

aptus_vb_status_t aptus_vb_tx_credit(aptus_vb_tx_t *tx, uint32_t bytes)
{
    if (bytes > tx->size - tx->credits) {
        return APTUS_VB_CORRUPT;
    }
    tx->credits += bytes;
    return APTUS_VB_OK;
}

aptus_vb_status_t aptus_vb_rx_poll(aptus_vb_rx_t *rx, uint8_t *block,
                                   aptus_vb_msg_t *msg)
{
    uint8_t flag;
    uint32_t len;

    for (;;) {
        /* acquire: the bytes the writer stored before the flag are visible
         * once the flag is */
        flag = __atomic_load_n(&block[rx->slot], __ATOMIC_ACQUIRE);
        if (flag == APTUS_VB_FLAG_EMPTY) {
            return APTUS_VB_EMPTY;
        }
        if (flag == APTUS_VB_FLAG_WRAP) {
            if (rx->slot == rx->size - 1) {
                /* no writer wraps at the end: following it would poll
                 * this byte forever */
                break;
            }
            /* the rest of the trip is the sender's loss: credit it */
            rx->freed += rx->slot + 1;
            rx->slot = rx->size - 1;
            rx->wraps++;
            continue;
        }
        if ((flag != APTUS_VB_FLAG_MSG) || (rx->slot < APTUS_VB_OVERHEAD)) {
            break;
        }
        len = aptus_get16(block + rx->slot - 2);
        if (len + APTUS_VB_OVERHEAD > rx->slot) {
            break; /* reaches below the block's start */
        }
        msg->data   = block + rx->slot - 2 - len;
        msg->length = len;
        return APTUS_VB_OK;
    }
    rx->corrupt++;
    return APTUS_VB_CORRUPT;
}

void aptus_vb_rx_release(aptus_vb_rx_t *rx, uint8_t *block,
                         const aptus_vb_msg_t *msg)
{
    uint32_t cost = msg->length + APTUS_VB_OVERHEAD;

    if (rx->slot == rx->size - 1) {
        /* the one slot no earlier message of the next trip clears */
        block[rx->slot] = APTUS_VB_FLAG_EMPTY;
    }
    rx->slot -= cost;
    rx->freed += cost;
    rx->msgs++;
}

void aptus_vb_write_local(uint8_t *block, const aptus_vb_write_t *write,
                          const uint8_t *image)
{
    uint32_t last = write->total - 1;

    memcpy(block + write->offset, image, last);
    __atomic_store_n(&block[write->offset + last], image[last],
                     __ATOMIC_RELEASE);
}
