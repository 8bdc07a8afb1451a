/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD-ZCopy channel (Koop et al., "MVAPICH-Aptus", IPDPS 2008,
 * section 3.2).
 *
 * Large transfers over unreliable datagrams without staging copies. The
 * initiator of a get takes a receive context (a dedicated receive queue)
 * from a bounded pool and receives straight into the destination; the
 * owner of the memory streams tagged datagrams from the source buffer
 * inside the window the initiator grants. Control (request, credit with
 * missing ranges, done, error) and the copy-based fallback travel over the
 * UD-SR stream between the two, as internal messages. Protocol logic is in
 * proto/zcopy.
 *
 * A get below the threshold, or when no context is free, is served by the
 * copy-based path: the owner sends the data through the reliable stream.
 * Everything runs from the user's progress (completions are the user's).
 */
#ifndef APTUS_UD_ZCOPY_H_
#define APTUS_UD_ZCOPY_H_

#include "ud_sr_chan.h"
#include "proto/zcopy.h"

#include <ucs/datastruct/list.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Internal message id of UD-ZCopy on the UD-SR stream. */
#define APTUS_UDZ_MSG_ID 1

/* Datagrams posted per receive, and sent per segmented send. */
#define APTUS_UDZ_TRAIN_MAX 64

typedef struct aptus_udz_config {
    size_t thresh;       /* smaller gets take the copy-based path */
    unsigned contexts;   /* receive contexts (dedicated queues) */
    unsigned window;     /* datagrams one context holds: the owner's window */
    unsigned batch;      /* datagrams per receive or send call */
    size_t max_get;      /* largest get */
    unsigned max_served; /* transfers this side serves at once (owner) */
} aptus_udz_config_t;

/* Whether the owner registered [address, address + length) with token. */
typedef int (*aptus_udz_check_t)(void *arg, uint64_t token, uint64_t address,
                                 uint64_t length);

typedef struct aptus_udz_get aptus_udz_get_t;

typedef struct aptus_udz_ctx {
    aptus_dgram_rxq_t *rxq;
    aptus_udz_get_t *get; /* NULL: free */
    uint64_t key;         /* of the transfer it serves */
} aptus_udz_ctx_t;

typedef struct aptus_udz_stats {
    uint64_t zc_gets, zc_bytes, copy_gets, copy_bytes, pool_empty;
    uint64_t dgrams_sent, dgrams_resent, dgrams_received, misplaced;
    uint64_t duplicates, bad_key, bad_index, truncated, credits, nacks;
    uint64_t stalls, probes, errors, aborted;
    uint64_t writes, write_bytes, write_refused;
    uint64_t puts_inline;     /* small puts carried in the stream */
    uint64_t reflect_refused; /* requests naming another node's address */
    uint64_t serve_limit;     /* requests answered "busy" at MAX_SERVED */
    uint64_t busy_retries;    /* this side's requests retried after "busy" */
    uint64_t async_yields;    /* streams the async thread left to the user's
                                 progress, which was waiting for the lock */
    uint64_t errors_dropped;  /* error replies with no room to wait in */
    uint64_t ctxs_open;       /* receive contexts opened (on first use) */
    uint64_t ctx_open_failed; /* ... that could not be: copy path */
} aptus_udz_stats_t;

typedef struct aptus_udz {
    aptus_chan_t super;
    aptus_ud_chan_t *ud;
    aptus_udz_config_t config;
    aptus_udz_check_t check;
    void *check_arg;
    uint32_t payload;   /* data bytes per datagram */
    unsigned max_train; /* datagrams per segmented send */
    aptus_udz_ctx_t *ctxs;
    unsigned num_ctxs;
    ucs_list_link_t gets;           /* this side asked */
    ucs_list_link_t puts;           /* this side serves */
    unsigned num_puts;              /* on the list: at most config.max_served */
    uint64_t last_req_us;           /* a peer last asked this side for data */
    const volatile int *stop_async; /* set while the user waits for the
                                       async lock: the async thread stops
                                       streaming (the user goes on) */
    void *bounce;             /* put_bcopy's packing buffer, on first use */
    ucs_list_link_t flushes;  /* waiting for gets and writes to finish */
    ucs_list_link_t writes;   /* this side put: the target reads them */
    ucs_list_link_t wtargets; /* this side reads what a writer put */
    int closing;
    ucs_mpool_t get_mp;
    ucs_mpool_t put_mp;
    uint32_t next_xfer;
    /* receive batch: header, destination piece, spill of the last piece */
    uint8_t *hdrs;
    uint8_t *scratch;
    uint8_t *staging;
    struct iovec *rx_iov;
    aptus_dgram_rxv_t *rxv;
    uint32_t *slots;
    /* send batch */
    aptus_dgram_tx_t *tx;
    struct iovec *tx_iov;
    uint8_t *tx_hdrs;
    /* completions are handed to the user last, once the lists are
     * consistent: a callback may start or cancel other transfers */
    aptus_ud_comp_list_t done;
    aptus_udz_stats_t stats;
} aptus_udz_t;

