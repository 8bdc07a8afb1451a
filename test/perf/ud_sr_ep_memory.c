/*
 * UCX-Aptus: memory cost of idle endpoints.
 *
 * Opens one UCT interface through the public UCT API and creates N
 * endpoints (connect-to-iface) to N distinct remote interfaces, without N
 * real peers, then reports how much memory each endpoint costs:
 *
 *   ud_sr: the remote interface address is the packed {uint16_t port
 *          (network order); uint32_t key;} of ud_sr; this program takes its
 *          own interface's address and varies the key, so every endpoint is
 *          a distinct remote interface (a distinct peer of the channel).
 *          An endpoint that never sends puts nothing on the wire.
 *   tcp:   UCX's tcp connects on ep_create, so it needs something listening.
 *          This program opens plain listening sockets that never accept (one
 *          per TCP_EPS_PER_LISTENER endpoints, below the kernel's somaxconn)
 *          and points the endpoints at them; each endpoint is still a
 *          separate TCP connection with its own socket and descriptor (which
 *          is what a tcp endpoint costs). Kernel socket memory is reported
 *          separately (growth of the "TCP" slab, both ends of the loopback
 *          connection); it is not in the process' malloc or RSS figures.
 *
 * Figures:
 *   bytes_per_ep_malloc  growth of malloc'ed bytes (mallinfo2 uordblks +
 *                        hblkhd, i.e. heap and mmap'ed chunks) / N
 *   rss_per_ep           growth of the resident set (/proc/self/statm) / N
 *   create_ns_per_ep     wall time of uct_ep_create / N
 *   idle_cpu_pct         CPU time the process used (async thread included)
 *                        while the N endpoints sat idle for -i ms (200)
 * The exact per-peer figure of ud_sr (struct + pool header + share of the
 * lookup table) is printed by the transport itself when the interface closes
 * with UCX_APTUS_STATS=stdout ("aptus-stats ud_sr/lo ... peer_bytes=...").
 *
 * Output: one line
 *   tl=ud_sr dev=lo eps=1000 bytes_per_ep_malloc=... rss_per_ep=... ...
 * or, where the endpoints cannot be created, "tl=... eps=N skipped=<why>"
 * (exit status 3).
 *
 * Build (public UCX headers only):
 *   gcc -O2 -o ud_sr_ep_memory ud_sr_ep_memory.c $(pkg-config --cflags --libs
 * ucx) Run (the aptus module must be in the process): UCX_APTUS_STATS=stdout
 * LD_PRELOAD=.../libuct_aptus.so ./ud_sr_ep_memory -n 10000
 *   ./ud_sr_ep_memory -t tcp -n 10000
 */
#define _GNU_SOURCE
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *tl;        /* transport name */
    const char *component; /* UCT component */
    const char *md;        /* memory domain name */
    const char *dev;       /* device */
    unsigned num_eps;
    unsigned idle_ms;
} options_t;

typedef struct {
    ucs_async_context_t *async;
    uct_worker_h worker;
    uct_component_h component;
    uct_md_h md;
    uct_iface_h iface;
    uct_iface_attr_t attr;
    uct_device_addr_t *dev_addr;
    uct_iface_addr_t *iface_addr;
    int *listen_fds; /* tcp only */
    uint16_t *listen_ports;
    unsigned num_listeners;
} ctx_t;

/* The packed interface addresses of the transports measured here. */
typedef struct {
    uint16_t port; /* network byte order */
    uint32_t key;
} __attribute__((packed)) ud_sr_iface_addr_t;

typedef struct {
    uint16_t port; /* network byte order */
} __attribute__((packed)) tcp_iface_addr_t;

#define CHECK(_expr, _what)                                                    \
    do {                                                                       \
        ucs_status_t _s = (_expr);                                             \
        if (_s != UCS_OK) {                                                    \
            fprintf(stderr, "ud_sr_ep_memory: %s failed: %s\n", (_what),       \
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

/* Kernel memory in TCP socket objects (slab "TCP"), or 0 if unreadable. */
static size_t tcp_slab_bytes(void)
{
    char line[512], name[64];
    unsigned long active, num, objsize;
    size_t bytes = 0;
    FILE *f      = fopen("/proc/slabinfo", "r");

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if ((sscanf(line, "%63s %lu %lu %lu", name, &active, &num, &objsize) ==
             4) &&
            !strcmp(name, "TCP")) {
            bytes = active * objsize;
        }
    }
    fclose(f);
    return bytes;
}

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_sec(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static void usage(const char *prog)
{
    printf("usage: %s [-t ud_sr|tcp] [-d DEV] [-n NUM_EPS] [-i IDLE_MS]\n"
           "  -t  transport (ud_sr: component/md 'aptus'; tcp: UCX's own)\n"
           "  -d  device (lo)\n"
           "  -n  endpoints to create (1000)\n"
           "  -i  how long the endpoints sit idle before destruction (200)\n",
           prog);
}

static void open_iface(const options_t *opts, ctx_t *ctx)
{
    uct_component_h *components;
    uct_component_attr_t comp_attr;
    uct_md_config_t *md_config;
    uct_iface_config_t *iface_config;
    uct_iface_params_t params;
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
        fprintf(
            stderr,
            "ud_sr_ep_memory: UCT component '%s' with md '%s' not found%s\n",
            opts->component, opts->md,
            strcmp(opts->component, "aptus")
                ? ""
                : " (is libuct_aptus.so preloaded? LD_PRELOAD or aptus-env)");
        exit(2);
    }

    CHECK(uct_md_config_read(ctx->component, NULL, NULL, &md_config),
          "uct_md_config_read");
    CHECK(uct_md_open(ctx->component, opts->md, md_config, &ctx->md),
          "uct_md_open");
    uct_config_release(md_config);

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
                         &ctx->iface),
          "uct_iface_open");
    uct_config_release(iface_config);

    CHECK(uct_iface_query(ctx->iface, &ctx->attr), "uct_iface_query");
    if (!(ctx->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE)) {
        fprintf(stderr, "ud_sr_ep_memory: %s/%s cannot connect to iface\n",
                opts->tl, opts->dev);
        exit(2);
    }
    ctx->dev_addr   = calloc(1, ctx->attr.device_addr_len);
    ctx->iface_addr = calloc(1, ctx->attr.iface_addr_len + 8);
    CHECK(uct_iface_get_device_address(ctx->iface, ctx->dev_addr),
          "uct_iface_get_device_address");
    CHECK(uct_iface_get_address(ctx->iface, ctx->iface_addr),
          "uct_iface_get_address");
}

