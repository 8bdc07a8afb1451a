/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the broadcast library's settings (see bcast_config.h).
 */
#include "bcast_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *aptus_bc_getenv(const char *name)
{
    return getenv(name);
}

/* An unsigned decimal within [lo, hi]. */
static int aptus_bc_uint(const char *(*env)(const char *), const char *name,
                         uint64_t lo, uint64_t hi, uint64_t *val, char *err,
                         size_t errlen)
{
    const char *s = env(name);
    char *end;
    unsigned long long v;

    if ((s == NULL) || (s[0] == '\0')) {
        return 0; /* keep the default */
    }
    errno = 0;
    v     = strtoull(s, &end, 10);
    if ((s[0] == '-') || (errno != 0) || (*end != '\0') || (v < lo) ||
        (v > hi)) {
        snprintf(err, errlen, "%s=%s: expected a whole number in %llu..%llu",
                 name, s, (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    *val = v;
    return 0;
}

static int aptus_bc_bool(const char *(*env)(const char *), const char *name,
                         int *val, char *err, size_t errlen)
{
    const char *s = env(name);

    if ((s == NULL) || (s[0] == '\0')) {
        return 0;
    }
    if (!strcmp(s, "y") || !strcmp(s, "yes") || !strcmp(s, "1") ||
        !strcmp(s, "on")) {
        *val = 1;
    } else if (!strcmp(s, "n") || !strcmp(s, "no") || !strcmp(s, "0") ||
               !strcmp(s, "off")) {
        *val = 0;
    } else {
        snprintf(err, errlen, "%s=%s: expected y or n", name, s);
        return -1;
    }
    return 0;
}

static int aptus_bc_group(const char *s, struct sockaddr_in *group)
{
    char ip[64];
    const char *colon = strrchr(s, ':');
    char *end;
    unsigned long port;
    size_t n;

    if ((colon == NULL) || ((n = (size_t)(colon - s)) >= sizeof(ip))) {
        return -1;
    }
    memcpy(ip, s, n);
    ip[n] = '\0';
    port  = strtoul(colon + 1, &end, 10);
    if ((colon[1] == '\0') || (*end != '\0') || (port == 0) || (port > 65535)) {
        return -1;
    }
    memset(group, 0, sizeof(*group));
    group->sin_family = AF_INET;
    group->sin_port   = htons((uint16_t)port);
    if ((inet_pton(AF_INET, ip, &group->sin_addr) != 1) ||
        !IN_MULTICAST(ntohl(group->sin_addr.s_addr))) {
        return -1;
    }
    return 0;
}

int aptus_bc_config_read(aptus_bc_config_t *cfg,
                         const char *(*env)(const char *name), char *err,
                         size_t errlen)
{
    struct {
        const char *name;
        uint64_t lo, hi;
        uint32_t *field;
    } u32[] = {
        { "APTUS_BCAST_WINDOW", 2, APTUS_MC_WINDOW_MAX, &cfg->mc.window },
        { "APTUS_BCAST_ACK_EVERY", 1, APTUS_MC_WINDOW_MAX / 2,
          &cfg->mc.ack_every },
        { "APTUS_BCAST_GROUP_SIZE", 0, INT32_MAX, &cfg->mc.group_size },
        { "APTUS_BCAST_FRAG_SIZE", 0, 65000, &cfg->mc.frag_size },
        { "APTUS_BCAST_MAX_MSG", 0, 64u * 65000u, &cfg->mc.max_msg },
        { "APTUS_BCAST_ACK_DELAY_US", 1, 10000000, &cfg->mc.ack_delay_us },
        { "APTUS_BCAST_RTO_MIN_US", 1, 10000000, &cfg->mc.rto_min_us },
        { "APTUS_BCAST_RTO_MAX_US", 1, 60000000, &cfg->mc.rto_max_us },
    };
    const char *s;
    uint64_t v;
    unsigned i;

    if (env == NULL) {
        env = aptus_bc_getenv;
    }
    memset(cfg, 0, sizeof(*cfg));
    cfg->enable = 1;
    aptus_mc_config_default(&cfg->mc);
    cfg->mc.frag_size    = 0; /* from the interface */
    cfg->mc.max_msg      = 32768;
    cfg->peer_timeout_us = 30ull * 1000000;
    cfg->rcvbuf          = 4 << 20;

    /* first, so that a job with a malformed setting still reports */
    s = env("APTUS_BCAST_STATS");
    if (s != NULL) {
        if (strlen(s) >= sizeof(cfg->stats)) {
            snprintf(err, errlen,
                     "APTUS_BCAST_STATS: longer than %zu characters",
                     sizeof(cfg->stats) - 1);
            return -1;
        }
        strcpy(cfg->stats, s);
    }
    if ((aptus_bc_bool(env, "APTUS_BCAST", &cfg->enable, err, errlen) < 0) ||
        (aptus_bc_bool(env, "APTUS_BCAST_VERBOSE", &cfg->verbose, err, errlen) <
         0)) {
        return -1;
    }
    for (i = 0; i < sizeof(u32) / sizeof(u32[0]); ++i) {
        v = *u32[i].field;
        if (aptus_bc_uint(env, u32[i].name, u32[i].lo, u32[i].hi, &v, err,
                          errlen) < 0) {
            return -1;
        }
        *u32[i].field = (uint32_t)v;
    }
    if (cfg->mc.ack_every > cfg->mc.window / 2) {
        snprintf(err, errlen,
                 "APTUS_BCAST_ACK_EVERY=%u: at most APTUS_BCAST_WINDOW/2 (%u)",
                 cfg->mc.ack_every, cfg->mc.window / 2);
        return -1;
    }
    if (cfg->mc.rto_min_us > cfg->mc.rto_max_us) {
        snprintf(err, errlen,
                 "APTUS_BCAST_RTO_MIN_US=%u exceeds APTUS_BCAST_RTO_MAX_US=%u",
                 cfg->mc.rto_min_us, cfg->mc.rto_max_us);
        return -1;
    }
    if (cfg->mc.rto_init_us < cfg->mc.rto_min_us) {
        cfg->mc.rto_init_us = cfg->mc.rto_min_us;
    }
    if (cfg->mc.rto_init_us > cfg->mc.rto_max_us) {
        cfg->mc.rto_init_us = cfg->mc.rto_max_us;
    }
    v = cfg->peer_timeout_us / 1000000;
    if (aptus_bc_uint(env, "APTUS_BCAST_PEER_TIMEOUT", 0, 86400, &v, err,
                      errlen) < 0) {
        return -1;
    }
    cfg->peer_timeout_us = v * 1000000;
    v                    = (uint64_t)cfg->rcvbuf;
    if (aptus_bc_uint(env, "APTUS_BCAST_RCVBUF", 4096, 1u << 30, &v, err,
                      errlen) < 0) {
        return -1;
    }
    cfg->rcvbuf = (int)v;

    s = env("APTUS_BCAST_IF");
    if (s != NULL) {
        if (strlen(s) >= sizeof(cfg->ifspec)) {
            snprintf(err, errlen, "APTUS_BCAST_IF: longer than %zu characters",
                     sizeof(cfg->ifspec) - 1);
            return -1;
        }
        strcpy(cfg->ifspec, s);
    }
    s = env("APTUS_BCAST_WIRE");
    if ((s == NULL) || (s[0] == '\0') || !strcmp(s, "auto")) {
        cfg->wire = APTUS_BC_WIRE_AUTO;
    } else if (!strcmp(s, "sock")) {
        cfg->wire = APTUS_BC_WIRE_SOCK;
    } else if (!strcmp(s, "verbs")) {
        cfg->wire = APTUS_BC_WIRE_VERBS;
    } else {
        snprintf(err, errlen,
                 "APTUS_BCAST_WIRE=%s: expected auto, sock or verbs", s);
        return -1;
    }
    s = env("APTUS_BCAST_GROUP");
    if ((s != NULL) && (s[0] != '\0')) {
        if (aptus_bc_group(s, &cfg->group) < 0) {
            snprintf(err, errlen,
                     "APTUS_BCAST_GROUP=%s: expected a multicast IPv4 "
                     "address and a port, e.g. 239.1.2.3:5000",
                     s);
            return -1;
        }
        cfg->fixed_group = 1;
    }
    return 0;
}

aptus_bc_mpi_t aptus_bc_mpi_family(const char *version)
{
    /* Open MPI names itself first ("Open MPI v4.1.2, package: ..."); every
     * other answer (MPICH, MVAPICH, Intel MPI) comes from MPICH's ABI */
    return ((version != NULL) && (strstr(version, "Open MPI") != NULL))
               ? APTUS_BC_MPI_OPEN_MPI
               : APTUS_BC_MPI_MPICH;
}

const char *aptus_bc_mpi_name(aptus_bc_mpi_t mpi)
{
    return (mpi == APTUS_BC_MPI_OPEN_MPI) ? "Open MPI" : "MPICH";
}

const char *aptus_bc_mpi_library(aptus_bc_mpi_t mpi)
{
    return (mpi == APTUS_BC_MPI_OPEN_MPI) ? "libaptus_bcast.so"
                                          : "libaptus_bcast_mpich.so";
}
