/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire, connection part: opening and closing the wire
 * and its connections, progress, keys (see verbs_conn.h, docs/verbs.md).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_conn_int.h"

#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/time/time.h>

#include <string.h>
#include <unistd.h>

aptus_verbs_conn_t *aptus_verbs_conn_alloc(aptus_verbs_conn_wire_t *cw)
{
    aptus_verbs_conn_t *conn;

    conn = ucs_calloc(1, sizeof(*conn), "aptus_verbs_conn");
    if (conn == NULL) {
        return NULL;
    }
    /* the credit word the peer writes: registered, remotely writable */
    if (ucs_posix_memalign((void **)&conn->ctl, UCS_SYS_CACHE_LINE_SIZE,
                           sizeof(*conn->ctl), "aptus_verbs_conn_ctl") != 0) {
        ucs_free(conn);
        return NULL;
    }
    memset(conn->ctl, 0, sizeof(*conn->ctl));
    conn->ctl_mr = ibv_reg_mr(cw->dev->pd, conn->ctl, sizeof(*conn->ctl),
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (conn->ctl_mr == NULL) {
        ucs_error("verbs conn: ibv_reg_mr of the credit word failed: %m");
        ucs_free(conn->ctl);
        ucs_free(conn);
        return NULL;
    }
    conn->super.wire   = &cw->super;
    conn->state        = APTUS_VERBS_CONN_S_SETUP;
    conn->backlog_tail = &conn->backlog;
    conn->dones_tail   = &conn->dones;
    ucs_list_add_tail(&cw->conns, &conn->list);
    return conn;
}

aptus_verbs_conn_t *aptus_verbs_conn_by_qpn(aptus_verbs_conn_wire_t *cw,
                                            uint32_t qpn)
{
    khiter_t iter = kh_get(aptus_verbs_qpn, &cw->qps, qpn);

    return (iter == kh_end(&cw->qps)) ? NULL : kh_val(&cw->qps, iter);
}

/* Broken: nothing more goes or arrives; the owner is told from progress
 * (never from inside one of its own calls). */
void aptus_verbs_conn_fail(aptus_verbs_conn_t *conn, ucs_status_t status)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    struct ibv_qp_attr attr;

    if ((conn->state == APTUS_VERBS_CONN_S_FAILED) ||
        (conn->state == APTUS_VERBS_CONN_S_CLOSED)) {
        return;
    }
    ucs_debug("verbs conn %p: failed: %s", conn, ucs_status_string(status));
    if (conn->state == APTUS_VERBS_CONN_S_UP) {
        --cw->num_up;
    }
    conn->state       = APTUS_VERBS_CONN_S_FAILED;
    conn->fail_status = status;
    if (conn->half_open) {
        /* a setup the owner never saw: the setup timer frees it */
        conn->fail_told = 1;
    } else {
        ++cw->num_fail_pending;
        cw->super.stats.failures += (status != UCS_ERR_NOT_CONNECTED);
        cw->super.stats.peer_closes += (status == UCS_ERR_NOT_CONNECTED);
    }
    if (conn->qp != NULL) {
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = IBV_QPS_ERR;
        (void)ibv_modify_qp(conn->qp, &attr, IBV_QP_STATE);
    }
    aptus_verbs_rx_conn_gone(conn);
}

/* Free everything of a connection: its QP (in the error state, its send
 * queue drained first), its credit word, its backlog. */
