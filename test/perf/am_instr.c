/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the instruction cost of an 8-byte active message.
 *
 * Two interfaces of one transport in one process and one worker, A and B,
 * connected both ways (connect-to-iface), bounce an 8-byte am_short: A
 * sends, the worker is progressed until B's handler ran, B sends back, and
 * so on, ITERS times after a warm-up. The loop is the function
 * am_instr_loop(), so that a counting tool can count it alone:
 *
 *   valgrind --tool=callgrind --toggle-collect=am_instr_loop \
 *            ./am_instr -t ud_sr -n 20000
 *
 * and instructions per message (send + receive, user space, the thread that
 * runs the loop) are the loop's count / (2 * ITERS). One process leaves no
 * scheduling gap between a send and its receive: the datagram or segment
 * is in the receiving socket when the first poll looks. Kernel instructions
 * (the system calls themselves) are not counted by callgrind.
 *
 * Output: "tl=ud_sr dev=lo iters=N msgs=2N"
 *
 * Build (public UCX headers only):
 *   gcc -O2 -o am_instr am_instr.c $(pkg-config --cflags --libs ucx)
 * Run (the module's transports, ud_sr, rc_sr, rc_fp and aptus, need it in
 * the process):
 *   LD_PRELOAD=.../libuct_aptus.so ./am_instr -t ud_sr -n 20000
 *   ./am_instr -t tcp -n 20000
 */
#define _GNU_SOURCE
#include "perf_probe.h"

#define PROG   "am_instr"
#define AM_ID  1
#define WARMUP 1000

static volatile unsigned long am_instr_received[2];

static ucs_status_t am_instr_handler(void *arg, void *data, size_t length,
                                     unsigned flags)
{
    ++am_instr_received[(uintptr_t)arg];
    return UCS_OK;
}

static void am_instr_send(perf_uct_t *uct, uct_ep_h ep)
{
    uint64_t payload = 0x0123456789abcdefull;
    ucs_status_t status;

    while ((status = uct_ep_am_short(ep, AM_ID, 0, &payload,
                                     sizeof(payload))) == UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(uct->worker);
    }
    perf_check(status, PROG, "uct_ep_am_short");
}

static void am_instr_wait(perf_uct_t *uct, int side, unsigned long want)
{
    while (am_instr_received[side] < want) {
        uct_worker_progress(uct->worker);
    }
}

static void am_instr_run(perf_uct_t *uct, uct_ep_h a2b, uct_ep_h b2a,
                         unsigned iters)
{
    unsigned long base_a = am_instr_received[0];
    unsigned long base_b = am_instr_received[1];
    unsigned i;

    for (i = 1; i <= iters; ++i) {
        am_instr_send(uct, a2b);
        am_instr_wait(uct, 1, base_b + i);
        am_instr_send(uct, b2a);
        am_instr_wait(uct, 0, base_a + i);
    }
}

/* The measured loop: what a counting tool is pointed at (the warm-up runs
 * am_instr_run outside it). */
__attribute__((noinline)) void am_instr_loop(perf_uct_t *uct, uct_ep_h a2b,
                                             uct_ep_h b2a, unsigned iters)
{
    am_instr_run(uct, a2b, b2a, iters);
}

static int am_instr_opt(int c, const char *value, void *arg)
{
    return 0;
}

static void usage(const char *prog)
{
    printf("usage: %s [-t ud_sr|rc_sr|rc_fp|aptus|tcp] [-d DEV] [-n ITERS]\n",
           prog);
}

static uct_ep_h am_instr_connect(perf_uct_t *uct, perf_iface_t *from,
                                 perf_iface_t *to)
{
    uct_ep_params_t params;
    uct_ep_h ep;

    perf_ep_params(&params, from->iface, to->dev_addr, to->iface_addr);
    perf_check(uct_ep_create(&params, &ep), PROG, "uct_ep_create");
    return ep;
}

int main(int argc, char **argv)
{
    perf_opts_t opts = perf_default_opts("ud_sr", "aptus", "aptus");
    perf_iface_t a, b;
    perf_uct_t uct;
    uct_ep_h a2b, b2a;
    int ret;

    opts.num_eps = 20000; /* here: iterations */
    ret = perf_parse_opts(argc, argv, "t:d:n:h", PROG, "*", &opts, am_instr_opt,
                          NULL, usage);
    if (ret >= 0) {
        return ret;
    }

    perf_open_md(PROG, &opts, &uct);
    perf_open_iface(PROG, &opts, &uct, &a);
    perf_open_iface(PROG, &opts, &uct, &b);
    perf_check(uct_iface_set_am_handler(a.iface, AM_ID, am_instr_handler,
                                        (void *)(uintptr_t)0, 0),
               PROG, "uct_iface_set_am_handler");
    perf_check(uct_iface_set_am_handler(b.iface, AM_ID, am_instr_handler,
                                        (void *)(uintptr_t)1, 0),
               PROG, "uct_iface_set_am_handler");
    uct_iface_progress_enable(a.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    uct_iface_progress_enable(b.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    a2b = am_instr_connect(&uct, &a, &b);
    b2a = am_instr_connect(&uct, &b, &a);

    am_instr_run(&uct, a2b, b2a, WARMUP); /* connections, pools, caches */
    am_instr_loop(&uct, a2b, b2a, opts.num_eps);
    printf("tl=%s dev=%s iters=%u msgs=%u\n", opts.tl, opts.dev, opts.num_eps,
           2 * opts.num_eps);

    uct_ep_destroy(a2b);
    uct_ep_destroy(b2a);
    perf_close_iface(&a);
    perf_close_iface(&b);
    perf_close_md(&uct);
    return 0;
}
