/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD-ZCopy channel (see ud_zcopy.h): set-up and teardown,
 * control messages, completions and flushes, dispatch.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_zcopy_int.h"
#include "base/aptus_numa.h"
#include "proto/random.h"

#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/uid.h>

#include <string.h>

const char *aptus_udz_config_check(const aptus_udz_config_t *config)
{
    if (config->window < 4) {
        return "ZCOPY_WINDOW must be at least 4";
    }
    if (config->batch == 0) {
        return "RX_BATCH must be at least 1";
    }
    if (config->max_get == 0) {
        return "ZCOPY_MAX must be positive";
    }
    if (config->max_served == 0) {
        return "ZCOPY_MAX_SERVED must be at least 1";
    }
    return NULL;
}

/* Keys and tokens come from the OS CSPRNG (proto/random.h): a guessed one
 * lets a stray process into a transfer. There is no weaker fallback. */
static uint32_t aptus_udz_random(void)
{
    uint32_t r = aptus_random32();

    if (r == 0) {
        ucs_fatal("ud_zcopy: the OS gives no randomness (getrandom: %m)");
    }
    return r;
}

uint64_t aptus_udz_random64(void)
{
    uint64_t r = aptus_random64();

    if (r == 0) {
        ucs_fatal("ud_zcopy: the OS gives no randomness (getrandom: %m)");
    }
    return r;
}

/* The receive contexts and the batch arrays (any of them may be NULL). */
static void aptus_udz_free_arrays(aptus_udz_t *udz)
{
    unsigned i;

    for (i = 0; i < udz->num_ctxs; ++i) {
        if (udz->ctxs[i].rxq != NULL) {
            udz->ud->wire->ops->rxq_close(udz->ctxs[i].rxq);
        }
    }
    udz->num_ctxs = 0;
    ucs_free(udz->hdrs);
    ucs_free(udz->scratch);
    ucs_free(udz->staging);
    ucs_free(udz->rx_iov);
    ucs_free(udz->rxv);
    ucs_free(udz->slots);
    ucs_free(udz->tx);
    ucs_free(udz->tx_iov);
    ucs_free(udz->tx_hdrs);
    ucs_free(udz->ctxs);
}

