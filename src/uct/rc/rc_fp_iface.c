/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the rc_fp UCT interface (rc_fp.h): rc_sr's interface plus
 * the blocks this process gives fast-path senders, polled from progress.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "rc_fp.h"
#include "uct/base/aptus_iface.h"

#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>

#include <string.h>
#include <unistd.h>

#define UCT_RC_FP_WIRE_POLL_MAX    1024
#define UCT_RC_FP_MAX_CHANNELS_MAX 4096

static const char *uct_rc_fp_mode_names[] = { [APTUS_FP_VELOBLOCK] =
                                                  "veloblock",
                                              [APTUS_FP_ORIGINAL] = "original",
                                              [APTUS_FP_ORIGINAL_REDUCED] =
                                                  "original_reduced",
                                              [APTUS_FP_MODE_LAST] = NULL };

ucs_config_field_t uct_rc_fp_iface_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_rc_fp_iface_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_rc_sr_iface_config_table) },

    { "MAX_CHANNELS", "8",
      "Fast-path channels a process gives peers (blocks of its memory they\n"
      "write into), and, separately, channels it sends into. Never exceeded:\n"
      "a peer asking beyond it is refused and stays on RC-SR (1 to 4096).",
      ucs_offsetof(uct_rc_fp_iface_config_t, max_channels),
      UCS_CONFIG_TYPE_UINT },

    { "THRESH", "16",
      "Messages small enough for the fast path an endpoint sends before it\n"
      "asks its peer for a channel (1 to 1048576).",
      ucs_offsetof(uct_rc_fp_iface_config_t, thresh), UCS_CONFIG_TYPE_UINT },

    { "MODE", "veloblock",
      "The channel's ring: 'veloblock' (one block of BLOCK_SIZE, variable-\n"
      "length messages from its end, byte credits, no sender buffer),\n"
      "'original' (SLOTS x SLOT_SIZE fixed slots on the receiver and a\n"
      "mirror of them on the sender: 32 x 8 KB each side), or\n"
      "'original_reduced' (fixed slots of SLOT_SIZE within BLOCK_SIZE for\n"
      "both sides together).",
      ucs_offsetof(uct_rc_fp_iface_config_t, mode),
      UCS_CONFIG_TYPE_ENUM(uct_rc_fp_mode_names) },

    { "BLOCK_SIZE", "32k",
      "Memory of one channel: veloblock's block; original_reduced's total\n"
      "(64 to 1g).",
      ucs_offsetof(uct_rc_fp_iface_config_t, block_size),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "SLOTS", "32",
      "Slots of one channel in 'original' mode (1 to 65536; at most 1g with\n"
      "SLOT_SIZE).",
      ucs_offsetof(uct_rc_fp_iface_config_t, slots), UCS_CONFIG_TYPE_UINT },

    { "SLOT_SIZE", "8k",
      "Bytes of one slot in the original modes (5 to 65539).",
      ucs_offsetof(uct_rc_fp_iface_config_t, slot_size),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "MAX_MSG", "8k",
      "Largest active message (UCT header included) that takes the fast\n"
      "path; larger ones, and those without credit, go over RC-SR (1 to\n"
      "65535, and at most what a slot or the block holds).",
      ucs_offsetof(uct_rc_fp_iface_config_t, max_msg),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "WIRE_POLL", "1",
      "While this process gives fast-path blocks, poll the connections (a\n"
      "system call on the sock wire) on one progress call in this many;\n"
      "the blocks on every one. Above 1, small messages gain a little\n"
      "latency, and credits and grants over RC-SR arrive later: with few\n"
      "slots (original_reduced) the fast path then runs dry more often\n"
      "(1 to 1024).",
      ucs_offsetof(uct_rc_fp_iface_config_t, wire_poll), UCS_CONFIG_TYPE_UINT },

    { NULL }
};

static inline uct_rc_fp_iface_t *uct_rc_fp_iface(uct_rc_sr_iface_t *iface)
{
    return ucs_derived_of(iface, uct_rc_fp_iface_t);
}

void uct_rc_fp_ep_handle_ctl(uct_rc_fp_iface_t *iface, aptus_rc_link_t *link,
                             const aptus_fp_ctl_t *ctl);

/* ---- the receiving side ------------------------------------------------ */

/* The link to answer a peer on: its endpoint's link when this side has one
 * (an accepted connection may be closed by a merge with it, and what was
 * sent on it lost), even while that link moves (sends then wait, and the
 * answer is owed); else the connection the peer opened. */
