/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's per-message system calls, made without libc's
 * cancellation points. Nothing cancels a thread inside them here, and the
 * libc wrappers' pair of cancellation switches costs about 45 instructions
 * a call, as much as a datagram header's parsing. Results and errno as the
 * libc calls'.
 */
#ifndef APTUS_SOCK_SYS_H_
#define APTUS_SOCK_SYS_H_

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline ssize_t aptus_sock_sendmsg(int fd, const struct msghdr *msg,
                                         int flags)
{
    return syscall(SYS_sendmsg, fd, msg, flags);
}

static inline int aptus_sock_sendmmsg(int fd, struct mmsghdr *msgs,
                                      unsigned count, int flags)
{
    return (int)syscall(SYS_sendmmsg, fd, msgs, count, flags);
}

static inline int aptus_sock_recvmmsg(int fd, struct mmsghdr *msgs,
                                      unsigned count, int flags)
{
    return (int)syscall(SYS_recvmmsg, fd, msgs, count, flags, NULL);
}

static inline ssize_t aptus_sock_recvmsg(int fd, struct msghdr *msg, int flags)
{
    return syscall(SYS_recvmsg, fd, msg, flags);
}

static inline ssize_t aptus_sock_send(int fd, const void *buf, size_t len,
                                      int flags)
{
    return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static inline ssize_t aptus_sock_recv(int fd, void *buf, size_t len, int flags)
{
    return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

/* epoll_wait with no wait (the progress poll) */
static inline int aptus_sock_epoll_poll(int epfd, struct epoll_event *events,
                                        int max)
{
    return (int)syscall(SYS_epoll_wait, epfd, events, max, 0);
}

#endif
