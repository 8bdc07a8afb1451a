/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus UCP test: a peer that dies is reported through UCP's error
 * handling (UCP_ERR_HANDLING_MODE_PEER) over ud_sr, and nothing hangs.
 *
 * The process forks; parent and child exchange UCP worker addresses over a
 * pipe, connect with peer error handling, exchange tagged messages (every
 * byte checked), then the child dies without closing anything (_exit).
 *
 *   mode "send": the parent keeps sending to the dead child; the
 *                transport's retransmissions go unanswered.
 *   mode "idle": the parent only progresses; UCP's keepalive (which ud_sr
 *                carries as active messages) finds the peer gone.
 *
 * Either way the parent's endpoint error callback must fire (within the
 * time limit given) with an error status, and outstanding requests must
 * complete with an error. Run with UCX_TLS=ud_sr and the module preloaded;
 * the test script sets UCX_UD_SR_TIMEOUT and UCX_KEEPALIVE_INTERVAL short.
 *
 * Usage: ucp_peer_failure send|idle [LIMIT_SECONDS]
 * Prints "ucp_peer_failure MODE: PASS (...)" or "...: FAIL (...)".
 */
#include <ucp/api/ucp.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG_SIZE 3000 /* two datagrams each */
#define NUM_MSGS 50

static volatile int err_seen;
static ucs_status_t err_status;

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fail(const char *mode, const char *why)
{
    printf("ucp_peer_failure %s: FAIL (%s)\n", mode, why);
    fflush(stdout);
    exit(1);
}

static void err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    err_status = status;
    err_seen   = 1;
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    *(ucs_status_t *)user_data = status;
}

static void recv_cb(void *request, ucs_status_t status,
                    const ucp_tag_recv_info_t *info, void *user_data)
{
    *(ucs_status_t *)user_data = status;
}

static void init_ucp(ucp_context_h *ctx, ucp_worker_h *worker)
{
    ucp_params_t params;
    ucp_worker_params_t wparams;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    if (ucp_init(&params, NULL, ctx) != UCS_OK) {
        fail("init", "ucp_init");
    }
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_worker_create(*ctx, &wparams, worker) != UCS_OK) {
        fail("init", "ucp_worker_create");
    }
}

static ucp_ep_h connect_to(ucp_worker_h worker, const void *addr)
{
    ucp_ep_params_t params;
    ucp_ep_h ep;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address         = addr;
    params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb  = err_cb;
    params.err_handler.arg = NULL;
    if (ucp_ep_create(worker, &params, &ep) != UCS_OK) {
        fail("init", "ucp_ep_create");
    }
    return ep;
}

