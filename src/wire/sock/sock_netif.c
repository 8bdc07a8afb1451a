/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the sock wire's devices (see sock_netif.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sock_netif.h"
#include "sock_dgram.h"

#include <ucs/datastruct/array.inl>
#include <ucs/debug/assert.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sock.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>

#include <dirent.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { APTUS_SOCK_DEV_LOOPBACK = 1u << 0 };

UCS_ARRAY_DEFINE_INLINE(aptus_sock_devices, unsigned, uct_tl_device_resource_t)

typedef struct aptus_sock_dev_addr_hdr {
    uint8_t af; /* AF_INET or AF_INET6 */
    uint8_t flags;
} UCS_S_PACKED aptus_sock_dev_addr_hdr_t;

typedef struct aptus_sock_dev_addr_loop {
    uint64_t host_id;
    uint64_t net_ns;
} UCS_S_PACKED aptus_sock_dev_addr_loop_t;

size_t aptus_sock_netif_mtu(const char *dev_name)
{
    struct ifreq ifr;

    memset(&ifr, 0, sizeof(ifr));
    if ((ucs_netif_ioctl(dev_name, SIOCGIFMTU, &ifr) != UCS_OK) ||
        (ifr.ifr_mtu <= 0)) {
        return 0;
    }
    return (size_t)ifr.ifr_mtu;
}

static int aptus_sock_has_addr(const char *name)
{
    struct sockaddr_storage ss;

    return (ucs_netif_get_addr(name, AF_INET, (struct sockaddr *)&ss, NULL) ==
            UCS_OK) ||
           (ucs_netif_get_addr(name, AF_INET6, (struct sockaddr *)&ss, NULL) ==
            UCS_OK);
}

ucs_status_t aptus_sock_query_devices(uct_tl_device_resource_t **devices_p,
                                      unsigned *num_devices_p)
{
    ucs_array_t(aptus_sock_devices) devices = UCS_ARRAY_DYNAMIC_INITIALIZER;
    uct_tl_device_resource_t *device;
    struct dirent *entry;
    DIR *dir;

    dir = opendir("/sys/class/net");
    if (dir == NULL) {
        ucs_error("opendir(/sys/class/net) failed: %m");
        return UCS_ERR_IO_ERROR;
    }

    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') {
            continue;
        }
        if (!ucs_netif_is_active(entry->d_name, AF_INET) &&
            !ucs_netif_is_active(entry->d_name, AF_INET6)) {
            continue;
        }
        if (!aptus_sock_has_addr(entry->d_name)) {
            continue;
        }
        if (ucs_array_append(aptus_sock_devices, &devices) != UCS_OK) {
            ucs_array_cleanup_dynamic(&devices);
            closedir(dir);
            return UCS_ERR_NO_MEMORY;
        }
        device = ucs_array_last(&devices);
        ucs_snprintf_zero(device->name, sizeof(device->name), "%s",
                          entry->d_name);
        device->type       = UCT_DEVICE_TYPE_NET;
        device->sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    closedir(dir);

    /* the caller frees the buffer with ucs_free, as UCT does */
    *num_devices_p = ucs_array_length(&devices);
    *devices_p     = ucs_array_extract_buffer(aptus_sock_devices, &devices);
    return UCS_OK;
}

static long aptus_sock_sysfs_long(const char *dev_name, const char *file)
{
    char path[256], buf[64];
    long value = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/net/%s/%s", dev_name, file);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    if (fgets(buf, sizeof(buf), f) != NULL) {
        value = strtol(buf, NULL, 10);
    }
    fclose(f);
    return value;
}

int aptus_sock_netif_is_loopback(const char *dev_name)
{
    return aptus_sock_sysfs_long(dev_name, "type") == 772; /* ARPHRD_LOOPBACK */
}

void aptus_sock_netif_caps(const char *dev_name, double *latency_p,
                           double *bandwidth_p)
{
    long speed_mbps = aptus_sock_sysfs_long(dev_name, "speed");
    long type       = aptus_sock_sysfs_long(dev_name, "type");

    if (type == 772 /* ARPHRD_LOOPBACK */) {
        /* no link: the kernel copies between socket buffers; figures as
         * measured by contrib/bench (about 3 us one way, 0.9 GB/s) */
        *latency_p   = 3e-6;
        *bandwidth_p = 900.0 * UCS_MBYTE;
        return;
    }
    if (speed_mbps <= 0) {
        speed_mbps = 100; /* unknown speed: assume the slowest common link */
    }
    *latency_p   = 10e-6;
    *bandwidth_p = speed_mbps * 1e6 / 8;
}

double aptus_sock_netif_zcopy_bw(const char *dev_name, double copy_bw)
{
    if (aptus_sock_sysfs_long(dev_name, "type") == 772 /* ARPHRD_LOOPBACK */) {
        /* UD-ZCopy, UCP tag_bw at 1 MB, MTU 2048: 3.8 GB/s against 0.8
         * GB/s copied (contrib/bench/ud_sr_bench.sh); one-sided copies
         * are faster still. The lower figure, so that UCP's choice holds
         * for peers without a connection too. */
        return ucs_max(copy_bw, 3500.0 * UCS_MBYTE);
    }
    return copy_bw;
}

static int aptus_sock_is_loopback(const aptus_sock_addr_t *a)
{
    static const uint8_t v6_loop[16] = { 0, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0, 0, 1 };

    if (a->family == AF_INET) {
        return a->ip[0] == 127;
    }
    return !memcmp(a->ip, v6_loop, sizeof(v6_loop));
}

