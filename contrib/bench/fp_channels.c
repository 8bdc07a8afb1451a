/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: 8-byte latency over rc_fp against the number of fast-path
 * channels a receiver polls (the Veloblock paper's observation that the
 * cost of polling grows with the channels).
 *
 * Two processes: the server opens one rc_fp interface; the client opens N
 * interfaces, each a peer of the server with an endpoint both ways. Every
 * pair first exchanges enough messages to earn a fast-path channel each
 * way, so the server polls N receive channels. Then the client ping-pongs
 * 8-byte active messages (am_short) with the server over its first
 * interface, and reports half the round trip. Each of the server's progress
 * calls polls all N channels; the client's first interface polls one.
 *
 * Output: one line
 *   channels=N server_rx_channels=K iters=I lat_us=<median> lat_avg_us=...
 * (K: the receive channels the server holds while measuring, from the
 * transport's statistics through UCX_APTUS_STATS as the script reads them;
 * here the channels the client was granted).
 *
 * Build: gcc -O2 -o fp_channels fp_channels.c $(pkg-config --cflags --libs ucx)
 * Run:   UCX_RC_FP_MAX_CHANNELS=64 LD_PRELOAD=.../libuct_aptus.so \
 *            ./fp_channels -n 16 [-i iters] [-d lo]
 */
#define _GNU_SOURCE
#include "../../test/perf/perf_probe.h"

#include <signal.h>
#include <sys/wait.h>

#define PROG      "fp_channels"
#define AM_ID     7
#define WARM_MSGS 64 /* per pair: past UCX_RC_FP_THRESH, both ways */
#define MAX_PEERS 256

typedef struct {
    uint32_t from; /* the client interface a message came from */
    uint32_t seq;
} msg_t;

typedef struct {
    volatile unsigned count;
    msg_t last;
} rx_state_t;

static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned flags)
{
    rx_state_t *rx = arg;

    memcpy(&rx->last, data, sizeof(rx->last));
    rx->count++;
    return UCS_OK;
}

/* addresses through a pipe: length-prefixed blobs */
static void put_blob(int fd, const void *p, uint32_t len)
{
    if ((write(fd, &len, sizeof(len)) != sizeof(len)) ||
        (write(fd, p, len) != (ssize_t)len)) {
        perror(PROG ": write");
        exit(1);
    }
}

static void *get_blob(int fd)
{
    uint32_t len;
    uint8_t *p;
    size_t got = 0;
    ssize_t n;

    if (read(fd, &len, sizeof(len)) != sizeof(len)) {
        fprintf(stderr, PROG ": peer went away\n");
        exit(1);
    }
    p = calloc(1, len + 8);
    while (got < len) {
        n = read(fd, p + got, len - got);
        if (n <= 0) {
            fprintf(stderr, PROG ": peer went away\n");
            exit(1);
        }
        got += n;
    }
    return p;
}

static void send_msg(uct_worker_h worker, uct_ep_h ep, uint32_t from,
                     uint32_t seq)
{
    msg_t m = { from, seq };
    uint64_t hdr;

    memcpy(&hdr, &m, sizeof(hdr));
    while (uct_ep_am_short(ep, AM_ID, hdr, NULL, 0) == UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(worker);
    }
}