/* Wait for a request; returns its status (UCS_OK or an error). */
static ucs_status_t wait_req(ucp_worker_h worker, void *req,
                             volatile ucs_status_t *status, double limit)
{
    double deadline = now_sec() + limit;

    if (req == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while (*status == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
        if (now_sec() > deadline) {
            return UCS_ERR_TIMED_OUT;
        }
    }
    ucp_request_free(req);
    return *status;
}

static void fill(uint8_t *buf, int who, int i)
{
    int k;

    for (k = 0; k < MSG_SIZE; ++k) {
        buf[k] = (uint8_t)(who * 101 + i * 7 + k * 13);
    }
}

/* Send NUM_MSGS to the peer and receive as many, checking every byte. */
static void exchange(const char *mode, ucp_worker_h worker, ucp_ep_h ep,
                     int who)
{
    uint8_t sbuf[MSG_SIZE], rbuf[MSG_SIZE], expect[MSG_SIZE];
    ucp_request_param_t param;
    volatile ucs_status_t sst, rst;
    void *sreq, *rreq;
    int i;

    for (i = 0; i < NUM_MSGS; ++i) {
        memset(&param, 0, sizeof(param));
        param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.recv   = recv_cb;
        param.user_data = (void *)&rst;
        rst             = UCS_INPROGRESS;
        rreq =
            ucp_tag_recv_nbx(worker, rbuf, MSG_SIZE, i, (ucp_tag_t)-1, &param);

        fill(sbuf, who, i);
        param.cb.send   = send_cb;
        param.user_data = (void *)&sst;
        sst             = UCS_INPROGRESS;
        sreq            = ucp_tag_send_nbx(ep, sbuf, MSG_SIZE, i, &param);

        if ((wait_req(worker, sreq, &sst, 30) != UCS_OK) ||
            (wait_req(worker, rreq, &rst, 30) != UCS_OK)) {
            fail(mode, "exchange before the failure did not complete");
        }
        fill(expect, !who, i);
        if (memcmp(rbuf, expect, MSG_SIZE) != 0) {
            fail(mode, "received data differs");
        }
    }
}

int main(int argc, char **argv)
{
    const char *mode = (argc > 1) ? argv[1] : "send";
    double limit     = (argc > 2) ? atof(argv[2]) : 30.0;
    int to_child[2], to_parent[2], status;
    size_t len, peer_len;
    ucp_address_t *addr;
    ucp_context_h ctx;
    ucp_worker_h worker;
    char peer_addr[4096];
    ucp_ep_h ep;
    pid_t child;
    double start, took;

    if (strcmp(mode, "send") && strcmp(mode, "idle")) {
        fprintf(stderr, "usage: %s send|idle [LIMIT_SECONDS]\n", argv[0]);
        return 2;
    }
    if ((pipe(to_child) != 0) || (pipe(to_parent) != 0)) {
        fail(mode, "pipe");
    }

    child = fork();
    if (child < 0) {
        fail(mode, "fork");
    }

    /* each process its own UCP, after the fork */
    init_ucp(&ctx, &worker);
    if (ucp_worker_get_address(worker, &addr, &len) != UCS_OK) {
        fail(mode, "ucp_worker_get_address");
    }
    if ((write(child ? to_child[1] : to_parent[1], &len, sizeof(len)) !=
         sizeof(len)) ||
        (write(child ? to_child[1] : to_parent[1], addr, len) !=
         (ssize_t)len) ||
        (read(child ? to_parent[0] : to_child[0], &peer_len,
              sizeof(peer_len)) != sizeof(peer_len)) ||
        (peer_len > sizeof(peer_addr)) ||
        (read(child ? to_parent[0] : to_child[0], peer_addr, peer_len) !=
         (ssize_t)peer_len)) {
        fail(mode, "address exchange");
    }
    ucp_worker_release_address(worker, addr);
    ep = connect_to(worker, peer_addr);

    exchange(mode, worker, ep, child == 0);

    if (child == 0) {
        /* die abruptly: no flush, no close, nothing sent */
        _exit(0);
    }
    waitpid(child, &status, 0);

    start = now_sec();
    if (!strcmp(mode, "send")) {
        uint8_t buf[MSG_SIZE];
        ucp_request_param_t param;
        volatile ucs_status_t sst = UCS_INPROGRESS;
        ucs_status_t st;
        void *req;

        memset(&param, 0, sizeof(param));
        param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.send   = send_cb;
        param.user_data = (void *)&sst;
        fill(buf, 1, 999);
        req = ucp_tag_send_nbx(ep, buf, MSG_SIZE, 999, &param);
        /* accepted locally (eager copy) or failed with the endpoint: either
         * way it must not hang */
        st = wait_req(worker, req, &sst, limit);
        if (st == UCS_ERR_TIMED_OUT) {
            fail(mode, "a send to the dead peer never completed");
        }
    }
    while (!err_seen && (now_sec() - start < limit)) {
        ucp_worker_progress(worker);
    }
    took = now_sec() - start;
    if (!err_seen) {
        fail(mode, "the peer's death was not reported in time");
    }
    if (err_status == UCS_OK) {
        fail(mode, "error callback with UCS_OK");
    }

    printf("ucp_peer_failure %s: PASS (error callback after %.2f s: %s)\n",
           mode, took, ucs_status_string(err_status));
    fflush(stdout);
    /* the failed endpoint is closed in force mode; nothing may hang */
    {
        ucp_request_param_t param;
        void *req;

        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
        req                = ucp_ep_close_nbx(ep, &param);
        start              = now_sec();
        while ((req != NULL) && !UCS_PTR_IS_ERR(req) &&
               (ucp_request_check_status(req) == UCS_INPROGRESS)) {
            ucp_worker_progress(worker);
            if (now_sec() - start > limit) {
                fail(mode, "closing the failed endpoint hangs");
            }
        }
        if ((req != NULL) && !UCS_PTR_IS_ERR(req)) {
            ucp_request_free(req);
        }
    }
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    return 0;
}
