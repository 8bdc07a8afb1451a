/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: what endpoints cost before, during and after traffic.
 *
 * One process opens one sending interface and P receiving interfaces (50)
 * of one transport (ud_sr or aptus) on one worker, and creates N endpoints
 * (10,000) from the sender, spread evenly over the receivers. Then:
 *
 *   idle     the endpoints exist and never sent: the receivers know
 *            nothing of them (one end per endpoint);
 *   acked    each endpoint sent one 8-byte active message and the sender's
 *            interface flush completed (every message acknowledged): each
 *            receiver now holds a stream per endpoint (two ends);
 *   timeout  after one TIMEOUT of idleness with progress running.
 *
 * Each phase prints the growth of the malloc'ed bytes (mallinfo2 uordblks +
 * hblkhd: exact allocator bytes in use, not pages) since before the
 * endpoints were created, per endpoint and per endpoint end. What the
 * transport itself counts per peer (peer_bytes, its active state included)
 * is printed when the interfaces close with UCX_APTUS_STATS=stdout.
 * Growth that stays after the timeout and is not per-peer state is the
 * pools' high-water mark (send and receive buffers of the 10,000 messages
 * in flight at once), which UCX's memory pools keep until the interface
 * closes.
 *
 * Build (public UCX headers only):
 *   gcc -O2 -Wall -o ep_memory_idle ep_memory_idle.c \
 *       $(pkg-config --cflags --libs ucx)
 * Run (the aptus module must be in the process):
 *   LD_PRELOAD=.../libuct_aptus.so ./ep_memory_idle -t aptus -n 10000 -p 50
 * Output: one line per phase,
 *   tl=aptus eps=10000 ifaces=50 phase=idle bytes=... per_ep=... per_end=...
 */
#define _GNU_SOURCE
#include "perf_probe.h"

#define PROG "ep_memory_idle"

typedef struct {
    unsigned num_ifaces;
    double timeout;
} own_opts_t;

static void usage(const char *prog)
{
    printf("usage: %s [-t ud_sr|aptus] [-d DEV] [-n NUM_EPS] [-p IFACES] "
           "[-T TIMEOUT_S]\n"
           "  -t  transport (ud_sr)\n"
           "  -d  device (lo)\n"
           "  -n  endpoints (1000)\n"
           "  -p  receiving interfaces the endpoints spread over (50)\n"
           "  -T  the transport's TIMEOUT, seconds, set through the\n"
           "      environment unless already set (2)\n",
           prog);
}

static int own_opt(int c, const char *value, void *arg)
{
    own_opts_t *own = arg;

    switch (c) {
    case 'p':
        own->num_ifaces = strtoul(value, NULL, 0);
        return own->num_ifaces > 0;
    case 'T':
        own->timeout = strtod(value, NULL);
        return own->timeout > 0;
    default:
        return 0;
    }
}

static ucs_status_t am_drop(void *arg, void *data, size_t length,
                            unsigned flags)
{
    ++*(unsigned long *)arg;
    return UCS_OK;
}

static void progress_for(uct_worker_h worker, double seconds)
{
    double t0 = perf_now_sec();

    while (perf_now_sec() - t0 < seconds) {
        uct_worker_progress(worker);
        usleep(1000);
    }
}

/* One 8-byte message from each endpoint, then wait until all are in and
 * the sender's flush completes (every message acknowledged). */
static int send_all(perf_uct_t *uct, perf_iface_t *sender, uct_ep_h *eps,
                    unsigned num_eps, unsigned long *received)
{
    ucs_status_t status;
    unsigned i;
    double t0;

    for (i = 0; i < num_eps; ++i) {
        while ((status = uct_ep_am_short(eps[i], 1, i, NULL, 0)) ==
               UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(uct->worker);
        }
        perf_check(status, PROG, "uct_ep_am_short");
        if ((i % 16) == 15) {
            uct_worker_progress(uct->worker);
        }
    }
    t0 = perf_now_sec();
    while ((*received < num_eps) ||
           (uct_iface_flush(sender->iface, 0, NULL) != UCS_OK)) {
        uct_worker_progress(uct->worker);
        if (perf_now_sec() - t0 > 120) {
            fprintf(stderr, "%s: %lu of %u delivered after 120 s\n", PROG,
                    *received, num_eps);
            return -1;
        }
    }
    return 0;
}