ucs_status_t aptus_udz_init(aptus_udz_t *udz, aptus_ud_chan_t *ud,
                            const aptus_udz_config_t *config,
                            aptus_udz_check_t check, void *check_arg)
{
    unsigned batch = config->batch;
    ucs_status_t status;
    const char *bad;
    int node;

    bad = aptus_udz_config_check(config);
    if (bad != NULL) {
        ucs_error("ud_sr: invalid configuration: %s", bad);
        return UCS_ERR_INVALID_PARAM;
    }

    memset(udz, 0, sizeof(*udz));
    udz->super.ops     = &aptus_udz_chan_iface_ops;
    udz->super.carrier = &ud->super;
    udz->ud            = ud;
    udz->config        = *config;
    udz->check         = check;
    udz->check_arg     = check_arg;
    udz->payload       = ud->wire->mtu - APTUS_ZC_HDR_LEN;
    /* datagrams per segmented send (0: the wire has none) */
    udz->max_train =
        ucs_min(ucs_min(ud->wire->seg_max_count, APTUS_UDZ_TRAIN_MAX),
                ud->wire->seg_max_bytes / ud->wire->mtu);
    udz->next_xfer = aptus_udz_random();
    ucs_list_head_init(&udz->gets);
    ucs_list_head_init(&udz->puts);
    ucs_list_head_init(&udz->flushes);
    ucs_list_head_init(&udz->writes);
    ucs_list_head_init(&udz->wtargets);
    udz->closing = 0;

    /* the contexts and the spill buffers datagrams land in: on the
     * device's node, as the channel's receive buffers */
    node   = ud->config.numa_node;
    status = ucs_mpool_init(&udz->get_mp, APTUS_NUMA_MPOOL_PRIV_LEN,
                            sizeof(aptus_udz_get_t), 0, 8, 16, UINT_MAX,
                            &aptus_numa_mpool_ops, "aptus_udz_gets");
    if (status != UCS_OK) {
        return status;
    }
    aptus_numa_mpool_set_node(&udz->get_mp, node);
    status = ucs_mpool_init(&udz->put_mp, APTUS_NUMA_MPOOL_PRIV_LEN,
                            sizeof(aptus_udz_put_t), 0, 8, 16, UINT_MAX,
                            &aptus_numa_mpool_ops, "aptus_udz_puts");
    if (status != UCS_OK) {
        goto err_get_mp;
    }
    aptus_numa_mpool_set_node(&udz->put_mp, node);

    batch        = ucs_max(batch, APTUS_UDZ_TRAIN_MAX);
    udz->hdrs    = ucs_calloc(batch, APTUS_ZC_HDR_LEN, "aptus_udz_hdrs");
    udz->scratch = aptus_numa_malloc(APTUS_UDZ_SPILL, node, "aptus_udz_spill");
    udz->staging =
        aptus_numa_malloc(APTUS_UDZ_SPILL, node, "aptus_udz_staging");
    udz->rx_iov =
        ucs_calloc(batch * 2 + 1, sizeof(*udz->rx_iov), "aptus_udz_iov");
    udz->rxv     = ucs_calloc(1, sizeof(*udz->rxv), "aptus_udz_rxv");
    udz->slots   = ucs_calloc(batch, sizeof(*udz->slots), "aptus_udz_slots");
    udz->tx      = ucs_calloc(batch, sizeof(*udz->tx), "aptus_udz_tx");
    udz->tx_iov  = ucs_calloc(batch * 2, sizeof(*udz->tx_iov), "aptus_udz_txv");
    udz->tx_hdrs = ucs_calloc(batch, APTUS_ZC_HDR_LEN, "aptus_udz_txh");
    udz->ctxs    = ucs_calloc(ucs_max(config->contexts, 1), sizeof(*udz->ctxs),
                              "aptus_udz_ctxs");
    if ((udz->hdrs == NULL) || (udz->scratch == NULL) ||
        (udz->staging == NULL) || (udz->rx_iov == NULL) || (udz->rxv == NULL) ||
        (udz->slots == NULL) || (udz->tx == NULL) || (udz->tx_iov == NULL) ||
        (udz->tx_hdrs == NULL) || (udz->ctxs == NULL)) {
        status = UCS_ERR_NO_MEMORY;
        goto err_arrays;
    }

    /* the contexts (a socket each on the sock wire) open on first use: an
     * interface that never fetches by zero copy holds none */
    udz->num_ctxs = config->contexts;
    return UCS_OK;

err_arrays:
    aptus_udz_free_arrays(udz);
    ucs_mpool_cleanup(&udz->put_mp, 0);
err_get_mp:
    ucs_mpool_cleanup(&udz->get_mp, 0);
    return status;
}

/* ---- control messages ------------------------------------------------- */

/* Returns UCS_OK when sent, UCS_ERR_NO_RESOURCE to retry later. */
ucs_status_t aptus_udz_send(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                            const aptus_zc_msg_t *msg, const void *data,
                            size_t data_len)
{
    uint8_t buf[APTUS_UDZ_MSG_MAX];
    size_t len = aptus_zc_msg_build(buf, msg);
    ssize_t ret;

    ret = aptus_ud_chan_send_internal(udz->ud, peer, APTUS_UDZ_MSG_ID, buf, len,
                                      data, data_len);
    if (ret >= 0) {
        return UCS_OK;
    }
    if (ret == UCS_ERR_NO_RESOURCE) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* the stream is dead: its failure handler cleans up */
    return UCS_OK;
}

/* ---- completions and flushes ------------------------------------------- */

static unsigned aptus_udz_outstanding(aptus_udz_t *udz, aptus_ud_peer_t *peer)
{
    aptus_udz_get_t *get;
    unsigned n = 0;

    aptus_udz_write_t *wr;

    ucs_list_for_each(get, &udz->gets, list)
    {
        n += !get->finished && ((peer == NULL) || (get->peer == peer));
    }
    ucs_list_for_each(wr, &udz->writes, list)
    {
        n += (peer == NULL) || (wr->peer == peer);
    }
    return n;
}

void aptus_udz_complete_later(aptus_udz_t *udz, uct_completion_t *comp,
                              ucs_status_t status)
{
    aptus_ud_comp_list_add(&udz->done, comp, status);
}

static void aptus_udz_dispatch_completions(aptus_udz_t *udz)
{
    if (!udz->ud->in_async) { /* a peer failed in async context: later */
        aptus_ud_comp_list_dispatch(&udz->done);
    }
}

