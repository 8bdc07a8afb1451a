/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's proof of a connection's peer process.
 *
 * process_vm_readv/writev reach any process of the same user that the
 * kernel's ptrace check lets through, so the pid they take must be the
 * peer's as the kernel sees it, not a number the peer sent. Each wire
 * listens on an abstract AF_UNIX socket with a random name; abstract names
 * live in a network namespace, so only processes of this "host" reach it.
 * On a new connection each side sends PROVE_REQ (that name and a random
 * challenge) as its first frame. The receiver connects to the name, sends
 * the challenge and its own view of the TCP connection's local and remote
 * addresses, closes, and then sends PROVE_ANS over TCP. The asker takes the
 * rendezvous connection, reads SO_PEERCRED (the connecting process's pid,
 * translated into the asker's PID namespace: 0 when it is not visible
 * there) and ties the pid to the TCP connection whose challenge matches
 * and whose addresses are the same two, reversed. Only the TCP peer knows
 * the challenge, and TCP's four addresses name one connection in a
 * network namespace, so the process proven is one that holds the other
 * end of that very connection: a peer cannot have another UCX process
 * answer for it (relay a challenge over a connection of its own). When
 * PROVE_ANS arrives, whatever has not matched is final: not proven.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_conn_int.h"
#include "sock_dgram.h"
#include "proto/le.h"
#include "proto/random.h"

#include <ucs/debug/log.h>

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define APTUS_SOCK_PROVE_BIND_TRIES 4

static socklen_t aptus_sock_prove_addr(uint64_t name, struct sockaddr_un *sun)
{
    int len;

    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    /* sun_path[0] == 0: an abstract name, gone with its socket */
    len = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1,
                   "aptus-conn-%016" PRIx64, name);
    return offsetof(struct sockaddr_un, sun_path) + 1 + len;
}

void aptus_sock_prove_open(aptus_sock_conn_wire_t *cw)
{
    struct sockaddr_un sun;
    struct epoll_event ev;
    socklen_t len;
    int fd, tries;

    cw->prove_fd          = -1;
    cw->prove_num_pending = 0;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_debug("sock conn: no rendezvous socket (%m): peers not proven");
        return;
    }
    for (tries = 0; tries < APTUS_SOCK_PROVE_BIND_TRIES; ++tries) {
        cw->prove_name = aptus_random64();
        len            = aptus_sock_prove_addr(cw->prove_name, &sun);
        if (bind(fd, (struct sockaddr *)&sun, len) == 0) {
            break;
        }
        if (errno != EADDRINUSE) {
            tries = APTUS_SOCK_PROVE_BIND_TRIES;
        }
    }
    if ((tries == APTUS_SOCK_PROVE_BIND_TRIES) ||
        (listen(fd, APTUS_SOCK_CONN_BACKLOG) < 0)) {
        ucs_debug("sock conn: rendezvous socket not bound (%m): peers not "
                  "proven");
        close(fd);
        return;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events   = EPOLLIN;
    ev.data.ptr = &cw->prove_fd;
    if (epoll_ctl(cw->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        ucs_debug("sock conn: cannot watch the rendezvous socket: %m");
        close(fd);
        return;
    }
    cw->prove_fd = fd;
}

void aptus_sock_prove_close(aptus_sock_conn_wire_t *cw)
{
    while (cw->prove_num_pending > 0) {
        close(cw->prove_pending[--cw->prove_num_pending]);
    }
    if (cw->prove_fd >= 0) {
        close(cw->prove_fd);
        cw->prove_fd = -1;
    }
}

void aptus_sock_prove_start(aptus_sock_conn_t *conn)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);
    uint8_t body[APTUS_FRAME_PROVE_REQ_LEN];
    struct iovec iov = { body, sizeof(body) };

    if ((cw->prove_fd < 0) ||
        (aptus_random_bytes(conn->challenge, sizeof(conn->challenge)) != 0)) {
        conn->prove = APTUS_SOCK_PROVE_NONE;
        return;
    }
    conn->prove = APTUS_SOCK_PROVE_WAITING;
    (void)aptus_sock_prove_own_view(conn); /* else once connected */
    aptus_put64(body, cw->prove_name);
    memcpy(body + 8, conn->challenge, sizeof(conn->challenge));
    /* the first frame: a broken connection says so on its own */
    if ((aptus_sock_conn_send_frame(conn, APTUS_FRAME_TYPE_PROVE_REQ, &iov, 1,
                                    1) == UCS_OK) &&
        (conn->flags & APTUS_SOCK_CONN_CONNECTING)) {
        conn->flags |= APTUS_SOCK_CONN_PROVE_QUEUED;
    }
}

