/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the channel interface (see chan.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "chan.h"

const char *const aptus_chan_names[APTUS_CHAN_LAST] = {
    [APTUS_CHAN_UD_SR] = "ud_sr", [APTUS_CHAN_UD_ZCOPY] = "ud_zcopy",
    [APTUS_CHAN_RC_SR] = "rc_sr", [APTUS_CHAN_RC_RDMA] = "rc_rdma",
    [APTUS_CHAN_RC_FP] = "rc_fp",
};

ucs_status_t aptus_chan_carrier_pending_add(aptus_chan_t *chan,
                                            aptus_chan_peer_t *peer,
                                            uct_pending_req_t *req,
                                            unsigned flags)
{
    return chan->carrier->ops->pending_add(chan->carrier, peer, req, flags);
}

void aptus_chan_carrier_pending_purge(aptus_chan_t *chan,
                                      aptus_chan_peer_t *peer,
                                      uct_pending_purge_callback_t cb,
                                      void *arg)
{
    chan->carrier->ops->pending_purge(chan->carrier, peer, cb, arg);
}

ucs_status_t aptus_chan_carrier_check(aptus_chan_t *chan,
                                      aptus_chan_peer_t *peer)
{
    return chan->carrier->ops->check(chan->carrier, peer);
}

void aptus_chan_carrier_invalidate(aptus_chan_t *chan, aptus_chan_peer_t *peer)
{
    chan->carrier->ops->invalidate(chan->carrier, peer);
}