void aptus_udz_check_flushes(aptus_udz_t *udz)
{
    aptus_udz_flush_t *fl, *tmp;

    ucs_list_for_each_safe(fl, tmp, &udz->flushes, list)
    {
        if (aptus_udz_outstanding(udz, fl->peer) == 0) {
            ucs_list_del(&fl->list);
            aptus_udz_complete_later(udz, fl->comp, UCS_OK);
            ucs_free(fl);
        }
    }
}

/* ---- dispatch --------------------------------------------------------- */

ucs_status_t aptus_udz_internal(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                const void *data, size_t length, int is_async)
{
    aptus_udz_get_t *get;
    aptus_udz_put_t *put;
    aptus_udz_write_t *wr;
    aptus_zc_msg_t msg;

    if (aptus_zc_msg_parse(data, length, &msg) != 0) {
        udz->ud->stats.rx_malformed++;
        return UCS_OK;
    }
    if (is_async && (msg.type != APTUS_ZC_MSG_REQ) &&
        (msg.type != APTUS_ZC_MSG_CREDIT) && (msg.type != APTUS_ZC_MSG_DONE) &&
        (msg.type != APTUS_ZC_MSG_PUT)) {
        /* completions belong to the user's thread; the owner's side (a
         * request, its credits, its end) is served while the user computes.
         * A deferred DONE would hold every later message of the stream,
         * the next request too, until the user's next progress call. */
        return UCS_ERR_BUSY;
    }

    switch (msg.type) {
    case APTUS_ZC_MSG_REQ:
        aptus_udz_handle_req(udz, peer, &msg);
        return UCS_OK; /* nothing to complete */
    case APTUS_ZC_MSG_PUT:
        aptus_udz_handle_put(udz, &msg);
        return UCS_OK;
    case APTUS_ZC_MSG_CREDIT:
        put = aptus_udz_find_put(udz, peer, msg.xfer);
        if (put == NULL) {
            /* forgotten (idle too long, or no memory for the request) */
            aptus_udz_reply_error(udz, peer, msg.xfer, UCS_ERR_NO_ELEM);
        } else if (!put->copy && !put->error_pending) {
            put->last_heard_us = udz->ud->now_us;
            if ((msg.credit.edge > put->tx.edge) ||
                aptus_zc_seq_after(msg.credit.seen_seq, put->seen_seq)) {
                put->probe_shift = 0; /* the initiator is keeping up */
                put->seen_seq    = msg.credit.seen_seq;
            }
            aptus_zc_tx_credit(&put->tx, msg.credit.edge, msg.credit.ranges,
                               msg.credit.num_ranges, msg.credit.seen_seq);
            aptus_udz_put_pump(udz, put);
        }
        return UCS_OK;
    case APTUS_ZC_MSG_DONE:
        put = aptus_udz_find_put(udz, peer, msg.xfer);
        if (put != NULL) {
            aptus_udz_put_free(udz, put);
        }
        break;
    case APTUS_ZC_MSG_ERROR:
        get = aptus_udz_find_get(udz, peer, msg.xfer);
        if (get == NULL) {
            break;
        }
        if ((ucs_status_t)msg.done.status == UCS_ERR_BUSY) {
            aptus_udz_get_busy(udz, get);
        } else {
            aptus_udz_get_finish(udz, get, (ucs_status_t)msg.done.status, 0);
        }
        break;
    case APTUS_ZC_MSG_WRITE:
        aptus_udz_handle_write(udz, peer, &msg);
        break;
    case APTUS_ZC_MSG_WDONE:
        wr = aptus_udz_find_write(udz, peer, msg.xfer);
        if (wr != NULL) {
            aptus_udz_write_finish(udz, wr, (ucs_status_t)msg.done.status);
        }
        break;
    case APTUS_ZC_MSG_COPY:
        get = aptus_udz_find_get(udz, peer, msg.xfer);
        if ((get == NULL) || !get->copy) {
            break; /* cancelled meanwhile */
        }
        if ((msg.copy.offset > get->length) ||
            (msg.copy.length > get->length - msg.copy.offset)) {
            aptus_udz_get_finish(udz, get, UCS_ERR_IO_ERROR, 1);
            break;
        }
        memcpy(get->dest + msg.copy.offset, msg.copy.data, msg.copy.length);
        get->copied += msg.copy.length;
        get->last_data_us = udz->ud->now_us;
        get->stall_shift  = 0;
        if (get->copied == get->length) {
            udz->stats.copy_bytes += get->length;
            aptus_udz_get_finish(udz, get, UCS_OK, 0);
        }
        break;
    }
    aptus_udz_dispatch_completions(udz);
    return UCS_OK;
}

