/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the rc_sr UCT transport: RC-SR eager active messages over a
 * reliable connection per endpoint (receive pool shared by all connections,
 * credit flow control) and RC-RDMA one-sided put/get for UCP's rendezvous
 * and RMA, connect-to-iface.
 */
#ifndef UCT_RC_SR_IFACE_H_
#define UCT_RC_SR_IFACE_H_

#include "rc_params.h"
#include "uct/base/aptus_md.h"
#include "uct/base/aptus_iface.h"
#include "uct/base/aptus_stats.h"
#include "channel/rc_rdma_chan.h"
#include "proto/le.h"

#include <uct/base/uct_iface.h>

#define UCT_RC_SR_TL_NAME       "rc_sr"
#define UCT_RC_SR_MAX_AM_HDR    256
#define UCT_RC_SR_PUT_MAX_SHORT 2048

typedef struct uct_rc_sr_iface_config {
    uct_iface_config_t super;
    uct_rc_params_t rc; /* what every transport with RC-SR sets */
    unsigned rx_max_bufs;
    size_t rx_copy_thresh;
} uct_rc_sr_iface_config_t;

/* The iface address: listening port, interface key, and the credits this
 * interface grants every connection (the wire's device address carries the
 * IP). */
typedef struct uct_rc_sr_iface_addr {
    uint8_t port[4]; /* the listening one: opaque (wire_dev.h), LE */
    uint64_t key;
    uint16_t credits;
} UCS_S_PACKED uct_rc_sr_iface_addr_t;

typedef struct uct_rc_sr_iface uct_rc_sr_iface_t;

/* What a flavour of rc_sr (rc_sr itself, or one built on it) gives the
 * base constructor, as UCX's uct_rc_iface_ops_t: the base calls through
 * it and knows nothing else of the flavour. */
typedef struct uct_rc_sr_iface_ops {
    uct_iface_ops_t *tl_ops;   /* the transport's operations, all of them */
    const char *tl_name;       /* in messages and the statistics line */
    const char *config_prefix; /* of its settings, to name a bad one */
    size_t ep_size;            /* its endpoint, a uct_rc_sr_ep_t first */
    /* an active message from a connection, to check and hand to the user */
    ucs_status_t (*deliver)(uct_rc_sr_iface_t *iface, aptus_rc_link_t *link,
                            uint8_t am_id, void *data, size_t length,
                            aptus_conn_buf_t *buf, int at_start);
    /* an endpoint's connection failed, before the base reports it; NULL:
     * nothing of the flavour's to fail with it */
    void (*link_failed)(uct_rc_sr_iface_t *iface, aptus_rc_link_t *link,
                        ucs_status_t status);
    /* whether this progress call polls the connections; NULL: every one */
    int (*wire_due)(uct_rc_sr_iface_t *iface);
    /* what the flavour polls itself on every progress call; NULL: none */
    unsigned (*poll)(uct_rc_sr_iface_t *iface);
    /* 0: the flavour prints a statistics line of its own at close, with
     * the base's counters in it, and the base prints none */
    int print_stats;
} uct_rc_sr_iface_ops_t;

/* The endpoint owns a link of the RC channels (one connection). */
typedef struct uct_rc_sr_ep {
    uct_base_ep_t super;
    aptus_rc_link_t link;
} uct_rc_sr_ep_t;

struct uct_rc_sr_iface {
    uct_base_iface_t super;
    const uct_rc_sr_iface_ops_t *ops; /* the flavour's */
    const aptus_wire_dev_ops_t *wdev; /* the wire's devices and addresses */
    aptus_rc_chan_t chan;
    aptus_rc_rdma_chan_t rdma;
    aptus_conn_wire_t *wire;
    char dev_name[UCT_DEVICE_NAME_MAX];
    int rma; /* put/get offered */
    unsigned rx_queue_len;
    unsigned rx_max_bufs;
    size_t rx_headroom; /* the user's, before each held message */
    size_t desc_to_buf; /* from a held message's descriptor to its buffer */
    uct_recv_desc_t release_desc;
    /* Small messages are delivered from a copy of their own, so that one
     * the user holds does not pin a whole receive buffer. */
    size_t rx_copy_thresh;
    size_t rx_copy_bytes; /* what one copy descriptor takes */
    size_t rx_copy_pad;   /* bytes before a copy descriptor's release pointer */
    ucs_mpool_t rx_copy_mp;
    uct_recv_desc_t release_copy_desc;
    size_t am_alignment; /* (data + am_align_offset) of a descriptor */
    size_t am_align_offset;
    uint64_t rx_copied;          /* messages delivered from a copy */
    uint64_t rx_copy_full;       /* ... not: no copy descriptor left */
    uint64_t rx_held_now;        /* descriptors the user holds */
    uint64_t rx_held_bytes;      /* memory they keep */
    uint64_t rx_pool_empty_seen; /* wire's rx_pool_empty, last looked at */
    int rx_pool_full_reported;
    void *bounce; /* bcopy staging, seg_size bytes */
    /* completion of operations over a connection that the user gave none
     * for (the flush tells when they are done): it never fires */
    uct_completion_t sink;
    double latency;
    double bandwidth;
    aptus_rc_conn_resources_t conn_res; /* of the last connection opened */
    uint64_t eps_created;
    uint64_t rx_bad_am_id;         /* messages naming no user's id: dropped */
    uct_aptus_failures_t failures; /* to report from progress */
};

extern ucs_config_field_t uct_rc_sr_iface_config_table[];

/* A flavour derives its interface from this one, passing its ops. */
UCS_CLASS_DECLARE(uct_rc_sr_iface_t, uct_rc_sr_iface_ops_t *, uct_md_h,
                  uct_worker_h, const uct_iface_params_t *,
                  const uct_iface_config_t *);

/* Statistics of an interface, as printed; returns the number of entries. */
unsigned uct_rc_sr_iface_stats(uct_rc_sr_iface_t *iface,
                               uct_aptus_stat_t *stats, unsigned max);

/* Hand an active message to the user (rc_sr's receive path, also a
 * flavour's once it checked the message). */
ucs_status_t uct_rc_sr_deliver_user(uct_rc_sr_iface_t *iface, uint8_t am_id,
                                    void *data, size_t length,
                                    aptus_conn_buf_t *buf, int at_start);

/* The interface operations a flavour's table may share with rc_sr's. */
ucs_status_t uct_rc_sr_iface_query(uct_iface_h tl_iface,
                                   uct_iface_attr_t *attr);
ucs_status_t uct_rc_sr_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                   uct_completion_t *comp);
unsigned uct_rc_sr_iface_progress(uct_iface_h tl_iface);
ucs_status_t uct_rc_sr_iface_get_device_address(uct_iface_h tl_iface,
                                                uct_device_addr_t *addr);
ucs_status_t uct_rc_sr_iface_get_address(uct_iface_h tl_iface,
                                         uct_iface_addr_t *addr);
int uct_rc_sr_iface_is_reachable(const uct_iface_h tl_iface,
                                 const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr);

/* Forget queued failure reports of an endpoint being destroyed. */
void uct_rc_sr_iface_forget_ep(uct_rc_sr_iface_t *iface, uct_rc_sr_ep_t *ep);

#endif
