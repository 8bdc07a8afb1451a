/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the fast-path ring in its three modes (see fp_ring.h).
 */
#include "fp_ring.h"
#include "le.h"

#include <string.h>

const char *const aptus_fp_mode_names[APTUS_FP_MODE_LAST] = {
    [APTUS_FP_VELOBLOCK]        = "veloblock",
    [APTUS_FP_ORIGINAL]         = "original",
    [APTUS_FP_ORIGINAL_REDUCED] = "original_reduced",
};

int aptus_fp_geom_make(aptus_fp_mode_t mode, uint32_t block_size,
                       uint32_t slots, uint32_t slot_size,
                       aptus_fp_geom_t *geom, const char **why)
{
    memset(geom, 0, sizeof(*geom));
    geom->mode = mode;
    switch (mode) {
    case APTUS_FP_VELOBLOCK:
        if (aptus_vb_size_check(block_size) != 0) {
            *why = "the block size is out of range";
            return -1;
        }
        geom->size = block_size;
        return 0;
    case APTUS_FP_ORIGINAL_REDUCED:
        /* both sides' slots within the block size */
        if (slot_size == 0) {
            *why = "the slot size is zero";
            return -1;
        }
        slots = block_size / 2 / slot_size;
        /* fall through */
    case APTUS_FP_ORIGINAL:
        if ((slots == 0) || (slot_size <= APTUS_FP_FIXED_OVERHEAD) ||
            (slot_size > APTUS_VB_MAX_LEN + APTUS_FP_FIXED_OVERHEAD) ||
            ((uint64_t)slots * slot_size > APTUS_VB_MAX_SIZE)) {
            *why = "the slots do not make a ring (at least one slot of 5 "
                   "to 65539 bytes, at most 1 GB)";
            return -1;
        }
        geom->slots     = slots;
        geom->slot_size = slot_size;
        geom->size      = slots * slot_size;
        return 0;
    default:
        *why = "unknown mode";
        return -1;
    }
}

uint32_t aptus_fp_max_len(const aptus_fp_geom_t *geom)
{
    return (geom->mode == APTUS_FP_VELOBLOCK)
               ? aptus_vb_max_len(geom->size)
               : geom->slot_size - APTUS_FP_FIXED_OVERHEAD;
}

uint32_t aptus_fp_credits_total(const aptus_fp_geom_t *geom)
{
    return (geom->mode == APTUS_FP_VELOBLOCK) ? geom->size : geom->slots;
}

void aptus_fp_tx_init(aptus_fp_tx_t *tx, const aptus_fp_geom_t *geom)
{
    memset(tx, 0, sizeof(*tx));
    tx->geom = *geom;
    if (geom->mode == APTUS_FP_VELOBLOCK) {
        aptus_vb_tx_init(&tx->vb, geom->size);
    } else {
        tx->credits = geom->slots;
    }
}

void aptus_fp_rx_init(aptus_fp_rx_t *rx, const aptus_fp_geom_t *geom)
{
    memset(rx, 0, sizeof(*rx));
    rx->geom = *geom;
    if (geom->mode == APTUS_FP_VELOBLOCK) {
        aptus_vb_rx_init(&rx->vb, geom->size);
    }
}

aptus_vb_status_t aptus_fp_tx_pack(aptus_fp_tx_t *tx, const struct iovec *iov,
                                   unsigned iovcnt, uint8_t *scratch,
                                   uint8_t *mirror, const uint8_t **image_p,
                                   aptus_vb_write_t *write)
{
    uint32_t len = aptus_vb_iov_len(iov, iovcnt);
    aptus_vb_status_t status;
    uint8_t *slot;

    if (tx->geom.mode == APTUS_FP_VELOBLOCK) {
        status   = aptus_vb_tx_pack_iov(&tx->vb, iov, iovcnt, scratch, write);
        *image_p = scratch;
        if (status == APTUS_VB_OK) {
            tx->msgs++;
        } else if (status == APTUS_VB_NO_ROOM) {
            tx->no_room++;
        }
        return status;
    }

    if (len > aptus_fp_max_len(&tx->geom)) {
        return APTUS_VB_TOO_BIG;
    }
    if (tx->credits == 0) {
        tx->no_room++;
        return APTUS_VB_NO_ROOM;
    }
    slot    = mirror + (size_t)tx->next * tx->geom.slot_size;
    slot[0] = APTUS_FP_FLAG_SET;
    aptus_put16(slot + 1, (uint16_t)len);
    aptus_vb_gather(slot + 3, iov, iovcnt);
    slot[3 + len] = APTUS_FP_FLAG_SET;
    write->offset = tx->next * tx->geom.slot_size;
    write->total  = len + APTUS_FP_FIXED_OVERHEAD;
    *image_p      = slot;
    tx->next      = (tx->next + 1 == tx->geom.slots) ? 0 : tx->next + 1;
    tx->credits--;
    tx->msgs++;
    return APTUS_VB_OK;
}

