/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire, connection part: opening the wire, connecting,
 * accepting, progress and closing.
 *
 * Connections are non-blocking TCP sockets polled through one epoll set
 * (level-triggered, so a connection that could not be read for lack of a
 * receive buffer is simply offered again). The bytes they carry are framed
 * by sock_conn_frame.c; one-sided operations are sock_conn_vm.c (direct,
 * same host) and sock_conn_rma.c (over the connection, another host); the
 * proof of a peer's process is sock_conn_prove.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_conn.h"
#include "sock_conn_int.h"
#include "sock_dgram.h"
#include "sock_netif.h"
#include "sock_sys.h"
#include "base/aptus_numa.h"
#include "sock_frame.h"

#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sock.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <ucs/arch/cpu.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

void aptus_sock_conn_set_events(aptus_sock_conn_t *conn, uint32_t events)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    struct epoll_event ev;

    if ((conn->events == events) ||
        (conn->flags & (APTUS_SOCK_CONN_REPORTED | APTUS_SOCK_CONN_CLOSED))) {
        return;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events   = events;
    ev.data.ptr = conn;
    if (epoll_ctl(cw->epfd, EPOLL_CTL_MOD, conn->fd, &ev) < 0) {
        ucs_warn("sock conn: epoll_ctl(MOD) failed: %m");
        return;
    }
    conn->events = events;
}

/* The connection broke: stop watching it and tell the owner, once. */
void aptus_sock_conn_fail(aptus_sock_conn_t *conn, ucs_status_t status)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);

    if (conn->flags & (APTUS_SOCK_CONN_REPORTED | APTUS_SOCK_CONN_CLOSED)) {
        return;
    }
    conn->flags |= APTUS_SOCK_CONN_BROKEN | APTUS_SOCK_CONN_REPORTED;
    (void)epoll_ctl(cw->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
    aptus_sock_rma_cleanup(conn, status);
    if (status == UCS_ERR_NOT_CONNECTED) {
        cw->super.stats.peer_closes++;
    } else {
        cw->super.stats.failures++;
    }
    cw->config.handlers->failed(cw->config.arg, &conn->super, status);
}

static aptus_sock_conn_t *aptus_sock_conn_new(aptus_sock_conn_wire_t *cw,
                                              int fd, unsigned flags,
                                              void *user)
{
    aptus_sock_conn_t *conn;
    struct epoll_event ev;
    int one = 1;

    conn = ucs_calloc(1, sizeof(*conn), "aptus_sock_conn");
    if (conn == NULL) {
        return NULL;
    }
    /* small messages go out at once */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conn->super.wire = &cw->super;
    conn->super.user = user;
    aptus_sock_rma_init(conn);
    ucs_queue_head_init(&conn->zsegs);
    conn->fd     = fd;
    conn->flags  = flags;
    conn->events = EPOLLIN | EPOLLRDHUP;
    if (flags & APTUS_SOCK_CONN_CONNECTING) {
        conn->events |= EPOLLOUT;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events   = conn->events;
    ev.data.ptr = conn;
    if (epoll_ctl(cw->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        ucs_error("sock conn: epoll_ctl(ADD) failed: %m");
        ucs_free(conn);
        return NULL;
    }
    ucs_list_add_tail(&cw->conns, &conn->list);
    cw->super.num_conns++;
    aptus_sock_prove_start(conn);
    return conn;
}

static ucs_status_t aptus_sock_conn_connect(aptus_conn_wire_t *wire,
                                            const aptus_wire_addr_t *dst,
                                            void *user, aptus_conn_t **conn_p)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(wire);
    struct sockaddr_storage ss;
    aptus_sock_conn_t *conn;
    unsigned flags = 0;
    socklen_t len;
    char str[64];
    int fd;

    aptus_sock_addr_from_wire(dst, &ss, &len);
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_error("sock conn: socket() failed: %m");
        return (errno == EMFILE) ? UCS_ERR_EXCEEDS_LIMIT : UCS_ERR_IO_ERROR;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
        if (errno != EINPROGRESS) {
            ucs_error("sock conn: connect to %s failed: %m",
                      aptus_sock_addr_str(dst, str, sizeof(str)));
            close(fd);
            return UCS_ERR_UNREACHABLE;
        }
        flags = APTUS_SOCK_CONN_CONNECTING;
    }
    conn = aptus_sock_conn_new(cw, fd, flags, user);
    if (conn == NULL) {
        close(fd);
        return UCS_ERR_NO_MEMORY;
    }
    wire->stats.connects++;
    *conn_p = &conn->super;
    return UCS_OK;
}

