/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's connection setup, by datagrams between the
 * wires' setup UD QPs (docs/verbs.md):
 *
 *   connector                         acceptor
 *   RC QP to INIT, REQ(id, qpn, ctl) ->
 *                                     RC QP to RTR, RTS (half-open)
 *                                  <- REP(id, qpn, ctl)
 *   RTR, RTS: up; RTU(id)          ->
 *                                     up: accepted()
 *
 * A datagram may be lost: REQ and REP are sent again on a timer from
 * progress, doubling up to 256 ms, APTUS_VERBS_CONN_RETRIES times (the
 * REP twice as many, so as to outlive a connector whose RTU is lost); a
 * replayed REQ is
 * known by (source, id) and answered with the REP again, a replayed REP
 * with the RTU again. The acceptor's side stays internal until the RTU, and
 * at most APTUS_VERBS_CONN_MAX_HALF_OPEN of them exist (a new REQ beyond
 * pushes the oldest out): a forged flood of REQs costs at most that many
 * QPs, each gone after its retries.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_addr.h"
#include "verbs_conn_int.h"

#include <ucs/debug/assert.h>
#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <ucs/time/time.h>

#include <endian.h>
#include <string.h>
#include <unistd.h>

#define APTUS_VERBS_SETUP_MAGIC 0x41564331u /* "AVC1" */
#define APTUS_VERBS_SETUP_LEN   32

enum {
    APTUS_VERBS_SETUP_REQ = 1,
    APTUS_VERBS_SETUP_REP = 2,
    APTUS_VERBS_SETUP_RTU = 3
};

/* A setup datagram, big-endian on the wire. */
typedef struct aptus_verbs_setup_msg {
    uint8_t type;
    uint64_t id;
    uint32_t qpn;
    uint32_t ctl_rkey;
    uint64_t ctl_addr;
} aptus_verbs_setup_msg_t;

static void aptus_verbs_setup_pack(const aptus_verbs_setup_msg_t *m, uint8_t *p)
{
    uint32_t u32;
    uint64_t u64;

    memset(p, 0, APTUS_VERBS_SETUP_LEN);
    u32 = htobe32(APTUS_VERBS_SETUP_MAGIC);
    memcpy(p, &u32, 4);
    p[4] = m->type;
    u64  = htobe64(m->id);
    memcpy(p + 8, &u64, 8);
    u32 = htobe32(m->qpn);
    memcpy(p + 16, &u32, 4);
    u32 = htobe32(m->ctl_rkey);
    memcpy(p + 20, &u32, 4);
    u64 = htobe64(m->ctl_addr);
    memcpy(p + 24, &u64, 8);
}

static int aptus_verbs_setup_unpack(const uint8_t *p, size_t length,
                                    aptus_verbs_setup_msg_t *m)
{
    uint32_t u32;
    uint64_t u64;

    if (length < APTUS_VERBS_SETUP_LEN) {
        return 0;
    }
    memcpy(&u32, p, 4);
    if (be32toh(u32) != APTUS_VERBS_SETUP_MAGIC) {
        return 0;
    }
    m->type = p[4];
    memcpy(&u64, p + 8, 8);
    m->id = be64toh(u64);
    memcpy(&u32, p + 16, 4);
    m->qpn = be32toh(u32) & 0xffffff;
    memcpy(&u32, p + 20, 4);
    m->ctl_rkey = be32toh(u32);
    memcpy(&u64, p + 24, 8);
    m->ctl_addr = be64toh(u64);
    return 1;
}

/* Send a setup datagram of conn (lost silently, as any datagram). */
static void aptus_verbs_setup_send(aptus_verbs_conn_t *conn, uint8_t type)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    uint8_t buf[APTUS_VERBS_SETUP_LEN];
    aptus_verbs_setup_msg_t m;
    aptus_dgram_tx_t tx;
    struct iovec iov;
    unsigned sent;

    m.type     = type;
    m.id       = conn->id;
    m.qpn      = (conn->qp != NULL) ? conn->qp->qp_num : 0;
    m.ctl_rkey = conn->ctl_mr->rkey;
    m.ctl_addr = (uintptr_t)conn->ctl;
    aptus_verbs_setup_pack(&m, buf);
    iov.iov_base = buf;
    iov.iov_len  = sizeof(buf);
    tx.dst       = &conn->peer;
    tx.iov       = &iov;
    tx.iovcnt    = 1;
    (void)cw->setup->ops->send(cw->setup, &tx, 1, &sent);
}

