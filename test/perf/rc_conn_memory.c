/*
 * UCX-Aptus: resources of established connections.
 *
 * Opens two UCT interfaces of one transport (rc_sr or UCX's tcp) on one
 * device, on one worker in one process, and creates N endpoints from the
 * first to the second (connect-to-iface, with the second's device and
 * interface addresses). It progresses the worker until every connection is
 * established (the process holds two more descriptors per endpoint: the
 * connecting socket and the accepted one) and reports what one connection
 * costs, both ends counted (the endpoint on the first interface and the
 * accepted connection on the second):
 *
 *   bytes_per_conn_malloc   growth of malloc'ed bytes (mallinfo2 uordblks +
 *                           hblkhd, i.e. heap and mmap'ed chunks) / N
 *   rss_per_conn            growth of the resident set (/proc/self/statm) / N
 *   fds_per_conn            growth of the open descriptors (/proc/self/fd) / N
 *   kernel_sock_bytes_per_conn
 *                           growth of the kernel's "TCP" slab (struct
 *                           tcp_sock, both ends) / N; -1 when /proc/slabinfo
 *                           cannot be read (not root)
 *   sockbuf_limit_bytes_per_conn
 *                           SO_SNDBUF + SO_RCVBUF of every new socket / N:
 *                           how much buffer space the kernel lets the
 *                           connection's two sockets hold (a limit, not
 *                           allocated while the connection is idle)
 *   sockbuf_alloc_bytes_per_conn
 *                           growth of the kernel's TCP buffer memory
 *                           (/proc/net/sockstat "TCP: mem", pages; whole
 *                           host, so other traffic shows up) / N
 *   create_ns_per_ep        wall time of uct_ep_create / N
 *   connect_ms              from the first uct_ep_create until every
 *                           connection was established
 * The transport's own figures of rc_sr (bytes of state of a connection,
 * receive descriptors it may occupy, the shared receive pool) are printed by
 * the transport when the interface closes, with UCX_APTUS_STATS=stdout
 * ("aptus-stats rc_sr/lo ... conn_state_bytes=... conn_descriptors=...").
 *
 * Output: one line
 *   tl=rc_sr dev=lo conns=1000 bytes_per_conn_malloc=... rss_per_conn=... ...
 * or, where the connections cannot be made, "tl=... conns=N skipped=<why>"
 * (exit status 3).
 *
 * Build (public UCX headers only):
 *   gcc -O2 -o rc_conn_memory rc_conn_memory.c $(pkg-config --cflags --libs ucx)
 * Run (the aptus module must be in the process for rc_sr):
 *   UCX_APTUS_STATS=stdout LD_PRELOAD=.../libuct_aptus.so ./rc_conn_memory -n 1000
 *   ./rc_conn_memory -t tcp -n 1000
 */
#define _GNU_SOURCE
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *tl;        /* transport name */
    const char *component; /* UCT component */
    const char *md;        /* memory domain name */
    const char *dev;       /* device */
    unsigned num_eps;
    unsigned min_progress_ms; /* progress at least this long */
    unsigned max_progress_ms; /* give up waiting for the connections */
} options_t;

typedef struct {
    uct_iface_h iface;
    uct_iface_attr_t attr;
    uct_device_addr_t *dev_addr;
    uct_iface_addr_t *iface_addr;
} iface_t;

typedef struct {
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_component_h component;
    uct_md_h md;
    iface_t a; /* the endpoints' side */
    iface_t b; /* the accepting side */
} ctx_t;

/* One snapshot of the process' and the kernel's resources. */
typedef struct {
    size_t malloc;
    size_t rss;
    long fds;
    long slab;     /* TCP slab bytes, -1 if unreadable */
    long sock_mem; /* TCP socket buffer bytes (sockstat), -1 if unreadable */
} snapshot_t;

