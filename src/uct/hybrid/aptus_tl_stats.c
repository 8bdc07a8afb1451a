/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the aptus transport's statistics at interface close: the
 * interface's line, one line per channel by message size, one per peer.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"

#include <ucs/sys/math.h>

#include <stdio.h>
#include <string.h>

unsigned uct_aptus_tl_iface_stats(uct_aptus_tl_iface_t *iface,
                                  uct_aptus_stat_t *stats, unsigned max)
{
    const uct_aptus_tl_stats_t *s  = &iface->stats;
    const aptus_alloc_stats_t *a   = &iface->alloc.stats;
    const aptus_rc_chan_stats_t *r = &iface->rc.stats;
    uint64_t tx_msgs = 0, tx_bytes = 0;
    unsigned i;

    for (i = 0; i < APTUS_CHAN_LAST; ++i) {
        tx_msgs += s->tx_msgs[i];
        tx_bytes += s->tx_bytes[i];
    }
    {
        uct_aptus_stat_t all[] = {
            /* as every transport of the module says them */
            { "tx_msgs", tx_msgs },
            { "tx_bytes", tx_bytes }, /* every channel, gets included */
            { "rx_msgs", s->rx_in_order + s->rx_held },
            { "ud_sr_msgs", s->tx_msgs[APTUS_CHAN_UD_SR] },
            { "ud_sr_bytes", s->tx_bytes[APTUS_CHAN_UD_SR] },
            { "rc_sr_msgs", s->tx_msgs[APTUS_CHAN_RC_SR] },
            { "rc_sr_bytes", s->tx_bytes[APTUS_CHAN_RC_SR] },
            { "rc_rdma_msgs", s->tx_msgs[APTUS_CHAN_RC_RDMA] },
            { "rc_rdma_bytes", s->tx_bytes[APTUS_CHAN_RC_RDMA] },
            { "ud_zcopy_msgs", s->tx_msgs[APTUS_CHAN_UD_ZCOPY] },
            { "ud_zcopy_bytes", s->tx_bytes[APTUS_CHAN_UD_ZCOPY] },
            { "rc_fp_msgs", s->tx_msgs[APTUS_CHAN_RC_FP] },
            { "rx_in_order", s->rx_in_order },
            { "rx_held", s->rx_held },
            { "rx_max_held", s->max_held },
            { "rx_duplicates", s->rx_duplicates },
            { "rx_reorder_full", s->rx_reorder_full },
            { "rx_malformed", s->rx_malformed },
            { "rx_unknown_link", s->rx_unknown_link },
            { "rc_max", iface->alloc.config.max[APTUS_ALLOC_RC] },
            { "rc_now", iface->alloc.used[APTUS_ALLOC_RC] },
            { "rc_peak", a->peak[APTUS_ALLOC_RC] },
            { "rc_requested", a->requested[APTUS_ALLOC_RC] },
            { "rc_granted", a->granted[APTUS_ALLOC_RC] },
            { "rc_refused", a->refused[APTUS_ALLOC_RC] },
            { "rc_refusals", a->refusals[APTUS_ALLOC_RC] },
            { "rc_demoted", a->demoted[APTUS_ALLOC_RC] },
            { "rc_expired", a->expired[APTUS_ALLOC_RC] },
            { "rc_connects", s->rc_connects },
            { "rc_closed", s->rc_closed },
            { "rc_failed", s->rc_failed },
            { "rc_fallbacks", s->rc_fallbacks },
            { "resent", s->resent },
            { "xacks_sent", s->xacks_sent },
            { "xacks_spared", s->xacks_spared },
            { "kept_now", s->kept_now },
            { "kept_bytes", s->kept_bytes },
            { "rc_shared", r->shared },
            { "rc_switched", r->switched },
            { "fp_max", iface->alloc.config.max[APTUS_ALLOC_FP] },
            { "fp_now", iface->alloc.used[APTUS_ALLOC_FP] },
            { "fp_peak", a->peak[APTUS_ALLOC_FP] },
            { "fp_requested", a->requested[APTUS_ALLOC_FP] },
            { "fp_granted", a->granted[APTUS_ALLOC_FP] },
            { "fp_refused", a->refused[APTUS_ALLOC_FP] },
            { "fp_refusals", a->refusals[APTUS_ALLOC_FP] },
            { "fp_demoted", a->demoted[APTUS_ALLOC_FP] },
            { "fp_expired", a->expired[APTUS_ALLOC_FP] },
            { "fp_barred", a->barred[APTUS_ALLOC_FP] },
            { "fp_block_bytes", iface->fpc.geom.size },
            /* blocks are mapped on first use and kept until close */
            { "fp_blocks_bytes",
              (uint64_t)iface->fpc.num_mapped * iface->fpc.geom.size },
            { "fp_blocks_active", iface->fpc.num_active },
            { "fp_blocks_orphaned", s->fp_blocks_orphaned },
            { "fp_tx_msgs", iface->fpc.stats.tx_msgs },
            { "fp_rx_msgs", iface->fpc.stats.rx_msgs },
            { "fp_no_credit", iface->fpc.stats.no_credit },
            { "fp_credit_msgs", s->fp_credit_msgs },
            { "fp_credits_piggybacked", iface->fpc.stats.credits_piggybacked },
            { "fp_credits_bad", iface->fpc.stats.credits_bad },
            { "fp_write_failures", iface->fpc.stats.write_failures },
            { "fp_rx_corrupt", iface->fpc.stats.rx_corrupt },
            { "fp_refused_no_block", s->fp_refused_no_block },
            { "ctl_sent", s->ctl_sent },
            { "ctl_received", s->ctl_received },
            { "ctl_deferred", s->ctl_deferred },
            { "ud_polls_shared", s->ud_polls_shared },
            { "rc_no_credits", r->no_credits },
            { "rc_half_open_dropped", r->half_open_dropped },
            { "rc_accept_paused", iface->conn->stats.accept_paused },
            { "rc_pid_proven", iface->conn->stats.pid_proven },
            { "rc_pid_unproven", iface->conn->stats.pid_unproven },
            { "rc_pid_refused", iface->conn->stats.pid_refused },
            /* per-peer state of peers with traffic (freed when idle) */
            { "peers_active", iface->num_active },
            { "peers_activated", s->peers_activated },
            { "peers_shrunk", s->peers_shrunk },
            { "active_bytes", uct_aptus_tl_active_bytes(iface) },
        };
        unsigned n = ucs_min(max, sizeof(all) / sizeof(all[0]));
        unsigned total, i_stat;
        size_t peers;

        memcpy(stats, all, n * sizeof(*stats));
        /* and what tells about UD, under the names of a part */
        total = n + uct_ud_base_stats(&iface->ud, UCT_UD_BASE_STATS_PART,
                                      stats + n, max - n);
        /* peer_bytes: what a peer holds now, its active state included */
        peers = aptus_ud_chan_num_peers(&iface->ud.chan);
        for (i_stat = n; (i_stat < total) && (peers > 0); ++i_stat) {
            if (!strcmp(stats[i_stat].name, "peer_bytes")) {
                stats[i_stat].value +=
                    ucs_div_round_up(uct_aptus_tl_active_bytes(iface), peers);
            }
        }
        return total;
    }
}

