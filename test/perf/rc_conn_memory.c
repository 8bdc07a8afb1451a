/* SPDX-License-Identifier: BSD-3-Clause */
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
 *   gcc -O2 -o rc_conn_memory rc_conn_memory.c $(pkg-config --cflags --libs
 * ucx) Run (the aptus module must be in the process for rc_sr):
 *   UCX_APTUS_STATS=stdout LD_PRELOAD=.../libuct_aptus.so ./rc_conn_memory -n
 * 1000
 *   ./rc_conn_memory -t tcp -n 1000
 */
#define _GNU_SOURCE
#include "perf_probe.h"

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define PROG "rc_conn_memory"

typedef struct {
    perf_uct_t uct;
    perf_iface_t a; /* the endpoints' side */
    perf_iface_t b; /* the accepting side */
} ctx_t;

/* One snapshot of the process' and the kernel's resources. */
typedef struct {
    size_t malloc;
    size_t rss;
    long fds;
    long slab;     /* TCP slab bytes, -1 if unreadable */
    long sock_mem; /* TCP socket buffer bytes (sockstat), -1 if unreadable */
} snapshot_t;

static void snapshot(snapshot_t *s)
{
    s->malloc   = perf_malloc_bytes();
    s->rss      = perf_rss_bytes();
    s->fds      = perf_count_fds();
    s->slab     = perf_tcp_slab_bytes();
    s->sock_mem = perf_tcp_sockbuf_bytes();
}

/* The descriptors open at the baseline, to tell the new ones. */
typedef struct {
    unsigned char *old; /* old[fd] != 0: open at the baseline */
    int max_fd;
    long sockets;   /* new sockets seen */
    long other;     /* new descriptors that are not sockets */
    size_t sockbuf; /* their SO_SNDBUF + SO_RCVBUF */
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

/* How long to progress the worker after creating the endpoints. */
typedef struct {
    unsigned min_ms; /* at least this long (-p) */
    unsigned max_ms; /* give up waiting for the connections (-T) */
} progress_opts_t;

/* The options of this program only: -p MIN_MS, -T MAX_MS (arg: a
 * progress_opts_t). */
static int own_opt(int c, const char *value, void *arg)
{
    progress_opts_t *progress = arg;

    switch (c) {
    case 'p':
        progress->min_ms = strtoul(value, NULL, 0);
        return 1;
    case 'T':
        progress->max_ms = strtoul(value, NULL, 0);
        return 1;
    default:
        return 0;
    }
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

static void open_iface(const perf_opts_t *opts, ctx_t *ctx, perf_iface_t *ifc)
{
    perf_open_iface(PROG, opts, &ctx->uct, ifc);
    /* an interface that no one sends to needs no handlers: the endpoints
     * never send (an AM arriving without a handler would be an error) */
    uct_iface_progress_enable(ifc->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

/* Progresses the worker at least min_ms, and until the process holds
 * target_fds descriptors more than at the baseline and that number has not
 * changed for 100 ms, or max_ms have passed. Returns the time it took until
 * the target was first reached (seconds since t0), or -1. */
static double progress_until(ctx_t *ctx, long fds0, long target_fds,
                             unsigned min_ms, unsigned max_ms, double t0)
{
    double start = perf_now_sec(), reached = -1, stable_since = 0, t;
    long fds, last = -1;
    unsigned iter;

    for (iter = 0;; ++iter) {
        uct_worker_progress(ctx->uct.worker);
        if ((iter % 64) != 0) {
            continue;
        }
        t   = perf_now_sec();
        fds = perf_count_fds() - fds0;
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
    perf_opts_t opts         = perf_default_opts("rc_sr", "aptus", "aptus_rc");
    progress_opts_t progress = { .min_ms = 300, .max_ms = 10000 };
    snapshot_t s0, s1;
    fd_scan_t scan;
    double t0, t1, connected;
    uct_ep_params_t ep_params;
    uct_ep_h *eps, warm_ep;
    ctx_t ctx;
    ucs_status_t status;
    rlim_t need;
    unsigned i;
    long fds_before, want;
    int c;

    memset(&ctx, 0, sizeof(ctx));
    c = perf_parse_opts(argc, argv, "t:d:n:p:T:h", PROG, "rc_sr", &opts,
                        own_opt, &progress, usage);
    if (c >= 0) {
        return c;
    }

    /* two descriptors per connection (both ends are in this process) */
    need = 2 * (rlim_t)opts.num_eps + 512;
    if (perf_raise_fd_limit(need) != 0) {
        printf("tl=%s dev=%s conns=%u skipped=fd_limit(need %lu: %s)\n",
               opts.tl, opts.dev, opts.num_eps, (unsigned long)need,
               strerror(errno));
        return 3;
    }

    perf_open_md(PROG, &opts, &ctx.uct);
    open_iface(&opts, &ctx, &ctx.a);
    open_iface(&opts, &ctx, &ctx.b);

    eps = calloc(opts.num_eps, sizeof(*eps));
    perf_ep_params(&ep_params, ctx.a.iface, ctx.b.dev_addr, ctx.b.iface_addr);

    /* One connection first, established, so that one-time allocations
     * (first pool chunks, first tables, the accept path) are not counted
     * per connection. */
    fds_before = perf_count_fds();
    status     = uct_ep_create(&ep_params, &warm_ep);
    if (status != UCS_OK) {
        printf("tl=%s dev=%s conns=%u skipped=ep_create_failed(%s)\n", opts.tl,
               opts.dev, opts.num_eps, ucs_status_string(status));
        return 3;
    }
    if (progress_until(&ctx, fds_before, 2, progress.min_ms, progress.max_ms,
                       perf_now_sec()) < 0) {
        printf("tl=%s dev=%s conns=%u skipped=first_connection_not_"
               "established(fds +%ld)\n",
               opts.tl, opts.dev, opts.num_eps, perf_count_fds() - fds_before);
        return 3;
    }

    malloc_trim(0);
    snapshot(&s0);
    scan.max_fd = (int)(s0.fds + 4 * (long)opts.num_eps + 1024);
    scan.old    = calloc(scan.max_fd, 1);
    perf_for_each_fd(fd_mark_old, &scan);

    t0 = perf_now_sec();
    for (i = 0; i < opts.num_eps; ++i) {
        status = uct_ep_create(&ep_params, &eps[i]);
        if (status != UCS_OK) {
            perf_ep_create_failed(PROG, &opts, "conns", i, status);
            return 3;
        }
    }
    t1        = perf_now_sec();
    want      = 2 * (long)opts.num_eps;
    connected = progress_until(&ctx, s0.fds, want, progress.min_ms,
                               progress.max_ms, t0);
    snapshot(&s1);
    scan.sockets = scan.other = 0;
    scan.sockbuf              = 0;
    perf_for_each_fd(fd_scan_new, &scan);

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
    printf(
        " create_ns_per_ep=%.0f connect_ms=%.1f established=%s"
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

    perf_destroy_eps(PROG, eps, opts.num_eps, warm_ep);
    /* let the accepting side see the connections close */
    t0 = perf_now_sec();
    while (perf_now_sec() - t0 < 0.05) {
        uct_worker_progress(ctx.uct.worker);
    }

    free(eps);
    free(scan.old);
    perf_close_iface(&ctx.a); /* rc_sr prints its aptus-stats line here */
    perf_close_iface(&ctx.b);
    perf_close_md(&ctx.uct);
    fflush(stdout);
    return (connected >= 0) ? 0 : 4;
}
