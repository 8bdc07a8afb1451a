/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the ud_sr UCT transport: reliable active messages over
 * unreliable datagrams (the UD-SR channel), connect-to-iface.
 */
#ifndef UCT_UD_SR_IFACE_H_
#define UCT_UD_SR_IFACE_H_

#include "ud_base.h"

#include "proto/le.h"

#include <uct/base/uct_iface.h>

#define UCT_UD_SR_TL_NAME "ud_sr"

typedef struct uct_ud_sr_iface_config {
    uct_iface_config_t super;
    uct_ud_sr_params_t ud;
} uct_ud_sr_iface_config_t;

/* The iface address: the wire's port and interface key (the wire's device
 * address carries the rest: the IP, the HCA). */
typedef struct uct_ud_sr_iface_addr {
    uint8_t port[4]; /* opaque (wire_dev.h), little-endian */
    uint64_t key;
    uint16_t mtu; /* the largest datagram it takes */
} UCS_S_PACKED uct_ud_sr_iface_addr_t;

/* The endpoint: a UD-SR peer (stream) with the UCT endpoint in the
 * peer's headroom, so an endpoint costs what a peer costs. */
typedef struct uct_ud_sr_ep {
    uct_base_ep_t super;
    aptus_ud_peer_t peer;
} uct_ud_sr_ep_t;

static inline uct_ud_sr_ep_t *uct_ud_sr_ep_of_peer(aptus_ud_peer_t *peer)
{
    return ucs_container_of(peer, uct_ud_sr_ep_t, peer);
}

typedef struct uct_ud_sr_iface {
    uct_base_iface_t super;
    uct_ud_base_t ud; /* the wire, UD-SR and UD-ZCopy */
    int zcopy;        /* get_zcopy offered to the user */
    char dev_name[UCT_DEVICE_NAME_MAX];
} uct_ud_sr_iface_t;

extern ucs_config_field_t uct_ud_sr_iface_config_table[];

/* Report a failure of the endpoint peer to the user's error handler (from
 * progress), once; forget it when the endpoint goes away first. */
void uct_ud_sr_iface_queue_failure(uct_ud_sr_iface_t *iface,
                                   aptus_ud_peer_t *peer, ucs_status_t status);
void uct_ud_sr_iface_forget_failure(uct_ud_sr_iface_t *iface,
                                    aptus_ud_peer_t *peer);

/* Statistics of an interface, as printed; returns the number of entries. */
unsigned uct_ud_sr_iface_stats(uct_ud_sr_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max);

#endif
