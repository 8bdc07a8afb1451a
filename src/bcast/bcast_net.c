/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the broadcast's multicast: the choice of wire, and the sock
 * wire's IP multicast (see bcast_net.h).
 */
#include "bcast_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

void aptus_bc_group_of_key(uint64_t key, struct sockaddr_in *group)
{
    /* mix the key so that consecutive keys spread (splitmix64 finaliser) */
    uint64_t h = key;
    uint8_t b1;

    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;

    b1 = (uint8_t)(h >> 8);
    if ((b1 == 0) || (b1 == 128)) {
        b1++;
    }
    memset(group, 0, sizeof(*group));
    group->sin_family      = AF_INET;
    group->sin_addr.s_addr = htonl((239u << 24) | ((uint32_t)b1 << 16) |
                                   ((uint32_t)(h >> 16) & 0xffffu));
    group->sin_port        = htons((uint16_t)(10000 + (h >> 40) % 50000));
}

static void aptus_bc_err(char *err, size_t errlen, const char *what, int e)
{
    snprintf(err, errlen, "%s: %s", what, strerror(e));
}

typedef enum {
    APTUS_BC_IF_BY_ADDR,    /* the interface that holds *addr */
    APTUS_BC_IF_BY_NAME,    /* the first IPv4 address of name */
    APTUS_BC_IF_FIRST_MCAST /* the first up, multicast-capable one */
} aptus_bc_if_match_t;

/* Look an interface up in getifaddrs(): fills *addr (and name_out, when
 * not NULL) from the first IPv4 entry that matches (want_name: the name
 * BY_NAME looks for); 0 or -errno. */
static int aptus_bc_find_if(aptus_bc_if_match_t match, const char *want_name,
                            struct in_addr *addr, char *name_out,
                            size_t namelen)
{
    const unsigned want = IFF_UP | IFF_MULTICAST;
    struct ifaddrs *ifs, *ifa;
    struct in_addr a;
    int rc = -ENODEV, hit;

    if (getifaddrs(&ifs) != 0) {
        return -errno;
    }
    for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
        if ((ifa->ifa_addr == NULL) || (ifa->ifa_addr->sa_family != AF_INET)) {
            continue;
        }
        a = ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        switch (match) {
        case APTUS_BC_IF_BY_ADDR:
            hit = (a.s_addr == addr->s_addr);
            break;
        case APTUS_BC_IF_BY_NAME:
            hit = (strcmp(ifa->ifa_name, want_name) == 0);
            break;
        default:
            hit = ((ifa->ifa_flags & want) == want);
            break;
        }
        if (hit) {
            *addr = a;
            if (name_out != NULL) {
                snprintf(name_out, namelen, "%s", ifa->ifa_name);
            }
            rc = 0;
            break;
        }
    }
    freeifaddrs(ifs);
    return rc;
}

/* The MTU of interface name (1500 when it cannot be read). */
static unsigned aptus_bc_if_mtu(const char *name)
{
    struct ifreq ifr;
    unsigned mtu = 1500;
    int fd       = socket(AF_INET, SOCK_DGRAM, 0);

    if (fd < 0) {
        return mtu;
    }
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) {
        mtu = (unsigned)ifr.ifr_mtu;
    }
    close(fd);
    return mtu;
}