void aptus_verbs_conn_release(aptus_verbs_conn_t *conn)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(conn->super.wire);
    struct ibv_qp_attr attr;
    khiter_t iter;
    unsigned spins;

    if (conn->state == APTUS_VERBS_CONN_S_CLOSED) {
        return;
    }
    if (conn->state == APTUS_VERBS_CONN_S_UP) {
        --cw->num_up;
    } else if ((conn->state == APTUS_VERBS_CONN_S_FAILED) && !conn->fail_told) {
        --cw->num_fail_pending;
    }
    /* from here its completions (flushed) fail nothing more */
    conn->state = APTUS_VERBS_CONN_S_CLOSED;
    aptus_verbs_setup_forget(conn);
    aptus_verbs_rx_conn_gone(conn);
    if (conn->qp != NULL) {
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = IBV_QPS_ERR;
        (void)ibv_modify_qp(conn->qp, &attr, IBV_QP_STATE);
        /* the QP's work requests complete (flushed) before it goes, so
         * that their send buffers come back and the CQ stays sized */
        for (spins = 0; (conn->sq_outstanding > 0) && (spins < 1000000);
             ++spins) {
            aptus_verbs_tx_poll(cw);
        }
        iter = kh_get(aptus_verbs_qpn, &cw->qps, conn->qp->qp_num);
        if (iter != kh_end(&cw->qps)) {
            kh_del(aptus_verbs_qpn, &cw->qps, iter);
        }
        if (ibv_destroy_qp(conn->qp)) {
            ucs_warn("verbs conn: ibv_destroy_qp failed");
        }
        conn->qp = NULL;
    }
    aptus_verbs_tx_conn_gone(conn);
    if ((conn->ctl_mr != NULL) && ibv_dereg_mr(conn->ctl_mr)) {
        ucs_warn("verbs conn: ibv_dereg_mr failed");
    }
    conn->ctl_mr = NULL;
    ucs_free(conn->ctl);
    conn->ctl        = NULL;
    conn->super.user = NULL;
    ucs_list_del(&conn->list);
    if (cw->in_progress) {
        ucs_list_add_tail(&cw->dead, &conn->list); /* a handler may look */
    } else {
        ucs_free(conn);
    }
}

static void aptus_verbs_conn_close(aptus_conn_t *c)
{
    aptus_verbs_conn_t *conn = aptus_verbs_conn(c);

    if (conn->state == APTUS_VERBS_CONN_S_UP) {
        /* in order: the peer learns it (failed with NOT_CONNECTED). On an
         * HCA the QP's move to the error state below may flush the DISC
         * before it went: the peer then sees an error instead. */
        (void)aptus_verbs_tx_disc(conn);
    }
    if (conn->super.wire->num_conns > 0) {
        --conn->super.wire->num_conns;
    }
    aptus_verbs_conn_release(conn);
}

/* The owner learns of broken connections. Its handler may close any
 * connection, which moves it off the list: look again from the start after
 * each call. */
static unsigned aptus_verbs_conn_tell_failures(aptus_verbs_conn_wire_t *cw)
{
    aptus_verbs_conn_t *conn, *found;
    unsigned count = 0;

    while (cw->num_fail_pending > 0) {
        found = NULL;
        ucs_list_for_each(conn, &cw->conns, list)
        {
            if ((conn->state == APTUS_VERBS_CONN_S_FAILED) &&
                !conn->fail_told) {
                found = conn;
                break;
            }
        }
        if (found == NULL) {
            break;
        }
        found->fail_told = 1;
        --cw->num_fail_pending;
        ++count;
        cw->config.handlers->failed(cw->config.arg, &found->super,
                                    found->fail_status);
    }
    return count;
}

static unsigned aptus_verbs_conn_progress(aptus_conn_wire_t *wire)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(wire);
    aptus_verbs_conn_t *conn, *tmp;
    unsigned count;

    cw->in_progress = 1;
    aptus_verbs_conn_update_time(cw);
    count = aptus_verbs_setup_progress(cw);
    count += aptus_verbs_tx_poll(cw);
    count += aptus_verbs_rx_progress(cw);
    aptus_verbs_rx_grant(cw);
    count += aptus_verbs_tx_progress(cw);
    if (cw->num_fail_pending > 0) {
        count += aptus_verbs_conn_tell_failures(cw);
    }
    cw->in_progress = 0;
    ucs_list_for_each_safe(conn, tmp, &cw->dead, list)
    {
        ucs_list_del(&conn->list);
        ucs_free(conn);
    }
    return count;
}

static int aptus_verbs_conn_key_reachable(aptus_conn_t *c,
                                          const aptus_mem_key_t *key)
{
    aptus_verbs_conn_t *conn = aptus_verbs_conn(c);

    return (conn->state == APTUS_VERBS_CONN_S_UP) &&
           (key->host_id == c->wire->host_id);
}

/* A key of this fabric is good on any connection to its owner: the rkey is
 * the HCA's check. It is remembered with the peer's address, so that
 * write_ordered, which is given no connection, finds one to that peer. */
