/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire, connection part.
 *
 * Connections are non-blocking TCP sockets polled through one epoll set
 * (level-triggered, so a connection that could not be read for lack of a
 * receive buffer is simply offered again). Each read takes as many bytes as
 * one pool buffer holds and delivers every whole frame in it; the first
 * frame of a buffer may be kept in place by the receiver, the tail of a
 * frame cut by the buffer's end moves to the start of a fresh buffer. A
 * connection holds a buffer only while a frame is half received, and a
 * send backlog only while the socket refuses bytes: idle connections cost
 * their state and their socket.
 *
 * One-sided operations are process_vm_writev/readv into the connection's
 * peer, inside the key's bounds, for a peer whose pid the kernel proved
 * (sock_conn_prove.c: same host only); a key naming another process is
 * refused. For a peer on another host they are frames on its connection
 * (sock_conn_rma.c) that the target serves into or out of its registered
 * memory.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_conn.h"
#include "sock_conn_int.h"
#include "sock_dgram.h"
#include "sock_netif.h"
#include "../../base/aptus_mpool.h"
#include "../../proto/le.h"
#include "../../proto/rc_sr_proto.h"
#include "base/aptus_log.h"

#include <sys/stat.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/mpool.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sock.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <ucs/sys/uid.h>
#include <ucs/arch/cpu.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

void aptus_conn_buf_release(aptus_conn_buf_t *buf)
{
    if (--buf->refs == 0) {
        buf->wire->stats.rx_pool_in_use--;
        ucs_mpool_put(buf);
    }
}

static uint8_t *aptus_sock_conn_area(aptus_sock_conn_wire_t *cw,
                                     aptus_conn_buf_t *buf)
{
    return aptus_conn_buf_area(buf, cw->config.rx_headroom);
}

static aptus_conn_buf_t *aptus_sock_conn_buf_get(aptus_sock_conn_wire_t *cw)
{
    aptus_conn_buf_t *buf = ucs_mpool_get(&cw->rx_mp);

    if (buf != NULL) {
        buf->wire = &cw->super;
        buf->refs = 1;
        if (++cw->super.stats.rx_pool_in_use > cw->super.stats.rx_pool_peak) {
            cw->super.stats.rx_pool_peak = cw->super.stats.rx_pool_in_use;
        }
    }
    return buf;
}

static void aptus_sock_conn_set_events(aptus_sock_conn_t *conn, uint32_t events)
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

