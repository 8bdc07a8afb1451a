/*
 * UCX-Aptus: the RC-RDMA channel (see rc_rdma_chan.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_rdma_chan.h"

#include <ucs/debug/log.h>

#include <inttypes.h>

void aptus_rc_rdma_chan_init(aptus_rc_rdma_chan_t *rdma, aptus_rc_chan_t *rc)
{
    memset(rdma, 0, sizeof(*rdma));
    rdma->super.ops     = &aptus_rc_rdma_chan_iface_ops;
    rdma->super.carrier = &rc->super;
    rdma->rc            = rc;
}

static ucs_status_t aptus_rc_rdma_op(aptus_rc_rdma_chan_t *rdma,
                                     aptus_rc_link_t *link,
                                     const struct iovec *iov, unsigned iovcnt,
                                     uint64_t remote_addr,
                                     const aptus_mem_key_t *key, int is_write)
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
    status = is_write ? wire->ops->write(wire, key, remote_addr, iov, iovcnt)
                      : wire->ops->read(wire, key, remote_addr, iov, iovcnt);
    if (ucs_unlikely(status != UCS_OK)) {
        rdma->stats.refused++;
        if (status == UCS_ERR_INVALID_ADDR) {
            ucs_error("rc_rdma %s: [0x%" PRIx64 ", +%zu) is outside the "
                      "remote key's region or not mapped",
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
                               const aptus_mem_key_t *key)
{
    return aptus_rc_rdma_op(rdma, link, iov, iovcnt, remote_addr, key, 1);
}

ucs_status_t aptus_rc_rdma_get(aptus_rc_rdma_chan_t *rdma,
                               aptus_rc_link_t *link, const struct iovec *iov,
                               unsigned iovcnt, uint64_t remote_addr,
                               const aptus_mem_key_t *key)
{
    return aptus_rc_rdma_op(rdma, link, iov, iovcnt, remote_addr, key, 0);
}

/* The channel interface (chan.h). */

static ucs_status_t aptus_rc_rdma_iface_put(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer,
                                            const struct iovec *iov,
                                            unsigned iovcnt,
                                            uint64_t remote_addr,
                                            const aptus_chan_key_t *key,
                                            uct_completion_t *comp)
{
    return aptus_rc_rdma_put(ucs_derived_of(chan, aptus_rc_rdma_chan_t),
                             (aptus_rc_link_t *)peer, iov, iovcnt, remote_addr,
                             &key->mem);
}

static ucs_status_t aptus_rc_rdma_iface_get(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer,
                                            const struct iovec *iov,
                                            unsigned iovcnt,
                                            uint64_t remote_addr,
                                            const aptus_chan_key_t *key,
                                            uct_completion_t *comp)
{
    return aptus_rc_rdma_get(ucs_derived_of(chan, aptus_rc_rdma_chan_t),
                             (aptus_rc_link_t *)peer, iov, iovcnt, remote_addr,
                             &key->mem);
}

static ucs_status_t aptus_rc_rdma_iface_flush(aptus_chan_t *chan,
                                              aptus_chan_peer_t *peer,
                                              unsigned flags,
                                              uct_completion_t *comp)
{
    /* an operation is complete when its call returns on this wire; what
     * the link still queues (that later operations wait for) is RC-SR's */
    return chan->carrier->ops->flush(chan->carrier, peer, flags, comp);
}

const aptus_chan_ops_t aptus_rc_rdma_chan_iface_ops = {
    .type            = APTUS_CHAN_RC_RDMA,
    .peer_size       = 0,
    .peer_connect    = NULL, /* RC-SR's links */
    .peer_disconnect = NULL, /* nothing of its own per link */
    .send          = NULL,
    .put           = aptus_rc_rdma_iface_put,
    .get           = aptus_rc_rdma_iface_get,
    .flush         = aptus_rc_rdma_iface_flush,
    .pending_add   = aptus_chan_carrier_pending_add,
    .pending_purge = aptus_chan_carrier_pending_purge,
    .check         = aptus_chan_carrier_check,
    .invalidate    = aptus_chan_carrier_invalidate,
    .progress      = NULL, /* RC-SR progresses the links */
};
