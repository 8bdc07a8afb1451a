/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-ZCopy internals shared by its .c files: the records of a
 * transfer and the functions the files call of each other.
 */
#ifndef APTUS_UD_ZCOPY_INT_H_
#define APTUS_UD_ZCOPY_INT_H_

#include "ud_zcopy.h"
#include "ud_sr_chan_int.h"
#include "base/aptus_log.h"

#define APTUS_UDZ_MSG_MAX  256   /* encoded control message, without data */
#define APTUS_UDZ_SPILL    65536 /* room behind the posted slots: a train */
#define APTUS_UDZ_RING_MAX 4096  /* indices whose send sequence is kept */

enum {
    APTUS_UDZ_SEND_REQ    = 1u << 0,
    APTUS_UDZ_SEND_CREDIT = 1u << 1,
    APTUS_UDZ_SEND_DONE   = 1u << 2
};

/* The initiator's side of a transfer. */
struct aptus_udz_get {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer;
    uint32_t xfer;
    uint8_t to_send;  /* control messages that could not go yet */
    uint8_t copy;     /* copy-based path */
    uint8_t finished; /* completed; only DONE left to send */
    uint8_t *dest;
    uint64_t length;
    uint64_t remote_addr;
    uint64_t token;
    uct_completion_t *comp;
    int32_t done_status;
    uint64_t copied;      /* copy path */
    aptus_udz_ctx_t *ctx; /* zero-copy path */
    aptus_zc_rx_t rx;
    uint64_t *bitmap;
    uint64_t last_data_us;
    uint64_t last_credit_us;
    uint32_t stall_shift;
    uint32_t expect;        /* index the next arrival most likely has */
    uint64_t busy_until_us; /* the owner said "busy": ask again then */
};

/* The owner's side of a transfer. */
typedef struct aptus_udz_put {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer;
    uint32_t xfer;
    uint8_t copy;
    uint8_t error_pending; /* an ERROR reply could not go yet */
    int32_t error;
    const uint8_t *src;
    uint64_t length;
    uint32_t payload;
    aptus_wire_addr_t ctx_addr;
    uint64_t ctx_key;
    aptus_zc_tx_t tx;
    aptus_zc_sent_t *ring; /* send sequence of indices in play */
    uint32_t ring_size;
    uint32_t seen_seq; /* latest the initiator reported */
    uint32_t probe_shift;
    uint64_t copy_offset;
    uint64_t last_heard_us; /* request, credit */
    uint64_t last_send_us;
    uint64_t token; /* what the request named the source with */
} aptus_udz_put_t;

/* The writer's side of a put: its source is exported to the target under a
 * token made for this transfer, until the target says it has the data. */
typedef struct aptus_udz_write {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer;
    uint32_t xfer;
    uint8_t req_pending; /* WRITE could not go yet */
    const uint8_t *src;
    uint64_t length;
    uint64_t remote_addr; /* the target's, and its token */
    uint64_t token;
    uint64_t src_token;
    uct_completion_t *comp;
} aptus_udz_write_t;

/* The target's side: the get that reads the writer's data, then WDONE. */
typedef struct aptus_udz_wtarget {
    ucs_list_link_t list;
    aptus_udz_t *udz;
    aptus_ud_peer_t *peer;
    uint32_t xfer; /* the writer's */
    uint8_t reply_pending;
    int32_t status;
    uct_completion_t comp; /* of the get */
} aptus_udz_wtarget_t;

typedef struct aptus_udz_flush {
    ucs_list_link_t list;
    aptus_ud_peer_t *peer; /* NULL: every peer */
    uct_completion_t *comp;
} aptus_udz_flush_t;

/* ud_zcopy.c */
uint64_t aptus_udz_random64(void);
ucs_status_t aptus_udz_send(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                            const aptus_zc_msg_t *msg, const void *data,
                            size_t data_len);
void aptus_udz_complete_later(aptus_udz_t *udz, uct_completion_t *comp,
                              ucs_status_t status);
void aptus_udz_check_flushes(aptus_udz_t *udz);

/* ud_zcopy_get.c */
void aptus_udz_get_free(aptus_udz_t *udz, aptus_udz_get_t *get);
void aptus_udz_send_done(aptus_udz_t *udz, aptus_udz_get_t *get);
void aptus_udz_get_finish(aptus_udz_t *udz, aptus_udz_get_t *get,
                          ucs_status_t status, int tell_owner);
aptus_udz_get_t *aptus_udz_find_get(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                    uint32_t xfer);
void aptus_udz_get_busy(aptus_udz_t *udz, aptus_udz_get_t *get);
unsigned aptus_udz_get_progress(aptus_udz_t *udz, aptus_udz_get_t *get);

/* ud_zcopy_owner.c */
uint64_t aptus_udz_probe_us(aptus_udz_t *udz, aptus_udz_put_t *put);
aptus_udz_put_t *aptus_udz_find_put(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                    uint32_t xfer);
void aptus_udz_put_free(aptus_udz_t *udz, aptus_udz_put_t *put);
int aptus_udz_put_pump(aptus_udz_t *udz, aptus_udz_put_t *put);
void aptus_udz_reply_error(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           uint32_t xfer, ucs_status_t status);
void aptus_udz_handle_req(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                          const aptus_zc_msg_t *msg);

/* ud_zcopy_put.c */
aptus_udz_write_t *aptus_udz_find_write(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                        uint32_t xfer);
int aptus_udz_write_exported(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                             uint64_t token, uint64_t address, uint64_t length);
void aptus_udz_write_finish(aptus_udz_t *udz, aptus_udz_write_t *wr,
                            ucs_status_t status);
void aptus_udz_handle_put(aptus_udz_t *udz, const aptus_zc_msg_t *msg);
void aptus_udz_handle_write(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                            const aptus_zc_msg_t *msg);
unsigned aptus_udz_writes_progress(aptus_udz_t *udz);
void aptus_udz_writes_stop(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           ucs_status_t status, int failed);

#endif