static ucs_status_t aptus_sock_conn_errno_status(int err)
{
    switch (err) {
    case ECONNRESET:
    case EPIPE:
    case ECONNREFUSED:
    case ENOTCONN:
        return UCS_ERR_CONNECTION_RESET;
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return UCS_ERR_ENDPOINT_TIMEOUT;
    default:
        return UCS_ERR_IO_ERROR;
    }
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

/* Queue bytes the socket did not take, after whatever is queued. */
static ucs_status_t aptus_sock_conn_queue(aptus_sock_conn_t *conn,
                                          const struct iovec *iov,
                                          unsigned iovcnt, size_t skip)
{
    size_t total = 0, need, cap, n;
    uint8_t *txq;
    unsigned i;

    for (i = 0; i < iovcnt; ++i) {
        total += iov[i].iov_len;
    }
    total -= skip;
    need = conn->txq_len + total;
    if ((need > conn->txq_cap) && (conn->txq_off > 0)) {
        /* what was sent goes only when room is needed: moving the rest at
         * every frame would copy a long backlog once per frame */
        memmove(conn->txq, conn->txq + conn->txq_off,
                conn->txq_len - conn->txq_off);
        conn->txq_len -= conn->txq_off;
        conn->txq_off = 0;
        need          = conn->txq_len + total;
    }
    if (need > conn->txq_cap) {
        cap = ucs_max(need, conn->txq_cap * 2);
        txq = ucs_realloc(conn->txq, cap, "aptus_sock_conn_txq");
        if (txq == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        conn->txq     = txq;
        conn->txq_cap = cap;
    }
    for (i = 0; i < iovcnt; ++i) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        n = iov[i].iov_len - skip;
        memcpy(conn->txq + conn->txq_len, (uint8_t *)iov[i].iov_base + skip, n);
        conn->txq_len += n;
        skip = 0;
    }
    conn->super.wire->stats.tx_queued++;
    aptus_sock_conn_set_events(conn, conn->events | EPOLLOUT);
    return UCS_OK;
}

ucs_status_t aptus_sock_conn_send_frame(aptus_sock_conn_t *conn, unsigned type,
                                        const struct iovec *iov,
                                        unsigned iovcnt, int force)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    struct iovec frame_iov[APTUS_SOCK_CONN_MAX_IOV + 1];
    uint8_t hdr[APTUS_FRAME_HDR_LEN];
    uint8_t small[APTUS_SOCK_CONN_COALESCE];
    size_t total = 0, queued, len;
    struct msghdr msg;
    ucs_status_t status;
    ssize_t sent = 0;
    unsigned i;

    if (conn->flags & APTUS_SOCK_CONN_BROKEN) {
        return UCS_ERR_CONNECTION_RESET;
    }
    if (iovcnt > APTUS_SOCK_CONN_MAX_IOV) {
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; ++i) {
        if (iov[i].iov_len > cw->config.max_frame - total) {
            return UCS_ERR_INVALID_PARAM; /* (also when the sum wraps) */
        }
        frame_iov[i + 1] = iov[i];
        total += iov[i].iov_len;
    }
    queued = aptus_sock_conn_queued(conn);
    if (!force && (queued > 0) &&
        (queued + total + APTUS_FRAME_HDR_LEN > cw->config.max_backlog)) {
        return UCS_ERR_NO_RESOURCE;
    }
    queued = conn->txq_len - conn->txq_off;

    aptus_frame_hdr_pack(hdr, type, total);
    aptus_trace_data("sock conn %d: tx %s frame, %zu bytes", conn->fd,
                     aptus_frame_type_str(type), total);
    frame_iov[0].iov_base = hdr;
    frame_iov[0].iov_len  = sizeof(hdr);
    total += sizeof(hdr);

    if ((queued == 0) && !(conn->flags & APTUS_SOCK_CONN_CONNECTING)) {
        memset(&msg, 0, sizeof(msg));
        if (total <= APTUS_SOCK_CONN_COALESCE) {
            /* a small frame goes out of one buffer: the kernel copies it
             * faster than piece by piece */
            for (i = 0, len = 0; i <= iovcnt; ++i) {
                if (frame_iov[i].iov_len > 0) {
                    memcpy(small + len, frame_iov[i].iov_base,
                           frame_iov[i].iov_len);
                    len += frame_iov[i].iov_len;
                }
            }
            frame_iov[0].iov_base = small;
            frame_iov[0].iov_len  = len;
            msg.msg_iovlen        = 1;
            iovcnt                = 0;
        } else {
            msg.msg_iovlen = iovcnt + 1;
        }
        msg.msg_iov = frame_iov;
        sent        = sendmsg(conn->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0) {
            if ((errno != EAGAIN) && (errno != EWOULDBLOCK) &&
                (errno != EINTR)) {
                /* progress reports it through the failed handler */
                conn->flags |= APTUS_SOCK_CONN_BROKEN;
                return aptus_sock_conn_errno_status(errno);
            }
            sent = 0;
        }
    }
    cw->super.stats.tx_frames++;
    cw->super.stats.tx_bytes += total;
    if ((size_t)sent == total) {
        return UCS_OK;
    }
    status = aptus_sock_conn_queue(conn, frame_iov, iovcnt + 1, sent);
    if (status != UCS_OK) {
        /* part of the frame went out: the stream cannot continue */
        conn->flags |= APTUS_SOCK_CONN_BROKEN;
    }
    return status;
}