static void close_iface(ctx_t *ctx)
{
    uct_iface_close(ctx->iface);
    uct_md_close(ctx->md);
    uct_worker_destroy(ctx->worker);
    ucs_async_context_destroy(ctx->async);
    free(ctx->dev_addr);
    free(ctx->iface_addr);
}

/* tcp: listening sockets on the loopback that never accept. The kernel
 * completes at most somaxconn connections per listener (4096 by default),
 * so there is one listener per TCP_EPS_PER_LISTENER endpoints. */
#define TCP_EPS_PER_LISTENER 2048

static int tcp_dummy_listeners(ctx_t *ctx, unsigned num_eps)
{
    struct sockaddr_in sin;
    socklen_t len;
    struct rlimit rl;
    unsigned i, n = (num_eps + TCP_EPS_PER_LISTENER - 1) / TCP_EPS_PER_LISTENER;

    /* one descriptor per endpoint */
    if ((getrlimit(RLIMIT_NOFILE, &rl) == 0) &&
        (rl.rlim_cur < num_eps + n + 256)) {
        rl.rlim_cur = num_eps + n + 256;
        if (rl.rlim_max < rl.rlim_cur) {
            rl.rlim_max = rl.rlim_cur;
        }
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            return -1;
        }
    }

    ctx->listen_fds   = calloc(n, sizeof(*ctx->listen_fds));
    ctx->listen_ports = calloc(n, sizeof(*ctx->listen_ports));
    for (i = 0; i < n; ++i) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (fd < 0) {
            return -1;
        }
        ctx->listen_fds[ctx->num_listeners++] = fd;
        memset(&sin, 0, sizeof(sin));
        sin.sin_family      = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len                 = sizeof(sin);
        if ((bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) ||
            (listen(fd, 65535) != 0) ||
            (getsockname(fd, (struct sockaddr *)&sin, &len) != 0)) {
            return -1;
        }
        ctx->listen_ports[i] = sin.sin_port;
    }
    return 0;
}

static void tcp_close_listeners(ctx_t *ctx)
{
    unsigned i;

    for (i = 0; i < ctx->num_listeners; ++i) {
        close(ctx->listen_fds[i]);
    }
    free(ctx->listen_fds);
    free(ctx->listen_ports);
}

/* Remote interface address number i (distinct for distinct i). */
static void make_remote_addr(const options_t *opts, const ctx_t *ctx,
                             unsigned i, uct_iface_addr_t *out)
{
    if (!strcmp(opts->tl, "ud_sr")) {
        ud_sr_iface_addr_t a;

        memcpy(&a, ctx->iface_addr, sizeof(a));
        /* same port, another key: another incarnation of a remote
         * interface as far as the channel is concerned; never our own key */
        a.key = a.key ^ (0x9e3779b9u * (i + 1));
        if (a.key == 0) {
            a.key = 1;
        }
        memcpy(out, &a, sizeof(a));
    } else {
        tcp_iface_addr_t a;

        a.port =
            ctx->listen_ports[(i / TCP_EPS_PER_LISTENER) % ctx->num_listeners];

        memcpy(out, &a, sizeof(a));
    }
}