/* One line per peer that carried traffic: channel use by peer. */
static void uct_aptus_tl_iface_print_peer(uct_aptus_tl_iface_t *iface,
                                          const char *dest,
                                          aptus_ud_peer_t *peer)
{
    uct_aptus_tl_ep_t *ep = uct_aptus_tl_ep_of_peer(peer);
    char name[64];

    /* a peer that fell idle gave its counts back with its active state */
    if ((ep->act == NULL) || (ep->xtx.next == 0)) {
        return;
    }
    {
        uct_aptus_stat_t stats[] = {
            { "ud_sr_msgs", ep->act->tx_msgs[APTUS_CHAN_UD_SR] },
            { "ud_sr_bytes", ep->act->tx_bytes[APTUS_CHAN_UD_SR] },
            { "rc_sr_msgs", ep->act->tx_msgs[APTUS_CHAN_RC_SR] },
            { "rc_sr_bytes", ep->act->tx_bytes[APTUS_CHAN_RC_SR] },
            { "rc_rdma_msgs", ep->act->tx_msgs[APTUS_CHAN_RC_RDMA] },
            { "rc_rdma_bytes", ep->act->tx_bytes[APTUS_CHAN_RC_RDMA] },
            { "ud_zcopy_msgs", ep->act->tx_msgs[APTUS_CHAN_UD_ZCOPY] },
            { "ud_zcopy_bytes", ep->act->tx_bytes[APTUS_CHAN_UD_ZCOPY] },
            { "rc_now", ep->act->alloc.slot[APTUS_ALLOC_RC].state ==
                            APTUS_ALLOC_GRANTED },
            { "rx_held_now", ep->act->xrx.num_held },
            { "rc_fp_msgs", ep->act->tx_msgs[APTUS_CHAN_RC_FP] },
            { "rc_fp_bytes", ep->act->tx_bytes[APTUS_CHAN_RC_FP] },
            { "fp_now", uct_aptus_tl_fp_usable(ep) },
            { "remote", !!(ep->flags & UCT_APTUS_EP_REMOTE) },
        };

        snprintf(name, sizeof(name), "%s/peer-%08x-%u", iface->dev_name,
                 (unsigned)(uint32_t)peer->remote_key, peer->conn_id);
        uct_aptus_stats_print(dest, "aptus-peer", name, stats,
                              sizeof(stats) / sizeof(stats[0]));
    }
}

/* One line per channel: messages by size class ("le64", "le256", ...). */
void uct_aptus_tl_iface_print_sizes(uct_aptus_tl_iface_t *iface,
                                    const char *dest)
{
    static const char *const names[UCT_APTUS_SIZE_CLASSES] = {
        "le64",  "le256",  "le1k", "le4k", "le16k",
        "le64k", "le256k", "le1m", "gt1m"
    };
    uct_aptus_stat_t stats[UCT_APTUS_SIZE_CLASSES];
    char name[64];
    unsigned chan, c;

    if ((dest == NULL) || (dest[0] == '\0')) {
        return;
    }
    for (chan = 0; chan < APTUS_CHAN_LAST; ++chan) {
        if (iface->stats.tx_msgs[chan] == 0) {
            continue;
        }
        for (c = 0; c < UCT_APTUS_SIZE_CLASSES; ++c) {
            stats[c].name  = names[c];
            stats[c].value = iface->stats.tx_by_size[chan][c];
        }
        snprintf(name, sizeof(name), "%s/%s", iface->dev_name,
                 aptus_chan_names[chan]);
        uct_aptus_stats_print(dest, "aptus-sizes", name, stats,
                              UCT_APTUS_SIZE_CLASSES);
    }
}

void uct_aptus_tl_iface_print_peers(uct_aptus_tl_iface_t *iface,
                                    const char *dest)
{
    aptus_ud_peer_t *peer;

    if ((dest == NULL) || (dest[0] == '\0')) {
        return;
    }
    kh_foreach_key(&iface->ud.chan.peers, peer,
                   uct_aptus_tl_iface_print_peer(iface, dest, peer))
}