static aptus_rc_link_t *uct_rc_fp_find_link(uct_rc_fp_iface_t *iface,
                                            uint64_t peer_key)
{
    aptus_rc_link_t *link;
    aptus_rc_link_t *found = NULL, *orphan = NULL;

    ucs_list_for_each(link, &iface->super.chan.links, list)
    {
        if ((link->peer_key != peer_key) ||
            (link->flags & APTUS_RC_LINK_FAILED)) {
            continue;
        }
        if (link->flags & APTUS_RC_LINK_USER) {
            return link;
        }
        if (link->conn == NULL) {
            continue;
        }
        if (link->flags & APTUS_RC_LINK_ORPHAN) {
            /* a gone endpoint's connection, still draining: a RELEASE of
             * that endpoint's channel may still go there */
            orphan = link;
        } else {
            found = link;
        }
    }
    return (found != NULL) ? found : orphan;
}

static int uct_rc_fp_find_rx(uct_rc_fp_iface_t *iface, uint64_t peer_key,
                             uint16_t nonce)
{
    unsigned i;

    for (i = 0; i < iface->num_rx; ++i) {
        if ((iface->rx[i]->nonce == nonce) &&
            (iface->rx[i]->peer_key == peer_key)) {
            return i;
        }
    }
    return -1;
}

void uct_rc_fp_rx_free(uct_rc_fp_iface_t *iface, unsigned i)
{
    uct_rc_fp_rx_t *rx = iface->rx[i];

    iface->rx[i] = iface->rx[--iface->num_rx];
    aptus_fp_chan_block_close(&iface->fpc, rx->block);
    ucs_free(rx);
}

static void uct_rc_fp_rx_send_ctl(uct_rc_fp_iface_t *iface,
                                  aptus_rc_link_t *link,
                                  const aptus_fp_ctl_t *ctl, int *sent)
{
    uint8_t buf[APTUS_FP_CTL_MAX_LEN];
    aptus_chan_send_t send;

    aptus_chan_send_copy(&send, APTUS_FP_CTL_AM, NULL, 0, buf,
                         aptus_fp_ctl_pack(buf, ctl));
    send.flags = APTUS_CHAN_SEND_F_INTERNAL;
    *sent      = (link != NULL) &&
            (aptus_chan_send(&iface->super.chan.super,
                             (aptus_chan_peer_t *)link, &send) >= 0);
}

aptus_fp_block_t *uct_rc_fp_back_block(uct_rc_fp_iface_t *iface,
                                       uint64_t peer_key)
{
    uct_rc_fp_rx_t *rx;
    unsigned i;

    for (i = 0; i < iface->num_rx; ++i) {
        rx = iface->rx[i];
        if ((rx->peer_key == peer_key) && !rx->block->failed && !rx->released &&
            (aptus_fp_rx_pending_credits(&rx->block->ring) > 0)) {
            return rx->block;
        }
    }
    return NULL;
}

/* Freed credits go back with the next fast-path message to the peer
 * (uct_rc_fp_back_block), or explicitly once a quarter of the channel
 * piled up (traffic one way only). */
static void uct_rc_fp_rx_credit(uct_rc_fp_iface_t *iface, uct_rc_fp_rx_t *rx)
{
    aptus_fp_ctl_t ctl;
    int sent;

    if (rx->block->failed || (aptus_fp_rx_pending_credits(&rx->block->ring) <
                              iface->fpc.credit_quarter)) {
        rx->credit_owed = 0;
        return;
    }
    ctl.type           = APTUS_FP_CTL_CREDIT;
    ctl.nonce          = rx->nonce;
    ctl.credit.credits = aptus_fp_rx_pending_credits(&rx->block->ring);
    uct_rc_fp_rx_send_ctl(iface, uct_rc_fp_find_link(iface, rx->peer_key), &ctl,
                          &sent);
    if (sent) {
        (void)aptus_fp_chan_block_take_credits(&iface->fpc, rx->block);
        iface->stats.credit_msgs_sent++;
        rx->credit_owed = 0;
    } else {
        rx->credit_owed     = 1; /* no RC-SR credit now: from progress */
        iface->answers_owed = 1;
    }
}

/* ---- the channel's upcalls ---------------------------------------------- */

