/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus benchmark: what the first message of a new stream costs, beside
 * the latency of a stream that is already open.
 *
 * A ud_sr stream opens with a handshake: the first datagram asks for the
 * receiver's incarnation token and is not delivered, the receiver answers,
 * the sender sends again. So a new peer's first message costs one extra
 * round trip. UCX's tcp has its own price (its connection request and
 * answer before the first active message goes), measured the same way.
 *
 * One process, one worker, two interfaces of the transport (A and B), at UCT
 * level, so that nothing but the transport is timed:
 *
 *   first   R rounds (-r, 200), each on a fresh pair A and B (opened for the
 *           round and closed after it, so the stream was never used and B
 *           has never heard of A): A's endpoint to B is created
 *           (connect-to-iface), then timed: one 8-byte am_short from A
 *           (retried while UCS_ERR_NO_RESOURCE, the worker progressed)
 *           until B's handler has it. Median and 90th percentile. Before
 *           the timed message A has sent one and B received one, to and
 *           from a third interface, so that only the new stream is timed.
 *   cold    the same without that: the interfaces' first message, which
 *           adds what an interface sets up on first use (ud_sr: its
 *           receive-copy pool, ~9 MB, grown on the first delivery; whether
 *           those pages are new to the process varies with the state of
 *           malloc, so this figure is bimodal, tens of us or a few ms).
 *   open    one pair, endpoints both ways, after W (-w, 1,000) untimed
 *           ping-pongs: N (-n, 10,000) timed ping-pongs of an 8-byte
 *           am_short (B answers on its own endpoint); the one-way latency is
 *           half the median round trip.
 *
 * "8-byte": the 8 bytes are the am_short header, with no payload, as
 * ucx_perftest sends an 8-byte am_short (ud_sr_bench.sh's am_lat 8 B).
 * The endpoint's creation is not in the first message's time (for tcp it
 * starts the connect() there); its median is printed apart (create_p50_us).
 *
 * Output: one line
 *   tl=ud_sr dev=lo rounds=200 first_p50_us=.. first_p90_us=..
 *   open_p50_us=.. ratio=.. cold_p50_us=.. cold_p90_us=.. create_p50_us=..
 *   iters=10000
 * (ratio: first_p50_us / open_p50_us). Exit status 0, 1 on a failure (a
 * message that never arrived included), 2 if the transport is not there.
 *
 * Build: gcc -O2 -Wall -o first_msg first_msg.c $(pkg-config --cflags --libs
 *            ucx)
 * Run:   LD_PRELOAD=.../libuct_aptus.so ./first_msg -t ud_sr [-d lo]
 *        ./first_msg -t tcp
 * (contrib/bench/first_msg.sh runs it for ud_sr, aptus and tcp.)
 */
#define _GNU_SOURCE
#include "../../test/perf/perf_probe.h"

#define PROG      "first_msg"
#define AM_ID     5
#define WAIT_SEC  10.0 /* a message not there by then is lost: give up */
#define FLUSH_SEC 2.0

typedef struct {
    volatile unsigned long count;
} rx_t;

static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned flags)
{
    ((rx_t *)arg)->count++;
    return UCS_OK;
}

static void usage(const char *prog)
{
    printf("usage: %s [-t TL] [-d DEV] [-r ROUNDS] [-n ITERS] [-w WARMUP]\n"
           "  -t  ud_sr (default), aptus, rc_sr, rc_fp (aptus module), tcp\n"
           "  -d  device (lo)\n"
           "  -r  first-message rounds, a fresh pair each (200)\n"
           "  -n  timed ping-pongs on the open stream (10000)\n"
           "  -w  untimed ping-pongs before them (1000)\n",
           prog);
}

/* The component and memory domain of a transport (ucx_info -d). */
static int tl_md(perf_opts_t *opts)
{
    static const struct {
        const char *tl, *component, *md;
    } map[] = { { "ud_sr", "aptus", "aptus" },
                { "aptus", "aptus", "aptus" },
                { "rc_sr", "aptus", "aptus_rc" },
                { "rc_fp", "aptus", "aptus_rc" },
                { "tcp", "tcp", "tcp" } };
    unsigned i;

    for (i = 0; i < sizeof(map) / sizeof(map[0]); ++i) {
        if (!strcmp(opts->tl, map[i].tl)) {
            opts->component = map[i].component;
            opts->md        = map[i].md;
            return 0;
        }
    }
    fprintf(stderr, "%s: unknown transport '%s'\n", PROG, opts->tl);
    return -1;
}