/* Serving window: a peer asked this side for data within this time, so
 * more requests may follow and should not wait for the user. */
#define APTUS_UDZ_SERVING_US 100000

/* Whether peers have been reading this side's memory lately: requests then
 * deserve the async thread's attention between the user's calls. */
static inline int aptus_udz_serving(const aptus_udz_t *udz, uint64_t now_us)
{
    return (udz->last_req_us != 0) &&
           ((now_us - udz->last_req_us) < APTUS_UDZ_SERVING_US);
}

/* The channel interface's operations of UD-ZCopy (chan.h): get and put (one
 * buffer each); the peers are UD-SR's streams, which carry its
 * control messages. */
extern const aptus_chan_ops_t aptus_udz_chan_iface_ops;

const char *aptus_udz_config_check(const aptus_udz_config_t *config);

ucs_status_t aptus_udz_init(aptus_udz_t *udz, aptus_ud_chan_t *ud,
                            const aptus_udz_config_t *config,
                            aptus_udz_check_t check, void *check_arg);

/* Outstanding gets complete with UCS_ERR_CANCELED. */
void aptus_udz_cleanup(aptus_udz_t *udz);

/* Read length bytes at remote_addr (owner's registration token) into
 * dest; comp is called when every byte is in place (UCS_INPROGRESS), or
 * with an error. */
ucs_status_t aptus_udz_get(aptus_udz_t *udz, aptus_ud_peer_t *peer, void *dest,
                           uint64_t length, uint64_t remote_addr,
                           uint64_t token, uct_completion_t *comp);

/* Write the iov (one buffer) to remote_addr of the target's region (its
 * registration token): the target reads it with a get of its own from
 * memory exported for this transfer; comp is called when every byte is in
 * place there (UCS_INPROGRESS), or with an error. */
ucs_status_t aptus_udz_put(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           const void *src, uint64_t length,
                           uint64_t remote_addr, uint64_t token,
                           uct_completion_t *comp);

/* Largest put carried in the stream (aptus_udz_put_inline). */
static inline size_t aptus_udz_put_inline_max(const aptus_udz_t *udz)
{
    return udz->ud->config.max_msg - APTUS_ZC_PUT_HDR;
}

/* Write length bytes (at most aptus_udz_put_inline_max) to remote_addr of
 * the target's region: copied into the stream, so src is free at return
 * (UCS_OK); the stream's flush completes once they are in place there.
 * UCS_ERR_NO_RESOURCE: the stream's window is full, try again. */
ucs_status_t aptus_udz_put_inline(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                  const void *src, size_t length,
                                  uint64_t remote_addr, uint64_t token);

/* The user's progress: receive, grant credit, ask for what is missing,
 * stream what peers asked for. */
unsigned aptus_udz_progress(aptus_udz_t *udz);

/* Nothing moves by key: progress has nothing to do (most calls). */
static inline int aptus_udz_idle(aptus_udz_t *udz)
{
    return ucs_list_is_empty(&udz->gets) && ucs_list_is_empty(&udz->puts) &&
           ucs_list_is_empty(&udz->writes) &&
           ucs_list_is_empty(&udz->wtargets) &&
           ucs_array_is_empty(&udz->done.comps);
}

/* The owner's side only (streams to requesters, resends): what the async
 * thread does while the user computes; no completion runs. */
unsigned aptus_udz_progress_owner(aptus_udz_t *udz);

/* Internal messages from the UD-SR stream. */
ucs_status_t aptus_udz_internal(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                const void *data, size_t length, int is_async);

/* The stream to peer failed: its gets and writes fail with status, what
 * it asked of this side stops. */
void aptus_udz_peer_failed(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           ucs_status_t status);

/* The user's endpoint to peer is gone: its gets and writes are cancelled. */
void aptus_udz_peer_disconnect(aptus_udz_t *udz, aptus_ud_peer_t *peer);

/* UCS_OK when peer (NULL: any) has no get or write outstanding; otherwise comp
 * (if any) is completed when they are done, with comp->count raised by one when
 * 'counted' says the caller already owns a unit of it. */
ucs_status_t aptus_udz_flush(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                             uct_completion_t *comp, int counted);

#ifdef __cplusplus
}
#endif

#endif