static ucs_status_t aptus_sock_conn_send(aptus_conn_t *conn,
                                         const struct iovec *iov,
                                         unsigned iovcnt)
{
    return aptus_sock_conn_send_frame(aptus_sock_conn(conn),
                                      APTUS_FRAME_TYPE_MSG, iov, iovcnt, 0);
}

static size_t aptus_sock_conn_backlog(aptus_conn_t *tl_conn)
{
    return aptus_sock_conn_queued(aptus_sock_conn(tl_conn));
}

/* A key of another reach id (host or PID namespace) goes over the
 * connection even from a proven peer: the pid it names is of a namespace
 * where it means another process, if any. */
static int aptus_sock_conn_key_reachable(aptus_conn_t *tl_conn,
                                         const aptus_mem_key_t *key)
{
    return (aptus_sock_prove_peer(aptus_sock_conn(tl_conn)) != 0) &&
           (key->host_id == tl_conn->wire->host_id);
}

static ucs_status_t aptus_sock_conn_key_check(aptus_conn_t *tl_conn,
                                              const aptus_mem_key_t *key)
{
    aptus_sock_conn_t *conn = aptus_sock_conn(tl_conn);

    if (!aptus_sock_conn_key_reachable(tl_conn, key)) {
        return (conn->prove == APTUS_SOCK_PROVE_WAITING) ? UCS_ERR_NO_RESOURCE
                                                         : UCS_ERR_UNREACHABLE;
    }
    if (key->pid != (uint32_t)conn->peer_pid) {
        /* an edited key: it names a process that never proved itself */
        tl_conn->wire->stats.pid_refused++;
        ucs_debug("sock conn %d: key names pid %u, the peer is pid %d: "
                  "refused",
                  conn->fd, key->pid, (int)conn->peer_pid);
        return UCS_ERR_INVALID_ADDR;
    }
    return UCS_OK;
}

static pid_t aptus_sock_conn_peer_pid(aptus_conn_t *tl_conn)
{
    return aptus_sock_prove_peer(aptus_sock_conn(tl_conn));
}

static pid_t aptus_conn_pid_cached; /* 0: not known in this process */

static void aptus_conn_pid_forget(void)
{
    aptus_conn_pid_cached = 0; /* the child of a fork */
}

static void aptus_conn_pid_init(void)
{
    (void)pthread_atfork(NULL, NULL, aptus_conn_pid_forget);
}

pid_t aptus_conn_pid(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pid_t pid = __atomic_load_n(&aptus_conn_pid_cached, __ATOMIC_RELAXED);

    if (ucs_unlikely(pid == 0)) {
        (void)pthread_once(&once, aptus_conn_pid_init);
        pid = getpid();
        __atomic_store_n(&aptus_conn_pid_cached, pid, __ATOMIC_RELAXED);
    }
    return pid;
}

uint64_t aptus_conn_reach_id(void)
{
    /* A process's own PID namespace never changes (unshare changes its
     * children's), so the id is kept per pid: remote keys are packed on
     * the rendezvous path. A forked child, which may be in another
     * namespace, has another pid and reads its own (UCX's ucs_sys_get_ns
     * would hand it the parent's). */
    static uint64_t id;
    static pid_t id_pid;
    pid_t pid = aptus_conn_pid();
    struct stat st;
    uint64_t ns = 0;

    if (__atomic_load_n(&id_pid, __ATOMIC_ACQUIRE) == pid) {
        return id;
    }
    if (stat("/proc/self/ns/pid", &st) == 0) {
        ns = st.st_ino;
    }
    id = ucs_get_system_id() ^ (ns * 0x9e3779b97f4a7c15ull);
    __atomic_store_n(&id_pid, pid, __ATOMIC_RELEASE);
    return id;
}

/* The status of a failed process_vm_readv/writev (errno). */
static ucs_status_t aptus_sock_conn_rma_status(int err)
{
    switch (err) {
    case ESRCH:
        return UCS_ERR_CONNECTION_RESET; /* the owner is gone */
    case EFAULT:
        return UCS_ERR_INVALID_ADDR;
    case EPERM:
        return UCS_ERR_REJECTED;
    default:
        return UCS_ERR_IO_ERROR;
    }
}