static void aptus_sock_conn_listen_events(aptus_sock_conn_wire_t *cw,
                                          uint32_t events)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events   = events;
    ev.data.ptr = NULL; /* the listening socket */
    (void)epoll_ctl(cw->epfd, EPOLL_CTL_MOD, cw->listen_fd, &ev);
}

/* Out of descriptors: a pending connection stays readable on the
 * listening socket, and a level-triggered poll would spin on accept().
 * Stop watching it for a while; say so once, count the rest. */
static void aptus_sock_conn_accept_pause(aptus_sock_conn_wire_t *cw)
{
    if (!cw->accept_warned) {
        ucs_warn("sock conn: accept() failed: %m; not accepting for %d ms "
                 "(counted as accept_paused; raise the descriptor limit, "
                 "ulimit -n)",
                 APTUS_SOCK_CONN_ACCEPT_PAUSE_MS);
        cw->accept_warned = 1;
    }
    cw->super.stats.accept_paused++;
    aptus_sock_conn_listen_events(cw, 0);
    cw->accept_resume =
        ucs_get_time() + ucs_time_from_msec(APTUS_SOCK_CONN_ACCEPT_PAUSE_MS);
}

static void aptus_sock_conn_accept(aptus_sock_conn_wire_t *cw)
{
    aptus_sock_conn_t *conn;
    int fd;

    for (;;) {
        fd = accept4(cw->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if ((errno == EMFILE) || (errno == ENFILE) || (errno == ENOBUFS) ||
                (errno == ENOMEM)) {
                aptus_sock_conn_accept_pause(cw);
            } else if ((errno != EAGAIN) && (errno != EWOULDBLOCK) &&
                       (errno != EINTR) && (errno != ECONNABORTED)) {
                ucs_warn("sock conn: accept() failed: %m");
            }
            return;
        }
        conn = aptus_sock_conn_new(cw, fd, 0, NULL);
        if (conn == NULL) {
            close(fd);
            continue;
        }
        cw->super.stats.accepts++;
        cw->config.handlers->accepted(cw->config.arg, &conn->super);
    }
}

static void aptus_sock_conn_free(aptus_sock_conn_t *conn)
{
    if (conn->rx_buf != NULL) {
        aptus_conn_buf_release(conn->rx_buf);
    }
    aptus_sock_conn_zsegs_free(conn);
    ucs_free(conn->txq);
    ucs_free(conn->rma.serve);
    ucs_free(conn);
}

static unsigned aptus_sock_conn_progress(aptus_conn_wire_t *wire)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(wire);
    struct epoll_event events[APTUS_SOCK_CONN_EVENTS];
    aptus_sock_conn_t *conn, *tmp;
    unsigned count = 0;
    int i, n;

    if (ucs_unlikely(cw->accept_resume != 0) &&
        (ucs_get_time() >= cw->accept_resume)) {
        cw->accept_resume = 0;
        aptus_sock_conn_listen_events(cw, EPOLLIN);
    }
    n = aptus_sock_epoll_poll(cw->epfd, events, APTUS_SOCK_CONN_EVENTS);
    if (n <= 0) {
        return 0;
    }

    cw->in_progress = 1;
    for (i = 0; i < n; ++i) {
        if (events[i].data.ptr == &cw->watch_ready) {
            *cw->watch_ready = 1; /* the other wire reads it */
            continue;
        }
        if (events[i].data.ptr == &cw->prove_fd) {
            aptus_sock_prove_accept(cw);
            continue;
        }
        conn = events[i].data.ptr;
        if (conn == NULL) {
            aptus_sock_conn_accept(cw);
            count++;
            continue;
        }
        if (conn->flags & (APTUS_SOCK_CONN_REPORTED | APTUS_SOCK_CONN_CLOSED)) {
            continue;
        }
        if (events[i].events & EPOLLOUT) {
            aptus_sock_conn_writable(conn);
            count++;
        }
        if ((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) &&
            !(conn->flags &
              (APTUS_SOCK_CONN_REPORTED | APTUS_SOCK_CONN_CLOSED))) {
            count += aptus_sock_conn_rx(conn);
            if ((events[i].events & EPOLLERR) &&
                !(conn->flags & APTUS_SOCK_CONN_CLOSED)) {
                aptus_sock_conn_fail(conn, UCS_ERR_CONNECTION_RESET);
            }
        }
    }
    cw->in_progress = 0;

    ucs_list_for_each_safe(conn, tmp, &cw->zombies, list)
    {
        ucs_list_del(&conn->list);
        aptus_sock_conn_free(conn);
    }
    return count;
}

