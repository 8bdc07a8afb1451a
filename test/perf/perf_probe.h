/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: helpers shared by the resource benchmarks of test/perf
 * (ud_sr_ep_memory.c, rc_conn_memory.c).
 *
 * Probes of the process' and the kernel's resources (malloc'ed bytes,
 * resident set, descriptors, TCP socket memory), clocks, the handling of the
 * options and limits both programs share, and the UCT setup both make (one
 * memory domain, interfaces opened on a device, endpoints that connect to an
 * interface). Header only (static inline) and public UCX headers only, so
 * that each program still builds from its one .c file:
 *   gcc -O2 -Wall -o X X.c $(pkg-config --cflags --libs ucx)
 * The programs define _GNU_SOURCE before they include anything.
 */
#ifndef APTUS_TEST_PERF_PERF_PROBE_H
#define APTUS_TEST_PERF_PERF_PROBE_H

#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <dirent.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The options both programs take (-t, -d, -n) and the UCT component and
 * memory domain that the transport lives in. */
typedef struct {
    const char *tl;        /* transport name */
    const char *component; /* UCT component */
    const char *md;        /* memory domain name */
    const char *dev;       /* device */
    unsigned num_eps;
} perf_opts_t;

/* The UCT objects under the measured interfaces. */
typedef struct {
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_component_h component;
    uct_md_h md;
} perf_uct_t;

/* One open interface and its addresses (what an endpoint connects to). */
typedef struct {
    uct_iface_h iface;
    uct_iface_attr_t attr;
    uct_device_addr_t *dev_addr;
    uct_iface_addr_t *iface_addr;
} perf_iface_t;

/* Bytes the process holds in malloc'ed chunks (mallinfo2 uordblks, the heap,
 * + hblkhd, the mmap'ed chunks): the user-space memory an endpoint or a
 * connection costs, apart from which pages the allocator has touched. */
static inline size_t perf_malloc_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
}

/* Resident set of the process (/proc/self/statm), in bytes, or 0 if
 * unreadable: the memory an endpoint costs as the host sees it, pools and
 * pages touched included. */
static inline size_t perf_rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2) {
            resident = 0;
        }
        fclose(f);
    }
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Calls cb(fd, arg) (if not NULL) for every open descriptor of the process
 * (/proc/self/fd, except the directory's own) and returns their number, or -1
 * if unreadable: a socket or an event descriptor is a resource that a
 * connection holds apart from memory, and bounded by RLIMIT_NOFILE. */
static inline long perf_for_each_fd(void (*cb)(int fd, void *arg), void *arg)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;
    int fd;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        fd = atoi(e->d_name);
        if (fd == dirfd(d)) {
            continue;
        }
        ++n;
        if (cb != NULL) {
            cb(fd, arg);
        }
    }
    closedir(d);
    return n;
}

/* Number of open descriptors of the process, or -1 if unreadable (see
 * perf_for_each_fd). */
static inline long perf_count_fds(void)
{
    return perf_for_each_fd(NULL, NULL);
}

/* Kernel memory in TCP socket objects (active objects * object size of the
 * slab "TCP" in /proc/slabinfo), or -1 if unreadable (not root) or absent:
 * what a TCP connection costs in the kernel, which is neither in malloc's
 * nor in the resident set's figures. */
static inline long perf_tcp_slab_bytes(void)
{
    char line[512], name[64];
    unsigned long active, num, objsize;
    long bytes = -1;
    FILE *f    = fopen("/proc/slabinfo", "r");

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if ((sscanf(line, "%63s %lu %lu %lu", name, &active, &num, &objsize) ==
             4) &&
            !strcmp(name, "TCP")) {
            bytes = (long)(active * objsize);
        }
    }
    fclose(f);
    return bytes;
}

/* Kernel memory in TCP socket buffers, whole host ("TCP: ... mem <pages>" of
 * /proc/net/sockstat), in bytes, or -1 if unreadable: what the buffers of the
 * connections hold (other traffic on the host shows up too). */