static void report(const perf_opts_t *opts, unsigned num_ifaces,
                   const char *phase, size_t base, unsigned ends)
{
    ssize_t bytes = (ssize_t)perf_malloc_bytes() - (ssize_t)base;

    printf("tl=%s eps=%u ifaces=%u phase=%s bytes=%zd per_ep=%.1f "
           "per_end=%.1f\n",
           opts->tl, opts->num_eps, num_ifaces, phase, bytes,
           (double)bytes / opts->num_eps,
           (double)bytes / ((double)opts->num_eps * ends));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    perf_opts_t opts       = perf_default_opts("ud_sr", "aptus", "aptus");
    own_opts_t own         = { .num_ifaces = 50, .timeout = 2 };
    unsigned long received = 0;
    perf_iface_t sender, *receivers;
    uct_ep_params_t ep_params;
    uct_ep_h *eps, *warm_eps;
    ucs_status_t status;
    char value[32];
    perf_uct_t uct;
    size_t base;
    unsigned i;
    int c;

    c = perf_parse_opts(argc, argv, "t:d:n:p:T:h", PROG, "*", &opts, own_opt,
                        &own, usage);
    if (c >= 0) {
        return c;
    }
    if (strcmp(opts.tl, "ud_sr") && strcmp(opts.tl, "aptus")) {
        fprintf(stderr, "%s: -t ud_sr or aptus\n", PROG);
        return 1;
    }
    snprintf(value, sizeof(value), "%gs", own.timeout);
    setenv("UCX_UD_SR_TIMEOUT", value, 0);
    setenv("UCX_APTUS_TIMEOUT", value, 0);

    perf_open_md(PROG, &opts, &uct);
    perf_open_iface(PROG, &opts, &uct, &sender);
    uct_iface_progress_enable(sender.iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    receivers = calloc(own.num_ifaces, sizeof(*receivers));
    for (i = 0; i < own.num_ifaces; ++i) {
        perf_open_iface(PROG, &opts, &uct, &receivers[i]);
        perf_check(uct_iface_set_am_handler(receivers[i].iface, 1, am_drop,
                                            &received, 0),
                   PROG, "uct_iface_set_am_handler");
        uct_iface_progress_enable(receivers[i].iface,
                                  UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }
    eps = calloc(opts.num_eps, sizeof(*eps));

    /* One endpoint to each receiver first, each sending a message: the
     * one-time allocations (receive buffers posted, first pool chunks,
     * first tables) are not counted per endpoint. */
    warm_eps = calloc(own.num_ifaces, sizeof(*warm_eps));
    for (i = 0; i < own.num_ifaces; ++i) {
        perf_ep_params(&ep_params, sender.iface, receivers[i].dev_addr,
                       receivers[i].iface_addr);
        perf_check(uct_ep_create(&ep_params, &warm_eps[i]), PROG,
                   "uct_ep_create");
    }
    send_all(&uct, &sender, warm_eps, own.num_ifaces, &received);
    received = 0;
    progress_for(uct.worker, 0.05);

    malloc_trim(0);
    base = perf_malloc_bytes();
    for (i = 0; i < opts.num_eps; ++i) {
        perf_iface_t *r = &receivers[i % own.num_ifaces];

        perf_ep_params(&ep_params, sender.iface, r->dev_addr, r->iface_addr);
        status = uct_ep_create(&ep_params, &eps[i]);
        if (status != UCS_OK) {
            perf_ep_create_failed(PROG, &opts, "eps", i, status);
            return 3;
        }
    }
    progress_for(uct.worker, 0.05);
    report(&opts, own.num_ifaces, "idle", base, 1);

    if (send_all(&uct, &sender, eps, opts.num_eps, &received) != 0) {
        return 4;
    }
    /* the receivers' delayed acknowledgements are out too */
    progress_for(uct.worker, 0.05);
    report(&opts, own.num_ifaces, "acked", base, 2);

    progress_for(uct.worker, own.timeout);
    report(&opts, own.num_ifaces, "timeout", base, 2);

    for (i = 1; i < own.num_ifaces; ++i) {
        uct_ep_destroy(warm_eps[i]);
    }
    perf_destroy_eps(PROG, eps, opts.num_eps, warm_eps[0]);
    free(warm_eps);
    free(eps);
    for (i = 0; i < own.num_ifaces; ++i) {
        perf_close_iface(&receivers[i]); /* aptus-stats lines, if asked */
    }
    free(receivers);
    perf_close_iface(&sender);
    perf_close_md(&uct);
    return 0;
}