static ucs_status_t uct_rc_fp_chan_deliver(void *arg, aptus_fp_block_t *block,
                                           uint8_t am_id, void *data,
                                           size_t length)
{
    uct_rc_fp_iface_t *iface = arg;

    uct_iface_trace_am(&iface->super.super, UCT_AM_TRACE_TYPE_RECV, am_id, data,
                       length, "RX: AM FP");
    /* in place, no descriptor: a user that keeps it copies it */
    (void)uct_iface_invoke_am(&iface->super.super, am_id, data, length, 0);
    return UCS_OK;
}

static void uct_rc_fp_chan_credits_owed(void *arg, aptus_fp_block_t *block)
{
    uct_rc_fp_rx_credit(arg, block->owner);
}

static void uct_rc_fp_chan_block_failed(void *arg, aptus_fp_block_t *block,
                                        const char *why)
{
    uct_rc_fp_iface_t *iface = arg;
    aptus_rc_link_t *link, *tmp;

    ucs_error("rc_fp/%s: fast-path channel from 0x%016" PRIx64
              " failed: %s; the "
              "connections with that peer are failed",
              iface->super.dev_name, block->peer_key, why);
    /* a message may be lost, and the order of the ones after it with it:
     * the peer's connections fail (the user's error handler is told)
     * rather than wait for it forever */
    ucs_list_for_each_safe(link, tmp, &iface->super.chan.links, list)
    {
        if ((link->peer_key == block->peer_key) &&
            !(link->flags & APTUS_RC_LINK_FAILED)) {
            aptus_chan_invalidate(&iface->super.chan.super,
                                  (aptus_chan_peer_t *)link);
        }
    }
}

static const aptus_fp_chan_upcalls_t uct_rc_fp_chan_upcalls = {
    .deliver      = uct_rc_fp_chan_deliver,
    .credits_owed = uct_rc_fp_chan_credits_owed,
    .block_failed = uct_rc_fp_chan_block_failed,
    .peer_lost    = uct_rc_fp_peer_lost,
};

static void uct_rc_fp_owed_answers(uct_rc_fp_iface_t *iface);

/* The receiver's done with a released block once every message its
 * sender wrote was handed over (or the block failed). */
static int uct_rc_fp_rx_done(const uct_rc_fp_rx_t *rx)
{
    return rx->released &&
           ((rx->block->delivered == rx->fp_total) || rx->block->failed);
}

/* rc_sr's wire_due hook (UCX_RC_FP_WIRE_POLL: while blocks are given,
 * one call in that many). */
static int uct_rc_fp_wire_due(uct_rc_sr_iface_t *sr)
{
    uct_rc_fp_iface_t *iface = uct_rc_fp_iface(sr);

    /* the blocks cost a load each, the connections a system call: while
     * messages come through blocks, the call would delay them most */
    if ((iface->fpc.num_active == 0) ||
        (++iface->wire_tick >= iface->wire_poll)) {
        iface->wire_tick = 0;
        return 1;
    }
    return 0;
}

/* rc_sr's poll hook: every channel this process gives. */
static unsigned uct_rc_fp_iface_poll(uct_rc_sr_iface_t *sr)
{
    uct_rc_fp_iface_t *iface = uct_rc_fp_iface(sr);
    unsigned count;
    unsigned i;

    if (ucs_unlikely(iface->answers_owed)) {
        uct_rc_fp_owed_answers(iface);
    }
    count = aptus_fp_chan_progress(&iface->fpc);
    for (i = 0; i < iface->num_rx;) {
        if (ucs_unlikely(uct_rc_fp_rx_done(iface->rx[i]))) {
            uct_rc_fp_rx_free(iface, i);
            continue;
        }
        ++i;
    }
    return count;
}

/* Blocks of senders with no connection left: theirs to give again. */
static void uct_rc_fp_rx_collect(uct_rc_fp_iface_t *iface)
{
    unsigned i = 0;

    while (i < iface->num_rx) {
        if (uct_rc_fp_find_link(iface, iface->rx[i]->peer_key) == NULL) {
            uct_rc_fp_rx_free(iface, i);
        } else {
            ++i;
        }
    }
}