static void send8(perf_uct_t *uct, uct_ep_h ep)
{
    uint64_t hdr = 0x0123456789abcdefull;
    ucs_status_t status;

    /* NO_RESOURCE is the transport not ready yet (tcp still connecting, a
     * full window): part of what is measured, so retry at once */
    while ((status = uct_ep_am_short(ep, AM_ID, hdr, &hdr, 0)) ==
           UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(uct->worker);
    }
    perf_check(status, PROG, "uct_ep_am_short");
}

/* Progresses until rx has want messages; exits if that takes WAIT_SEC (a
 * lost handshake would otherwise hang the run). The clock is read only
 * every 256 calls, so that the wait costs little more than the polls. */
static void wait_rx(perf_uct_t *uct, rx_t *rx, unsigned long want)
{
    double deadline = 0;
    unsigned spins  = 0;

    while (rx->count < want) {
        uct_worker_progress(uct->worker);
        if (++spins % 256 == 0) {
            if (deadline == 0) {
                deadline = perf_now_sec() + WAIT_SEC;
            } else if (perf_now_sec() > deadline) {
                fprintf(stderr, "%s: message %lu not received in %.0f s\n",
                        PROG, want, WAIT_SEC);
                exit(1);
            }
        }
    }
}

/* Waits (untimed) until what ep sent is acknowledged, so that closing the
 * pair leaves nothing in flight to the next round's fresh interfaces. */
static void flush_ep(perf_uct_t *uct, uct_ep_h ep)
{
    double deadline = perf_now_sec() + FLUSH_SEC;
    ucs_status_t status;

    while (((status = uct_ep_flush(ep, 0, NULL)) != UCS_OK) &&
           (perf_now_sec() < deadline)) {
        if ((status != UCS_INPROGRESS) && (status != UCS_ERR_NO_RESOURCE)) {
            break; /* nothing to wait for */
        }
        uct_worker_progress(uct->worker);
    }
}