/* process_vm into pid (proven by the caller), inside key's bounds. */
static ucs_status_t aptus_sock_conn_vm(aptus_conn_wire_t *wire, pid_t pid,
                                       const aptus_mem_key_t *key,
                                       uint64_t remote_addr,
                                       const struct iovec *iov, unsigned iovcnt,
                                       int is_write)
{
    struct iovec local[APTUS_SOCK_CONN_MAX_IOV];
    struct iovec remote;
    size_t total = 0, done = 0, n;
    unsigned first = 0, i;
    ssize_t ret;

    if (iovcnt > APTUS_SOCK_CONN_MAX_IOV) {
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; ++i) {
        if (iov[i].iov_len > key->length - total) {
            wire->stats.refused++; /* (also when the sum wraps) */
            return UCS_ERR_INVALID_ADDR;
        }
        local[i] = iov[i];
        total += iov[i].iov_len;
    }
    if ((remote_addr < key->address) || (total > key->length) ||
        (remote_addr - key->address > key->length - total)) {
        wire->stats.refused++;
        return UCS_ERR_INVALID_ADDR;
    }

    while (done < total) {
        remote.iov_base = (void *)(uintptr_t)(remote_addr + done);
        remote.iov_len  = total - done;
        ret = is_write ? process_vm_writev(pid, local + first, iovcnt - first,
                                           &remote, 1, 0)
                       : process_vm_readv(pid, local + first, iovcnt - first,
                                          &remote, 1, 0);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            }
            ucs_debug("sock conn: process_vm_%sv(pid %d) failed: %m",
                      is_write ? "write" : "read", (int)pid);
            return aptus_sock_conn_rma_status(errno);
        }
        if (ret == 0) {
            return UCS_ERR_IO_ERROR;
        }
        done += ret;
        /* skip the local pieces that are complete */
        n = ret;
        while ((first < iovcnt) && (n >= local[first].iov_len)) {
            n -= local[first].iov_len;
            first++;
        }
        if (n > 0) {
            local[first].iov_base = (uint8_t *)local[first].iov_base + n;
            local[first].iov_len -= n;
        }
    }
    if (is_write) {
        wire->stats.writes++;
        wire->stats.write_bytes += total;
    } else {
        wire->stats.reads++;
        wire->stats.read_bytes += total;
    }
    return UCS_OK;
}

/* Into conn's proven peer only, whatever pid the key names. */
static ucs_status_t aptus_sock_conn_rma(aptus_conn_t *tl_conn,
                                        const aptus_mem_key_t *key,
                                        uint64_t remote_addr,
                                        const struct iovec *iov,
                                        unsigned iovcnt, int is_write)
{
    ucs_status_t status = aptus_sock_conn_key_check(tl_conn, key);

    if (status != UCS_OK) {
        tl_conn->wire->stats.refused++;
        /* not proven yet counts as not here: over the connection */
        return (status == UCS_ERR_NO_RESOURCE) ? UCS_ERR_UNREACHABLE : status;
    }
    return aptus_sock_conn_vm(tl_conn->wire, aptus_sock_conn(tl_conn)->peer_pid,
                              key, remote_addr, iov, iovcnt, is_write);
}

static ucs_status_t aptus_sock_conn_write(aptus_conn_t *conn,
                                          const aptus_mem_key_t *key,
                                          uint64_t remote_addr,
                                          const struct iovec *iov,
                                          unsigned iovcnt)
{
    return aptus_sock_conn_rma(conn, key, remote_addr, iov, iovcnt, 1);
}

static ucs_status_t aptus_sock_conn_read(aptus_conn_t *conn,
                                         const aptus_mem_key_t *key,
                                         uint64_t remote_addr,
                                         const struct iovec *iov,
                                         unsigned iovcnt)
{
    return aptus_sock_conn_rma(conn, key, remote_addr, iov, iovcnt, 0);
}