static void wait_count(uct_worker_h worker, rx_state_t *rx, unsigned count)
{
    while (rx->count < count) {
        uct_worker_progress(worker);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(const char *prog)
{
    printf("usage: %s [-n CHANNELS] [-i ITERS] [-d DEV]\n", prog);
}

int main(int argc, char **argv)
{
    perf_opts_t opts = perf_default_opts("rc_fp", "aptus", "aptus_rc");
    unsigned n = 1, iters = 20000, warmup = 2000, i, k;
    int to_server[2], to_client[2], c, status;
    perf_uct_t uct;
    rx_state_t rx = { 0 };
    pid_t pid;

    while ((c = getopt(argc, argv, "n:i:d:h")) != -1) {
        switch (c) {
        case 'n':
            n = strtoul(optarg, NULL, 0);
            break;
        case 'i':
            iters = strtoul(optarg, NULL, 0);
            break;
        case 'd':
            opts.dev = optarg;
            break;
        default:
            usage(argv[0]);
            return c != 'h';
        }
    }
    if ((n == 0) || (n > MAX_PEERS) || (iters == 0)) {
        fprintf(stderr, PROG ": -n must be 1..%d, -i positive\n", MAX_PEERS);
        return 1;
    }
    if ((pipe(to_server) != 0) || (pipe(to_client) != 0)) {
        perror(PROG ": pipe");
        return 1;
    }
    pid = fork();
    if (pid < 0) {
        perror(PROG ": fork");
        return 1;
    }
    perf_open_md(PROG, &opts, &uct);

    if (pid > 0) {
        /* the server: one interface, an endpoint to every client one */
        perf_iface_t srv;
        uct_ep_h eps[MAX_PEERS];
        uct_ep_params_t params;

        perf_open_iface(PROG, &opts, &uct, &srv);
        uct_iface_progress_enable(srv.iface,
                                  UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
        perf_check(uct_iface_set_am_handler(srv.iface, AM_ID, am_cb, &rx, 0),
                   PROG, "uct_iface_set_am_handler");
        put_blob(to_client[1], srv.dev_addr, srv.attr.device_addr_len);
        put_blob(to_client[1], srv.iface_addr, srv.attr.iface_addr_len);
        for (i = 0; i < n; ++i) {
            void *dev = get_blob(to_server[0]), *ifa = get_blob(to_server[0]);
            perf_ep_params(&params, srv.iface, dev, ifa);
            perf_check(uct_ep_create(&params, &eps[i]), PROG, "uct_ep_create");
            free(dev);
            free(ifa);
        }
        /* answer every message on the endpoint of the interface it came
         * from, until the client says it is done (seq UINT32_MAX) */
        for (k = 1;; ++k) {
            wait_count(uct.worker, &rx, k);
            if (rx.last.seq == UINT32_MAX) {
                break;
            }
            send_msg(uct.worker, eps[rx.last.from], 0, rx.last.seq);
        }
        for (i = 0; i < n; ++i) {
            uct_ep_destroy(eps[i]);
        }
        perf_close_iface(&srv);
        perf_close_md(&uct);
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }

    /* the client: n interfaces, each a peer of the server */
    {
        perf_iface_t *cli = calloc(n, sizeof(*cli));
        uct_ep_h *eps     = calloc(n, sizeof(*eps));
        rx_state_t *rxs   = calloc(n, sizeof(*rxs));
        perf_uct_t *w     = calloc(n, sizeof(*w));
        uct_ep_params_t params;
        void *sdev, *sifa;
        double *lat = calloc(iters, sizeof(*lat)), t0, sum = 0;

        sdev = get_blob(to_client[0]);
        sifa = get_blob(to_client[0]);
        for (i = 0; i < n; ++i) {
            /* a worker each: only the first is progressed while measuring */
            w[i] = uct;
            if (i > 0) {
                perf_check(uct_worker_create(uct.async, UCS_THREAD_MODE_SINGLE,
                                             &w[i].worker),
                           PROG, "uct_worker_create");
            }
            perf_open_iface(PROG, &opts, &w[i], &cli[i]);
            uct_iface_progress_enable(cli[i].iface,
                                      UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
            perf_check(uct_iface_set_am_handler(cli[i].iface, AM_ID, am_cb,
                                                &rxs[i], 0),
                       PROG, "uct_iface_set_am_handler");
            put_blob(to_server[1], cli[i].dev_addr,
                     cli[i].attr.device_addr_len);
            put_blob(to_server[1], cli[i].iface_addr,
                     cli[i].attr.iface_addr_len);
            perf_ep_params(&params, cli[i].iface, sdev, sifa);
            perf_check(uct_ep_create(&params, &eps[i]), PROG, "uct_ep_create");
        }
        /* every pair earns its channels: ping-pongs both ways */
        for (i = 0; i < n; ++i) {
            for (k = 0; k < WARM_MSGS; ++k) {
                send_msg(w[i].worker, eps[i], i, k);
                wait_count(w[i].worker, &rxs[i], k + 1);
            }
        }
        for (k = 0; k < warmup + iters; ++k) {
            t0 = perf_now_sec();
            send_msg(w[0].worker, eps[0], 0, k);
            wait_count(w[0].worker, &rxs[0], WARM_MSGS + k + 1);
            if (k >= warmup) {
                lat[k - warmup] = (perf_now_sec() - t0) * 1e6 / 2;
                sum += lat[k - warmup];
            }
        }
        send_msg(w[0].worker, eps[0], 0, UINT32_MAX);
        qsort(lat, iters, sizeof(*lat), cmp_double);
        printf("channels=%u iters=%u lat_us=%.3f lat_avg_us=%.3f\n", n, iters,
               lat[iters / 2], sum / iters);
        fflush(stdout);
        /* flush: the last message must leave before the interfaces go */
        while (uct_ep_flush(eps[0], 0, NULL) != UCS_OK) {
            uct_worker_progress(w[0].worker);
        }
        for (i = n; i-- > 0;) {
            uct_ep_destroy(eps[i]);
            perf_close_iface(&cli[i]);
            if (i > 0) {
                uct_worker_destroy(w[i].worker);
            }
        }
        perf_close_md(&uct);
        return 0;
    }
}
