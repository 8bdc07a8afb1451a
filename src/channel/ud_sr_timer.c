/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: UD-SR channel, timers: delayed ACKs, retransmission and the
 * search for the largest datagram a path carries.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "ud_sr_chan_int.h"

#include <inttypes.h>
#include <ucs/sys/math.h>

void aptus_ud_chan_set_class(aptus_ud_peer_t *peer, unsigned cls)
{
    peer->flags =
        (uint16_t)((peer->flags & ((1u << APTUS_UD_PEER_CLASS_SHIFT) - 1)) |
                   (cls << APTUS_UD_PEER_CLASS_SHIFT));
}

/* Start the search for the largest datagram the path to peer carries:
 * data goes at a size every link takes while probes of the size both ends
 * take (then Ethernet's) are answered, or not. */
void aptus_ud_chan_path_start(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                              size_t want)
{
    aptus_ud_peer_ext_t *ext;
    size_t base = ucs_min(want, APTUS_UD_PATH_BASE);

    if ((chan->wire->flags & APTUS_DGRAM_WIRE_F_LOCAL) || (want <= base)) {
        aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, want));
        return;
    }
    if (aptus_ud_peer_mtu(chan, peer) >= ucs_min(want, chan->wire->mtu)) {
        return; /* known already (a second endpoint on the stream) */
    }
    ext = aptus_ud_peer_ext_get(chan, peer);
    if (ext == NULL) {
        aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, base));
        return; /* no memory to search: the safe size */
    }
    aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, base));
    ext->path_want    = (uint16_t)ucs_min(want, chan->wire->mtu);
    ext->path_probe   = ext->path_want;
    ext->path_tries   = 0;
    ext->path_due_us  = chan->now_us;
    chan->next_due_us = chan->now_us;
    aptus_ud_chan_activate(chan, peer);
}

/* A probe is due, or the size being probed is given up. */
static void aptus_ud_chan_path_timer(aptus_ud_chan_t *chan,
                                     aptus_ud_peer_t *peer)
{
    aptus_ud_peer_ext_t *ext = peer->ext;
    char buf[64];

    if (chan->now_us < ext->path_due_us) {
        goto out;
    }
    if (ext->path_tries < APTUS_UD_PATH_TRIES) {
        aptus_ud_tx_path_probe(chan, peer, ext->path_probe);
        ext->path_due_us = chan->now_us + ((uint64_t)APTUS_UD_PATH_PROBE_US
                                           << ext->path_tries);
        ext->path_tries++;
        chan->stats.path_probes++;
        goto out;
    }

    /* every probe of this size lost while the stream lives: the path drops
     * it (a switch or a hop with a smaller MTU than both ends) */
    chan->stats.path_lost++;
    ucs_diag("ud_sr: %s drops datagrams of %u bytes (both ends take %u); "
             "using %zu",
             chan->wire->ops->addr_str(&peer->addr, buf, sizeof(buf)),
             ext->path_probe, ext->path_want,
             (ext->path_probe > APTUS_UD_PATH_ETHERNET) &&
                     (aptus_ud_peer_mtu(chan, peer) < APTUS_UD_PATH_ETHERNET)
                 ? (size_t)APTUS_UD_PATH_ETHERNET
                 : aptus_ud_peer_mtu(chan, peer));
    if ((ext->path_probe > APTUS_UD_PATH_ETHERNET) &&
        (aptus_ud_peer_mtu(chan, peer) < APTUS_UD_PATH_ETHERNET)) {
        ext->path_probe  = APTUS_UD_PATH_ETHERNET; /* jumbo frames lost */
        ext->path_tries  = 0;
        ext->path_due_us = chan->now_us;
    } else {
        ext->path_probe = 0;
        return;
    }

out:
    if (ext->path_due_us < chan->next_due_us) {
        chan->next_due_us = ext->path_due_us;
    }
}

void aptus_ud_chan_path_confirmed(aptus_ud_chan_t *chan, aptus_ud_peer_t *peer,
                                  size_t size)
{
    aptus_ud_peer_ext_t *ext = peer->ext;

    if ((ext == NULL) || (ext->path_probe == 0) || (size != ext->path_probe)) {
        return; /* stale, duplicated, or not asked for */
    }
    aptus_ud_chan_set_class(peer, aptus_ud_chan_dg_class(chan, size));
    ext->path_probe = 0;
    chan->stats.path_raised++;
    aptus_ud_peer_ext_try_release(chan, peer);
}

