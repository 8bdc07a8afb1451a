/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the RC-SR channel: active messages over reliable connections,
 * received into one buffer pool shared by every connection (the SRQ design)
 * under credit flow control, plus the RC-RDMA one-sided operations.
 *
 * A link is one connection and the credit state of both its directions;
 * the RC-RDMA channel (rc_rdma_chan.h) moves one-sided data over it.
 * The endpoint that opened a connection owns its link (USER); connections
 * peers open to this interface get links of their own, which carry the
 * peer's messages in and this side's credit returns out, until an endpoint
 * of this side to that peer takes the connection for its own messages too.
 * An endpoint that goes away says BYE and leaves its link receiving; the
 * connection closes once both sides are done with it. Nothing is ever
 * dropped: a sender without credits gets UCS_ERR_NO_RESOURCE and waits on
 * the pending queue; a receiver without free buffers leaves the bytes in
 * the connection until a buffer is free.
 */
#ifndef APTUS_RC_SR_CHAN_H_
#define APTUS_RC_SR_CHAN_H_

#include "chan.h"
#include "proto/rc_sr_proto.h"
#include "wire/conn.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

#define APTUS_RC_MAX_IOV 14 /* wire limit, minus the two headers */

enum {
    APTUS_RC_LINK_USER      = UCS_BIT(0), /* owned by an endpoint */
    APTUS_RC_LINK_GREETED   = UCS_BIT(1), /* accepted: HELLO received */
    APTUS_RC_LINK_FAILED    = UCS_BIT(2),
    APTUS_RC_LINK_REPORTED  = UCS_BIT(3),  /* failure given to the owner */
    APTUS_RC_LINK_EOF       = UCS_BIT(4),  /* closed by the peer, cleanly */
    APTUS_RC_LINK_PEER_GONE = UCS_BIT(5),  /* the peer's endpoint said BYE */
    APTUS_RC_LINK_INITIATED = UCS_BIT(6),  /* this side opened the connection */
    APTUS_RC_LINK_SWITCHING = UCS_BIT(7),  /* moving to the peer's connection */
    APTUS_RC_LINK_CLAIMED   = UCS_BIT(8),  /* accepted: a switch moves to it */
    APTUS_RC_LINK_CHECKED   = UCS_BIT(9),  /* a keepalive check was sent */
    APTUS_RC_LINK_ORPHAN    = UCS_BIT(10), /* its endpoint went: never shared */
    APTUS_RC_LINK_BYE_OWED  = UCS_BIT(11), /* ORPHAN: BYE once there is room */
    APTUS_RC_LINK_ACK_OWED  = UCS_BIT(12)  /* SWITCH_ACK once there is room */
};

typedef struct aptus_rc_chan_stats {
    uint64_t tx_msgs;
    uint64_t tx_bytes;
    uint64_t rx_msgs;
    uint64_t rx_bytes;
    uint64_t rx_held;      /* messages the receiver kept in place */
    uint64_t tx_credits;   /* explicit credit messages sent */
    uint64_t rx_credits;   /* explicit credit messages received */
    uint64_t no_credits;   /* sends refused for lack of credits */
    uint64_t backlog_full; /* sends refused for a full backlog */
    uint64_t pending_dispatched;
    uint64_t rx_malformed; /* bad messages: the connection is cut */
    uint64_t rx_bad_hello; /* connections refused at greeting */
    uint64_t links_failed;
    uint64_t checks;
    uint64_t shared;            /* endpoints that took a peer's connection */
    uint64_t switched;          /* ... after both had connected at once */
    uint64_t stale_switch_acks; /* for merges given up before they ended */
    uint64_t switch_acks_owed;  /* waited for room in the backlog */
    uint64_t switches_ended_by_bye; /* the peer's endpoint went before its
                                       SWITCH_ACK: the move completed */
    uint64_t half_open_dropped;     /* accepted, never greeted: closed (the
                                       oldest past APTUS_RC_MAX_HALF_OPEN, or
                                       after APTUS_RC_GREETING_TIMEOUT_MS) */
} aptus_rc_chan_stats_t;