int aptus_bc_net_pick_if(const char *spec, const struct sockaddr_in *group,
                         struct in_addr *ifaddr, unsigned *mtu, char *err,
                         size_t errlen)
{
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    char name[IF_NAMESIZE];
    int fd, rc;

    if ((spec != NULL) && (spec[0] != '\0')) {
        if (inet_pton(AF_INET, spec, ifaddr) != 1) {
            rc = aptus_bc_find_if(APTUS_BC_IF_BY_NAME, spec, ifaddr, NULL, 0);
            if (rc < 0) {
                snprintf(err, errlen,
                         "APTUS_BCAST_IF=%s: not an IPv4 address nor an "
                         "interface with one",
                         spec);
                return rc;
            }
        }
    } else {
        /* the source address the routing table picks for the group */
        fd = socket(AF_INET, SOCK_DGRAM, 0);
        if (fd < 0) {
            rc = -errno;
            aptus_bc_err(err, errlen, "socket", -rc);
            return rc;
        }
        if (connect(fd, (const struct sockaddr *)group, sizeof(*group)) != 0) {
            rc = -errno;
            close(fd);
            aptus_bc_err(err, errlen, "no route to the multicast group", -rc);
            return rc;
        }
        rc = getsockname(fd, (struct sockaddr *)&sa, &salen);
        close(fd);
        if (rc != 0) {
            rc = -errno;
            aptus_bc_err(err, errlen, "getsockname", -rc);
            return rc;
        }
        *ifaddr = sa.sin_addr;
        if ((ifaddr->s_addr == htonl(INADDR_ANY)) &&
            (aptus_bc_find_if(APTUS_BC_IF_FIRST_MCAST, NULL, ifaddr, NULL, 0) <
             0)) {
            snprintf(err, errlen,
                     "the route to the multicast group names no "
                     "source address and no interface is up "
                     "with MULTICAST and an IPv4 address");
            return -ENODEV;
        }
    }
    rc =
        aptus_bc_find_if(APTUS_BC_IF_BY_ADDR, NULL, ifaddr, name, sizeof(name));
    if (rc < 0) {
        snprintf(err, errlen, "no interface holds %s", inet_ntoa(*ifaddr));
        return rc;
    }
    *mtu = aptus_bc_if_mtu(name);
    return 0;
}

static int aptus_bc_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    return ((flags < 0) || (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0))
               ? -errno
               : 0;
}

static void aptus_bc_rcvbuf(int fd, int bytes)
{
    /* root may pass net.core.rmem_max (the multicast of a whole window
     * lands at once); others get what the kernel allows */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) !=
        0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
    }
}

int aptus_bc_net_have_verbs(void)
{
#ifdef APTUS_HAVE_BCAST_VERBS
    return 1;
#else
    return 0;
#endif
}

#ifndef APTUS_HAVE_BCAST_VERBS
int aptus_bc_net_open_verbs(aptus_bc_net_t *net,
                            const struct sockaddr_in *group,
                            struct in_addr ifaddr, unsigned mtu, char *err,
                            size_t errlen)
{
    snprintf(err, errlen,
             "this build has no verbs wire (rdma-core's libibverbs and "
             "librdmacm were not found when it was configured)");
    return -ENOSYS;
}
#endif

int aptus_bc_net_open(aptus_bc_net_t *net, aptus_bc_wire_t wire,
                      const struct sockaddr_in *group, const char *ifspec,
                      int rcvbuf, char *err, size_t errlen, char *note,
                      size_t notelen)
{
    struct in_addr ifaddr;
    unsigned mtu;
    int rc;

    if (note != NULL) {
        note[0] = '\0';
    }
    rc = aptus_bc_net_pick_if(ifspec, group, &ifaddr, &mtu, err, errlen);
    if (rc < 0) {
        return rc;
    }
    if ((wire == APTUS_BC_WIRE_VERBS) ||
        ((wire == APTUS_BC_WIRE_AUTO) && aptus_bc_net_have_verbs())) {
        rc = aptus_bc_net_open_verbs(net, group, ifaddr, mtu, err, errlen);
        if ((rc == 0) || (wire == APTUS_BC_WIRE_VERBS)) {
            return rc;
        }
        if (note != NULL) {
            snprintf(note, notelen, "verbs: %s", err);
        }
    }
    return aptus_bc_net_open_sock(net, group, ifaddr, mtu, rcvbuf, err, errlen);
}