static ucs_status_t aptus_sock_conn_write_imm(aptus_conn_t *tl_conn,
                                              const aptus_mem_key_t *key,
                                              uint64_t remote_addr,
                                              const struct iovec *iov,
                                              unsigned iovcnt, uint32_t imm)
{
    aptus_sock_conn_t *conn = aptus_sock_conn(tl_conn);
    uint8_t payload[APTUS_FRAME_IMM_LEN];
    struct iovec imm_iov = { payload, sizeof(payload) };
    ucs_status_t status;

    if (conn->flags & APTUS_SOCK_CONN_BROKEN) {
        return UCS_ERR_CONNECTION_RESET;
    }
    status = aptus_sock_conn_rma(tl_conn, key, remote_addr, iov, iovcnt, 1);
    if (status != UCS_OK) {
        return status;
    }
    aptus_put32(payload, imm);
    tl_conn->wire->stats.imms++;
    /* the data is in place: the notice must follow, whatever the backlog */
    return aptus_sock_conn_send_frame(conn, APTUS_FRAME_TYPE_IMM, &imm_iov, 1,
                                      1);
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

/* Send what the backlog holds; tell the owner when it is empty. */
static void aptus_sock_conn_writable(aptus_sock_conn_t *conn)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    ssize_t sent;
    socklen_t len;
    int err;

    if (conn->flags & APTUS_SOCK_CONN_CONNECTING) {
        len = sizeof(err);
        if ((getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) ||
            (err != 0)) {
            aptus_sock_conn_fail(conn, (err == ECONNREFUSED)
                                           ? UCS_ERR_UNREACHABLE
                                           : aptus_sock_conn_errno_status(err));
            return;
        }
        conn->flags &=
            ~(APTUS_SOCK_CONN_CONNECTING | APTUS_SOCK_CONN_PROVE_QUEUED);
    }
    while (conn->txq_off < conn->txq_len) {
        sent = send(conn->fd, conn->txq + conn->txq_off,
                    conn->txq_len - conn->txq_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0) {
            if ((errno == EAGAIN) || (errno == EWOULDBLOCK)) {
                return;
            } else if (errno == EINTR) {
                continue;
            }
            aptus_sock_conn_fail(conn, aptus_sock_conn_errno_status(errno));
            return;
        }
        conn->txq_off += sent;
    }
    /* an idle connection keeps no backlog memory */
    ucs_free(conn->txq);
    conn->txq     = NULL;
    conn->txq_off = conn->txq_len = conn->txq_cap = 0;
    aptus_sock_conn_set_events(conn, conn->events & ~EPOLLOUT);
    if (conn->rma.serve_count > 0) {
        aptus_sock_rma_serve(conn); /* the peer's reads go on */
        if (conn->txq_len > 0) {
            return;
        }
    }
    cw->config.handlers->writable(cw->config.arg, &conn->super);
}

/* Move a cut frame to the start of a buffer of its own (the current one
 * may be held by the receiver). Returns 0 when no buffer is free. */
static int aptus_sock_conn_rx_compact(aptus_sock_conn_wire_t *cw,
                                      aptus_sock_conn_t *conn)
{
    size_t left = conn->rx_len - conn->rx_off;
    aptus_conn_buf_t *buf;

    if (conn->rx_off == 0) {
        return 1;
    }
    if (left == 0) {
        aptus_conn_buf_release(conn->rx_buf);
        conn->rx_buf = NULL;
        conn->rx_off = conn->rx_len = 0;
        return 1;
    }
    if (conn->rx_buf->refs == 1) {
        memmove(aptus_sock_conn_area(cw, conn->rx_buf),
                aptus_sock_conn_area(cw, conn->rx_buf) + conn->rx_off, left);
    } else {
        buf = aptus_sock_conn_buf_get(cw);
        if (buf == NULL) {
            return 0;
        }
        memcpy(aptus_sock_conn_area(cw, buf),
               aptus_sock_conn_area(cw, conn->rx_buf) + conn->rx_off, left);
        aptus_conn_buf_release(conn->rx_buf);
        conn->rx_buf = buf;
    }
    conn->rx_off = 0;
    conn->rx_len = left;
    return 1;
}