static void uct_rc_fp_grant_pack(uct_rc_fp_iface_t *iface,
                                 const uct_rc_fp_rx_t *rx, aptus_fp_ctl_t *ctl)
{
    aptus_mem_key_t key;

    aptus_fp_chan_block_key(&iface->fpc, rx->block, &key);
    memset(ctl, 0, sizeof(*ctl));
    ctl->type            = APTUS_FP_CTL_GRANT;
    ctl->nonce           = rx->nonce;
    ctl->grant.mode      = iface->fpc.geom.mode;
    ctl->grant.size      = iface->fpc.geom.size;
    ctl->grant.slots     = iface->fpc.geom.slots;
    ctl->grant.slot_size = iface->fpc.geom.slot_size;
    ctl->grant.address   = key.address;
    ctl->grant.pid       = key.pid;
    ctl->grant.host_id   = key.host_id;
    ctl->grant.token     = key.token;
}

static void uct_rc_fp_handle_request(uct_rc_fp_iface_t *iface,
                                     aptus_rc_link_t *link,
                                     const aptus_fp_ctl_t *req)
{
    aptus_fp_ctl_t ctl;
    uct_rc_fp_rx_t *rx = NULL;
    int sent;

    memset(&ctl, 0, sizeof(ctl));
    ctl.nonce = req->nonce;
    if (uct_rc_fp_find_rx(iface, link->peer_key, req->nonce) >= 0) {
        return; /* asked twice: answered already */
    }
    if (iface->num_rx == iface->max_channels) {
        uct_rc_fp_rx_collect(iface);
    }
    if ((iface->num_rx < iface->max_channels) &&
        (req->request.host_id == iface->host_id)) {
        rx = ucs_calloc(1, sizeof(*rx), "uct_rc_fp_rx");
        if (rx != NULL) {
            rx->block = aptus_fp_chan_block_open(&iface->fpc, rx,
                                                 link->peer_key, req->nonce);
            if (rx->block == NULL) {
                ucs_free(rx);
                rx = NULL;
            }
        }
    }
    if (rx == NULL) {
        ctl.type = APTUS_FP_CTL_REFUSE;
        iface->stats.refused++;
        uct_rc_fp_rx_send_ctl(iface, uct_rc_fp_find_link(iface, link->peer_key),
                              &ctl, &sent);
        if (!sent && (iface->num_refusals < iface->max_channels)) {
            iface->refusals[iface->num_refusals].peer_key = link->peer_key;
            iface->refusals[iface->num_refusals].nonce    = req->nonce;
            iface->num_refusals++;
        }
        return; /* the sender stays on RC-SR */
    }
    rx->peer_key = link->peer_key;
    rx->nonce    = req->nonce;
    uct_rc_fp_grant_pack(iface, rx, &ctl);
    uct_rc_fp_rx_send_ctl(iface, uct_rc_fp_find_link(iface, link->peer_key),
                          &ctl, &sent);
    rx->grant_owed             = !sent; /* no room now: from progress */
    iface->rx[iface->num_rx++] = rx;
    iface->stats.rx_peak       = ucs_max(iface->stats.rx_peak, iface->num_rx);
    iface->stats.granted++;
}

/* Answers that found no room on the connection when they were made. */
static void uct_rc_fp_owed_answers(uct_rc_fp_iface_t *iface)
{
    aptus_rc_link_t *link;
    aptus_fp_ctl_t ctl;
    uct_rc_fp_rx_t *rx;
    unsigned i;
    int sent;

    for (i = 0; i < iface->num_rx; ++i) {
        rx = iface->rx[i];
        if (rx->credit_owed) {
            uct_rc_fp_rx_credit(iface, rx);
        }
        if (!rx->grant_owed) {
            continue;
        }
        uct_rc_fp_grant_pack(iface, rx, &ctl);
        uct_rc_fp_rx_send_ctl(iface, uct_rc_fp_find_link(iface, rx->peer_key),
                              &ctl, &sent);
        rx->grant_owed = !sent;
    }
    for (i = 0; i < iface->num_refusals;) {
        memset(&ctl, 0, sizeof(ctl));
        ctl.type  = APTUS_FP_CTL_REFUSE;
        ctl.nonce = iface->refusals[i].nonce;
        uct_rc_fp_rx_send_ctl(
            iface, uct_rc_fp_find_link(iface, iface->refusals[i].peer_key),
            &ctl, &sent);
        if (sent) {
            iface->refusals[i] = iface->refusals[--iface->num_refusals];
        } else {
            ++i;
        }
    }
    for (i = 0; i < iface->num_releases;) {
        memset(&ctl, 0, sizeof(ctl));
        ctl.type             = APTUS_FP_CTL_RELEASE;
        ctl.nonce            = iface->releases[i].nonce;
        ctl.release.fp_total = iface->releases[i].fp_total;
        link = uct_rc_fp_find_link(iface, iface->releases[i].peer_key);
        uct_rc_fp_rx_send_ctl(iface, link, &ctl, &sent);
        if (sent || (link == NULL)) {
            iface->stats.released += sent;
            iface->releases[i] = iface->releases[--iface->num_releases];
        } else {
            ++i;
        }
    }
    iface->answers_owed = (iface->num_releases > 0);
    for (i = 0; i < iface->num_rx; ++i) {
        iface->answers_owed |=
            iface->rx[i]->grant_owed | iface->rx[i]->credit_owed;
    }
    iface->answers_owed |= (iface->num_refusals > 0);
}

