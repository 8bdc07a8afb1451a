/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus benchmark: MPI ping-pong latency percentiles.
 *
 * Ranks 0 and 1 exchange SIZE-byte messages ITERS times after WARMUP
 * untimed rounds; rank 0 times every round trip and prints one line:
 *
 *   pp_pctl size=8 iters=20000 p50_us=.. p99_us=.. p999_us=.. max_us=..
 *           mean_us=..
 *
 * (one-way latency: half the round trip). The loss tail shows in p99,
 * p99.9 and max, which an average hides.
 *
 *   pp_pctl [-s SIZE] [-i ITERS] [-w WARMUP]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* nearest-rank percentile of sorted v[0..n) */
static double pctl(const double *v, int n, double p)
{
    int idx = (int)(p / 100.0 * n + 0.5) - 1;

    if (idx < 0) {
        idx = 0;
    }
    if (idx >= n) {
        idx = n - 1;
    }
    return v[idx];
}

int main(int argc, char **argv)
{
    int size = 8, iters = 20000, warmup = 1000, rank, nranks, opt, i, peer;
    double *lat, t0, sum                = 0;
    char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "s:i:w:")) != -1) {
        switch (opt) {
        case 's':
            size = atoi(optarg);
            break;
        case 'i':
            iters = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: pp_pctl [-s SIZE] [-i ITERS] "
                                "[-w WARMUP]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((nranks < 2) || (size < 0) || (iters < 1) || (warmup < 0)) {
        if (rank == 0) {
            fprintf(stderr, "pp_pctl: needs 2 ranks, SIZE >= 0, ITERS >= 1\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    buf = malloc(size > 0 ? size : 1);
    lat = malloc(sizeof(*lat) * iters);
    if ((buf == NULL) || (lat == NULL)) {
        fprintf(stderr, "pp_pctl: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, rank, size > 0 ? size : 1);
    peer = 1 - rank;

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank <= 1) {
        for (i = -warmup; i < iters; ++i) {
            if (rank == 0) {
                t0 = MPI_Wtime();
                MPI_Send(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                if (i >= 0) {
                    lat[i] = (MPI_Wtime() - t0) * 1e6 / 2;
                }
            } else {
                MPI_Recv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                MPI_Send(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        for (i = 0; i < iters; ++i) {
            sum += lat[i];
        }
        qsort(lat, iters, sizeof(*lat), cmp_double);
        printf("pp_pctl size=%d iters=%d p50_us=%.2f p99_us=%.2f "
               "p999_us=%.2f max_us=%.2f mean_us=%.2f\n",
               size, iters, pctl(lat, iters, 50), pctl(lat, iters, 99),
               pctl(lat, iters, 99.9), lat[iters - 1], sum / iters);
    }
    free(lat);
    free(buf);
    MPI_Finalize();
    return 0;
}