/* Opens one interface, its handler counting into rx, progress on. */
static void open_side(const perf_opts_t *opts, perf_uct_t *uct,
                      perf_iface_t *ifc, rx_t *rx)
{
    perf_open_iface(PROG, opts, uct, ifc);
    perf_check(uct_iface_set_am_handler(ifc->iface, AM_ID, am_cb, rx, 0), PROG,
               "uct_iface_set_am_handler");
    uct_iface_progress_enable(ifc->iface,
                              UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

static uct_ep_h connect_to(perf_iface_t *from, perf_iface_t *to)
{
    uct_ep_params_t params;
    uct_ep_h ep;
    ucs_status_t status;

    perf_ep_params(&params, from->iface, to->dev_addr, to->iface_addr);
    status = uct_ep_create(&params, &ep);
    perf_check(status, PROG, "uct_ep_create");
    return ep;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile p of v[0..n), which it sorts. */
static double pctl(double *v, unsigned n, double p)
{
    long idx = (long)(p / 100.0 * n + 0.5) - 1;

    qsort(v, n, sizeof(*v), cmp_double);
    if (idx < 0) {
        idx = 0;
    }
    if (idx >= (long)n) {
        idx = n - 1;
    }
    return v[idx];
}

/* One-way latency (us) of an open stream: half the median round trip. */
static double open_stream(const perf_opts_t *opts, perf_uct_t *uct,
                          unsigned warmup, unsigned iters)
{
    perf_iface_t a, b;
    rx_t rx_a = { 0 }, rx_b = { 0 };
    double *rtt = calloc(iters, sizeof(*rtt)), t0, lat;
    uct_ep_h a2b, b2a;
    unsigned i;

    open_side(opts, uct, &a, &rx_a);
    open_side(opts, uct, &b, &rx_b);
    a2b = connect_to(&a, &b);
    b2a = connect_to(&b, &a);
    /* the warm-up opens both streams (the handshakes) and warms pools */
    for (i = 0; i < warmup + iters; ++i) {
        t0 = perf_now_sec();
        send8(uct, a2b);
        wait_rx(uct, &rx_b, rx_b.count + 1);
        send8(uct, b2a);
        wait_rx(uct, &rx_a, rx_a.count + 1);
        if (i >= warmup) {
            rtt[i - warmup] = perf_now_sec() - t0;
        }
    }
    lat = pctl(rtt, iters, 50) / 2 * 1e6;
    flush_ep(uct, a2b);
    flush_ep(uct, b2a);
    uct_ep_destroy(a2b);
    uct_ep_destroy(b2a);
    perf_close_iface(&a);
    perf_close_iface(&b);
    free(rtt);
    return lat;
}

/* Sends one message from from to to on a new endpoint and waits for it
 * (untimed); returns the endpoint. */
static uct_ep_h warm_send(perf_uct_t *uct, perf_iface_t *from, perf_iface_t *to,
                          rx_t *to_rx)
{
    uct_ep_h ep = connect_to(from, to);

    send8(uct, ep);
    wait_rx(uct, to_rx, to_rx->count + 1);
    return ep;
}

/* The first message on a never-used stream, rounds times, in seconds
 * (first[]; create[], if not NULL: the endpoint's creation). Each round
 * opens a fresh pair A and B. With warm, both have carried a message
 * before the timed one, to and from a third interface W that stays open:
 * the round then times the stream alone, not the interface's own first use
 * (ud_sr grows its receive-copy pool on the first delivery, ~9 MB). */
static void first_msgs(const perf_opts_t *opts, perf_uct_t *uct,
                       unsigned rounds, int warm, double *first, double *create)
{
    perf_iface_t a, b, w;
    rx_t rx_a, rx_b, rx_w = { 0 };
    uct_ep_h a2b, a2w = NULL, w2b = NULL;
    double t0, t1;
    unsigned r;

    if (warm) {
        open_side(opts, uct, &w, &rx_w);
    }
    for (r = 0; r < rounds; ++r) {
        rx_a.count = rx_b.count = 0;
        open_side(opts, uct, &a, &rx_a);
        open_side(opts, uct, &b, &rx_b);
        if (warm) {
            a2w = warm_send(uct, &a, &w, &rx_w);
            w2b = warm_send(uct, &w, &b, &rx_b);
        }
        t0  = perf_now_sec();
        a2b = connect_to(&a, &b);
        t1  = perf_now_sec();
        send8(uct, a2b);
        wait_rx(uct, &rx_b, rx_b.count + 1);
        first[r] = perf_now_sec() - t1;
        if (create != NULL) {
            create[r] = t1 - t0;
        }
        flush_ep(uct, a2b);
        uct_ep_destroy(a2b);
        if (warm) {
            flush_ep(uct, a2w);
            flush_ep(uct, w2b);
            uct_ep_destroy(a2w);
            uct_ep_destroy(w2b);
        }
        perf_close_iface(&b);
        perf_close_iface(&a);
    }
    if (warm) {
        perf_close_iface(&w);
    }
}

int main(int argc, char **argv)
{
    perf_opts_t opts = perf_default_opts("ud_sr", "aptus", "aptus");
    unsigned rounds = 200, iters = 10000, warmup = 1000;
    double *first, *create, *cold, open_us, p50, p90;
    perf_uct_t uct;
    int c;

    while ((c = getopt(argc, argv, "t:d:r:n:w:h")) != -1) {
        switch (c) {
        case 't':
            opts.tl = optarg;
            break;
        case 'd':
            opts.dev = optarg;
            break;
        case 'r':
            rounds = strtoul(optarg, NULL, 0);
            break;
        case 'n':
            iters = strtoul(optarg, NULL, 0);
            break;
        case 'w':
            warmup = strtoul(optarg, NULL, 0);
            break;
        default:
            usage(argv[0]);
            return (c == 'h') ? 0 : 1;
        }
    }
    if ((tl_md(&opts) != 0) || (rounds == 0) || (iters == 0)) {
        usage(argv[0]);
        return 1;
    }

    perf_open_md(PROG, &opts, &uct);
    first  = calloc(rounds, sizeof(*first));
    create = calloc(rounds, sizeof(*create));
    cold   = calloc(rounds, sizeof(*cold));
    /* the open stream first: it also takes the process' one-time costs
     * (first use of the md, lazy symbol binding) off the first round */
    open_us = open_stream(&opts, &uct, warmup, iters);
    first_msgs(&opts, &uct, rounds, 1, first, create);
    first_msgs(&opts, &uct, rounds, 0, cold, NULL);

    p50 = pctl(first, rounds, 50) * 1e6;
    p90 = pctl(first, rounds, 90) * 1e6;
    printf("tl=%s dev=%s rounds=%u first_p50_us=%.2f first_p90_us=%.2f "
           "open_p50_us=%.2f ratio=%.1f cold_p50_us=%.2f cold_p90_us=%.2f "
           "create_p50_us=%.2f iters=%u\n",
           opts.tl, opts.dev, rounds, p50, p90, open_us, p50 / open_us,
           pctl(cold, rounds, 50) * 1e6, pctl(cold, rounds, 90) * 1e6,
           pctl(create, rounds, 50) * 1e6, iters);

    free(cold);
    free(first);
    free(create);
    perf_close_md(&uct);
    return 0;
}