/* This end's view of the connection: local, then remote address. */
static int aptus_sock_prove_view(int fd, uint8_t *out)
{
    struct sockaddr_storage ss;
    aptus_wire_addr_t addr;
    socklen_t len;

    len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        return 0;
    }
    aptus_sock_addr_to_wire((struct sockaddr *)&ss, &addr);
    memcpy(out, addr.raw, APTUS_WIRE_ADDR_LEN);
    len = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
        return 0;
    }
    aptus_sock_addr_to_wire((struct sockaddr *)&ss, &addr);
    memcpy(out + APTUS_WIRE_ADDR_LEN, addr.raw, APTUS_WIRE_ADDR_LEN);
    return 1;
}

/* This end's view of conn, read while the connection stands and kept. */
int aptus_sock_prove_own_view(aptus_sock_conn_t *conn)
{
    if (!conn->view_known && !(conn->flags & APTUS_SOCK_CONN_CONNECTING)) {
        conn->view_known = aptus_sock_prove_view(conn->fd, conn->view);
    }
    return conn->view_known;
}

/* Answer the peer's PROVE_REQ on its rendezvous socket, if this process
 * reaches it (the same network namespace), then say so over TCP. */
static void aptus_sock_prove_answer(aptus_sock_conn_t *conn,
                                    const uint8_t *payload)
{
    uint8_t msg[APTUS_SOCK_PROVE_MSG_LEN];
    struct sockaddr_un sun;
    socklen_t len;
    ssize_t sent;
    int fd;

    memcpy(msg, payload + 8, APTUS_FRAME_CHALLENGE_LEN);
    if (!aptus_sock_prove_view(conn->fd, msg + APTUS_FRAME_CHALLENGE_LEN)) {
        goto out;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        goto out;
    }
    /* a name of our own form only: the peer picks the number, not the
     * socket of some other program */
    len = aptus_sock_prove_addr(aptus_get64(payload), &sun);
    if (connect(fd, (struct sockaddr *)&sun, len) == 0) {
        /* the listener's queue holds it, closed or not, before PROVE_ANS
         * can arrive */
        sent = send(fd, msg, sizeof(msg), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent != (ssize_t)sizeof(msg)) {
            ucs_debug("sock conn %d: rendezvous answer not sent", conn->fd);
        }
    } else {
        /* another network namespace (host), or the asker is gone */
        ucs_debug("sock conn %d: no rendezvous with the peer: %m", conn->fd);
    }
    close(fd);
out:
    (void)aptus_sock_conn_send_frame(conn, APTUS_FRAME_TYPE_PROVE_ANS, NULL, 0,
                                     1);
}

/* A rendezvous answer from pid: the connection it proves, if any. */
static void aptus_sock_prove_match(aptus_sock_conn_wire_t *cw, pid_t pid,
                                   const uint8_t *msg)
{
    aptus_sock_conn_t *conn;

    ucs_list_for_each(conn, &cw->conns, list)
    {
        if ((conn->prove != APTUS_SOCK_PROVE_WAITING) ||
            (memcmp(conn->challenge, msg, APTUS_FRAME_CHALLENGE_LEN) != 0)) {
            continue;
        }
        msg += APTUS_FRAME_CHALLENGE_LEN;
        /* the answerer's local address is our remote one, and back */
        if ((pid > 0) && aptus_sock_prove_own_view(conn) &&
            (memcmp(msg, conn->view + APTUS_WIRE_ADDR_LEN,
                    APTUS_WIRE_ADDR_LEN) == 0) &&
            (memcmp(msg + APTUS_WIRE_ADDR_LEN, conn->view,
                    APTUS_WIRE_ADDR_LEN) == 0)) {
            conn->peer_pid = pid;
            conn->prove    = APTUS_SOCK_PROVE_PROVEN;
            cw->super.stats.pid_proven++;
            ucs_debug("sock conn %d: peer is pid %d", conn->fd, (int)pid);
        } else {
            /* answered for another connection, or by a process outside
             * our PID namespace: the challenge is spent */
            conn->prove = APTUS_SOCK_PROVE_NONE;
            cw->super.stats.pid_unproven++;
            ucs_debug("sock conn %d: peer not proven (pid %d)", conn->fd,
                      (int)pid);
        }
        return;
    }
}

