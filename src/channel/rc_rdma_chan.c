/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-RDMA channel (see rc_rdma_chan.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_rdma_chan.h"

#include "base/aptus_mpool.h"

#include <ucs/debug/log.h>

#include <inttypes.h>

/* An operation in flight over a connection: its completion. */
typedef struct aptus_rc_rdma_req {
    aptus_conn_rma_req_t super;
    uct_completion_t *comp;
} aptus_rc_rdma_req_t;

ucs_status_t aptus_rc_rdma_chan_init(aptus_rc_rdma_chan_t *rdma,
                                     aptus_rc_chan_t *rc, int over_conn)
{
    memset(rdma, 0, sizeof(*rdma));
    rdma->super.ops     = &aptus_rc_rdma_chan_iface_ops;
    rdma->super.carrier = &rc->super;
    rdma->rc            = rc;
    rdma->over_conn     = over_conn;
    return ucs_mpool_init(&rdma->req_mp, 0, sizeof(aptus_rc_rdma_req_t), 0, 8,
                          16, UINT_MAX, &aptus_mpool_plain_ops,
                          "aptus_rc_rdma_reqs");
}

void aptus_rc_rdma_chan_cleanup(aptus_rc_rdma_chan_t *rdma)
{
    ucs_mpool_cleanup(&rdma->req_mp, 1);
}

static void aptus_rc_rdma_req_done(aptus_conn_rma_req_t *self,
                                   ucs_status_t status)
{
    aptus_rc_rdma_req_t *req = ucs_derived_of(self, aptus_rc_rdma_req_t);
    uct_completion_t *comp   = req->comp;

    ucs_mpool_put(req);
    if (status == UCS_ERR_INVALID_ADDR) {
        ucs_error("rc_rdma: the peer refused a one-sided operation outside "
                  "its registered memory");
    }
    uct_invoke_completion(comp, status);
}

/* The peer is on another host: the operation goes as frames on the link's
 * connection, and completes when the target has served it. */
static ucs_status_t
aptus_rc_rdma_over_conn(aptus_rc_rdma_chan_t *rdma, aptus_rc_link_t *link,
                        const struct iovec *iov, unsigned iovcnt,
                        uint64_t remote_addr, const aptus_mem_key_t *key,
                        int is_write, uct_completion_t *comp)
{
    aptus_conn_wire_t *wire  = rdma->rc->wire;
    aptus_rc_rdma_req_t *req = NULL;
    ucs_status_t status;

    if (!rdma->over_conn || (wire->ops->read_conn == NULL) ||
        ((comp == NULL) && !is_write)) {
        return UCS_ERR_UNREACHABLE;
    }
    if (comp != NULL) {
        req = ucs_mpool_get(&rdma->req_mp);
        if (req == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        req->super.done = aptus_rc_rdma_req_done;
        req->comp       = comp;
    }
    status = is_write ? wire->ops->write_conn(link->conn, key, remote_addr, iov,
                                              iovcnt, req ? &req->super : NULL)
                      : wire->ops->read_conn(link->conn, key, remote_addr, iov,
                                             iovcnt, &req->super);
    if (status != UCS_OK) {
        if (req != NULL) {
            ucs_mpool_put(req);
        }
        return status;
    }
    if (is_write) {
        rdma->stats.conn_puts++;
    } else {
        rdma->stats.conn_gets++;
    }
    return (req != NULL) ? UCS_INPROGRESS : UCS_OK;
}

ucs_status_t aptus_rc_rdma_key_direct(aptus_rc_rdma_chan_t *rdma,
                                      aptus_rc_link_t *link,
                                      const aptus_mem_key_t *key)
{
    aptus_conn_wire_t *wire = rdma->rc->wire;
    ucs_status_t status;

    if (link->conn == NULL) {
        return UCS_ERR_UNREACHABLE;
    }
    status = wire->ops->key_check(link->conn, key);
    if ((status == UCS_OK) && rdma->over_conn &&
        (wire->ops->reads_outstanding != NULL) &&
        (wire->ops->reads_outstanding(link->conn) > 0)) {
        /* operations carried before the peer proved itself are still on
         * their way: a direct one would overtake them (a put_bw receiver
         * polling its last byte saw an older write land after the last) */
        return UCS_ERR_BUSY;
    }
    return status;
}

static ucs_status_t aptus_rc_rdma_op(aptus_rc_rdma_chan_t *rdma,
                                     aptus_rc_link_t *link,
                                     const struct iovec *iov, unsigned iovcnt,
                                     uint64_t remote_addr,
                                     const aptus_mem_key_t *key, int is_write,
                                     uct_completion_t *comp)
{
    aptus_conn_wire_t *wire = rdma->rc->wire;
    ucs_status_t status;
    size_t length = 0;
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        length += iov[i].iov_len;
    }
    if (length == 0) {
        return UCS_OK; /* nothing to move, and the key may be a dummy */
    }
    status = aptus_rc_chan_rma_check(rdma->rc, link);
    if (status != UCS_OK) {
        return status;
    }
    status = aptus_rc_rdma_key_direct(rdma, link, key);
    if (ucs_unlikely(status == UCS_ERR_INVALID_ADDR)) {
        rdma->stats.refused++; /* an edited key: counted by the wire */
        ucs_error("rc_rdma %s: the remote key names another process than "
                  "the peer",
                  is_write ? "put" : "get");
        return status;
    }
    if (ucs_unlikely((status == UCS_ERR_NO_RESOURCE) && !rdma->over_conn)) {
        return status; /* the peer's proof is on its way */
    }
    if (ucs_unlikely(status != UCS_OK)) {
        rdma->stats.ordered += (status == UCS_ERR_BUSY);
        status = aptus_rc_rdma_over_conn(rdma, link, iov, iovcnt, remote_addr,
                                         key, is_write, comp);
        if (UCS_STATUS_IS_ERR(status) && (status != UCS_ERR_NO_RESOURCE)) {
            rdma->stats.refused++;
        } else if (!UCS_STATUS_IS_ERR(status)) {
            rdma->stats.puts += is_write;
            rdma->stats.put_bytes += is_write ? length : 0;
            rdma->stats.gets += !is_write;
            rdma->stats.get_bytes += is_write ? 0 : length;
        }
        return status;
    }
    /* into the connection's proven peer; an edited key is refused */
    status = is_write
                 ? wire->ops->write(link->conn, key, remote_addr, iov, iovcnt)
                 : wire->ops->read(link->conn, key, remote_addr, iov, iovcnt);
    if (ucs_unlikely(status != UCS_OK)) {
        rdma->stats.refused++;
        if (status == UCS_ERR_INVALID_ADDR) {
            ucs_error("rc_rdma %s: [0x%" PRIx64 ", +%zu) is outside the "
                      "remote key's region, not mapped, or the key names "
                      "another process than the peer",
                      is_write ? "put" : "get", remote_addr, length);
        }
        return status;
    }
    if (is_write) {
        rdma->stats.puts++;
        rdma->stats.put_bytes += length;
    } else {
        rdma->stats.gets++;
        rdma->stats.get_bytes += length;
    }
    return UCS_OK;
}

ucs_status_t aptus_rc_rdma_put(aptus_rc_rdma_chan_t *rdma,
                               aptus_rc_link_t *link, const struct iovec *iov,
                               unsigned iovcnt, uint64_t remote_addr,
                               const aptus_mem_key_t *key,
                               uct_completion_t *comp)
{
    return aptus_rc_rdma_op(rdma, link, iov, iovcnt, remote_addr, key, 1, comp);
}

ucs_status_t aptus_rc_rdma_get(aptus_rc_rdma_chan_t *rdma,
                               aptus_rc_link_t *link, const struct iovec *iov,
                               unsigned iovcnt, uint64_t remote_addr,
                               const aptus_mem_key_t *key,
                               uct_completion_t *comp)
{
    return aptus_rc_rdma_op(rdma, link, iov, iovcnt, remote_addr, key, 0, comp);
}

/* The channel interface (chan.h). */

static ucs_status_t
aptus_rc_rdma_iface_put(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                        const struct iovec *iov, unsigned iovcnt,
                        uint64_t remote_addr, const aptus_chan_key_t *key,
                        uct_completion_t *comp)
{
    return aptus_rc_rdma_put(ucs_derived_of(chan, aptus_rc_rdma_chan_t),
                             (aptus_rc_link_t *)peer, iov, iovcnt, remote_addr,
                             &key->mem, comp);
}

static ucs_status_t
aptus_rc_rdma_iface_get(aptus_chan_t *chan, aptus_chan_peer_t *peer,
                        const struct iovec *iov, unsigned iovcnt,
                        uint64_t remote_addr, const aptus_chan_key_t *key,
                        uct_completion_t *comp)
{
    return aptus_rc_rdma_get(ucs_derived_of(chan, aptus_rc_rdma_chan_t),
                             (aptus_rc_link_t *)peer, iov, iovcnt, remote_addr,
                             &key->mem, comp);
}

static ucs_status_t aptus_rc_rdma_iface_flush(aptus_chan_t *chan,
                                              aptus_chan_peer_t *peer,
                                              unsigned flags,
                                              uct_completion_t *comp)
{
    /* an operation on this host is complete when its call returns, one over
     * the connection when the target answered: RC-SR's flush waits for
     * both (the backlog and the connection's outstanding operations) */
    return chan->carrier->ops->flush(chan->carrier, peer, flags, comp);
}

const aptus_chan_ops_t aptus_rc_rdma_chan_iface_ops = {
    .type            = APTUS_CHAN_RC_RDMA,
    .peer_size       = 0,
    .peer_connect    = NULL, /* RC-SR's links */
    .peer_disconnect = NULL, /* nothing of its own per link */
    .send            = NULL,
    .put             = aptus_rc_rdma_iface_put,
    .get             = aptus_rc_rdma_iface_get,
    .flush           = aptus_rc_rdma_iface_flush,
    .pending_add     = aptus_chan_carrier_pending_add,
    .pending_purge   = aptus_chan_carrier_pending_purge,
    .check           = aptus_chan_carrier_check,
    .invalidate      = aptus_chan_carrier_invalidate,
    .progress        = NULL, /* RC-SR progresses the links */
};