int main(int argc, char **argv)
{
    options_t opts = { .tl        = "ud_sr",
                       .component = "aptus",
                       .md        = "aptus",
                       .dev       = "lo",
                       .num_eps   = 1000,
                       .idle_ms   = 200 };
    size_t malloc0, malloc1, malloc2, rss0, rss1, slab0 = 0, slab1 = 0;
    double t0, t1, cpu0, cpu1, idle_t0, idle_t1;
    uct_iface_addr_t *remote;
    int is_tcp;
    uct_ep_params_t ep_params;
    uct_ep_h *eps, warm_ep;
    ctx_t ctx = { .num_listeners = 0 };
    ucs_status_t status;
    unsigned i;
    int c;

    while ((c = getopt(argc, argv, "t:d:n:i:h")) != -1) {
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
        case 'i':
            opts.idle_ms = strtoul(optarg, NULL, 0);
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
    } else if (strcmp(opts.tl, "ud_sr")) {
        fprintf(stderr, "ud_sr_ep_memory: unknown transport '%s'\n", opts.tl);
        return 1;
    }
    if (opts.num_eps == 0) {
        fprintf(stderr, "ud_sr_ep_memory: -n must be positive\n");
        return 1;
    }

    open_iface(&opts, &ctx);
    is_tcp = !strcmp(opts.tl, "tcp");
    if (is_tcp) {
        if (tcp_dummy_listeners(&ctx, opts.num_eps + 1) != 0) {
            printf("tl=%s dev=%s eps=%u skipped=no_listener_or_fd_limit(%s)\n",
                   opts.tl, opts.dev, opts.num_eps, strerror(errno));
            close_iface(&ctx);
            return 3;
        }
    }

    eps    = calloc(opts.num_eps, sizeof(*eps));
    remote = calloc(1, ctx.attr.iface_addr_len + 8);

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                           UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = ctx.iface;
    ep_params.dev_addr   = ctx.dev_addr;
    ep_params.iface_addr = remote;

    /* One endpoint first, so that one-time allocations (first pool chunk,
     * first table) are not counted per endpoint. */
    make_remote_addr(&opts, &ctx, opts.num_eps, remote);
    status = uct_ep_create(&ep_params, &warm_ep);
    if (status != UCS_OK) {
        printf("tl=%s dev=%s eps=%u skipped=ep_create_without_peer_fails(%s)\n",
               opts.tl, opts.dev, opts.num_eps, ucs_status_string(status));
        close_iface(&ctx);
        return 3;
    }

    malloc_trim(0);
    malloc0 = malloc_bytes();
    rss0    = rss_bytes();
    if (is_tcp) {
        slab0 = tcp_slab_bytes();
    }
    t0 = now_sec();
    for (i = 0; i < opts.num_eps; ++i) {
        make_remote_addr(&opts, &ctx, i, remote);
        status = uct_ep_create(&ep_params, &eps[i]);
        if (status != UCS_OK) {
            fprintf(stderr, "ud_sr_ep_memory: uct_ep_create #%u failed: %s\n",
                    i, ucs_status_string(status));
            printf("tl=%s dev=%s eps=%u skipped=ep_create_failed_at_%u(%s)\n",
                   opts.tl, opts.dev, opts.num_eps, i,
                   ucs_status_string(status));
            return 3;
        }
    }
    t1      = now_sec();
    malloc1 = malloc_bytes();
    rss1    = rss_bytes();
    if (is_tcp) {
        slab1 = tcp_slab_bytes();
    }

    /* Idle endpoints: no traffic, only the interface's timers run (and
     * whatever progress an application would call). */
    cpu0    = cpu_sec();
    idle_t0 = now_sec();
    while (now_sec() - idle_t0 < opts.idle_ms * 1e-3) {
        usleep(10000);
    }
    idle_t1 = now_sec();
    cpu1    = cpu_sec();
    uct_worker_progress(ctx.worker);
    malloc2 = malloc_bytes();

    printf("tl=%s dev=%s eps=%u bytes_per_ep_malloc=%.1f rss_per_ep=%.1f "
           "malloc_total=%zu rss_total=%zd create_ns_per_ep=%.0f "
           "idle_growth_bytes=%zd idle_cpu_pct=%.2f",
           opts.tl, opts.dev, opts.num_eps,
           (double)(malloc1 - malloc0) / opts.num_eps,
           (double)((ssize_t)rss1 - (ssize_t)rss0) / opts.num_eps,
           malloc1 - malloc0, (ssize_t)rss1 - (ssize_t)rss0,
           (t1 - t0) * 1e9 / opts.num_eps, (ssize_t)malloc2 - (ssize_t)malloc1,
           100.0 * (cpu1 - cpu0) / (idle_t1 - idle_t0));
    if (is_tcp) {
        printf(" kernel_sock_bytes_per_ep=%.1f fds_per_ep=1",
               (double)((ssize_t)slab1 - (ssize_t)slab0) / opts.num_eps);
    }
    printf("\n");
    fflush(stdout);

    t0 = now_sec();
    for (i = 0; i < opts.num_eps; ++i) {
        uct_ep_destroy(eps[i]);
    }
    uct_ep_destroy(warm_ep);
    t1 = now_sec();
    fprintf(stderr, "ud_sr_ep_memory: destroyed %u endpoints in %.3f ms\n",
            opts.num_eps + 1, (t1 - t0) * 1e3);

    free(eps);
    free(remote);
    close_iface(&ctx); /* ud_sr prints its aptus-stats line here */
    if (is_tcp) {
        tcp_close_listeners(&ctx);
    }
    fflush(stdout);
    return 0;
}