static void aptus_verbs_setup_arm(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);

    conn->next_tx_us =
        cw->now_us + ((uint64_t)APTUS_VERBS_CONN_RTO_US
                      << ucs_min(conn->tries, APTUS_VERBS_CONN_RTO_SHIFT_MAX));
    ++conn->tries;
}

/* An RC QP on the wire's SRQ and CQs, in INIT. */
static ucs_status_t aptus_verbs_setup_qp(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;
    khiter_t iter;
    int ret;

    memset(&init, 0, sizeof(init));
    init.send_cq             = cw->send_cq;
    init.recv_cq             = cw->recv_cq;
    init.srq                 = cw->srq;
    init.qp_type             = IBV_QPT_RC;
    init.cap.max_send_wr     = APTUS_VERBS_CONN_SQ_DEPTH;
    init.cap.max_send_sge    = 1;
    init.cap.max_inline_data = APTUS_VERBS_CONN_INLINE;
    conn->qp                 = ibv_create_qp(cw->dev->pd, &init);
    if (conn->qp == NULL) {
        ucs_error("verbs conn: ibv_create_qp(RC) failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    cw->max_inline = ucs_min(init.cap.max_inline_data, APTUS_VERBS_CONN_INLINE);

    memset(&attr, 0, sizeof(attr));
    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = cw->dev->port;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ;
    ret = ibv_modify_qp(conn->qp, &attr,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                            IBV_QP_ACCESS_FLAGS);
    if (ret != 0) {
        ucs_error("verbs conn: RC QP to INIT failed: %s", strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    iter = kh_put(aptus_verbs_qpn, &cw->qps, conn->qp->qp_num, &ret);
    if (ret < 0) {
        return UCS_ERR_NO_MEMORY;
    }
    kh_val(&cw->qps, iter) = conn;
    return UCS_OK;
}

/* INIT -> RTR -> RTS, towards the peer's QP qpn on the peer's port. */
static ucs_status_t aptus_verbs_setup_rts(aptus_verbs_conn_t *conn,
                                          uint32_t qpn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    struct ibv_qp_attr attr;
    int ret;

    memset(&attr, 0, sizeof(attr));
    attr.qp_state           = IBV_QPS_RTR;
    attr.path_mtu           = cw->path_mtu;
    attr.dest_qp_num        = qpn;
    attr.rq_psn             = 0;
    attr.max_dest_rd_atomic = 4;
    attr.min_rnr_timer      = 12;
    aptus_verbs_addr_ah_attr(&conn->peer, cw->dev->port, &attr.ah_attr);
    ret = ibv_modify_qp(conn->qp, &attr,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                            IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (ret == 0) {
        memset(&attr, 0, sizeof(attr));
        attr.qp_state  = IBV_QPS_RTS;
        attr.sq_psn    = 0;
        attr.timeout   = 14;
        attr.retry_cnt = 7;
        /* credits keep the SRQ from running dry: a receiver not ready is
         * a bug, to fail at once rather than retry */
        attr.rnr_retry     = 0;
        attr.max_rd_atomic = 4;
        ret                = ibv_modify_qp(conn->qp, &attr,
                                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                               IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                               IBV_QP_MAX_QP_RD_ATOMIC);
    }
    if (ret != 0) {
        ucs_error("verbs conn: RC QP to RTR/RTS failed: %s", strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    conn->peer_qpn = qpn;
    return UCS_OK;
}

static int aptus_verbs_setup_add_id(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    khiter_t iter;
    int ret;

    iter = kh_put(aptus_verbs_id, &cw->ids, conn->id, &ret);
    if (ret <= 0) {
        return 0; /* taken (or no memory) */
    }
    kh_val(&cw->ids, iter) = conn;
    conn->in_ids           = 1;
    return 1;
}

static void aptus_verbs_setup_start(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);

    ucs_list_add_tail(&cw->setups, &conn->setup_list);
    conn->in_setup = 1;
    aptus_verbs_setup_arm(conn);
}

void aptus_verbs_setup_forget(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    khiter_t iter;

    if (conn->in_setup) {
        ucs_list_del(&conn->setup_list);
        conn->in_setup = 0;
    }
    if (conn->half_open) {
        --cw->num_half_open;
        conn->half_open = 0;
    }
    if (conn->in_ids) {
        iter = kh_get(aptus_verbs_id, &cw->ids, conn->id);
        if ((iter != kh_end(&cw->ids)) && (kh_val(&cw->ids, iter) == conn)) {
            kh_del(aptus_verbs_id, &cw->ids, iter);
        }
        conn->in_ids = 0;
    }
}

/* The connection is up on this side: sends may go. */
static void aptus_verbs_setup_up(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);

    if (conn->in_setup) {
        ucs_list_del(&conn->setup_list);
        conn->in_setup = 0;
    }
    conn->state = APTUS_VERBS_CONN_S_UP;
    ++cw->num_up;
    cw->rx_regrant = 1; /* its first credits */
    aptus_verbs_tx_wake(conn);
}

ucs_status_t aptus_verbs_conn_connect(aptus_conn_wire_t *wire,
                                      const aptus_wire_addr_t *dst, void *user,
                                      aptus_conn_t **conn_p)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(wire);
    aptus_verbs_conn_t *conn;
    ucs_status_t status;

    conn = aptus_verbs_conn_alloc(cw);
    if (conn == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    conn->super.user = user;
    conn->peer       = *dst;
    status           = aptus_verbs_setup_qp(conn);
    if (status != UCS_OK) {
        aptus_verbs_conn_release(conn);
        return status;
    }
    do {
        conn->id = ucs_generate_uuid((uintptr_t)conn);
    } while ((conn->id == 0) || !aptus_verbs_setup_add_id(conn));

    aptus_verbs_conn_update_time(cw);
    aptus_verbs_setup_start(conn);
    aptus_verbs_setup_send(conn, APTUS_VERBS_SETUP_REQ);
    ++wire->num_conns;
    ++wire->stats.connects;
    *conn_p = &conn->super;
    return UCS_OK;
}

static void aptus_verbs_setup_on_req(aptus_verbs_conn_wire_t *cw,
                                     const aptus_verbs_setup_msg_t *m,
                                     const aptus_wire_addr_t *src)
{
    aptus_verbs_conn_t *conn;
    khiter_t iter;

    iter = kh_get(aptus_verbs_id, &cw->ids, m->id);
    if (iter != kh_end(&cw->ids)) {
        conn = kh_val(&cw->ids, iter);
        if (conn->accepted && (conn->state == APTUS_VERBS_CONN_S_SETUP) &&
            !memcmp(&conn->peer, src, sizeof(*src)) &&
            (conn->peer_qpn == m->qpn)) {
            aptus_verbs_setup_send(conn, APTUS_VERBS_SETUP_REP); /* lost */
        } else {
            ++cw->setup_dropped; /* a replay, or an id taken */
        }
        return;
    }
    if (cw->num_half_open >= APTUS_VERBS_CONN_MAX_HALF_OPEN) {
        /* the oldest goes: a flood cannot lock genuine peers out for the
         * whole of its setups' lifetime, only while it lasts */
        ucs_list_for_each(conn, &cw->setups, setup_list)
        {
            if (conn->half_open) {
                break;
            }
        }
        ucs_assert(&conn->setup_list != &cw->setups);
        ++cw->half_open_refused;
        aptus_verbs_conn_release(conn);
    }

    conn = aptus_verbs_conn_alloc(cw);
    if (conn == NULL) {
        return;
    }
    conn->accepted      = 1;
    conn->half_open     = 1;
    conn->id            = m->id;
    conn->peer          = *src;
    conn->peer_ctl_addr = m->ctl_addr;
    conn->peer_ctl_rkey = m->ctl_rkey;
    ++cw->num_half_open;
    if ((aptus_verbs_setup_qp(conn) != UCS_OK) ||
        (aptus_verbs_setup_rts(conn, m->qpn) != UCS_OK) ||
        !aptus_verbs_setup_add_id(conn)) {
        aptus_verbs_conn_release(conn);
        return;
    }
    aptus_verbs_setup_start(conn);
    aptus_verbs_setup_send(conn, APTUS_VERBS_SETUP_REP);
}

static aptus_verbs_conn_t *
aptus_verbs_setup_find(aptus_verbs_conn_wire_t *cw,
                       const aptus_verbs_setup_msg_t *m, int accepted)
{
    khiter_t iter = kh_get(aptus_verbs_id, &cw->ids, m->id);
    aptus_verbs_conn_t *conn;

    if (iter == kh_end(&cw->ids)) {
        return NULL;
    }
    conn = kh_val(&cw->ids, iter);
    return (conn->accepted == accepted) ? conn : NULL;
}

static void aptus_verbs_setup_on_rep(aptus_verbs_conn_wire_t *cw,
                                     const aptus_verbs_setup_msg_t *m)
{
    aptus_verbs_conn_t *conn = aptus_verbs_setup_find(cw, m, 0);

    if (conn == NULL) {
        ++cw->setup_dropped;
        return;
    }
    if (conn->state == APTUS_VERBS_CONN_S_UP) {
        if (conn->peer_qpn == m->qpn) {
            aptus_verbs_setup_send(conn, APTUS_VERBS_SETUP_RTU); /* lost */
        }
        return;
    }
    if (conn->state != APTUS_VERBS_CONN_S_SETUP) {
        return;
    }
    conn->peer_ctl_addr = m->ctl_addr;
    conn->peer_ctl_rkey = m->ctl_rkey;
    if (aptus_verbs_setup_rts(conn, m->qpn) != UCS_OK) {
        aptus_verbs_conn_fail(conn, UCS_ERR_IO_ERROR);
        return;
    }
    aptus_verbs_setup_send(conn, APTUS_VERBS_SETUP_RTU);
    aptus_verbs_setup_up(conn);
    cw->config.handlers->writable(cw->config.arg, &conn->super);
}

static void aptus_verbs_setup_on_rtu(aptus_verbs_conn_wire_t *cw,
                                     const aptus_verbs_setup_msg_t *m,
                                     const aptus_wire_addr_t *src)
{
    aptus_verbs_conn_t *conn = aptus_verbs_setup_find(cw, m, 1);

    if ((conn == NULL) || (conn->state != APTUS_VERBS_CONN_S_SETUP) ||
        memcmp(&conn->peer, src, sizeof(*src))) {
        ++cw->setup_dropped;
        return;
    }
    --cw->num_half_open;
    conn->half_open = 0;
    aptus_verbs_setup_up(conn);
    ++cw->super.num_conns;
    ++cw->super.stats.accepts;
    cw->config.handlers->accepted(cw->config.arg, &conn->super);
}

/* Setup datagrams in, and the retransmission timers. */
unsigned aptus_verbs_setup_progress(aptus_verbs_conn_wire_t *cw)
{
    aptus_dgram_rx_t rx[16];
    aptus_verbs_setup_msg_t m;
    aptus_verbs_conn_t *conn, *tmp;
    unsigned i, n, count = 0;

    cw->setup->ops->progress(cw->setup, cw->now_us);
    do {
        for (i = 0; i < 16; ++i) {
            rx[i].buf = cw->setup_rx[i];
        }
        n = cw->setup->ops->recv(cw->setup, rx, 16);
        for (i = 0; i < n; ++i) {
            if (!aptus_verbs_setup_unpack(rx[i].buf, rx[i].length, &m)) {
                ++cw->setup_dropped;
                continue;
            }
            switch (m.type) {
            case APTUS_VERBS_SETUP_REQ:
                aptus_verbs_setup_on_req(cw, &m, &rx[i].src);
                break;
            case APTUS_VERBS_SETUP_REP:
                aptus_verbs_setup_on_rep(cw, &m);
                break;
            case APTUS_VERBS_SETUP_RTU:
                aptus_verbs_setup_on_rtu(cw, &m, &rx[i].src);
                break;
            default:
                ++cw->setup_dropped;
                break;
            }
        }
        count += n;
    } while (n == 16);

    ucs_list_for_each_safe(conn, tmp, &cw->setups, setup_list)
    {
        if (conn->state == APTUS_VERBS_CONN_S_FAILED) {
            if (conn->accepted) {
                aptus_verbs_conn_release(conn); /* a half-open one */
            }
            continue;
        }
        if (conn->next_tx_us > cw->now_us) {
            continue;
        }
        if (conn->tries > (conn->accepted ? APTUS_VERBS_CONN_REP_RETRIES
                                          : APTUS_VERBS_CONN_RETRIES)) {
            if (conn->accepted) {
                aptus_verbs_conn_release(conn); /* no RTU ever came */
            } else {
                aptus_verbs_setup_forget(conn);
                aptus_verbs_conn_fail(conn, UCS_ERR_UNREACHABLE);
            }
            continue;
        }
        aptus_verbs_setup_send(conn, conn->accepted ? APTUS_VERBS_SETUP_REP
                                                    : APTUS_VERBS_SETUP_REQ);
        aptus_verbs_setup_arm(conn);
    }
    return count;
}