void aptus_ud_chan_tick(aptus_ud_chan_t *chan)
{
    const aptus_rel_config_t *cfg = &chan->config.rel;
    aptus_rel_timer_status_t tstatus;
    aptus_ud_tx_ctx_t ctx;
    aptus_ud_peer_t *peer;
    aptus_rel_tx_t *tx;
    unsigned i, resent;
    uint64_t due;
    int probe, periodic;

    /* A tick comes every TIMER_TICK, and sooner when a peer's timer is due
     * (a probe after two round trips): only the first kind sends delayed
     * ACKs, so that data that arrived a moment ago is not acknowledged
     * alone just before the reply that would have carried it. */
    periodic = (chan->now_us - chan->last_tick_us) >= chan->config.tick_us;
    if (periodic) {
        chan->last_tick_us = chan->now_us;
    }
    chan->next_due_us = UINT64_MAX;
    ctx.chan          = chan;
    ctx.status        = UCS_OK;

    for (i = 0; i < ucs_array_length(&chan->active);) {
        peer = ucs_array_elem(&chan->active, i);
        if (ucs_unlikely(peer->flags & APTUS_UD_PEER_FAILED)) {
            aptus_ud_chan_deactivate(chan, peer);
            continue;
        }

        /* Delayed ACK: whatever was not piggybacked by now goes alone. */
        if (periodic && aptus_rel_rx_has_unacked(&peer->rx)) {
            aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_ACK, 0);
        }

        if (!aptus_ud_peer_tx_idle(peer)) {
            tx       = &peer->win->tx;
            ctx.peer = peer;
            if (tx->sacked) {
                chan->stats.tx_fast_retransmits += aptus_rel_tx_fast_retransmit(
                    tx, cfg, chan->now_us, aptus_ud_tx_resend, &ctx);
            }
            /* one pass over the window: resends, probe, next due time */
            tstatus =
                aptus_rel_tx_timer(tx, cfg, chan->now_us, aptus_ud_tx_resend,
                                   &ctx, &resent, &probe, &due);
            if (due < chan->next_due_us) {
                chan->next_due_us = due;
            }
            chan->stats.tx_retransmits += resent;
            if (probe) {
                aptus_ud_tx_probe(chan, peer);
                chan->stats.tx_probes++;
            }
            if (tstatus == APTUS_REL_TIMER_FAILED) {
                /* what a user needs to tell a dead peer from a stream the
                 * two sides no longer agree on */
                ucs_diag("ud_sr: stream %u to key 0x%016" PRIx64 " timed "
                         "out: sent up to psn %u, acknowledged %u, receiving "
                         "psn %u; interface totals: bad acks %" PRIu64
                         ", out of window %" PRIu64 ", duplicates %" PRIu64,
                         peer->conn_id, peer->remote_key, tx->next_psn,
                         tx->acked_psn, peer->rx.expected,
                         chan->stats.rx_bad_ack, chan->stats.rx_out_of_window,
                         chan->stats.rx_duplicates);
                aptus_ud_tx_batch_flush(chan);
                aptus_ud_chan_peer_fail(chan, peer, UCS_ERR_ENDPOINT_TIMEOUT);
                /* Should the peer be alive after all (a long partition),
                 * its side of the stream dies too: a later endpoint may
                 * reuse the stream number once this one is reclaimed. */
                aptus_ud_tx_send_ctl(chan, peer, APTUS_UD_SR_TYPE_RESET, 0);
                continue; /* removed from the active set: same index again */
            }
        }

        if (ucs_unlikely((peer->ext != NULL) && peer->ext->path_probe)) {
            aptus_ud_chan_path_timer(chan, peer);
        }

        if (aptus_ud_peer_tx_idle(peer) &&
            !aptus_rel_rx_has_unacked(&peer->rx) &&
            ((peer->ext == NULL) ||
             ((peer->ext->held == NULL) && (peer->ext->path_probe == 0)))) {
            aptus_ud_chan_deactivate(chan, peer);
            aptus_ud_peer_ext_try_release(chan, peer);
            continue;
        }
        ++i;
    }
    aptus_ud_tx_batch_flush(chan);
}