int aptus_bc_net_open_sock(aptus_bc_net_t *net, const struct sockaddr_in *group,
                           struct in_addr ifaddr, unsigned mtu, int rcvbuf,
                           char *err, size_t errlen)
{
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    struct ip_mreq mreq;
    unsigned char ttl = 1, loop = 1;
    int one = 1, rc;

    memset(net, 0, sizeof(*net));
    net->wire   = APTUS_BC_WIRE_SOCK;
    net->mfd    = -1;
    net->ufd    = -1;
    net->group  = *group;
    net->ifaddr = ifaddr;
    net->room   = mtu - APTUS_BC_IP_UDP_HDR;
    inet_ntop(AF_INET, &ifaddr, net->where, sizeof(net->where));

    /* the group member: every rank of the host binds the same group and
     * port, so the address is shared */
    net->mfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (net->mfd < 0) {
        rc = -errno;
        aptus_bc_err(err, errlen, "socket", -rc);
        goto fail;
    }
    if (setsockopt(net->mfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) !=
        0) {
        rc = -errno;
        aptus_bc_err(err, errlen, "SO_REUSEADDR", -rc);
        goto fail;
    }
    if (bind(net->mfd, (const struct sockaddr *)group, sizeof(*group)) != 0) {
        rc = -errno;
        aptus_bc_err(err, errlen, "bind to the multicast group", -rc);
        goto fail;
    }
    mreq.imr_multiaddr = group->sin_addr;
    mreq.imr_interface = net->ifaddr;
    if (setsockopt(net->mfd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq,
                   sizeof(mreq)) != 0) {
        rc = -errno;
        aptus_bc_err(err, errlen, "joining the multicast group", -rc);
        goto fail;
    }
    aptus_bc_rcvbuf(net->mfd, rcvbuf);

    /* the sender and point-to-point socket */
    net->ufd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (net->ufd < 0) {
        rc = -errno;
        aptus_bc_err(err, errlen, "socket", -rc);
        goto fail;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr   = net->ifaddr;
    if (bind(net->ufd, (const struct sockaddr *)&sa, sizeof(sa)) != 0) {
        rc = -errno;
        aptus_bc_err(err, errlen, "bind to the interface", -rc);
        goto fail;
    }
    if ((setsockopt(net->ufd, IPPROTO_IP, IP_MULTICAST_IF, &net->ifaddr,
                    sizeof(net->ifaddr)) != 0) ||
        (setsockopt(net->ufd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl,
                    sizeof(ttl)) != 0) ||
        (setsockopt(net->ufd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop,
                    sizeof(loop)) != 0)) {
        rc = -errno;
        aptus_bc_err(err, errlen, "multicast options", -rc);
        goto fail;
    }
    aptus_bc_rcvbuf(net->ufd, rcvbuf);
    if (getsockname(net->ufd, (struct sockaddr *)&sa, &salen) != 0) {
        rc = -errno;
        aptus_bc_err(err, errlen, "getsockname", -rc);
        goto fail;
    }
    net->self.ip   = sa.sin_addr.s_addr;
    net->self.port = sa.sin_port;
    if (((rc = aptus_bc_nonblock(net->mfd)) < 0) ||
        ((rc = aptus_bc_nonblock(net->ufd)) < 0)) {
        aptus_bc_err(err, errlen, "O_NONBLOCK", -rc);
        goto fail;
    }
    return 0;

fail:
    aptus_bc_net_close(net);
    return rc;
}

void aptus_bc_net_close(aptus_bc_net_t *net)
{
#ifdef APTUS_HAVE_BCAST_VERBS
    if (net->wire == APTUS_BC_WIRE_VERBS) {
        aptus_bc_verbs_close(net);
    }
#endif
    if (net->mfd >= 0) {
        close(net->mfd);
    }
    if (net->ufd >= 0) {
        close(net->ufd);
    }
    net->mfd = net->ufd = -1;
    free(net->peers);
    net->peers  = NULL;
    net->npeers = 0;
}

int aptus_bc_net_connect(aptus_bc_net_t *net, const aptus_bc_addr_t *peers,
                         uint32_t n)
{
    net->peers = malloc(sizeof(*peers) * (size_t)n);
    if (net->peers == NULL) {
        return -ENOMEM;
    }
    memcpy(net->peers, peers, sizeof(*peers) * (size_t)n);
    net->npeers = n;
#ifdef APTUS_HAVE_BCAST_VERBS
    if (net->wire == APTUS_BC_WIRE_VERBS) {
        return aptus_bc_verbs_connect(net);
    }
#endif
    return 0;
}

static int aptus_bc_sendmsg(aptus_bc_net_t *net, const struct sockaddr_in *to,
                            const struct iovec *iov, unsigned iovcnt)
{
    struct msghdr msg;

    memset(&msg, 0, sizeof(msg));
    msg.msg_name    = (void *)to;
    msg.msg_namelen = sizeof(*to);
    msg.msg_iov     = (struct iovec *)iov;
    msg.msg_iovlen  = iovcnt;
    for (;;) {
        if (sendmsg(net->ufd, &msg, 0) >= 0) {
            return 0;
        }
        if (errno != EINTR) {
            break;
        }
    }
    net->tx_errors++;
    return -errno;
}

int aptus_bc_net_mcast(aptus_bc_net_t *net, const struct iovec *iov,
                       unsigned iovcnt)
{
#ifdef APTUS_HAVE_BCAST_VERBS
    if (net->wire == APTUS_BC_WIRE_VERBS) {
        return aptus_bc_verbs_mcast(net, iov, iovcnt);
    }
#endif
    return aptus_bc_sendmsg(net, &net->group, iov, iovcnt);
}

int aptus_bc_net_send(aptus_bc_net_t *net, uint32_t rank,
                      const struct iovec *iov, unsigned iovcnt)
{
    const aptus_bc_addr_t *dst;
    struct sockaddr_in to;

    if (rank >= net->npeers) {
        return -EINVAL;
    }
#ifdef APTUS_HAVE_BCAST_VERBS
    if (net->wire == APTUS_BC_WIRE_VERBS) {
        return aptus_bc_verbs_send(net, rank, iov, iovcnt);
    }
#endif
    dst = &net->peers[rank];
    memset(&to, 0, sizeof(to));
    to.sin_family      = AF_INET;
    to.sin_addr.s_addr = dst->ip;
    to.sin_port        = dst->port;
    return aptus_bc_sendmsg(net, &to, iov, iovcnt);
}

static long aptus_bc_sock_recv(int fd, void *buf, size_t len, int *truncated)
{
    struct sockaddr_in sa;
    struct iovec iov = { buf, len };
    struct msghdr msg;
    ssize_t n;

    memset(&msg, 0, sizeof(msg));
    msg.msg_name    = &sa;
    msg.msg_namelen = sizeof(sa);
    msg.msg_iov     = &iov;
    msg.msg_iovlen  = 1;
    do {
        n = recvmsg(fd, &msg, 0);
    } while ((n < 0) && (errno == EINTR));
    if (n < 0) {
        return 0; /* EAGAIN, or an ICMP error of an earlier send */
    }
    if (msg.msg_flags & MSG_TRUNC) {
        *truncated = 1;
        return -1;
    }
    return n;
}

long aptus_bc_net_recv(aptus_bc_net_t *net, void *buf, size_t len,
                       int *truncated)
{
    long n;

#ifdef APTUS_HAVE_BCAST_VERBS
    if (net->wire == APTUS_BC_WIRE_VERBS) {
        return aptus_bc_verbs_recv(net, buf, len, truncated);
    }
#endif
    /* the group's data first: repairs and ACKs are about it */
    n = aptus_bc_sock_recv(net->mfd, buf, len, truncated);
    return (n != 0) ? n : aptus_bc_sock_recv(net->ufd, buf, len, truncated);
}

const char *aptus_bc_addr_str(const aptus_bc_addr_t *addr, char *buf,
                              size_t max)
{
    struct in_addr a;
    char ip[INET_ADDRSTRLEN];

    if (addr->ip == 0) {
        snprintf(buf, max, "lid 0x%x qp 0x%x", addr->lid, addr->qpn);
        return buf;
    }
    a.s_addr = addr->ip;
    inet_ntop(AF_INET, &a, ip, sizeof(ip));
    snprintf(buf, max, "%s:%u", ip, ntohs(addr->port));
    return buf;
}
