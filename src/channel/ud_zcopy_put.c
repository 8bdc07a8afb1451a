/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-ZCopy writes (put): a get turned around.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_zcopy_int.h"

#include <ucs/debug/memtrack_int.h>

#include <string.h>

/* ---- writes (put): a get turned around -------------------------------- */

aptus_udz_write_t *aptus_udz_find_write(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                        uint32_t xfer)
{
    aptus_udz_write_t *wr;

    ucs_list_for_each(wr, &udz->writes, list)
    {
        if ((wr->xfer == xfer) && (wr->peer == peer)) {
            return wr;
        }
    }
    return NULL;
}

/* Whether [address, +length) lies in the source of a write to peer that
 * token names: only the target of that write may read it. */
int aptus_udz_write_exported(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                             uint64_t token, uint64_t address, uint64_t length)
{
    aptus_udz_write_t *wr;
    uint64_t start;

    ucs_list_for_each(wr, &udz->writes, list)
    {
        start = (uintptr_t)wr->src;
        if ((wr->peer == peer) && (wr->src_token == token) &&
            (address >= start) && (length <= wr->length) &&
            (address - start <= wr->length - length)) {
            return 1;
        }
    }
    return 0;
}

static void aptus_udz_send_write(aptus_udz_t *udz, aptus_udz_write_t *wr)
{
    aptus_zc_msg_t msg;

    memset(&msg, 0, sizeof(msg));
    msg.type             = APTUS_ZC_MSG_WRITE;
    msg.xfer             = wr->xfer;
    msg.write.dest_addr  = wr->remote_addr;
    msg.write.length     = wr->length;
    msg.write.dest_token = wr->token;
    msg.write.src_addr   = (uintptr_t)wr->src;
    msg.write.src_token  = wr->src_token;
    wr->req_pending = (aptus_udz_send(udz, wr->peer, &msg, NULL, 0) != UCS_OK);
}

/* The write ends: the source is no longer exported, and what this side
 * still streams from it stops. */
void aptus_udz_write_finish(aptus_udz_t *udz, aptus_udz_write_t *wr,
                            ucs_status_t status)
{
    aptus_udz_put_t *put, *tmp;

    ucs_list_for_each_safe(put, tmp, &udz->puts, list)
    {
        if ((put->peer == wr->peer) && (put->token == wr->src_token)) {
            aptus_udz_put_free(udz, put);
        }
    }
    ucs_list_del(&wr->list);
    if (status == UCS_OK) {
        udz->stats.write_bytes += wr->length;
    } else {
        udz->stats.aborted++;
    }
    if (wr->comp != NULL) {
        aptus_udz_complete_later(udz, wr->comp, status);
    }
    ucs_free(wr);
    aptus_udz_check_flushes(udz);
}

ucs_status_t aptus_udz_put_inline(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                                  const void *src, size_t length,
                                  uint64_t remote_addr, uint64_t token)
{
    aptus_zc_msg_t msg;
    ucs_status_t status;

    if (peer->flags & APTUS_UD_PEER_FAILED) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }
    if (length > aptus_udz_put_inline_max(udz)) {
        return UCS_ERR_INVALID_PARAM;
    }
    memset(&msg, 0, sizeof(msg));
    msg.type           = APTUS_ZC_MSG_PUT;
    msg.put.dest_addr  = remote_addr;
    msg.put.dest_token = token;
    status             = aptus_udz_send(udz, peer, &msg, src, length);
    if (status == UCS_OK) {
        udz->stats.puts_inline++;
        udz->stats.write_bytes += length;
    }
    return status;
}

/* A small put arrived: the bytes go where the writer said if the user
 * registered that memory under the token; else they are dropped and
 * counted (the writer's flush still completes: as with a wrong rkey over
 * UCX's own transports, the data does not land). Served in the async
 * thread too, so that it is in place before the stream acknowledges it. */
void aptus_udz_handle_put(aptus_udz_t *udz, const aptus_zc_msg_t *msg)
{
    if ((msg->put.length > 0) &&
        ((udz->check == NULL) ||
         !udz->check(udz->check_arg, msg->put.dest_token, msg->put.dest_addr,
                     msg->put.length))) {
        if (udz->stats.write_refused++ == 0) {
            ucs_diag("ud_zcopy: a put of %zu bytes to 0x%" PRIx64 " names "
                     "memory not registered under its key: dropped",
                     msg->put.length, msg->put.dest_addr);
        }
        return;
    }
    memcpy((void *)(uintptr_t)msg->put.dest_addr, msg->put.data,
           msg->put.length);
}

