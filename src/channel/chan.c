/*
 * UCX-Aptus: the channel interface (see chan.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "chan.h"

const char *const aptus_chan_names[APTUS_CHAN_LAST] = {
    [APTUS_CHAN_UD_SR]    = "ud_sr",
    [APTUS_CHAN_UD_ZCOPY] = "ud_zcopy",
    [APTUS_CHAN_RC_SR]    = "rc_sr",
    [APTUS_CHAN_RC_RDMA]  = "rc_rdma",
    [APTUS_CHAN_RC_FP]    = "rc_fp",
};