#define CHECK(_expr, _what)                                                    \
    do {                                                                       \
        ucs_status_t _s = (_expr);                                             \
        if (_s != UCS_OK) {                                                    \
            fprintf(stderr, "rc_conn_memory: %s failed: %s\n", (_what),        \
                    ucs_status_string(_s));                                    \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static size_t malloc_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
}

static size_t rss_bytes(void)
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

/* Calls cb(fd, arg) for every open descriptor of the process (except the
 * directory's own); returns their number. */
static long for_each_fd(void (*cb)(int fd, void *arg), void *arg)
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

static long count_fds(void)
{
    return for_each_fd(NULL, NULL);
}

/* Kernel memory in TCP socket objects (slab "TCP"), or -1 if unreadable. */
static long tcp_slab_bytes(void)
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

/* Kernel memory in TCP socket buffers, whole host ("TCP: ... mem <pages>"
 * of /proc/net/sockstat), or -1 if unreadable. */
static long tcp_sockbuf_bytes(void)
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

static void snapshot(snapshot_t *s)
{
    s->malloc   = malloc_bytes();
    s->rss      = rss_bytes();
    s->fds      = count_fds();
    s->slab     = tcp_slab_bytes();
    s->sock_mem = tcp_sockbuf_bytes();
}

/* The descriptors open at the baseline, to tell the new ones. */
typedef struct {
    unsigned char *old; /* old[fd] != 0: open at the baseline */
    int max_fd;
    long sockets;       /* new sockets seen */
    long other;         /* new descriptors that are not sockets */
    size_t sockbuf;     /* their SO_SNDBUF + SO_RCVBUF */
} fd_scan_t;

static void fd_mark_old(int fd, void *arg)
{
    fd_scan_t *scan = arg;

    if ((fd >= 0) && (fd < scan->max_fd)) {
        scan->old[fd] = 1;
    }
}

static void fd_scan_new(int fd, void *arg)
{
    fd_scan_t *scan = arg;
    int sndbuf = 0, rcvbuf = 0;
    socklen_t len;
    struct stat st;

    if ((fd >= 0) && (fd < scan->max_fd) && scan->old[fd]) {
        return;
    }
    if ((fstat(fd, &st) != 0) || !S_ISSOCK(st.st_mode)) {
        scan->other++;
        return;
    }
    scan->sockets++;
    len = sizeof(sndbuf);
    (void)getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len);
    len = sizeof(rcvbuf);
    (void)getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
    scan->sockbuf += (size_t)sndbuf + (size_t)rcvbuf;
}

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(const char *prog)
{
    printf("usage: %s [-t rc_sr|tcp] [-d DEV] [-n NUM_EPS] [-p MIN_MS] "
           "[-T MAX_MS]\n"
           "  -t  transport (rc_sr: component 'aptus', md 'aptus_rc'; tcp: "
           "UCX's own)\n"
           "  -d  device (lo)\n"
           "  -n  endpoints (connections) to create (1000)\n"
           "  -p  progress the worker at least this long after creating them "
           "(300 ms)\n"
           "  -T  at most this long, waiting for every connection (10000 ms)\n",
           prog);
}

static void open_md(const options_t *opts, ctx_t *ctx)
{
    uct_component_h *components;
    uct_component_attr_t comp_attr;
    uct_md_config_t *md_config;
    unsigned num_components, i, j;
    int found = 0;

    CHECK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &ctx->async),
          "ucs_async_context_create");
    CHECK(uct_worker_create(ctx->async, UCS_THREAD_MODE_SINGLE, &ctx->worker),
          "uct_worker_create");

    CHECK(uct_query_components(&components, &num_components),
          "uct_query_components");
    for (i = 0; (i < num_components) && !found; ++i) {
        memset(&comp_attr, 0, sizeof(comp_attr));
        comp_attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                               UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        CHECK(uct_component_query(components[i], &comp_attr),
              "uct_component_query");
        if (strcmp(comp_attr.name, opts->component)) {
            continue;
        }
        comp_attr.md_resources = calloc(comp_attr.md_resource_count,
                                        sizeof(*comp_attr.md_resources));
        comp_attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        CHECK(uct_component_query(components[i], &comp_attr),
              "uct_component_query");
        for (j = 0; j < comp_attr.md_resource_count; ++j) {
            if (!strcmp(comp_attr.md_resources[j].md_name, opts->md)) {
                ctx->component = components[i];
                found          = 1;
                break;
            }
        }
        free(comp_attr.md_resources);
    }
    uct_release_component_list(components);
    if (!found) {
        fprintf(stderr,
                "rc_conn_memory: UCT component '%s' with md '%s' not found%s\n",
                opts->component, opts->md,
                strcmp(opts->component, "aptus")
                    ? ""
                    : " (is libuct_aptus.so preloaded? LD_PRELOAD or "
                      "aptus-env)");
        exit(2);
    }

    CHECK(uct_md_config_read(ctx->component, NULL, NULL, &md_config),
          "uct_md_config_read");
    CHECK(uct_md_open(ctx->component, opts->md, md_config, &ctx->md),
          "uct_md_open");
    uct_config_release(md_config);
}