ucs_status_t aptus_udz_put(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           const void *src, uint64_t length,
                           uint64_t remote_addr, uint64_t token,
                           uct_completion_t *comp)
{
    aptus_udz_write_t *wr;

    if (peer->flags & APTUS_UD_PEER_FAILED) {
        return UCS_ERR_ENDPOINT_TIMEOUT;
    }
    if (length == 0) {
        return UCS_OK;
    }
    if ((length > udz->config.max_get) ||
        ((uintptr_t)src + length < (uintptr_t)src)) {
        return UCS_ERR_INVALID_PARAM;
    }
    wr = ucs_malloc(sizeof(*wr), "aptus_udz_write");
    if (wr == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    wr->peer        = peer;
    wr->xfer        = udz->next_xfer++;
    wr->src         = src;
    wr->length      = length;
    wr->remote_addr = remote_addr;
    wr->token       = token;
    wr->src_token   = aptus_udz_random64();
    wr->comp        = comp;
    ucs_list_add_tail(&udz->writes, &wr->list);
    udz->stats.writes++;
    aptus_udz_send_write(udz, wr);
    return UCS_INPROGRESS;
}

static void aptus_udz_wtarget_reply(aptus_udz_t *udz, aptus_udz_wtarget_t *wt)
{
    aptus_zc_msg_t msg;

    msg.type        = APTUS_ZC_MSG_WDONE;
    msg.xfer        = wt->xfer;
    msg.done.status = wt->status;
    if (udz->closing ||
        (aptus_udz_send(udz, wt->peer, &msg, NULL, 0) == UCS_OK)) {
        ucs_list_del(&wt->list);
        ucs_free(wt);
    } else {
        wt->reply_pending = 1;
    }
}

/* The target's get of the writer's data ended. */
static void aptus_udz_wtarget_done(uct_completion_t *comp)
{
    aptus_udz_wtarget_t *wt = ucs_container_of(comp, aptus_udz_wtarget_t, comp);

    wt->status = comp->status;
    aptus_udz_wtarget_reply(wt->udz, wt);
}

void aptus_udz_handle_write(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                            const aptus_zc_msg_t *msg)
{
    aptus_udz_wtarget_t *wt;
    ucs_status_t status;

    wt = ucs_calloc(1, sizeof(*wt), "aptus_udz_wtarget");
    if (wt == NULL) {
        return; /* the writer's stream check finds the peer alive, so it
                 * waits: the same as a lost request of a get */
    }
    wt->udz  = udz;
    wt->peer = peer;
    wt->xfer = msg->xfer;
    ucs_list_add_tail(&udz->wtargets, &wt->list);

    /* write only into memory the user registered and gave the key of */
    if ((udz->check == NULL) ||
        !udz->check(udz->check_arg, msg->write.dest_token, msg->write.dest_addr,
                    msg->write.length)) {
        udz->stats.write_refused++;
        wt->status = UCS_ERR_INVALID_ADDR;
        aptus_udz_wtarget_reply(udz, wt);
        return;
    }
    wt->comp.func   = aptus_udz_wtarget_done;
    wt->comp.count  = 1;
    wt->comp.status = UCS_OK;
    status = aptus_udz_get(udz, peer, (void *)(uintptr_t)msg->write.dest_addr,
                           msg->write.length, msg->write.src_addr,
                           msg->write.src_token, &wt->comp);
    if (status != UCS_INPROGRESS) {
        wt->status = (status == UCS_OK) ? UCS_OK : status;
        aptus_udz_wtarget_reply(udz, wt);
    }
}

unsigned aptus_udz_writes_progress(aptus_udz_t *udz)
{
    aptus_udz_write_t *wr;
    aptus_udz_wtarget_t *wt, *tmp;
    unsigned count = 0;

    ucs_list_for_each(wr, &udz->writes, list)
    {
        if (wr->req_pending) {
            aptus_udz_send_write(udz, wr);
            ++count;
        }
    }
    ucs_list_for_each_safe(wt, tmp, &udz->wtargets, list)
    {
        if (wt->reply_pending) {
            aptus_udz_wtarget_reply(udz, wt);
            ++count;
        }
    }
    return count;
}

/* peer's stream failed (status) or its endpoint is gone (CANCELED). */
void aptus_udz_writes_stop(aptus_udz_t *udz, aptus_ud_peer_t *peer,
                           ucs_status_t status, int failed)
{
    aptus_udz_write_t *wr, *wtmp;
    aptus_udz_wtarget_t *wt, *ttmp;

    ucs_list_for_each_safe(wr, wtmp, &udz->writes, list)
    {
        if (wr->peer == peer) {
            aptus_udz_write_finish(udz, wr, status);
        }
    }
    /* the targets' gets end with the stream: only replies still waiting
     * for room are dropped here */
    ucs_list_for_each_safe(wt, ttmp, &udz->wtargets, list)
    {
        if (failed && (wt->peer == peer) && wt->reply_pending) {
            ucs_list_del(&wt->list);
            ucs_free(wt);
        }
    }
}
