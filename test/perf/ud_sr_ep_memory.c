/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: memory cost of idle endpoints.
 *
 * Opens one UCT interface through the public UCT API and creates N
 * endpoints (connect-to-iface) to N distinct remote interfaces, without N
 * real peers, then reports how much memory each endpoint costs:
 *
 *   ud_sr: the remote interface address is the packed {uint16_t port
 *          (network order); uint64_t key;} of ud_sr; this program takes its
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
#include "perf_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#define PROG "ud_sr_ep_memory"

typedef struct {
    perf_uct_t uct;
    perf_iface_t ifc;
    int *listen_fds; /* tcp only */
    uint16_t *listen_ports;
    unsigned num_listeners;
} ctx_t;

/* The packed interface addresses of the transports measured here. */
typedef struct {
    uint16_t port; /* network byte order */
    uint64_t key;
} __attribute__((packed)) ud_sr_iface_addr_t;

typedef struct {
    uint16_t port; /* network byte order */
} __attribute__((packed)) tcp_iface_addr_t;

static void usage(const char *prog)
{
    printf("usage: %s [-t ud_sr|tcp] [-d DEV] [-n NUM_EPS] [-i IDLE_MS]\n"
           "  -t  transport (ud_sr: component/md 'aptus'; tcp: UCX's own)\n"
           "  -d  device (lo)\n"
           "  -n  endpoints to create (1000)\n"
           "  -i  how long the endpoints sit idle before destruction (200)\n",
           prog);
}

/* The option of this program only: -i IDLE_MS (arg: the idle time). */
static int own_opt(int c, const char *value, void *arg)
{
    if (c != 'i') {
        return 0;
    }
    *(unsigned *)arg = strtoul(value, NULL, 0);
    return 1;
}

static void open_iface(const perf_opts_t *opts, ctx_t *ctx)
{
    perf_open_md(PROG, opts, &ctx->uct);
    perf_open_iface(PROG, opts, &ctx->uct, &ctx->ifc);
}

static void close_iface(ctx_t *ctx)
{
    perf_close_iface(&ctx->ifc);
    perf_close_md(&ctx->uct);
}

/* tcp: listening sockets on the loopback that never accept. The kernel
 * completes at most somaxconn connections per listener (4096 by default),
 * so there is one listener per TCP_EPS_PER_LISTENER endpoints. */
#define TCP_EPS_PER_LISTENER 2048

static int tcp_dummy_listeners(ctx_t *ctx, unsigned num_eps)
{
    struct sockaddr_in sin;
    socklen_t len;
    unsigned i, n = (num_eps + TCP_EPS_PER_LISTENER - 1) / TCP_EPS_PER_LISTENER;

    /* one descriptor per endpoint */
    if (perf_raise_fd_limit(num_eps + n + 256) != 0) {
        return -1;
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
static void make_remote_addr(const perf_opts_t *opts, const ctx_t *ctx,
                             unsigned i, uct_iface_addr_t *out)
{
    if (!strcmp(opts->tl, "ud_sr")) {
        ud_sr_iface_addr_t a;

        memcpy(&a, ctx->ifc.iface_addr, sizeof(a));
        /* same port, another key: another incarnation of a remote
         * interface as far as the channel is concerned; never our own key */
        a.key = a.key ^ (0x9e3779b97f4a7c15ull * (i + 1));
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
    perf_opts_t opts = perf_default_opts("ud_sr", "aptus", "aptus");
    unsigned idle_ms = 200;
    size_t malloc0, malloc1, malloc2, rss0, rss1;
    long slab0 = 0, slab1 = 0;
    double t0, t1, cpu0, cpu1, idle_t0, idle_t1;
    uct_iface_addr_t *remote;
    int is_tcp;
    uct_ep_params_t ep_params;
    uct_ep_h *eps, warm_ep;
    ctx_t ctx = { .num_listeners = 0 };
    ucs_status_t status;
    unsigned i;
    int c;

    c = perf_parse_opts(argc, argv, "t:d:n:i:h", PROG, "ud_sr", &opts, own_opt,
                        &idle_ms, usage);
    if (c >= 0) {
        return c;
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
    remote = calloc(1, ctx.ifc.attr.iface_addr_len + 8);
    perf_ep_params(&ep_params, ctx.ifc.iface, ctx.ifc.dev_addr, remote);

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
    malloc0 = perf_malloc_bytes();
    rss0    = perf_rss_bytes();
    if (is_tcp) {
        slab0 = perf_tcp_slab_bytes(); /* -1 (unreadable) on both ends: 0 */
    }
    t0 = perf_now_sec();
    for (i = 0; i < opts.num_eps; ++i) {
        make_remote_addr(&opts, &ctx, i, remote);
        status = uct_ep_create(&ep_params, &eps[i]);
        if (status != UCS_OK) {
            perf_ep_create_failed(PROG, &opts, "eps", i, status);
            return 3;
        }
    }
    t1      = perf_now_sec();
    malloc1 = perf_malloc_bytes();
    rss1    = perf_rss_bytes();
    if (is_tcp) {
        slab1 = perf_tcp_slab_bytes();
    }

    /* Idle endpoints: no traffic, only the interface's timers run (and
     * whatever progress an application would call). */
    cpu0    = perf_cpu_sec();
    idle_t0 = perf_now_sec();
    while (perf_now_sec() - idle_t0 < idle_ms * 1e-3) {
        usleep(10000);
    }
    idle_t1 = perf_now_sec();
    cpu1    = perf_cpu_sec();
    uct_worker_progress(ctx.uct.worker);
    malloc2 = perf_malloc_bytes();

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
               (double)(slab1 - slab0) / opts.num_eps);
    }
    printf("\n");
    fflush(stdout);

    perf_destroy_eps(PROG, eps, opts.num_eps, warm_ep);

    free(eps);
    free(remote);
    close_iface(&ctx); /* ud_sr prints its aptus-stats line here */
    if (is_tcp) {
        tcp_close_listeners(&ctx);
    }
    fflush(stdout);
    return 0;
}
