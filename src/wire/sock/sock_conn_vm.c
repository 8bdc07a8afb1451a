/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's direct one-sided operations.
 *
 * They are process_vm_writev/readv into the connection's peer, inside the
 * key's bounds, for a peer whose pid the kernel proved (sock_conn_prove.c:
 * same host only); a key naming another process is refused. For a peer on
 * another host they are frames on its connection (sock_conn_rma.c) that
 * the target serves into or out of its registered memory.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_conn_int.h"
#include "proto/le.h"
#include "sock_frame.h"

#include <ucs/debug/log.h>

#include <errno.h>
#include <sys/uio.h>

/* A key of another reach id (host or PID namespace) goes over the
 * connection even from a proven peer: the pid it names is of a namespace
 * where it means another process, if any. */
int aptus_sock_conn_key_reachable(aptus_conn_t *tl_conn,
                                  const aptus_mem_key_t *key)
{
    return (aptus_sock_prove_peer(aptus_sock_conn(tl_conn)) != 0) &&
           (key->host_id == tl_conn->wire->host_id);
}

ucs_status_t aptus_sock_conn_key_check(aptus_conn_t *tl_conn,
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

pid_t aptus_sock_conn_peer_pid(aptus_conn_t *tl_conn)
{
    return aptus_sock_prove_peer(aptus_sock_conn(tl_conn));
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

ucs_status_t aptus_sock_conn_write(aptus_conn_t *conn,
                                   const aptus_mem_key_t *key,
                                   uint64_t remote_addr,
                                   const struct iovec *iov, unsigned iovcnt)
{
    return aptus_sock_conn_rma(conn, key, remote_addr, iov, iovcnt, 1);
}

ucs_status_t aptus_sock_conn_read(aptus_conn_t *conn,
                                  const aptus_mem_key_t *key,
                                  uint64_t remote_addr, const struct iovec *iov,
                                  unsigned iovcnt)
{
    return aptus_sock_conn_rma(conn, key, remote_addr, iov, iovcnt, 0);
}

ucs_status_t aptus_sock_conn_write_imm(aptus_conn_t *tl_conn,
                                       const aptus_mem_key_t *key,
                                       uint64_t remote_addr,
                                       const struct iovec *iov, unsigned iovcnt,
                                       uint32_t imm)
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

/* One process_vm_writev with a local and a remote vector per piece: the
 * kernel copies remote vector by vector, and within one by local vector,
 * so a piece boundary is a boundary between separate copies. On x86 the
 * stores of one copy may become visible out of order among themselves
 * ("fast string" rep movs) but not after the stores of a later
 * instruction (TSO), so the pieces are seen in order. Other CPUs give no
 * such order inside the kernel: there every piece is its own call and a
 * full fence separates them (the kernel's stores are this thread's). */
ucs_status_t aptus_sock_conn_write_ordered(aptus_conn_wire_t *wire,
                                           const aptus_mem_key_t *key,
                                           const aptus_conn_piece_t *pieces,
                                           unsigned count)
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
