/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus benchmark: all-to-all of small messages.
 *
 * MPI_Alltoall with B bytes per peer (default 64): every rank talks to
 * every other, with small messages -- the pattern where per-peer
 * connections cost most and earn least. Checked on the last iteration.
 *
 * Usage: a2a_small [-b BYTES] [-i ITERS] [-w WARMUP]
 * Rank 0 prints "a2a_small: ranks=R bytes_per_peer=B iters=I
 * time_per_iter_us=T max_rss_kb=M OK|FAIL".
 */
#include <mpi.h>

#include "bench_rss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int bytes = 64, iters = 2000, warmup = 100, opt, rank, nranks, it, p;
    unsigned char *sbuf, *rbuf;
    long errors = 0, total_errors, rss, max_rss;
    double t0   = 0, t;

    MPI_Init(&argc, &argv);
    while ((opt = getopt(argc, argv, "b:i:w:")) != -1) {
        switch (opt) {
        case 'b':
            bytes = atoi(optarg);
            break;
        case 'i':
            iters = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: a2a_small [-b BYTES] [-i ITERS] "
                            "[-w WARMUP]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    sbuf = malloc((size_t)bytes * nranks);
    rbuf = malloc((size_t)bytes * nranks);
    for (p = 0; p < nranks; ++p) {
        memset(sbuf + (size_t)p * bytes, (rank * 31 + p) & 0xff, bytes);
    }
    for (it = 0; it < warmup + iters; ++it) {
        if (it == warmup) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        MPI_Alltoall(sbuf, bytes, MPI_BYTE, rbuf, bytes, MPI_BYTE,
                     MPI_COMM_WORLD);
    }
    t = MPI_Wtime() - t0;
    for (p = 0; p < nranks; ++p) {
        if (rbuf[(size_t)p * bytes] != ((p * 31 + rank) & 0xff)) {
            ++errors;
        }
    }
    rss = bench_max_rss_kb();
    MPI_Reduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&rss, &max_rss, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("a2a_small: ranks=%d bytes_per_peer=%d iters=%d "
               "time_per_iter_us=%.1f max_rss_kb=%ld %s\n",
               nranks, bytes, iters, t / iters * 1e6, max_rss,
               total_errors ? "FAIL" : "OK");
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return (rank == 0) && total_errors;
}