static inline long perf_tcp_sockbuf_bytes(void)
{
    char line[512];
    long bytes = -1, pages;
    const char *p;
    FILE *f = fopen("/proc/net/sockstat", "r");

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "TCP:", 4) || ((p = strstr(line, " mem ")) == NULL)) {
            continue;
        }
        if (sscanf(p, " mem %ld", &pages) == 1) {
            bytes = pages * sysconf(_SC_PAGESIZE);
        }
    }
    fclose(f);
    return bytes;
}

/* Monotonic wall-clock time in seconds: for durations (endpoint creation,
 * connection setup, idle periods), unaffected by changes of the date. */
static inline double perf_now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time (user + system) the process has used, in seconds, every thread
 * included (UCX's async thread too): what idle endpoints cost in CPU. */
static inline double perf_cpu_sec(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* Raises the soft limit on open descriptors (RLIMIT_NOFILE) to need, and the
 * hard limit with it where that is lower (root only), as every endpoint or
 * connection measured holds descriptors of its own. Returns 0, or -1 (errno
 * set) if the limit cannot be raised; does nothing if it cannot be read. */
static inline int perf_raise_fd_limit(rlim_t need)
{
    struct rlimit rl;

    if ((getrlimit(RLIMIT_NOFILE, &rl) == 0) && (rl.rlim_cur < need)) {
        rl.rlim_cur = need;
        if (rl.rlim_max < need) {
            rl.rlim_max = need;
        }
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The options a program starts from: its own transport tl, in component and
 * md, on the loopback ("lo"), 1000 endpoints (the defaults usage() shows). */
static inline perf_opts_t
perf_default_opts(const char *tl, const char *component, const char *md)
{
    perf_opts_t opts = {
        .tl = tl, .component = component, .md = md, .dev = "lo", .num_eps = 1000
    };

    return opts;
}

/* Takes option c with its argument (from getopt) if it is one of those both
 * programs share: -t TL, -d DEV, -n NUM_EPS. Returns 1 if it took it. */
static inline int perf_common_opt(int c, const char *arg, perf_opts_t *opts)
{
    switch (c) {
    case 't':
        opts->tl = arg;
        return 1;
    case 'd':
        opts->dev = arg;
        return 1;
    case 'n':
        opts->num_eps = strtoul(arg, NULL, 0);
        return 1;
    default:
        return 0;
    }
}

/* The memory domain of one of the module's transports, or NULL. */
static inline const char *perf_module_md(const char *tl)
{
    static const char *const mds[][2] = { { "ud_sr", "aptus" },
                                          { "aptus", "aptus" },
                                          { "rc_sr", "aptus_rc" },
                                          { "rc_fp", "aptus_rc" } };
    unsigned i;

    for (i = 0; i < sizeof(mds) / sizeof(mds[0]); ++i) {
        if (!strcmp(tl, mds[i][0])) {
            return mds[i][1];
        }
    }
    return NULL;
}

/* Checks the shared options once parsed: "tcp" is UCX's own tcp (component
 * and md "tcp"); own_tl "*" takes any of the module's transports, on its
 * memory domain, and any other own_tl only itself; -n must be positive.
 * Says why on stderr and returns -1 if they are not usable, 0 if they
 * are. */
static inline int perf_check_opts(const char *prog, const char *own_tl,
                                  perf_opts_t *opts)
{
    if (!strcmp(opts->tl, "tcp")) {
        opts->component = "tcp";
        opts->md        = "tcp";
    } else if (!strcmp(own_tl, "*") && (perf_module_md(opts->tl) != NULL)) {
        opts->md = perf_module_md(opts->tl);
    } else if (strcmp(opts->tl, own_tl)) {
        fprintf(stderr, "%s: unknown transport '%s'\n", prog, opts->tl);
        return -1;
    }
    if (opts->num_eps == 0) {
        fprintf(stderr, "%s: -n must be positive\n", prog);
        return -1;
    }
    return 0;
}

/* Parses the command line (getopt, optstring) into opts: the shared options
 * through perf_common_opt, the program's own through own_opt(c, optarg, arg)
 * (which returns 1 if it took c), -h; then checks them (perf_check_opts).
 * Returns -1 if the program goes on, or the status it exits with: 0 after -h
 * and 1 on an unknown option (both with usage(argv[0])) or a bad value. */
static inline int
perf_parse_opts(int argc, char **argv, const char *optstring, const char *prog,
                const char *own_tl, perf_opts_t *opts,
                int (*own_opt)(int c, const char *value, void *arg), void *arg,
                void (*usage)(const char *prog))
{
    int c;

    while ((c = getopt(argc, argv, optstring)) != -1) {
        if (perf_common_opt(c, optarg, opts) || own_opt(c, optarg, arg)) {
            continue;
        }
        usage(argv[0]);
        return (c == 'h') ? 0 : 1;
    }
    return (perf_check_opts(prog, own_tl, opts) != 0) ? 1 : -1;
}

/* Exits (status 1) with "PROG: WHAT failed: STATUS" if a UCX call failed:
 * the setup of a benchmark has no way around a failure. */
static inline void perf_check(ucs_status_t status, const char *prog,
                              const char *what)
{
    if (status != UCS_OK) {
        fprintf(stderr, "%s: %s failed: %s\n", prog, what,
                ucs_status_string(status));
        exit(1);
    }
}

/* Creates the async context and the worker, finds the UCT component that
 * has opts->md among its memory domains, and opens that memory domain: what
 * the measured interfaces are opened on. Exits with status 2 if the
 * component is not there (the aptus module not loaded, most likely). */
static inline void perf_open_md(const char *prog, const perf_opts_t *opts,
                                perf_uct_t *uct)
{
    uct_component_h *components;
    uct_component_attr_t comp_attr;
    uct_md_config_t *md_config;
    unsigned num_components, i, j;
    int found = 0;

    perf_check(
        ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &uct->async),
        prog, "ucs_async_context_create");
    perf_check(
        uct_worker_create(uct->async, UCS_THREAD_MODE_SINGLE, &uct->worker),
        prog, "uct_worker_create");

    perf_check(uct_query_components(&components, &num_components), prog,
               "uct_query_components");
    for (i = 0; (i < num_components) && !found; ++i) {
        memset(&comp_attr, 0, sizeof(comp_attr));
        comp_attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                               UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        perf_check(uct_component_query(components[i], &comp_attr), prog,
                   "uct_component_query");
        if (strcmp(comp_attr.name, opts->component)) {
            continue;
        }
        comp_attr.md_resources = calloc(comp_attr.md_resource_count,
                                        sizeof(*comp_attr.md_resources));
        comp_attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        perf_check(uct_component_query(components[i], &comp_attr), prog,
                   "uct_component_query");
        for (j = 0; j < comp_attr.md_resource_count; ++j) {
            if (!strcmp(comp_attr.md_resources[j].md_name, opts->md)) {
                uct->component = components[i];
                found          = 1;
                break;
            }
        }
        free(comp_attr.md_resources);
    }
    uct_release_component_list(components);
    if (!found) {
        fprintf(stderr, "%s: UCT component '%s' with md '%s' not found%s\n",
                prog, opts->component, opts->md,
                strcmp(opts->component, "aptus")
                    ? ""
                    : " (is libuct_aptus.so preloaded? LD_PRELOAD or "
                      "aptus-env)");
        exit(2);
    }

    perf_check(uct_md_config_read(uct->component, NULL, NULL, &md_config), prog,
               "uct_md_config_read");
    perf_check(uct_md_open(uct->component, opts->md, md_config, &uct->md), prog,
               "uct_md_open");
    uct_config_release(md_config);
}

/* Closes what perf_open_md opened. */
static inline void perf_close_md(perf_uct_t *uct)
{
    uct_md_close(uct->md);
    uct_worker_destroy(uct->worker);
    ucs_async_context_destroy(uct->async);
}

/* Opens an interface of transport opts->tl on device opts->dev (default
 * configuration, no stats, no rx headroom) and gets its device and interface
 * addresses, which endpoints connect to. Exits with status 2 if the
 * transport cannot connect to an interface (all that is measured here). */
static inline void perf_open_iface(const char *prog, const perf_opts_t *opts,
                                   const perf_uct_t *uct, perf_iface_t *ifc)
{
    uct_iface_config_t *iface_config;
    uct_iface_params_t params;

    perf_check(
        uct_md_iface_config_read(uct->md, opts->tl, NULL, NULL, &iface_config),
        prog, "uct_md_iface_config_read");
    memset(&params, 0, sizeof(params));
    params.field_mask =
        UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
        UCT_IFACE_PARAM_FIELD_STATS_ROOT | UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
        UCT_IFACE_PARAM_FIELD_CPU_MASK;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = opts->tl;
    params.mode.device.dev_name = opts->dev;
    params.stats_root           = NULL;
    params.rx_headroom          = 0;
    UCS_CPU_ZERO(&params.cpu_mask);
    perf_check(uct_iface_open(uct->md, uct->worker, &params, iface_config,
                              &ifc->iface),
               prog, "uct_iface_open");
    uct_config_release(iface_config);

    perf_check(uct_iface_query(ifc->iface, &ifc->attr), prog,
               "uct_iface_query");
    if (!(ifc->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE)) {
        fprintf(stderr, "%s: %s/%s cannot connect to iface\n", prog, opts->tl,
                opts->dev);
        exit(2);
    }
    ifc->dev_addr   = calloc(1, ifc->attr.device_addr_len + 8);
    ifc->iface_addr = calloc(1, ifc->attr.iface_addr_len + 8);
    perf_check(uct_iface_get_device_address(ifc->iface, ifc->dev_addr), prog,
               "uct_iface_get_device_address");
    perf_check(uct_iface_get_address(ifc->iface, ifc->iface_addr), prog,
               "uct_iface_get_address");
}

/* Closes what perf_open_iface opened. */
static inline void perf_close_iface(perf_iface_t *ifc)
{
    uct_iface_close(ifc->iface);
    free(ifc->dev_addr);
    free(ifc->iface_addr);
}

/* Fills the parameters of uct_ep_create for endpoints of iface that connect
 * to the remote interface at dev_addr and iface_addr (connect-to-iface). */
static inline void perf_ep_params(uct_ep_params_t *params, uct_iface_h iface,
                                  const uct_device_addr_t *dev_addr,
                                  const uct_iface_addr_t *iface_addr)
{
    memset(params, 0, sizeof(*params));
    params->field_mask = UCT_EP_PARAM_FIELD_IFACE |
                         UCT_EP_PARAM_FIELD_DEV_ADDR |
                         UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params->iface      = iface;
    params->dev_addr   = dev_addr;
    params->iface_addr = iface_addr;
}

/* Reports that uct_ep_create failed for endpoint number i of the measured
 * ones: on stderr, and as the program's output line "tl=... dev=...
 * UNIT=N skipped=ep_create_failed_at_I(STATUS)" (unit: what N counts). */
static inline void perf_ep_create_failed(const char *prog,
                                         const perf_opts_t *opts,
                                         const char *unit, unsigned i,
                                         ucs_status_t status)
{
    fprintf(stderr, "%s: uct_ep_create #%u failed: %s\n", prog, i,
            ucs_status_string(status));
    printf("tl=%s dev=%s %s=%u skipped=ep_create_failed_at_%u(%s)\n", opts->tl,
           opts->dev, unit, opts->num_eps, i, ucs_status_string(status));
}

/* Destroys the num_eps measured endpoints and the warm-up one, and says on
 * stderr how long that took: the cost of tearing endpoints down. */
static inline void perf_destroy_eps(const char *prog, uct_ep_h *eps,
                                    unsigned num_eps, uct_ep_h warm_ep)
{
    double t0, t1;
    unsigned i;

    t0 = perf_now_sec();
    for (i = 0; i < num_eps; ++i) {
        uct_ep_destroy(eps[i]);
    }
    uct_ep_destroy(warm_ep);
    t1 = perf_now_sec();
    fprintf(stderr, "%s: destroyed %u endpoints in %.3f ms\n", prog,
            num_eps + 1, (t1 - t0) * 1e3);
}

#endif
