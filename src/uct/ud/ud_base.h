/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the UD half of a transport, embedded by every transport that
 * carries a UD-SR channel (ud_sr, and the aptus hybrid): the datagram
 * wire, the UD-SR channel with UD-ZCopy carried on it, the async timer and
 * receive events that keep them going while the user computes, the queue
 * of failures to report from progress, the device address, and the
 * statistics of the UD channels under one set of names.
 */
#ifndef UCT_UD_BASE_H_
#define UCT_UD_BASE_H_

#include "ud_sr_params.h"
#include "uct/base/aptus_iface.h"
#include "uct/base/aptus_md.h"
#include "uct/base/aptus_stats.h"
#include "channel/ud_sr_chan.h"
#include "channel/ud_zcopy.h"
#include "wire/wire_dev.h"

#include <uct/base/uct_iface.h>

typedef struct uct_ud_base {
    uct_base_iface_t *iface; /* the transport's interface, which holds it */
    const char *tl_name;
    const char *dev_name;
    const aptus_wire_dev_ops_t *wdev;
    aptus_dgram_wire_t *wire;
    aptus_ud_chan_t chan;
    aptus_udz_t udz; /* UD-ZCopy: gets, and serving peers' gets */
    uct_aptus_async_timer_t timer;
    uct_aptus_async_rx_t async_rx;
    uct_aptus_failures_t failures;   /* to report from progress */
    double latency;                  /* the wire's, for UCT's estimates */
    double bandwidth;                /* of messages copied through the wire */
    aptus_ud_internal_cb_t internal; /* the transport's internal messages */
    void *internal_arg;
} uct_ud_base_t;

/* Which of the UD channels' statistics a transport prints, and how: one
 * made of UD alone prints all under plain names; one where UD is a part
 * prints those that tell about UD, prefixed "ud_" where its other
 * channels have a counter of the same name. */
typedef enum {
    UCT_UD_BASE_STATS_ALONE,
    UCT_UD_BASE_STATS_PART
} uct_ud_base_stats_style_t;

/* Open the wire, the UD-SR channel and UD-ZCopy on it; ops and arg are
 * the transport's upcalls of the channel. On failure nothing is left
 * open. */
ucs_status_t uct_ud_base_init(uct_ud_base_t *ud, uct_base_iface_t *iface,
                              const char *tl_name, const char *dev_name,
                              const uct_ud_sr_setup_t *setup,
                              const aptus_ud_chan_ops_t *ops, void *arg);

/* The transport's handler of its own internal messages (ids other than
 * UD-ZCopy's); without one, such a message counts as malformed. */
void uct_ud_base_set_internal(uct_ud_base_t *ud, aptus_ud_internal_cb_t cb,
                              void *arg);

/* Start the async timer and the receive events (last thing of an open). */
ucs_status_t uct_ud_base_start(uct_ud_base_t *ud,
                               const uct_ud_sr_setup_t *setup);

/* Stop them (first thing of a close, without the async lock). */
void uct_ud_base_stop(uct_ud_base_t *ud);

/* Close UD-ZCopy, the channel and the wire; forget queued failures. */
void uct_ud_base_cleanup(uct_ud_base_t *ud);

/* The UD part of a progress call: the channel, then UD-ZCopy. */
unsigned uct_ud_base_progress(uct_ud_base_t *ud);

/* Queue a failure of the endpoint ep (whose stream is peer) for the user's
 * error handler, once; forget it when the endpoint goes away first; report
 * what is queued (from progress). */
void uct_ud_base_queue_failure(uct_ud_base_t *ud, aptus_ud_peer_t *peer,
                               uct_ep_h ep, ucs_status_t status);
void uct_ud_base_forget_failure(uct_ud_base_t *ud, uct_ep_h ep);

static inline void uct_ud_base_report_failures(uct_ud_base_t *ud)
{
    if (ucs_unlikely(uct_aptus_failures_pending(&ud->failures))) {
        uct_aptus_failures_report(&ud->failures, &ud->iface->super, ud->tl_name,
                                  ud->dev_name);
    }
}

/* The device address, and whether a peer's is reachable. */
size_t uct_ud_base_dev_addr_len(const uct_ud_base_t *ud);
void uct_ud_base_dev_addr_pack(const uct_ud_base_t *ud,
                               uct_device_addr_t *addr);
int uct_ud_base_is_reachable(const uct_ud_base_t *ud,
                             const uct_device_addr_t *dev_addr);

/* The port of this interface's datagram address (the wire's opaque value,
 * wire_dev.h), and a peer's address from its device address and the port
 * its interface address names. */
uint32_t uct_ud_base_port(const uct_ud_base_t *ud);
void uct_ud_base_peer_addr(const uct_ud_base_t *ud,
                           const uct_device_addr_t *dev_addr, uint32_t port,
                           aptus_wire_addr_t *addr);

/* Append the UD channels' statistics; returns how many of at most max. */
unsigned uct_ud_base_stats(uct_ud_base_t *ud, uct_ud_base_stats_style_t style,
                           uct_aptus_stat_t *stats, unsigned max);

#endif