unsigned aptus_udz_progress_owner(aptus_udz_t *udz)
{
    aptus_udz_put_t *put, *ptmp;
    unsigned count = 0;

    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        if (put->error_pending || put->copy || (put->tx.num_rtx > 0) ||
            (put->tx.next_new < put->tx.edge)) {
            aptus_udz_put_pump(udz, put);
            ++count;
        }
    }
    return count;
}

unsigned aptus_udz_progress(aptus_udz_t *udz)
{
    aptus_udz_get_t *get, *gtmp;
    aptus_udz_put_t *put, *ptmp;
    uint64_t now   = udz->ud->now_us;
    unsigned count = 0;
    uint64_t sent;

    if (aptus_udz_idle(udz)) {
        return 0;
    }

    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if (get->finished) {
            aptus_udz_send_done(udz, get); /* frees it once sent */
            ++count;
        } else {
            count += aptus_udz_get_progress(udz, get);
        }
    }
    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        if (put->error_pending || put->copy || (put->tx.num_rtx > 0) ||
            (put->tx.next_new < put->tx.edge)) {
            /* progress if anything went (a full socket sends nothing) */
            sent = udz->stats.dgrams_sent + udz->stats.copy_bytes +
                   udz->stats.errors;
            aptus_udz_put_pump(udz, put);
            count += (udz->stats.dgrams_sent + udz->stats.copy_bytes +
                      udz->stats.errors) != sent;
        } else if ((now - put->last_heard_us) >
                   2 * (uint64_t)udz->ud->config.rel.peer_timeout_us) {
            /* the initiator went quiet for good, yet its stream lives (the
             * probes check it): it lost track of the transfer */
            aptus_udz_put_free(udz, put);
        } else if (((now - put->last_send_us) >=
                    aptus_udz_probe_us(udz, put)) &&
                   aptus_zc_tx_probe(&put->tx)) {
            /* all sent that may be, nothing heard: the tail may be lost,
             * or the initiator gone; a reliable no-op on the stream finds
             * out (its failure ends the put) */
            put->probe_shift++;
            udz->stats.probes++;
            (void)aptus_ud_chan_check(udz->ud, put->peer);
            aptus_udz_put_pump(udz, put);
            ++count;
        }
    }
    count += aptus_udz_writes_progress(udz);
    aptus_udz_dispatch_completions(udz);
    return count;
}

void aptus_udz_peer_failed(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           ucs_status_t status)
{
    aptus_udz_get_t *get, *gtmp;
    aptus_udz_put_t *put, *ptmp;

    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if (get->peer != peer) {
            continue;
        }
        if (get->finished) {
            aptus_udz_get_free(udz, get);
        } else {
            aptus_udz_get_finish(udz, get, status, 0);
        }
    }
    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        if (put->peer == peer) {
            aptus_udz_put_free(udz, put);
        }
    }
    aptus_udz_writes_stop(udz, peer, status, 1);
    aptus_udz_dispatch_completions(udz);
}

void aptus_udz_peer_disconnect(aptus_udz_t *udz, aptus_ud_peer_t *peer)
{
    aptus_udz_get_t *get, *gtmp;

    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if ((get->peer == peer) && !get->finished) {
            aptus_udz_get_finish(udz, get, UCS_ERR_CANCELED, 1);
        }
    }
    aptus_udz_writes_stop(udz, peer, UCS_ERR_CANCELED, 0);
    aptus_udz_dispatch_completions(udz);
}

