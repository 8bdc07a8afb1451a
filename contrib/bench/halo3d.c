/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus benchmark: a 3-D nearest-neighbour halo exchange.
 *
 * The ranks form a periodic 3-D grid (MPI_Dims_create); every iteration
 * each rank exchanges one face of N x N doubles with each of its six
 * neighbours (Irecv/Isend/Waitall) -- large messages to a few peers, the
 * pattern of stencil codes. The faces carry a pattern that is checked
 * on the last iteration.
 *
 * Usage: halo3d [-n N] [-i ITERS] [-w WARMUP]
 * Rank 0 prints "halo3d: ranks=R face_bytes=B iters=I time_per_iter_us=T
 * max_rss_kb=M" (M: the largest peak resident size over the ranks) and
 * exits non-zero if a face was wrong.
 */
#include <mpi.h>

#include "bench_rss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int n = 128, iters = 200, warmup = 20, opt, rank, nranks, i, d, it;
    int dims[3] = { 0, 0, 0 }, periods[3] = { 1, 1, 1 }, nb[6];
    double *sbuf[6], *rbuf[6], t0 = 0, t;
    long errors = 0, total_errors, rss, max_rss;
    MPI_Request req[12];
    MPI_Comm cart;
    size_t count;

    MPI_Init(&argc, &argv);
    while ((opt = getopt(argc, argv, "n:i:w:")) != -1) {
        switch (opt) {
        case 'n':
            n = atoi(optarg);
            break;
        case 'i':
            iters = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: halo3d [-n N] [-i ITERS] [-w WARMUP]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Dims_create(nranks, 3, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
    MPI_Comm_rank(cart, &rank);
    for (d = 0; d < 3; ++d) {
        MPI_Cart_shift(cart, d, 1, &nb[2 * d], &nb[2 * d + 1]);
    }
    count = (size_t)n * n;
    for (i = 0; i < 6; ++i) {
        sbuf[i] = malloc(count * sizeof(double));
        rbuf[i] = malloc(count * sizeof(double));
        for (size_t k = 0; k < count; ++k) {
            sbuf[i][k] = rank * 1e6 + i * 1e5 + (double)k;
        }
    }

    for (it = 0; it < warmup + iters; ++it) {
        if (it == warmup) {
            MPI_Barrier(cart);
            t0 = MPI_Wtime();
        }
        for (i = 0; i < 6; ++i) {
            /* face i comes from the neighbour on the opposite side, which
             * sent its face i^1 */
            MPI_Irecv(rbuf[i], (int)count, MPI_DOUBLE, nb[i], i ^ 1, cart,
                      &req[i]);
        }
        for (i = 0; i < 6; ++i) {
            MPI_Isend(sbuf[i], (int)count, MPI_DOUBLE, nb[i], i, cart,
                      &req[6 + i]);
        }
        MPI_Waitall(12, req, MPI_STATUSES_IGNORE);
    }
    t = MPI_Wtime() - t0;

    for (i = 0; i < 6; ++i) {
        for (size_t k = 0; k < count; ++k) {
            if (rbuf[i][k] != nb[i] * 1e6 + (i ^ 1) * 1e5 + (double)k) {
                ++errors;
                break;
            }
        }
    }
    rss = bench_max_rss_kb();
    MPI_Reduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, 0, cart);
    MPI_Reduce(&rss, &max_rss, 1, MPI_LONG, MPI_MAX, 0, cart);
    if (rank == 0) {
        printf("halo3d: ranks=%d grid=%dx%dx%d face_bytes=%zu iters=%d "
               "time_per_iter_us=%.1f max_rss_kb=%ld %s\n",
               nranks, dims[0], dims[1], dims[2], count * sizeof(double), iters,
               t / iters * 1e6, max_rss, total_errors ? "FAIL" : "OK");
    }
    for (i = 0; i < 6; ++i) {
        free(sbuf[i]);
        free(rbuf[i]);
    }
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return (rank == 0) && total_errors;
}