/* Connections accepted and not greeted yet (HELLO) that an interface keeps,
 * each a descriptor: beyond it the oldest goes; none waits longer than the
 * greeting timeout. A peer's HELLO goes out with its connect. */
#define APTUS_RC_MAX_HALF_OPEN       64
#define APTUS_RC_GREETING_TIMEOUT_MS 5000

typedef struct aptus_rc_link {
    aptus_conn_t *conn;
    aptus_rc_credits_t fc;
    uint32_t tx_limit; /* what the peer granted: fc.tx never exceeds it */
    uint32_t reserved; /* credits only internal messages may take (the
                          owner's control must get through) */
    unsigned flags;
    int am_queued;          /* a message waits in the wire's backlog */
    uint64_t peer_key;      /* the other interface's identity */
    uint32_t peer_port;     /* ... with its port (wire_dev.h: opaque) */
    uint32_t conn_id;       /* the initiating side's name for the connection */
    ucs_time_t accepted_at; /* an accepted link not greeted yet: since */
    struct aptus_rc_link *switch_to; /* SWITCHING: the accepted link */
    ucs_status_t error; /* what the owner is told: ENDPOINT_TIMEOUT */
    ucs_status_t cause; /* what broke the connection, for the logs */
    uint16_t tag; /* the owner's name for the peer, sent in HELLO: only links
                     with the same tag are shared or merged (here: a hole
                     beside the statuses keeps the link at 136 bytes) */
    ucs_arbiter_group_t pending; /* uct_pending_req_t waiting for credits */
    ucs_queue_head_t flushes;    /* flush requests waiting for the backlog */
    ucs_list_link_t list;        /* chan->links */
} aptus_rc_link_t;

typedef struct aptus_rc_chan aptus_rc_chan_t;

typedef struct aptus_rc_chan_ops {
    /* An active message arrived on link (an owner's, or one the peer opened
     * and no owner took yet: its peer_key and peer_port name the sender's
     * interface); buf may be held when at_start (then the callee takes a
     * reference). */
    ucs_status_t (*deliver)(void *arg, aptus_rc_link_t *link, uint8_t am_id,
                            void *data, size_t length, aptus_conn_buf_t *buf,
                            int at_start);
    /* An owner's link failed: report from the user's progress. */
    void (*peer_failed)(void *arg, aptus_rc_link_t *link, ucs_status_t status);
} aptus_rc_chan_ops_t;

typedef struct aptus_rc_chan_config {
    uint32_t credits;    /* messages granted to each connection's sender */
    size_t max_msg;      /* active message bytes (UCT header included) */
    uint32_t local_port; /* this interface's port, as peers know it */
} aptus_rc_chan_config_t;

struct aptus_rc_chan {
    aptus_chan_t super;
    aptus_conn_wire_t *wire;
    void *staging; /* a PACK message is packed here (max_msg bytes) */
    aptus_rc_chan_config_t config;
    uint64_t local_key; /* peers name it in their HELLO */
    const aptus_rc_chan_ops_t *ops;
    void *arg;
    ucs_arbiter_t pending;
    ucs_list_link_t links;
    unsigned num_user_links;
    unsigned num_accepted_links;
    unsigned num_half_open;       /* accepted, not greeted */
    ucs_time_t next_greet_check;  /* when the oldest may time out */
    aptus_rc_link_t *dispatching; /* its pending group is being dispatched:
                                     its requests may send */
    uint32_t next_conn_id;
    aptus_rc_chan_stats_t stats;
};

/* Handlers to give the wire (config.handlers, with config.arg = chan). */
extern const aptus_conn_handlers_t aptus_rc_chan_wire_handlers;

ucs_status_t aptus_rc_chan_init(aptus_rc_chan_t *chan, aptus_conn_wire_t *wire,
                                const aptus_rc_chan_config_t *config,
                                uint64_t local_key,
                                const aptus_rc_chan_ops_t *ops, void *arg);