static void uct_rc_fp_handle_ctl(uct_rc_fp_iface_t *iface,
                                 aptus_rc_link_t *link, const void *data,
                                 size_t length)
{
    aptus_fp_ctl_t ctl;
    int i;

    if (aptus_fp_ctl_parse(data, length, &ctl) != 0) {
        iface->stats.ctl_malformed++;
        return;
    }
    switch (ctl.type) {
    case APTUS_FP_CTL_REQUEST:
        uct_rc_fp_handle_request(iface, link, &ctl);
        iface->answers_owed = 1; /* progress looks (and clears it) */
        break;
    case APTUS_FP_CTL_RELEASE:
        i = uct_rc_fp_find_rx(iface, link->peer_key, ctl.nonce);
        if ((i >= 0) && !iface->rx[i]->released) {
            /* what the sender wrote before goes to the user first (some
             * may wait for RC-SR messages still on their way: the block
             * goes when they are all delivered) */
            iface->rx[i]->released = 1;
            iface->rx[i]->fp_total = ctl.release.fp_total;
            aptus_fp_chan_block_drain(&iface->fpc, iface->rx[i]->block,
                                      UINT32_MAX);
            if (uct_rc_fp_rx_done(iface->rx[i])) {
                uct_rc_fp_rx_free(iface, i);
            }
        }
        break;
    default:
        uct_rc_fp_ep_handle_ctl(iface, link, &ctl);
        break;
    }
}

/* rc_sr's deliver hook: control, order, trailer. */
static ucs_status_t uct_rc_fp_deliver_rc(uct_rc_sr_iface_t *sr,
                                         aptus_rc_link_t *link, uint8_t am_id,
                                         void *data, size_t length,
                                         aptus_conn_buf_t *buf, int at_start)
{
    uct_rc_fp_iface_t *iface = uct_rc_fp_iface(sr);
    uint32_t fp_before;
    uint16_t nonce;
    int i;

    if (am_id == APTUS_FP_CTL_AM) {
        uct_rc_fp_handle_ctl(iface, link, data, length);
        return UCS_OK;
    }
    if ((am_id >= UCT_AM_ID_MAX) ||
        (aptus_fp_trailer_parse(data, length, &nonce, &fp_before) != 0)) {
        if (sr->rx_bad_am_id++ == 0) {
            ucs_error("rc_fp/%s: dropped a malformed message (id %u, %zu "
                      "bytes) from 0x%016" PRIx64 "",
                      sr->dev_name, am_id, length, link->peer_key);
        }
        return UCS_OK;
    }
    if ((nonce != 0) &&
        ((i = uct_rc_fp_find_rx(iface, link->peer_key, nonce)) >= 0)) {
        /* what was written into the block before this one goes first */
        aptus_fp_chan_block_drain(&iface->fpc, iface->rx[i]->block, fp_before);
        aptus_fp_chan_block_carried(iface->rx[i]->block);
    }
    return uct_rc_sr_deliver_user(sr, am_id, data,
                                  length - APTUS_FP_TRAILER_LEN, buf, at_start);
}

/* ---- statistics --------------------------------------------------------- */