static ucs_status_t aptus_verbs_conn_key_check(aptus_conn_t *c,
                                               const aptus_mem_key_t *key)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(c->wire);
    aptus_verbs_conn_t *conn    = aptus_verbs_conn(c);
    khiter_t iter;
    int ret;

    if (key->host_id != c->wire->host_id) {
        return UCS_ERR_UNREACHABLE;
    }
    if (conn->state == APTUS_VERBS_CONN_S_SETUP) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (conn->state != APTUS_VERBS_CONN_S_UP) {
        return UCS_ERR_UNREACHABLE;
    }
    iter = kh_put(aptus_verbs_key, &cw->keys, key->token, &ret);
    if (ret < 0) {
        return UCS_ERR_NO_MEMORY;
    }
    kh_val(&cw->keys, iter) = conn->peer;
    return UCS_OK;
}

static pid_t aptus_verbs_conn_peer_pid(aptus_conn_t *conn)
{
    return 0; /* no kernel proof on verbs: the rkey is the access check */
}

static unsigned aptus_verbs_conn_reads_outstanding(aptus_conn_t *c)
{
    aptus_verbs_conn_t *conn = aptus_verbs_conn(c);

    return conn->rma_pending + conn->writes_pending;
}

static void aptus_verbs_conn_resources(aptus_conn_t *c, size_t *state_bytes_p,
                                       size_t *kernel_bytes_p, unsigned *fds_p)
{
    aptus_verbs_conn_t *conn = aptus_verbs_conn(c);

    *state_bytes_p = sizeof(*conn) + conn->backlog_bytes;
    /* what the adapter holds for it: the registered credit word */
    *kernel_bytes_p = (conn->ctl != NULL) ? sizeof(*conn->ctl) : 0;
    *fds_p          = 0;
}

static void aptus_verbs_conn_wire_close(aptus_conn_wire_t *wire)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(wire);
    aptus_verbs_conn_t *conn, *tmp;

    ucs_list_for_each_safe(conn, tmp, &cw->conns, list)
    {
        aptus_verbs_conn_release(conn);
    }
    ucs_list_for_each_safe(conn, tmp, &cw->dead, list)
    {
        ucs_list_del(&conn->list);
        ucs_free(conn);
    }
    aptus_verbs_tx_cleanup(cw);
    aptus_verbs_rx_cleanup(cw);
    kh_destroy_inplace(aptus_verbs_qpn, &cw->qps);
    kh_destroy_inplace(aptus_verbs_key, &cw->keys);
    kh_destroy_inplace(aptus_verbs_id, &cw->ids);
    if (cw->setup != NULL) {
        cw->setup->ops->close(cw->setup);
    }
    ucs_free(cw);
}

static const aptus_conn_wire_ops_t aptus_verbs_conn_ops = {
    .connect           = aptus_verbs_conn_connect,
    .send              = aptus_verbs_conn_send,
    .backlog           = aptus_verbs_conn_backlog,
    .write             = aptus_verbs_conn_write,
    .read              = aptus_verbs_conn_read,
    .write_imm         = aptus_verbs_conn_write_imm,
    .write_ordered     = aptus_verbs_conn_write_ordered,
    .mem_reg           = aptus_verbs_conn_mem_reg,
    .mem_dereg         = aptus_verbs_conn_mem_dereg,
    .key_reachable     = aptus_verbs_conn_key_reachable,
    .key_check         = aptus_verbs_conn_key_check,
    .peer_pid          = aptus_verbs_conn_peer_pid,
    .write_conn        = aptus_verbs_conn_write_conn,
    .read_conn         = aptus_verbs_conn_read_conn,
    .reads_outstanding = aptus_verbs_conn_reads_outstanding,
    .progress          = aptus_verbs_conn_progress,
    .watch_fd          = NULL, /* completions are polled: no descriptor */
    .conn_resources    = aptus_verbs_conn_resources,
    .buf_put           = aptus_verbs_conn_buf_put,
    .conn_close        = aptus_verbs_conn_close,
    .close             = aptus_verbs_conn_wire_close
};