void aptus_rc_chan_cleanup(aptus_rc_chan_t *chan);

/* Connect an endpoint's link to a remote interface (its listening address,
 * and its identity as its interface address gives it: key and port; and
 * its credit grant) and greet it; or, when that interface already
 * connected to this one and no endpoint uses that connection yet, take it:
 * one connection then serves both directions. Only connections with the
 * same tag (the owner's name for the peer) are shared or merged. */
ucs_status_t aptus_rc_chan_connect(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                   const aptus_wire_addr_t *addr, uint64_t key,
                                   uint32_t port, uint32_t credits,
                                   uint16_t tag);
void aptus_rc_chan_disconnect(aptus_rc_chan_t *chan, aptus_rc_link_t *link);

/* The channel interface's operations of RC-SR (chan.h). */
extern const aptus_chan_ops_t aptus_rc_chan_iface_ops;

/* Where an RC-SR peer is (aptus_chan_peer_connect's remote; the storage
 * is the caller's aptus_rc_link_t), as aptus_rc_chan_connect takes it. */
typedef struct aptus_rc_remote {
    const aptus_wire_addr_t *addr; /* the listening address */
    uint64_t key;                  /* the interface's identity */
    uint32_t port;                 /* ... with its port (wire_dev.h) */
    uint32_t credits;              /* its grant */
    uint16_t tag;                  /* the owner's name for the peer */
} aptus_rc_remote_t;

/* Send an eager message (one credit): UCS_OK, the packed length (PACK),
 * UCS_ERR_NO_RESOURCE (no credit or a full backlog: nothing was packed),
 * or the link's error. The bytes are the connection's when it returns. */
ssize_t aptus_rc_chan_send(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                           const aptus_chan_send_t *send);

/* Send an active message gathered from iov (one credit). */
ucs_status_t aptus_rc_chan_send_am(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                   uint8_t am_id, const struct iovec *iov,
                                   unsigned iovcnt);

/* Whether one-sided operations may start now on the link: they must not
 * overtake messages still queued or pending. Returns UCS_OK, NO_RESOURCE,
 * or the link's error. */
ucs_status_t aptus_rc_chan_rma_check(aptus_rc_chan_t *chan,
                                     aptus_rc_link_t *link);

ucs_status_t aptus_rc_chan_pending_add(aptus_rc_chan_t *chan,
                                       aptus_rc_link_t *link,
                                       uct_pending_req_t *req);
void aptus_rc_chan_pending_purge(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                 uct_pending_purge_callback_t cb, void *arg);

ucs_status_t aptus_rc_chan_flush(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                 unsigned flags, uct_completion_t *comp);
ucs_status_t aptus_rc_chan_flush_all(aptus_rc_chan_t *chan);

/* Fail the endpoint's link now (uct_ep_invalidate): its connection closes,
 * outstanding flushes complete with an error, and the failure is reported
 * to the owner, as when the connection breaks. */
void aptus_rc_chan_invalidate(aptus_rc_chan_t *chan, aptus_rc_link_t *link);

/* Keepalive: a NOP on the connection; a broken one is reported. */
ucs_status_t aptus_rc_chan_check(aptus_rc_chan_t *chan, aptus_rc_link_t *link);

unsigned aptus_rc_chan_progress(aptus_rc_chan_t *chan);

/* Resources of one endpoint's connection, both ends counted on this host
 * when the peer is local (bytes of state, kernel buffer space, file
 * descriptors, receive descriptors it may occupy). */
typedef struct aptus_rc_conn_resources {
    size_t state_bytes;
    size_t kernel_bytes;
    unsigned fds;
    unsigned descriptors;
    size_t descriptor_bytes;
} aptus_rc_conn_resources_t;

void aptus_rc_chan_link_resources(aptus_rc_chan_t *chan, aptus_rc_link_t *link,
                                  aptus_rc_conn_resources_t *res);

#ifdef __cplusplus
}
#endif

#endif