static void open_iface(const options_t *opts, ctx_t *ctx, iface_t *ifc)
{
    uct_iface_config_t *iface_config;
    uct_iface_params_t params;

    CHECK(
        uct_md_iface_config_read(ctx->md, opts->tl, NULL, NULL, &iface_config),
        "uct_md_iface_config_read");
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
    CHECK(uct_iface_open(ctx->md, ctx->worker, &params, iface_config,
                         &ifc->iface),
          "uct_iface_open");
    uct_config_release(iface_config);

    CHECK(uct_iface_query(ifc->iface, &ifc->attr), "uct_iface_query");
    if (!(ifc->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE)) {
        fprintf(stderr, "rc_conn_memory: %s/%s cannot connect to iface\n",
                opts->tl, opts->dev);
        exit(2);
    }
    ifc->dev_addr   = calloc(1, ifc->attr.device_addr_len + 8);
    ifc->iface_addr = calloc(1, ifc->attr.iface_addr_len + 8);
    CHECK(uct_iface_get_device_address(ifc->iface, ifc->dev_addr),
          "uct_iface_get_device_address");
    CHECK(uct_iface_get_address(ifc->iface, ifc->iface_addr),
          "uct_iface_get_address");
    /* an interface that no one sends to needs no handlers: the endpoints
     * never send (an AM arriving without a handler would be an error) */
    uct_iface_progress_enable(ifc->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

static void close_iface(iface_t *ifc)
{
    uct_iface_close(ifc->iface);
    free(ifc->dev_addr);
    free(ifc->iface_addr);
}

/* Progresses the worker at least min_ms, and until the process holds
 * target_fds descriptors more than at the baseline and that number has not
 * changed for 100 ms, or max_ms have passed. Returns the time it took until
 * the target was first reached (seconds since t0), or -1. */
static double progress_until(ctx_t *ctx, long fds0, long target_fds,
                             unsigned min_ms, unsigned max_ms, double t0)
{
    double start = now_sec(), reached = -1, stable_since = 0, t;
    long fds, last = -1;
    unsigned iter;

    for (iter = 0;; ++iter) {
        uct_worker_progress(ctx->worker);
        if ((iter % 64) != 0) {
            continue;
        }
        t   = now_sec();
        fds = count_fds() - fds0;
        if (fds != last) {
            last         = fds;
            stable_since = t;
        }
        if ((fds >= target_fds) && (reached < 0)) {
            reached = t - t0;
        }
        if ((t - start >= min_ms * 1e-3) && (fds >= target_fds) &&
            (t - stable_since >= 0.1)) {
            return reached;
        }
        if (t - start >= max_ms * 1e-3) {
            return reached;
        }
    }
}

int main(int argc, char **argv)
{
    options_t opts = { .tl              = "rc_sr",
                       .component       = "aptus",
                       .md              = "aptus_rc",
                       .dev             = "lo",
                       .num_eps         = 1000,
                       .min_progress_ms = 300,
                       .max_progress_ms = 10000 };
    snapshot_t s0, s1;
    fd_scan_t scan;
    double t0, t1, connected;
    uct_ep_params_t ep_params;
    uct_ep_h *eps, warm_ep;
    ctx_t ctx;
    ucs_status_t status;
    struct rlimit rl;
    unsigned i;
    long fds_before, want;
    int c;

    memset(&ctx, 0, sizeof(ctx));
    while ((c = getopt(argc, argv, "t:d:n:p:T:h")) != -1) {
        switch (c) {
        case 't':
            opts.tl = optarg;
            break;
        case 'd':
            opts.dev = optarg;
            break;
        case 'n':
            opts.num_eps = strtoul(optarg, NULL, 0);
            break;
        case 'p':
            opts.min_progress_ms = strtoul(optarg, NULL, 0);
            break;
        case 'T':
            opts.max_progress_ms = strtoul(optarg, NULL, 0);
            break;
        case 'h':
            usage(argv[0]);
            return 0;
        default:
            usage(argv[0]);
            return 1;
        }
    }
    if (!strcmp(opts.tl, "tcp")) {
        opts.component = "tcp";
        opts.md        = "tcp";
    } else if (strcmp(opts.tl, "rc_sr")) {
        fprintf(stderr, "rc_conn_memory: unknown transport '%s'\n", opts.tl);
        return 1;
    }
    if (opts.num_eps == 0) {
        fprintf(stderr, "rc_conn_memory: -n must be positive\n");
        return 1;
    }

    /* two descriptors per connection (both ends are in this process) */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t need = 2 * (rlim_t)opts.num_eps + 512;

        if (rl.rlim_cur < need) {
            rl.rlim_cur = need;
            if (rl.rlim_max < need) {
                rl.rlim_max = need;
            }
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
                printf("tl=%s dev=%s conns=%u skipped=fd_limit(need %lu: %s)\n",
                       opts.tl, opts.dev, opts.num_eps, (unsigned long)need,
                       strerror(errno));
                return 3;
            }
        }
    }

    open_md(&opts, &ctx);
    open_iface(&opts, &ctx, &ctx.a);
    open_iface(&opts, &ctx, &ctx.b);

    eps = calloc(opts.num_eps, sizeof(*eps));
    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                           UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = ctx.a.iface;
    ep_params.dev_addr   = ctx.b.dev_addr;
    ep_params.iface_addr = ctx.b.iface_addr;

    /* One connection first, established, so that one-time allocations
     * (first pool chunks, first tables, the accept path) are not counted
     * per connection. */
    fds_before = count_fds();
    status     = uct_ep_create(&ep_params, &warm_ep);
    if (status != UCS_OK) {
        printf("tl=%s dev=%s conns=%u skipped=ep_create_failed(%s)\n", opts.tl,
               opts.dev, opts.num_eps, ucs_status_string(status));
        return 3;
    }
    if (progress_until(&ctx, fds_before, 2, opts.min_progress_ms,
                       opts.max_progress_ms, now_sec()) < 0) {
        printf("tl=%s dev=%s conns=%u skipped=first_connection_not_"
               "established(fds +%ld)\n",
               opts.tl, opts.dev, opts.num_eps, count_fds() - fds_before);
        return 3;
    }

    malloc_trim(0);
    snapshot(&s0);
    scan.max_fd = (int)(s0.fds + 4 * (long)opts.num_eps + 1024);
    scan.old    = calloc(scan.max_fd, 1);
    for_each_fd(fd_mark_old, &scan);

    t0 = now_sec();
    for (i = 0; i < opts.num_eps; ++i) {
        status = uct_ep_create(&ep_params, &eps[i]);
        if (status != UCS_OK) {
            fprintf(stderr, "rc_conn_memory: uct_ep_create #%u failed: %s\n",
                    i, ucs_status_string(status));
            printf("tl=%s dev=%s conns=%u skipped=ep_create_failed_at_%u(%s)\n",
                   opts.tl, opts.dev, opts.num_eps, i,
                   ucs_status_string(status));
            return 3;
        }
    }
    t1   = now_sec();
    want = 2 * (long)opts.num_eps;
    connected = progress_until(&ctx, s0.fds, want, opts.min_progress_ms,
                               opts.max_progress_ms, t0);
    snapshot(&s1);
    scan.sockets = scan.other = 0;
    scan.sockbuf = 0;
    for_each_fd(fd_scan_new, &scan);

    printf("tl=%s dev=%s conns=%u bytes_per_conn_malloc=%.1f "
           "rss_per_conn=%.1f fds_per_conn=%.2f",
           opts.tl, opts.dev, opts.num_eps,
           ((double)s1.malloc - (double)s0.malloc) / opts.num_eps,
           ((double)s1.rss - (double)s0.rss) / opts.num_eps,
           (double)(s1.fds - s0.fds) / opts.num_eps);
    if ((s0.slab >= 0) && (s1.slab >= 0)) {
        printf(" kernel_sock_bytes_per_conn=%.1f",
               (double)(s1.slab - s0.slab) / opts.num_eps);
    } else {
        printf(" kernel_sock_bytes_per_conn=-1");
    }
    printf(" sockbuf_limit_bytes_per_conn=%.0f",
           (double)scan.sockbuf / opts.num_eps);
    if ((s0.sock_mem >= 0) && (s1.sock_mem >= 0)) {
        printf(" sockbuf_alloc_bytes_per_conn=%.1f",
               (double)(s1.sock_mem - s0.sock_mem) / opts.num_eps);
    }
    printf(" create_ns_per_ep=%.0f connect_ms=%.1f established=%s"
           " malloc_total=%zd rss_total=%zd new_sockets=%ld new_other_fds=%ld\n",
           (t1 - t0) * 1e9 / opts.num_eps,
           (connected >= 0) ? connected * 1e3 : -1.0,
           (connected >= 0) ? "yes" : "no",
           (ssize_t)s1.malloc - (ssize_t)s0.malloc,
           (ssize_t)s1.rss - (ssize_t)s0.rss, scan.sockets, scan.other);
    if (scan.other != 0) {
        fprintf(stderr,
                "rc_conn_memory: note: %ld new descriptors are not sockets\n",
                scan.other);
    }
    fflush(stdout);

    t0 = now_sec();
    for (i = 0; i < opts.num_eps; ++i) {
        uct_ep_destroy(eps[i]);
    }
    uct_ep_destroy(warm_ep);
    t1 = now_sec();
    fprintf(stderr, "rc_conn_memory: destroyed %u endpoints in %.3f ms\n",
            opts.num_eps + 1, (t1 - t0) * 1e3);
    /* let the accepting side see the connections close */
    t0 = now_sec();
    while (now_sec() - t0 < 0.05) {
        uct_worker_progress(ctx.worker);
    }

    free(eps);
    free(scan.old);
    close_iface(&ctx.a); /* rc_sr prints its aptus-stats line here */
    close_iface(&ctx.b);
    uct_md_close(ctx.md);
    uct_worker_destroy(ctx.worker);
    ucs_async_context_destroy(ctx.async);
    fflush(stdout);
    return (connected >= 0) ? 0 : 4;
}
