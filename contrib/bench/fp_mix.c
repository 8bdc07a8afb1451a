/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: a mixed-size, data-verifying MPI exchange for the fast-path
 * benchmark: every rank trades windows of messages with its ring
 * neighbours (distance 1..P each way), sizes drawn from a fixed mix
 * (half up to 128 B, 30% up to 2 KB, 15% up to 8000 B, 5% up to 32 KB,
 * which no fast path takes). Every message is checked.
 *
 *   fp_mix [-i ITERS] [-p PEERS_EACH_WAY] [-w WINDOW]
 *
 * Rank 0 prints "fp_mix np=N iters=I msgs=M time_per_iter_us=T errors=E OK"
 * (or FAILED); exit status 1 on any error.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZE 32768

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* the size of message j from src to dst in iteration it */
static int msg_size(int src, int dst, int it, int j)
{
    uint32_t r    = mix((uint32_t)src * 7919u ^ (uint32_t)dst * 104729u ^
                        (uint32_t)it * 31u ^ (uint32_t)j * 2654435761u);
    uint32_t pick = r % 100, v = r >> 8;

    if (pick < 50) {
        return 1 + v % 128;
    } else if (pick < 80) {
        return 129 + v % (2048 - 128);
    } else if (pick < 95) {
        return 2049 + v % (8000 - 2048);
    }
    return 8001 + v % (MAX_SIZE - 8000);
}

static uint8_t msg_byte(int src, int it, int j, int k)
{
    return (uint8_t)(src * 13 + it * 7 + j * 3 + k);
}

int main(int argc, char **argv)
{
    int iters = 2000, peers = 2, window = 8, rank, np, c, it, p, j, k, n;
    long errors = 0, total_errors, msgs = 0;
    double t0, t1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((c = getopt(argc, argv, "i:p:w:")) != -1) {
        switch (c) {
        case 'i':
            iters = atoi(optarg);
            break;
        case 'p':
            peers = atoi(optarg);
            break;
        case 'w':
            window = atoi(optarg);
            break;
        default:
            if (rank == 0) {
                fprintf(stderr,
                        "usage: fp_mix [-i ITERS] [-p PEERS] [-w WINDOW]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (2 * peers >= np) {
        peers = (np - 1) / 2; /* distinct neighbours only */
    }
    if (peers < 1) {
        peers = 1;
    }
    n             = 2 * peers * window; /* messages each way per iteration */
    uint8_t *sbuf = malloc((size_t)n * MAX_SIZE);
    uint8_t *rbuf = malloc((size_t)n * MAX_SIZE);
    MPI_Request *reqs = malloc(2 * n * sizeof(*reqs));

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (it = 0; it < iters; ++it) {
        int r = 0, idx = 0;
        for (p = 1; p <= peers; ++p) {
            int from[2] = { (rank - p + np) % np, (rank + p) % np };
            for (int d = 0; d < 2; ++d) {
                for (j = 0; j < window; ++j, ++idx) {
                    MPI_Irecv(rbuf + (size_t)idx * MAX_SIZE, MAX_SIZE, MPI_BYTE,
                              from[d], j, MPI_COMM_WORLD, &reqs[r++]);
                }
            }
        }
        idx = 0;
        for (p = 1; p <= peers; ++p) {
            int to[2] = { (rank + p) % np, (rank - p + np) % np };
            for (int d = 0; d < 2; ++d) {
                for (j = 0; j < window; ++j, ++idx) {
                    int size   = msg_size(rank, to[d], it, j);
                    uint8_t *b = sbuf + (size_t)idx * MAX_SIZE;
                    for (k = 0; k < size; ++k) {
                        b[k] = msg_byte(rank, it, j, k);
                    }
                    MPI_Isend(b, size, MPI_BYTE, to[d], j, MPI_COMM_WORLD,
                              &reqs[r++]);
                }
            }
        }
        MPI_Waitall(r, reqs, MPI_STATUSES_IGNORE);
        idx = 0;
        for (p = 1; p <= peers; ++p) {
            int from[2] = { (rank - p + np) % np, (rank + p) % np };
            for (int d = 0; d < 2; ++d) {
                for (j = 0; j < window; ++j, ++idx) {
                    int size   = msg_size(from[d], rank, it, j);
                    uint8_t *b = rbuf + (size_t)idx * MAX_SIZE;
                    for (k = 0; k < size; ++k) {
                        if (b[k] != msg_byte(from[d], it, j, k)) {
                            errors++;
                            break;
                        }
                    }
                    msgs++;
                }
            }
        }
    }
    t1 = MPI_Wtime();
    MPI_Allreduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("fp_mix np=%d iters=%d msgs=%ld time_per_iter_us=%.1f "
               "errors=%ld %s\n",
               np, iters, msgs * np, (t1 - t0) * 1e6 / iters, total_errors,
               total_errors ? "FAILED" : "OK");
    }
    free(sbuf);
    free(rbuf);
    free(reqs);
    MPI_Finalize();
    return total_errors ? 1 : 0;
}