unsigned aptus_fp_write_pieces(const aptus_fp_geom_t *geom,
                               const aptus_vb_write_t *write,
                               aptus_fp_piece_t *pieces)
{
    uint32_t last = write->total - 1;

    if (write->total <= 1) {
        pieces[0].offset = 0; /* a wrap record: the flag alone */
        pieces[0].length = write->total;
        return 1;
    }
    if (geom->mode == APTUS_FP_VELOBLOCK) {
        pieces[0].offset = 0;
        pieces[0].length = last;
        pieces[1].offset = last;
        pieces[1].length = 1;
        return 2;
    }
    pieces[0].offset = 1;
    pieces[0].length = last - 1;
    pieces[1].offset = last;
    pieces[1].length = 1;
    pieces[2].offset = 0;
    pieces[2].length = 1;
    return 3;
}

aptus_vb_status_t aptus_fp_tx_credit(aptus_fp_tx_t *tx, uint32_t credits)
{
    if (tx->geom.mode == APTUS_FP_VELOBLOCK) {
        return aptus_vb_tx_credit(&tx->vb, credits);
    }
    if (credits > tx->geom.slots - tx->credits) {
        return APTUS_VB_CORRUPT;
    }
    tx->credits += credits;
    return APTUS_VB_OK;
}

int aptus_fp_tx_may_send(const aptus_fp_tx_t *tx, uint32_t len)
{
    uint32_t cost;

    if (len > aptus_fp_max_len(&tx->geom)) {
        return 0;
    }
    if (tx->geom.mode != APTUS_FP_VELOBLOCK) {
        return tx->credits > 0;
    }
    cost = len + APTUS_VB_OVERHEAD;
    if (cost > tx->vb.slot) {
        /* the wrap spends the rest of this trip, then the message */
        return tx->vb.credits >= tx->vb.slot + cost + 1;
    }
    return tx->vb.credits >= cost + (tx->vb.slot == tx->vb.size - 1);
}

aptus_vb_status_t aptus_fp_rx_poll(aptus_fp_rx_t *rx, uint8_t *mem,
                                   aptus_vb_msg_t *msg)
{
    uint8_t *slot;
    uint8_t head, tail;
    uint32_t len;

    if (rx->geom.mode == APTUS_FP_VELOBLOCK) {
        return aptus_vb_rx_poll(&rx->vb, mem, msg);
    }
    slot = mem + (size_t)rx->next * rx->geom.slot_size;
    head = __atomic_load_n(&slot[0], __ATOMIC_ACQUIRE);
    if (head == 0) {
        return APTUS_VB_EMPTY;
    }
    if (head != APTUS_FP_FLAG_SET) {
        goto corrupt;
    }
    len = aptus_get16(slot + 1);
    if (len > aptus_fp_max_len(&rx->geom)) {
        goto corrupt;
    }
    /* the head is published last (aptus_fp_write_pieces), and its load
     * is an acquire: the length, payload and tail are in place with it */
    tail = slot[3 + len];
    if (tail != APTUS_FP_FLAG_SET) {
        goto corrupt;
    }
    msg->data   = slot + 3;
    msg->length = len;
    return APTUS_VB_OK;

corrupt:
    rx->corrupt++;
    return APTUS_VB_CORRUPT;
}

void aptus_fp_rx_release(aptus_fp_rx_t *rx, uint8_t *mem,
                         const aptus_vb_msg_t *msg)
{
    uint8_t *slot;

    if (rx->geom.mode == APTUS_FP_VELOBLOCK) {
        aptus_vb_rx_release(&rx->vb, mem, msg);
        return;
    }
    /* both flags: the next message in this slot may put its tail where
     * this one's was */
    slot                  = mem + (size_t)rx->next * rx->geom.slot_size;
    slot[3 + msg->length] = 0;
    slot[0]               = 0;
    rx->next              = (rx->next + 1 == rx->geom.slots) ? 0 : rx->next + 1;
    rx->freed++;
    rx->msgs++;
}

uint32_t aptus_fp_rx_pending_credits(const aptus_fp_rx_t *rx)
{
    return (rx->geom.mode == APTUS_FP_VELOBLOCK) ? rx->vb.freed : rx->freed;
}

uint32_t aptus_fp_rx_take_credits(aptus_fp_rx_t *rx)
{
    uint32_t credits;

    if (rx->geom.mode == APTUS_FP_VELOBLOCK) {
        return aptus_vb_rx_take_credits(&rx->vb);
    }
    credits   = rx->freed;
    rx->freed = 0;
    return credits;
}