/* Deliver every whole frame in the buffer. Returns 0 when the connection
 * was closed or broken meanwhile. */
static int aptus_sock_conn_rx_frames(aptus_sock_conn_wire_t *cw,
                                     aptus_sock_conn_t *conn)
{
    uint8_t *area                  = aptus_sock_conn_area(cw, conn->rx_buf);
    const aptus_conn_handlers_t *h = cw->config.handlers;
    aptus_frame_result_t result;
    aptus_frame_t frame;

    for (;;) {
        result =
            aptus_frame_parse(area + conn->rx_off, conn->rx_len - conn->rx_off,
                              cw->config.max_frame, &frame);
        if (result == APTUS_FRAME_PARTIAL) {
            return 1;
        } else if (result == APTUS_FRAME_BAD) {
            cw->super.stats.rx_malformed++;
            aptus_sock_conn_fail(conn, UCS_ERR_IO_ERROR);
            return 0;
        }
        cw->super.stats.rx_frames++;
        cw->super.stats.rx_bytes += APTUS_FRAME_HDR_LEN + frame.length;
        aptus_trace_data("sock conn %d: rx %s frame, %zu bytes", conn->fd,
                         aptus_frame_type_str(frame.type), frame.length);
        if (frame.type == APTUS_FRAME_TYPE_MSG) {
            h->recv(cw->config.arg, &conn->super, (void *)frame.payload,
                    frame.length, conn->rx_buf, conn->rx_off == 0);
        } else if (frame.type == APTUS_FRAME_TYPE_IMM) {
            h->imm(cw->config.arg, &conn->super, aptus_get32(frame.payload));
        } else if ((frame.type == APTUS_FRAME_TYPE_PROVE_REQ) ||
                   (frame.type == APTUS_FRAME_TYPE_PROVE_ANS)) {
            if (!aptus_sock_prove_frame(conn, frame.type, frame.payload)) {
                return 0;
            }
        } else if (!aptus_sock_rma_frame(conn, frame.type, frame.payload,
                                         frame.length)) {
            return 0; /* failed for it */
        }
        conn->rx_off += APTUS_FRAME_HDR_LEN + frame.length;
        if (conn->flags & (APTUS_SOCK_CONN_REPORTED | APTUS_SOCK_CONN_CLOSED)) {
            return 0;
        }
    }
}

static unsigned aptus_sock_conn_rx(aptus_sock_conn_t *conn)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    unsigned reads, count = 0;
    size_t room;
    ssize_t ret;

    for (reads = 0; reads < APTUS_SOCK_CONN_READS; ++reads) {
        if ((conn->rx_buf != NULL) && !aptus_sock_conn_rx_compact(cw, conn)) {
            cw->super.stats.rx_pool_empty++;
            return count;
        }
        if (conn->rx_buf == NULL) {
            conn->rx_buf = aptus_sock_conn_buf_get(cw);
            if (conn->rx_buf == NULL) {
                /* the data waits in the socket: never dropped */
                cw->super.stats.rx_pool_empty++;
                return count;
            }
            conn->rx_off = conn->rx_len = 0;
        }

        room = cw->area_size - conn->rx_len;
        ret  = recv(conn->fd,
                    aptus_sock_conn_area(cw, conn->rx_buf) + conn->rx_len, room,
                    MSG_DONTWAIT);
        cw->super.stats.rx_syscalls++;
        if (ret <= 0) {
            if ((ret < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) ||
                              (errno == EINTR))) {
                break;
            }
            aptus_sock_conn_fail(
                conn, (ret == 0) ? UCS_ERR_NOT_CONNECTED
                                 : aptus_sock_conn_errno_status(errno));
            return count;
        }
        conn->rx_len += ret;
        count++;
        if (!aptus_sock_conn_rx_frames(cw, conn)) {
            return count;
        }
        if ((size_t)ret < room) {
            break; /* the socket is empty: spare the system call */
        }
    }

    /* keep a buffer only for a frame that is half received */
    if ((conn->rx_buf != NULL) && (conn->rx_off == conn->rx_len)) {
        aptus_conn_buf_release(conn->rx_buf);
        conn->rx_buf = NULL;
        conn->rx_off = conn->rx_len = 0;
    }
    return count;
}