ucs_status_t aptus_verbs_conn_open(const char *dev_name,
                                   const aptus_conn_wire_config_t *config,
                                   aptus_conn_wire_t **wire_p)
{
    aptus_dgram_wire_config_t setup_config;
    aptus_verbs_conn_wire_t *cw;
    ucs_status_t status;
    size_t port_mtu;

    if ((config->max_frame == 0) || (config->max_frame > (1ul << 30)) ||
        (config->rx_buffers == 0) ||
        ((config->rx_max_buffers != 0) &&
         (config->rx_max_buffers < config->rx_buffers)) ||
        ((config->rx_alignment > 1) && !ucs_is_pow2(config->rx_alignment))) {
        ucs_error("verbs conn: invalid frame size %zu, pool size %u..%u or "
                  "alignment %zu",
                  config->max_frame, config->rx_buffers, config->rx_max_buffers,
                  config->rx_alignment);
        return UCS_ERR_INVALID_PARAM;
    }
    cw = ucs_calloc(1, sizeof(*cw), "aptus_verbs_conn_wire");
    if (cw == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    cw->super.ops = &aptus_verbs_conn_ops;
    cw->config    = *config;
    ucs_list_head_init(&cw->conns);
    ucs_list_head_init(&cw->tx_pending);
    ucs_list_head_init(&cw->dead);
    kh_init_inplace(aptus_verbs_qpn, &cw->qps);
    kh_init_inplace(aptus_verbs_key, &cw->keys);
    kh_init_inplace(aptus_verbs_id, &cw->ids);
    ucs_list_head_init(&cw->setups);

    /* the setup QP: small datagrams, few at a time */
    memset(&setup_config, 0, sizeof(setup_config));
    setup_config.mtu          = APTUS_VERBS_DGRAM_MTU_MIN;
    setup_config.rx_queue_len = 32;
    setup_config.tx_queue_len = 16;
    setup_config.numa_node    = config->numa_node;
    status = aptus_verbs_dgram_open(dev_name, &setup_config, &cw->setup);
    if (status != UCS_OK) {
        goto err;
    }
    cw->dev        = ucs_container_of(cw->setup, aptus_verbs_dgram_t, super);
    cw->super.addr = cw->setup->addr;
    port_mtu       = cw->dev->port_mtu;
    cw->path_mtu   = (port_mtu >= 4096)   ? IBV_MTU_4096
                     : (port_mtu >= 2048) ? IBV_MTU_2048
                     : (port_mtu >= 1024) ? IBV_MTU_1024
                     : (port_mtu >= 512)  ? IBV_MTU_512
                                          : IBV_MTU_256;
    /* keys compare equal across hosts of the fabric */
    cw->super.host_id = aptus_verbs_fabric_id(&cw->dev->gid);

    status = aptus_verbs_rx_init(cw);
    if (status != UCS_OK) {
        goto err;
    }
    status = aptus_verbs_tx_init(cw);
    if (status != UCS_OK) {
        goto err;
    }
    *wire_p = &cw->super;
    return UCS_OK;

err:
    aptus_verbs_conn_wire_close(&cw->super);
    return status;
}

ucs_status_t aptus_verbs_conn_mem_reg(aptus_conn_wire_t *wire, void *address,
                                      size_t length, aptus_mem_key_t *key,
                                      void **memh_p)
{
    aptus_verbs_conn_wire_t *cw = aptus_verbs_cw(wire);
    struct ibv_mr *mr;
    uint64_t token;

    mr = aptus_verbs_hca_reg(cw->dev->hca, address, length, cw->dev->lid,
                             &token);
    if (mr == NULL) {
        return UCS_ERR_IO_ERROR;
    }
    memset(key, 0, sizeof(*key));
    key->address = (uintptr_t)address;
    key->length  = length;
    key->token   = token;
    key->host_id = wire->host_id;
    key->pid     = (uint32_t)getpid();
    *memh_p      = mr;
    return UCS_OK;
}

void aptus_verbs_conn_mem_dereg(aptus_conn_wire_t *wire, void *memh)
{
    if ((memh != NULL) && ibv_dereg_mr((struct ibv_mr *)memh)) {
        ucs_warn("verbs conn: ibv_dereg_mr failed");
    }
}

void aptus_verbs_conn_update_time(aptus_verbs_conn_wire_t *cw)
{
    cw->now_us = (cw->test_clock != NULL)
                     ? *cw->test_clock
                     : (uint64_t)ucs_time_to_usec(ucs_get_time());
}

void aptus_verbs_conn_set_test_clock(aptus_conn_wire_t *wire,
                                     const uint64_t *now_us)
{
    aptus_verbs_cw(wire)->test_clock = now_us;
}

void aptus_verbs_conn_set_unpaced(aptus_conn_wire_t *wire, int unpaced)
{
    aptus_verbs_cw(wire)->unpaced = unpaced;
}