static size_t aptus_sock_ip_len(uint8_t af)
{
    return (af == AF_INET6) ? 16 : 4;
}

size_t aptus_sock_dev_addr_len(const aptus_wire_addr_t *local)
{
    const aptus_sock_addr_t *a = (const aptus_sock_addr_t *)local->raw;

    return sizeof(aptus_sock_dev_addr_hdr_t) + aptus_sock_ip_len(a->family) +
           (aptus_sock_is_loopback(a) ? sizeof(aptus_sock_dev_addr_loop_t) : 0);
}

static uint64_t aptus_sock_net_ns(void)
{
    return ucs_sys_get_ns(UCS_SYS_NS_TYPE_NET);
}

void aptus_sock_dev_addr_pack(const aptus_wire_addr_t *local, void *buf)
{
    const aptus_sock_addr_t *a     = (const aptus_sock_addr_t *)local->raw;
    aptus_sock_dev_addr_hdr_t *hdr = buf;
    aptus_sock_dev_addr_loop_t loop;
    uint8_t *p = (uint8_t *)(hdr + 1);

    hdr->af    = (uint8_t)a->family;
    hdr->flags = aptus_sock_is_loopback(a) ? APTUS_SOCK_DEV_LOOPBACK : 0;
    memcpy(p, a->ip, aptus_sock_ip_len(hdr->af));
    p += aptus_sock_ip_len(hdr->af);
    if (hdr->flags & APTUS_SOCK_DEV_LOOPBACK) {
        loop.host_id = ucs_get_system_id();
        loop.net_ns  = aptus_sock_net_ns();
        memcpy(p, &loop, sizeof(loop));
    }
}

int aptus_sock_dev_addr_reachable(const aptus_wire_addr_t *local,
                                  const void *remote_dev_addr)
{
    const aptus_sock_addr_t *a = (const aptus_sock_addr_t *)local->raw;
    const aptus_sock_dev_addr_hdr_t *rhdr = remote_dev_addr;
    int local_loop                        = aptus_sock_is_loopback(a);
    aptus_sock_dev_addr_loop_t loop;

    if ((rhdr->af != a->family) ||
        (!!(rhdr->flags & APTUS_SOCK_DEV_LOOPBACK) != local_loop)) {
        return 0;
    }
    if (!local_loop) {
        return 1; /* routed network: leave it to the network */
    }
    memcpy(&loop, (const uint8_t *)(rhdr + 1) + aptus_sock_ip_len(rhdr->af),
           sizeof(loop));
    return (loop.host_id == ucs_get_system_id()) &&
           (loop.net_ns == aptus_sock_net_ns());
}

/* A port as sockaddr holds it; 0 (refused, lost) for what no UDP or TCP
 * port can be, so that a forged one reaches nobody rather than a port
 * truncated to 16 bits. */
static uint16_t aptus_sock_port_to_net(uint32_t port)
{
    return (port > UINT16_MAX) ? 0 : htons((uint16_t)port);
}

void aptus_sock_wire_addr_make(const void *remote_dev_addr, uint32_t port,
                               aptus_wire_addr_t *addr)
{
    const aptus_sock_dev_addr_hdr_t *rhdr = remote_dev_addr;
    aptus_sock_addr_t *a                  = (aptus_sock_addr_t *)addr->raw;

    memset(addr, 0, sizeof(*addr));
    a->family = rhdr->af;
    a->port   = aptus_sock_port_to_net(port);
    memcpy(a->ip, rhdr + 1, aptus_sock_ip_len(rhdr->af));
}

void aptus_sock_wire_addr_with_port(const aptus_wire_addr_t *addr,
                                    uint32_t port, aptus_wire_addr_t *out)
{
    aptus_sock_addr_t *a;

    if (out != addr) {
        *out = *addr;
    }
    a       = (aptus_sock_addr_t *)out->raw;
    a->port = aptus_sock_port_to_net(port);
}

ucs_status_t aptus_sock_open_bound(const char *dev_name, int type, int backlog,
                                   int *fd_p, aptus_wire_addr_t *addr)
{
    static const sa_family_t families[] = { AF_INET, AF_INET6 };
    struct sockaddr_storage ss;
    ucs_status_t status = UCS_ERR_NO_DEVICE;
    socklen_t len;
    unsigned i;
    int fd;

    for (i = 0; i < sizeof(families) / sizeof(families[0]); ++i) {
        memset(&ss, 0, sizeof(ss));
        status = ucs_netif_get_addr(dev_name, families[i],
                                    (struct sockaddr *)&ss, NULL);
        if (status == UCS_OK) {
            break;
        }
    }
    if (status != UCS_OK) {
        ucs_error("sock wire: network interface %s has no IPv4/IPv6 address",
                  dev_name);
        return UCS_ERR_NO_DEVICE;
    }

    fd = socket(ss.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_error("sock wire: socket() failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    len = (ss.ss_family == AF_INET) ? sizeof(struct sockaddr_in)
                                    : sizeof(struct sockaddr_in6);
    if ((bind(fd, (struct sockaddr *)&ss, len) < 0) ||
        ((backlog > 0) && (listen(fd, backlog) < 0))) {
        ucs_error("sock wire: cannot %s on %s: %m",
                  (backlog > 0) ? "listen" : "bind", dev_name);
        close(fd);
        return UCS_ERR_IO_ERROR;
    }
    len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        ucs_error("sock wire: getsockname() failed: %m");
        close(fd);
        return UCS_ERR_IO_ERROR;
    }
    aptus_sock_addr_to_wire((struct sockaddr *)&ss, addr);
    *fd_p = fd;
    return UCS_OK;
}