ucs_status_t aptus_udz_flush(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                             uct_completion_t *comp, int counted)
{
    aptus_udz_flush_t *fl;

    if (aptus_udz_outstanding(udz, peer) == 0) {
        return UCS_OK;
    }
    if (comp == NULL) {
        return UCS_INPROGRESS;
    }
    fl = ucs_malloc(sizeof(*fl), "aptus_udz_flush");
    if (fl == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    fl->peer = peer;
    fl->comp = comp;
    if (counted) {
        comp->count++;
    }
    ucs_list_add_tail(&udz->flushes, &fl->list);
    return UCS_INPROGRESS;
}

void aptus_udz_cleanup(aptus_udz_t *udz)
{
    aptus_udz_get_t *get, *gtmp;
    aptus_udz_put_t *put, *ptmp;
    aptus_udz_flush_t *fl, *ftmp;
    aptus_udz_write_t *wr, *wtmp;
    aptus_udz_wtarget_t *wt, *ttmp;

    udz->closing = 1;
    ucs_list_for_each_safe(wr, wtmp, &udz->writes, list)
    {
        aptus_udz_write_finish(udz, wr, UCS_ERR_CANCELED);
    }
    ucs_list_for_each_safe(get, gtmp, &udz->gets, list)
    {
        if (get->comp != NULL) {
            aptus_udz_complete_later(udz, get->comp, UCS_ERR_CANCELED);
        }
        aptus_udz_get_free(udz, get);
    }
    ucs_list_for_each_safe(put, ptmp, &udz->puts, list)
    {
        aptus_udz_put_free(udz, put);
    }
    ucs_list_for_each_safe(fl, ftmp, &udz->flushes, list)
    {
        aptus_udz_complete_later(udz, fl->comp, UCS_ERR_CANCELED);
        ucs_free(fl);
    }
    aptus_ud_comp_list_cleanup(&udz->done);
    /* the targets' gets completed above and freed their records */
    ucs_list_for_each_safe(wt, ttmp, &udz->wtargets, list)
    {
        ucs_list_del(&wt->list);
        ucs_free(wt);
    }
    aptus_udz_free_arrays(udz);
    ucs_free(udz->bounce);
    ucs_mpool_cleanup(&udz->put_mp, 1);
    ucs_mpool_cleanup(&udz->get_mp, 1);
}

/* The channel interface (chan.h). */

static ucs_status_t aptus_udz_iface_get(aptus_chan_t *chan,
                                        aptus_chan_peer_t *peer,
                                        const struct iovec *iov,
                                        unsigned iovcnt, uint64_t remote_addr,
                                        const aptus_chan_key_t *key,
                                        uct_completion_t *comp)
{
    if (iovcnt != 1) {
        return UCS_ERR_INVALID_PARAM;
    }
    return aptus_udz_get(ucs_derived_of(chan, aptus_udz_t),
                         (aptus_ud_peer_t *)peer, iov[0].iov_base,
                         iov[0].iov_len, remote_addr, key->token, comp);
}

static ucs_status_t aptus_udz_iface_put(aptus_chan_t *chan,
                                        aptus_chan_peer_t *peer,
                                        const struct iovec *iov,
                                        unsigned iovcnt, uint64_t remote_addr,
                                        const aptus_chan_key_t *key,
                                        uct_completion_t *comp)
{
    if (iovcnt != 1) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* the target reads it from here: complete when it is in place there
     * (the small puts, put_short and put_bcopy, go in the stream:
     * aptus_udz_put_inline) */
    return aptus_udz_put(ucs_derived_of(chan, aptus_udz_t),
                         (aptus_ud_peer_t *)peer, iov[0].iov_base,
                         iov[0].iov_len, remote_addr, key->token, comp);
}

static ucs_status_t aptus_udz_iface_flush(aptus_chan_t *chan,
                                          aptus_chan_peer_t *peer,
                                          unsigned flags,
                                          uct_completion_t *comp)
{
    return aptus_udz_flush(ucs_derived_of(chan, aptus_udz_t),
                           (aptus_ud_peer_t *)peer, comp,
                           !!(flags & APTUS_CHAN_FLUSH_F_SHARED_COMP));
}

static void aptus_udz_iface_peer_disconnect(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer)
{
    aptus_udz_peer_disconnect(ucs_derived_of(chan, aptus_udz_t),
                              (aptus_ud_peer_t *)peer);
}

static unsigned aptus_udz_iface_progress(aptus_chan_t *chan, int is_async)
{
    return aptus_udz_progress(ucs_derived_of(chan, aptus_udz_t));
}

const aptus_chan_ops_t aptus_udz_chan_iface_ops = {
    .type            = APTUS_CHAN_UD_ZCOPY,
    .peer_size       = 0,
    .peer_connect    = NULL,                            /* UD-SR's streams */
    .peer_disconnect = aptus_udz_iface_peer_disconnect, /* its gets, puts */
    .send            = NULL,
    .put             = aptus_udz_iface_put,
    .get             = aptus_udz_iface_get,
    .flush           = aptus_udz_iface_flush,
    .pending_add     = aptus_chan_carrier_pending_add,
    .pending_purge   = aptus_chan_carrier_pending_purge,
    .check           = aptus_chan_carrier_check,
    .invalidate      = aptus_chan_carrier_invalidate,
    .progress        = aptus_udz_iface_progress,
};