/* Read the answer on an accepted rendezvous connection and close it;
 * returns 0, keeping it open, while nothing is written yet. */
static int aptus_sock_prove_read(aptus_sock_conn_wire_t *cw, int fd)
{
    uint8_t msg[APTUS_SOCK_PROVE_MSG_LEN];
    struct ucred cred;
    socklen_t len;
    ssize_t got;

    got = recv(fd, msg, sizeof(msg), MSG_DONTWAIT);
    if ((got < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK))) {
        return 0;
    }
    len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        cred.pid = 0;
    }
    close(fd);
    if (got == (ssize_t)sizeof(msg)) {
        aptus_sock_prove_match(cw, cred.pid, msg);
    }
    return 1;
}

/* A rendezvous connection taken between the answerer's connect and its
 * write (the answerer lost the core, or the asker's epoll was quick): its
 * answer is in before PROVE_ANS, so it is read again then. */
static void aptus_sock_prove_keep(aptus_sock_conn_wire_t *cw, int fd)
{
    if (cw->prove_num_pending == APTUS_SOCK_PROVE_PENDING) {
        close(cw->prove_pending[0]);
        memmove(cw->prove_pending, cw->prove_pending + 1,
                (APTUS_SOCK_PROVE_PENDING - 1) * sizeof(int));
        --cw->prove_num_pending;
    }
    cw->prove_pending[cw->prove_num_pending++] = fd;
}

void aptus_sock_prove_accept(aptus_sock_conn_wire_t *cw)
{
    unsigned i;
    int fd;

    if (cw->prove_fd < 0) {
        return;
    }
    for (i = 0; i < cw->prove_num_pending;) {
        if (aptus_sock_prove_read(cw, cw->prove_pending[i])) {
            cw->prove_pending[i] = cw->prove_pending[--cw->prove_num_pending];
        } else {
            ++i;
        }
    }
    for (i = 0; i < APTUS_SOCK_PROVE_ACCEPTS; ++i) {
        fd = accept4(cw->prove_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return; /* none left (or out of descriptors: later) */
        }
        if (!aptus_sock_prove_read(cw, fd)) {
            aptus_sock_prove_keep(cw, fd);
        }
    }
}

pid_t aptus_sock_prove_peer(aptus_sock_conn_t *conn)
{
    if (ucs_unlikely(conn->prove == APTUS_SOCK_PROVE_WAITING)) {
        /* the answer may be in before PROVE_ANS is read */
        aptus_sock_prove_accept(aptus_sock_cw(conn->super.wire));
    }
    return (conn->prove == APTUS_SOCK_PROVE_PROVEN) ? conn->peer_pid : 0;
}

int aptus_sock_prove_frame(aptus_sock_conn_t *conn, unsigned type,
                           const uint8_t *payload)
{
    aptus_sock_conn_wire_t *cw = aptus_sock_cw(conn->super.wire);

    if (type == APTUS_FRAME_TYPE_PROVE_REQ) {
        if (conn->answered) {
            ucs_debug("sock conn %d: a second PROVE_REQ: connection cut",
                      conn->fd);
            cw->super.stats.rx_malformed++;
            aptus_sock_conn_fail(conn, UCS_ERR_IO_ERROR);
            return 0;
        }
        conn->answered = 1;
        aptus_sock_prove_answer(conn, payload);
        return 1; /* a send that broke it is reported by progress */
    }
    /* PROVE_ANS: the answer, if any, is in the rendezvous queue */
    if (conn->prove == APTUS_SOCK_PROVE_WAITING) {
        aptus_sock_prove_accept(cw);
        if (conn->prove == APTUS_SOCK_PROVE_WAITING) {
            conn->prove = APTUS_SOCK_PROVE_NONE;
            cw->super.stats.pid_unproven++;
            ucs_debug("sock conn %d: peer not proven (another host?)",
                      conn->fd);
        }
    }
    return 1;
}