unsigned uct_rc_fp_iface_stats(uct_rc_fp_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max)
{
    const uct_rc_fp_stats_t *s     = &iface->stats;
    const aptus_fp_chan_stats_t *c = &iface->fpc.stats;
    const aptus_fp_geom_t *geom    = &iface->fpc.geom;
    uint64_t share         = s->eligible ? 100 * c->tx_msgs / s->eligible : 0;
    uct_aptus_stat_t all[] = {
        { "fp_tx_msgs", c->tx_msgs },
        { "fp_tx_bytes", c->tx_bytes },
        { "fp_eligible", s->eligible },
        { "fp_share_pct", share },
        { "fp_no_credit", c->no_credit },
        { "fp_requests", s->requests },
        { "fp_granted", s->granted },
        { "fp_refused", s->refused },
        { "fp_unreachable", s->unreachable },
        { "fp_released", s->released },
        { "fp_rx_msgs", c->rx_msgs },
        { "fp_rx_bytes", c->rx_bytes },
        { "fp_rx_held_for_order", c->rx_held_for_order },
        { "fp_rx_corrupt", c->rx_corrupt },
        { "fp_credit_msgs_sent", s->credit_msgs_sent },
        { "fp_credit_msgs_received", s->credit_msgs_received },
        { "fp_credits_returned", c->credits_explicit + c->credits_piggybacked },
        { "fp_credits_piggybacked", c->credits_piggybacked },
        { "fp_credits_piggyback_received", c->credits_piggyback_received },
        { "fp_credits_bad", c->credits_bad },
        { "fp_ctl_malformed", s->ctl_malformed },
        { "fp_ctl_unknown", s->ctl_unknown + c->credits_unknown },
        { "fp_write_failures", c->write_failures },
        { "fp_max_channels", iface->max_channels },
        { "fp_rx_channels", iface->num_rx },
        { "fp_rx_peak", s->rx_peak },
        { "fp_tx_channels", iface->fpc.num_senders },
        { "fp_tx_peak", c->senders_peak },
        { "fp_recv_bytes_per_channel", aptus_fp_recv_bytes(geom) },
        { "fp_send_bytes_per_channel", aptus_fp_send_bytes(geom) },
        { "fp_bytes_now",
          (uint64_t)iface->num_rx * aptus_fp_recv_bytes(geom) +
              (uint64_t)iface->fpc.num_senders * aptus_fp_send_bytes(geom) },
        { "fp_bytes_peak", s->rx_peak * aptus_fp_recv_bytes(geom) +
                               c->senders_peak * aptus_fp_send_bytes(geom) },
        /* blocks stay mapped once used, until the interface closes */
        { "fp_bytes_mapped", aptus_fp_chan_bytes(&iface->fpc) },
        { "fp_polls", c->polls },
        { "fp_poll_channels", c->poll_blocks },
    };
    unsigned n = ucs_min(max, sizeof(all) / sizeof(all[0]));
    unsigned m;

    memcpy(stats, all, n * sizeof(*stats));
    m = uct_rc_sr_iface_stats(&iface->super, stats + n, max - n);
    return n + m;
}

/* ---- the interface ------------------------------------------------------ */

static ucs_status_t uct_rc_fp_iface_query(uct_iface_h tl_iface,
                                          uct_iface_attr_t *attr)
{
    uct_rc_sr_iface_t *iface = ucs_derived_of(tl_iface, uct_rc_sr_iface_t);
    ucs_status_t status;

    /* rc_sr's answer, less the order trailer every RC-SR message carries */
    status = uct_rc_sr_iface_query(tl_iface, attr);
    if (status != UCS_OK) {
        return status;
    }
    attr->cap.am.max_short -= APTUS_FP_TRAILER_LEN;
    attr->cap.am.max_bcopy -= APTUS_FP_TRAILER_LEN;
    attr->cap.am.max_zcopy -= APTUS_FP_TRAILER_LEN;
    attr->cap.am.max_iov -= 1;
    /* A small message costs a store into the peer's memory, no system
     * call on either side: only where every peer of the device is on this
     * host (a loopback device). On a link, peers on other hosts get RC-SR
     * and its figures; UCP picks lanes from these, so they must hold for
     * every peer the device reaches. */
    if (iface->wdev->is_local(iface->dev_name)) {
        attr->latency.c = ucs_min(attr->latency.c, 300e-9);
        attr->overhead  = 1e-6;
    }
    return UCS_OK;
}

static UCS_CLASS_DECLARE_DELETE_FUNC(uct_rc_fp_iface_t, uct_iface_t);