static void aptus_sock_conn_resources(aptus_conn_t *tl_conn,
                                      size_t *state_bytes_p,
                                      size_t *kernel_bytes_p, unsigned *fds_p)
{
    aptus_sock_conn_t *conn    = aptus_sock_conn(tl_conn);
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(tl_conn->wire);
    int sndbuf = 0, rcvbuf = 0;
    socklen_t len;

    len = sizeof(sndbuf);
    (void)getsockopt(conn->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len);
    len = sizeof(rcvbuf);
    (void)getsockopt(conn->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
    *state_bytes_p = sizeof(*conn) + conn->txq_cap +
                     ((conn->rma.serve != NULL)
                          ? APTUS_CONN_MAX_READS * sizeof(*conn->rma.serve)
                          : 0) +
                     ((conn->rx_buf != NULL) ? cw->super.rx_buf_size : 0);
    *kernel_bytes_p = (size_t)sndbuf + (size_t)rcvbuf;
    *fds_p          = 1;
}

static void aptus_sock_conn_close_conn(aptus_conn_t *tl_conn)
{
    aptus_sock_conn_t *conn    = aptus_sock_conn(tl_conn);
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(tl_conn->wire);

    if (!(conn->flags & APTUS_SOCK_CONN_REPORTED)) {
        (void)epoll_ctl(cw->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
    }
    close(conn->fd);
    conn->flags |= APTUS_SOCK_CONN_CLOSED | APTUS_SOCK_CONN_BROKEN;
    aptus_sock_rma_cleanup(conn, UCS_ERR_CANCELED);
    aptus_sock_conn_zsegs_free(conn); /* their memory may go with the user */
    conn->super.user = NULL; /* a handler below the close sees it is gone */
    ucs_list_del(&conn->list);
    cw->super.num_conns--;
    if (cw->in_progress) {
        ucs_list_add_tail(&cw->zombies, &conn->list);
    } else {
        aptus_sock_conn_free(conn);
    }
}

static void aptus_sock_conn_wire_close(aptus_conn_wire_t *wire)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(wire);
    aptus_sock_conn_t *conn, *tmp;

    ucs_list_for_each_safe(conn, tmp, &cw->conns, list)
    {
        aptus_sock_conn_close_conn(&conn->super);
    }
    ucs_list_for_each_safe(conn, tmp, &cw->zombies, list)
    {
        ucs_list_del(&conn->list);
        aptus_sock_conn_free(conn);
    }
    aptus_sock_prove_close(cw);
    close(cw->listen_fd);
    close(cw->epfd);
    ucs_mpool_cleanup(&cw->rx_mp, 1);
    ucs_free(cw);
}

static ucs_status_t aptus_sock_conn_watch_fd(aptus_conn_wire_t *wire, int fd,
                                             int *ready_p)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(wire);
    struct epoll_event ev;

    if (cw->watch_ready != NULL) {
        return UCS_ERR_ALREADY_EXISTS; /* one is enough for its users */
    }
    memset(&ev, 0, sizeof(ev));
    ev.events   = EPOLLIN; /* level-triggered: reported until drained */
    ev.data.ptr = &cw->watch_ready;
    if (epoll_ctl(cw->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        ucs_debug("sock conn: cannot watch fd %d: %m", fd);
        return UCS_ERR_IO_ERROR;
    }
    cw->watch_ready = ready_p;
    return UCS_OK;
}

static const aptus_conn_wire_ops_t aptus_sock_conn_ops = {
    .connect           = aptus_sock_conn_connect,
    .send              = aptus_sock_conn_send,
    .backlog           = aptus_sock_conn_backlog,
    .write             = aptus_sock_conn_write,
    .write_ordered     = aptus_sock_conn_write_ordered,
    .read              = aptus_sock_conn_read,
    .write_imm         = aptus_sock_conn_write_imm,
    .key_reachable     = aptus_sock_conn_key_reachable,
    .key_check         = aptus_sock_conn_key_check,
    .peer_pid          = aptus_sock_conn_peer_pid,
    .write_conn        = aptus_sock_conn_write_conn,
    .read_conn         = aptus_sock_conn_read_conn,
    .reads_outstanding = aptus_sock_conn_reads_outstanding,
    .progress          = aptus_sock_conn_progress,
    .watch_fd          = aptus_sock_conn_watch_fd,
    .conn_resources    = aptus_sock_conn_resources,
    .buf_put           = aptus_sock_conn_buf_put,
    .conn_close        = aptus_sock_conn_close_conn,
    .close             = aptus_sock_conn_wire_close,
};


ucs_status_t aptus_sock_conn_open(const char *dev_name,
                                  const aptus_conn_wire_config_t *config,
                                  aptus_conn_wire_t **wire_p)
{
    size_t alignment, align_offset;
    aptus_sock_conn_wire_t *cw;
    struct epoll_event ev;
    ucs_status_t status;

    if ((config->max_frame == 0) || (config->max_frame > APTUS_FRAME_MAX_LEN) ||
        (config->rx_buffers == 0) ||
        ((config->rx_max_buffers != 0) &&
         (config->rx_max_buffers < config->rx_buffers)) ||
        ((config->rx_alignment > 1) && !ucs_is_pow2(config->rx_alignment))) {
        ucs_error("sock conn: invalid frame size %zu, pool size %u..%u or "
                  "alignment %zu",
                  config->max_frame, config->rx_buffers, config->rx_max_buffers,
                  config->rx_alignment);
        return UCS_ERR_INVALID_PARAM;
    }
    cw = ucs_calloc(1, sizeof(*cw), "aptus_sock_conn_wire");
    if (cw == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    cw->super.ops     = &aptus_sock_conn_ops;
    cw->super.host_id = aptus_conn_reach_id();
    cw->config        = *config;
    /* The headroom grows by up to 7 bytes so that the byte to align sits a
     * multiple of 8 bytes after the buffer's start: the buffer header then
     * stays 8-byte aligned whatever offset the user asked for. */
    cw->config.rx_headroom =
        ucs_align_up(config->rx_headroom, 8) +
        (-(sizeof(aptus_conn_buf_t) + config->rx_align_offset) & 7);
    cw->area_size = APTUS_FRAME_HDR_LEN + config->max_frame;
    cw->super.rx_buf_size =
        sizeof(aptus_conn_buf_t) + cw->config.rx_headroom + cw->area_size;
    ucs_list_head_init(&cw->conns);
    ucs_list_head_init(&cw->zombies);

    /* A message that starts a buffer is delivered in place: place the
     * buffers so that its aligned byte is. */
    alignment    = ucs_max(config->rx_alignment, UCS_SYS_CACHE_LINE_SIZE);
    align_offset = (sizeof(aptus_conn_buf_t) + cw->config.rx_headroom +
                    config->rx_align_offset) &
                   (alignment - 1);
    ucs_assert((align_offset % 8) == 0);
    status =
        ucs_mpool_init(&cw->rx_mp, APTUS_NUMA_MPOOL_PRIV_LEN,
                       ucs_max(cw->super.rx_buf_size, align_offset),
                       align_offset, alignment, ucs_min(32, config->rx_buffers),
                       ucs_max(config->rx_max_buffers, config->rx_buffers),
                       &aptus_numa_mpool_ops, "aptus_conn_rx");
    if (status != UCS_OK) {
        goto err_free;
    }
    aptus_numa_mpool_set_node(&cw->rx_mp, config->numa_node);

    status =
        aptus_sock_open_bound(dev_name, SOCK_STREAM, APTUS_SOCK_CONN_BACKLOG,
                              &cw->listen_fd, &cw->super.addr);
    if (status != UCS_OK) {
        goto err_mpool;
    }

    cw->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (cw->epfd < 0) {
        ucs_error("sock conn: epoll_create1() failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err_listen;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events   = EPOLLIN;
    ev.data.ptr = NULL;
    if (epoll_ctl(cw->epfd, EPOLL_CTL_ADD, cw->listen_fd, &ev) < 0) {
        ucs_error("sock conn: epoll_ctl() failed: %m");
        status = UCS_ERR_IO_ERROR;
        goto err_epoll;
    }
    aptus_sock_prove_open(cw); /* without it, no peer is reached directly */

    *wire_p = &cw->super;
    return UCS_OK;

err_epoll:
    close(cw->epfd);
err_listen:
    close(cw->listen_fd);
err_mpool:
    ucs_mpool_cleanup(&cw->rx_mp, 1);
err_free:
    ucs_free(cw);
    return status;
}