static void aptus_sock_conn_free(aptus_sock_conn_t *conn)
{
    if (conn->rx_buf != NULL) {
        aptus_conn_buf_release(conn->rx_buf);
    }
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
    n = epoll_wait(cw->epfd, events, APTUS_SOCK_CONN_EVENTS, 0);
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

/* One process_vm_writev with a local and a remote vector per piece: the
 * kernel copies remote vector by vector, and within one by local vector,
 * so a piece boundary is a boundary between separate copies. On x86 the
 * stores of one copy may become visible out of order among themselves
 * ("fast string" rep movs) but not after the stores of a later
 * instruction (TSO), so the pieces are seen in order. Other CPUs give no
 * such order inside the kernel: there every piece is its own call and a
 * full fence separates them (the kernel's stores are this thread's). */
static ucs_status_t
aptus_sock_conn_write_ordered(aptus_conn_wire_t *wire,
                              const aptus_mem_key_t *key,
                              const aptus_conn_piece_t *pieces, unsigned count)
{
    struct iovec local[APTUS_CONN_MAX_PIECES], remote[APTUS_CONN_MAX_PIECES];
    size_t total = 0;
    unsigned i;
#if defined(__x86_64__) || defined(__i386__)
    ssize_t ret;
#else
    ucs_status_t status;
#endif

    if (count > APTUS_CONN_MAX_PIECES) {
        return UCS_ERR_INVALID_PARAM;
    }
    if ((key->host_id != wire->host_id) || (key->pid == 0)) {
        wire->stats.refused++; /* not a key that passed key_check */
        return UCS_ERR_UNREACHABLE;
    }
    for (i = 0; i < count; ++i) {
        if ((pieces[i].remote_addr < key->address) ||
            (pieces[i].length > key->length) ||
            (pieces[i].remote_addr - key->address >
             key->length - pieces[i].length)) {
            wire->stats.refused++;
            return UCS_ERR_INVALID_ADDR;
        }
        local[i].iov_base  = (void *)pieces[i].local;
        local[i].iov_len   = pieces[i].length;
        remote[i].iov_base = (void *)(uintptr_t)pieces[i].remote_addr;
        remote[i].iov_len  = pieces[i].length;
        total += pieces[i].length;
    }
#if defined(__x86_64__) || defined(__i386__)
    do {
        ret = process_vm_writev(key->pid, local, count, remote, count, 0);
    } while ((ret < 0) && (errno == EINTR));
    if (ret == (ssize_t)total) {
        return UCS_OK;
    }
    if (ret >= 0) {
        /* a fault part way (the pages went): nothing is published unless
         * the polled byte, last, went too; report it as the region gone */
        return UCS_ERR_INVALID_ADDR;
    }
#else
    for (i = 0; i < count; ++i) {
        status = aptus_sock_conn_vm(wire, key->pid, key, pieces[i].remote_addr,
                                    &local[i], 1, 1);
        if (status != UCS_OK) {
            return status;
        }
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    return UCS_OK;
#endif
    ucs_debug("sock conn: process_vm_writev(pid %u) failed: %m", key->pid);
    return aptus_sock_conn_rma_status(errno);
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
    status = ucs_mpool_init(
        &cw->rx_mp, 0, ucs_max(cw->super.rx_buf_size, align_offset),
        align_offset, alignment, ucs_min(32, config->rx_buffers),
        ucs_max(config->rx_max_buffers, config->rx_buffers),
        &aptus_mpool_plain_ops, "aptus_conn_rx");
    if (status != UCS_OK) {
        goto err_free;
    }

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