static uct_iface_ops_t uct_rc_fp_iface_tl_ops = {
    .ep_am_short              = uct_rc_fp_ep_am_short,
    .ep_am_short_iov          = uct_base_ep_am_short_iov,
    .ep_am_bcopy              = uct_rc_fp_ep_am_bcopy,
    .ep_am_zcopy              = uct_rc_fp_ep_am_zcopy,
    .ep_put_short             = uct_rc_sr_ep_put_short,
    .ep_put_bcopy             = uct_rc_sr_ep_put_bcopy,
    .ep_put_zcopy             = uct_rc_sr_ep_put_zcopy,
    .ep_get_bcopy             = uct_rc_sr_ep_get_bcopy,
    .ep_get_zcopy             = uct_rc_sr_ep_get_zcopy,
    .ep_pending_add           = uct_rc_sr_ep_pending_add,
    .ep_pending_purge         = uct_rc_sr_ep_pending_purge,
    .ep_flush                 = uct_rc_sr_ep_flush,
    .ep_fence                 = uct_rc_sr_ep_fence,
    .ep_check                 = uct_rc_sr_ep_check,
    .ep_create                = uct_rc_fp_ep_create,
    .ep_destroy               = uct_rc_fp_ep_destroy,
    .iface_flush              = uct_rc_sr_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_rc_sr_iface_progress,
    .iface_event_fd_get       = ucs_empty_function_return_unsupported,
    .iface_event_arm          = ucs_empty_function_return_unsupported,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_rc_fp_iface_t),
    .iface_query              = uct_rc_fp_iface_query,
    .iface_get_device_address = uct_rc_sr_iface_get_device_address,
    .iface_get_address        = uct_rc_sr_iface_get_address,
    .iface_is_reachable       = uct_rc_sr_iface_is_reachable,
};

/* rc_sr's interface, with rc_fp's endpoints, active messages and hooks */
static uct_rc_sr_iface_ops_t uct_rc_fp_iface_ops = {
    .tl_ops        = &uct_rc_fp_iface_tl_ops,
    .tl_name       = UCT_RC_FP_TL_NAME,
    .config_prefix = UCT_RC_FP_CONFIG_PREFIX,
    .ep_size       = sizeof(uct_rc_fp_ep_t),
    .deliver       = uct_rc_fp_deliver_rc,
    .link_failed   = uct_rc_fp_link_failed,
    .wire_due      = uct_rc_fp_wire_due,
    .poll          = uct_rc_fp_iface_poll,
    .print_stats   = 0, /* rc_fp's line has rc_sr's counters in it */
};

