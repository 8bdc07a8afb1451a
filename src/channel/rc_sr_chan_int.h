/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: RC-SR channel internals shared by its .c files.
 */
#ifndef APTUS_RC_SR_CHAN_INT_H_
#define APTUS_RC_SR_CHAN_INT_H_

#include "rc_sr_chan.h"

#include <ucs/time/time.h>

typedef struct aptus_rc_flush {
    ucs_queue_elem_t queue;
    uct_completion_t *comp;
} aptus_rc_flush_t;

/* rc_sr_chan.c */
size_t aptus_rc_link_backlog(const aptus_rc_link_t *link);
unsigned aptus_rc_link_reads(const aptus_rc_link_t *link);
void aptus_rc_link_init(aptus_rc_link_t *link, unsigned flags,
                        uint32_t tx_credits, uint32_t grant);
void aptus_rc_link_complete_flushes(aptus_rc_link_t *link, ucs_status_t status);
void aptus_rc_link_report(aptus_rc_chan_t *chan, aptus_rc_link_t *link);

/* rc_sr_link.c */
void aptus_rc_link_failed(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                          ucs_status_t status);
void aptus_rc_accepted_free(aptus_rc_chan_t *chan, aptus_rc_link_t *link);
void aptus_rc_chan_drop_half_open(aptus_rc_chan_t *chan, unsigned max,
                                  ucs_time_t now);
void aptus_rc_link_send_ctl(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                            unsigned kind);
void aptus_rc_link_schedule(aptus_rc_chan_t *chan, aptus_rc_link_t *link);
void aptus_rc_chan_orphan_drained(aptus_rc_chan_t *chan, aptus_rc_link_t *link);

#endif
