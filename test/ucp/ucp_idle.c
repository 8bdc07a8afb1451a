/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: a UCP worker that sits idle, calling progress once a
 * millisecond for the given seconds, as an application between phases.
 * test_ucp.sh counts the system calls its threads make meanwhile: an idle
 * transport must let the async thread sleep between its timer's periods.
 *
 *   ucp_idle SECONDS
 */
#include <ucp/api/ucp.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    ucp_params_t params         = { 0 };
    ucp_worker_params_t wparams = { 0 };
    double seconds              = (argc > 1) ? atof(argv[1]) : 1.0;
    struct timespec start, now;
    ucp_context_h context;
    ucp_worker_h worker;

    params.field_mask   = UCP_PARAM_FIELD_FEATURES;
    params.features     = UCP_FEATURE_TAG;
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_init(&params, NULL, &context) != UCS_OK) {
        fprintf(stderr, "ucp_idle: ucp_init failed\n");
        return 1;
    }
    if (ucp_worker_create(context, &wparams, &worker) != UCS_OK) {
        fprintf(stderr, "ucp_idle: ucp_worker_create failed\n");
        ucp_cleanup(context);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        ucp_worker_progress(worker);
        usleep(1000);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) +
                 (now.tv_nsec - start.tv_nsec) * 1e-9 <
             seconds);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    printf("ucp_idle: PASS (%.1f s)\n", seconds);
    return 0;
}