static UCS_CLASS_INIT_FUNC(uct_rc_fp_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const uct_rc_fp_iface_config_t *config =
        ucs_derived_of(tl_config, uct_rc_fp_iface_config_t);
    const char *why = NULL;
    aptus_fp_geom_t geom;
    ucs_status_t status;
    /* -1 reads as the largest value: WIRE_POLL=-1 never polled the
     * connections, a huge MAX_CHANNELS or block mapped memory for ever */
    const uct_aptus_range_t ranges[] = {
        { "MAX_CHANNELS", uct_aptus_uint(config->max_channels), 1,
          UCT_RC_FP_MAX_CHANNELS_MAX },
        { "THRESH", uct_aptus_uint(config->thresh), 1, 1048576 },
        { "BLOCK_SIZE", uct_aptus_bytes(config->block_size), APTUS_VB_MIN_SIZE,
          APTUS_VB_MAX_SIZE },
        { "SLOTS", uct_aptus_uint(config->slots), 1, 65536 },
        { "SLOT_SIZE", uct_aptus_bytes(config->slot_size),
          APTUS_FP_FIXED_OVERHEAD + 1,
          APTUS_VB_MAX_LEN + APTUS_FP_FIXED_OVERHEAD },
        { "MAX_MSG", uct_aptus_bytes(config->max_msg), 1, APTUS_VB_MAX_LEN },
        { "WIRE_POLL", uct_aptus_uint(config->wire_poll), 1,
          UCT_RC_FP_WIRE_POLL_MAX },
    };

    UCS_CLASS_CALL_SUPER_INIT(uct_rc_sr_iface_t, &uct_rc_fp_iface_ops, md,
                              worker, params, tl_config);

    if (!uct_aptus_ranges_check(UCT_RC_FP_TL_NAME, UCT_RC_FP_CONFIG_PREFIX,
                                ranges, ucs_static_array_size(ranges))) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* in range one by one, the sizes may still make no ring together */
    if (aptus_fp_geom_make((aptus_fp_mode_t)config->mode, config->block_size,
                           config->slots, config->slot_size, &geom,
                           &why) != 0) {
        ucs_error("rc_fp: invalid configuration: UCX_" UCT_RC_FP_CONFIG_PREFIX
                  "MODE=%s with BLOCK_SIZE=%zu SLOTS=%u SLOT_SIZE=%zu: %s",
                  uct_rc_fp_mode_names[config->mode], config->block_size,
                  config->slots, config->slot_size, why);
        return UCS_ERR_INVALID_PARAM;
    }
    self->max_channels = config->max_channels;
    self->thresh       = config->thresh;
    self->wire_poll    = config->wire_poll;
    self->wire_tick    = 0;
    self->max_msg      = ucs_min(config->max_msg,
                                 aptus_fp_max_len(&geom) - APTUS_FP_MSG_HDR_LEN);
    self->host_id      = aptus_conn_reach_id(); /* and PID namespace */
    self->next_nonce   = 0;
    self->num_rx       = 0;
    self->num_tx       = 0;
    self->num_refusals = 0;
    self->num_releases = 0;
    self->answers_owed = 0;
    memset(&self->stats, 0, sizeof(self->stats));
    /* RC-SR carries the channel's control, and is the peer's health */
    status = aptus_fp_chan_init(&self->fpc, &geom, self->max_channels,
                                self->max_channels, self->super.wire,
                                &self->super.chan.super,
                                &uct_rc_fp_chan_upcalls, self);
    if (status != UCS_OK) {
        return status;
    }
    self->fpc.numa_node =
        uct_aptus_md_numa_node(self->super.super.md, self->super.dev_name);
    self->releases = ucs_calloc(self->max_channels, sizeof(*self->releases),
                                "uct_rc_fp_releases");
    self->refusals = ucs_calloc(self->max_channels, sizeof(*self->refusals),
                                "uct_rc_fp_refusals");
    self->rx =
        ucs_calloc(self->max_channels, sizeof(*self->rx), "uct_rc_fp_rx_table");
    self->tx =
        ucs_calloc(self->max_channels, sizeof(*self->tx), "uct_rc_fp_tx_table");
    if ((self->rx == NULL) || (self->tx == NULL) || (self->refusals == NULL) ||
        (self->releases == NULL)) {
        ucs_free(self->releases);
        ucs_free(self->refusals);
        ucs_free(self->rx);
        ucs_free(self->tx);
        aptus_fp_chan_cleanup(&self->fpc);
        return UCS_ERR_NO_MEMORY;
    }

    ucs_debug("rc_fp/%s: %s, %u B per channel received, %u B sent, at most "
              "%u channels, messages up to %u B",
              self->super.dev_name, aptus_fp_mode_names[geom.mode],
              aptus_fp_recv_bytes(&geom), aptus_fp_send_bytes(&geom),
              self->max_channels, self->max_msg);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_rc_fp_iface_t)
{
    uct_aptus_md_t *md = ucs_derived_of(self->super.super.md, uct_aptus_md_t);
    uct_aptus_stat_t stats[128];
    unsigned n;

    n = uct_rc_fp_iface_stats(self, stats, 128);
    /* one line: rc_sr's counters are in it (rc_sr's cleanup prints none) */
    uct_aptus_stats_print(md->stats, UCT_RC_FP_TL_NAME, self->super.dev_name,
                          stats, n);
    while (self->num_rx > 0) {
        uct_rc_fp_rx_free(self, 0);
    }
    ucs_free(self->rx);
    ucs_free(self->tx);
    ucs_free(self->refusals);
    ucs_free(self->releases);
    aptus_fp_chan_cleanup(&self->fpc);
}

UCS_CLASS_DEFINE(uct_rc_fp_iface_t, uct_rc_sr_iface_t);

static UCS_CLASS_DEFINE_NEW_FUNC(uct_rc_fp_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t *,
                                 const uct_iface_config_t *);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_rc_fp_iface_t, uct_iface_t);

static ucs_status_t
uct_rc_fp_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                        unsigned *num_devices_p)
{
    return uct_aptus_iface_query_devices(md, 1, 1, devices_p, num_devices_p);
}

UCT_TL_DEFINE_ENTRY(&uct_aptus_component, rc_fp, uct_rc_fp_query_devices,
                    uct_rc_fp_iface_t, UCT_RC_FP_CONFIG_PREFIX,
                    uct_rc_fp_iface_config_table, uct_rc_fp_iface_config_t);
