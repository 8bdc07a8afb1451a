/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus benchmark: MPI_Bcast, three ways (after the multicast paper's
 * figures 6 to 9: Liu, Mamidala and Panda, "Fast and Scalable MPI-Level
 * Broadcast using InfiniBand's Hardware Multicast Support", IPDPS 2004).
 * Run it with and without libaptus_bcast preloaded; the same binary
 * measures whichever MPI_Bcast it gets.
 *
 *   lat   for each size: ITERS broadcasts from root 0, each followed by a
 *         barrier; the time inside MPI_Bcast averaged over iterations,
 *         then over ranks (what the OSU benchmark reports)
 *   tput  for each size: ITERS back-to-back broadcasts from root 0, then a
 *         barrier; broadcasts per second at the root's clock
 *   skew  for each size: a barrier, then every rank is away (asleep) for
 *         a random time in [0, SKEW_US], then MPI_Bcast; the time inside
 *         it averaged over iterations and ranks. A receiver waits for the
 *         root either way; under a tree it also waits for the interior
 *         ranks on its path, a delay that grows with the tree's depth.
 *
 * Usage: bcast_bench -m lat|tput|skew [-s SIZES] [-i ITERS] [-w WARMUP]
 *                    [-k SKEW_US] [-v]
 * -v: every rank's own average and worst time on stderr.
 * Rank 0 prints one line per size:
 *   bcast_bench mode=lat np=8 size=64 usec=12.3 ...
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The skew: a rank is away (asleep, so that on a host with fewer cores
 * than ranks the others keep theirs) for usec. */
static void away_for(double usec)
{
    struct timespec ts;

    ts.tv_sec  = (time_t)(usec / 1e6);
    ts.tv_nsec = (long)((usec - (double)ts.tv_sec * 1e6) * 1e3);
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    const char *mode    = "lat";
    char sizes_arg[512] = "8,64,512,1024,4096,8192,16384,32768";
    int iters = 1000, warmup = 50, rank, np, opt, i, size;
    double skew_us = 1000, t, t0, sum, all, rate, worst;
    int verbose    = 0;
    unsigned seed;
    char *tok, *save = NULL;
    uint8_t *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((opt = getopt(argc, argv, "m:s:i:w:k:v")) != -1) {
        switch (opt) {
        case 'm':
            mode = optarg;
            break;
        case 's':
            snprintf(sizes_arg, sizeof(sizes_arg), "%s", optarg);
            break;
        case 'i':
            iters = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        case 'k':
            skew_us = atof(optarg);
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            if (rank == 0) {
                fprintf(stderr,
                        "usage: bcast_bench -m lat|tput|skew [-s SIZES] "
                        "[-i ITERS] [-w WARMUP] [-k SKEW_US]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    buf  = malloc(1 << 20);
    seed = 12345u + 7919u * (unsigned)rank;
    memset(buf, rank, 1 << 20);

    for (tok = strtok_r(sizes_arg, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        size = atoi(tok);
        for (i = 0; i < warmup; ++i) {
            MPI_Bcast(buf, size, MPI_BYTE, 0, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        sum   = 0;
        worst = 0;
        if (!strcmp(mode, "lat") || !strcmp(mode, "skew")) {
            for (i = 0; i < iters; ++i) {
                if (!strcmp(mode, "skew")) {
                    /* all start together, then each is away a while */
                    MPI_Barrier(MPI_COMM_WORLD);
                    away_for(skew_us * rand_r(&seed) / RAND_MAX);
                }
                t = MPI_Wtime();
                MPI_Bcast(buf, size, MPI_BYTE, 0, MPI_COMM_WORLD);
                t = MPI_Wtime() - t;
                sum += t;
                if (t > worst) {
                    worst = t;
                }
                if (!strcmp(mode, "lat")) {
                    MPI_Barrier(MPI_COMM_WORLD);
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
            sum /= iters;
            if (verbose) {
                fprintf(stderr,
                        "bcast_bench rank %d size %d: %.2f us, "
                        "worst %.1f us\n",
                        rank, size, sum * 1e6, worst * 1e6);
            }
            MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("bcast_bench mode=%s np=%d size=%d usec=%.2f iters=%d%s",
                       mode, np, size, all / np * 1e6, iters,
                       strcmp(mode, "skew") ? "\n" : "");
                if (!strcmp(mode, "skew")) {
                    printf(" skew_us=%.0f\n", skew_us);
                }
            }
        } else {
            t0 = MPI_Wtime();
            for (i = 0; i < iters; ++i) {
                MPI_Bcast(buf, size, MPI_BYTE, 0, MPI_COMM_WORLD);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            t    = MPI_Wtime() - t0;
            rate = iters / t;
            if (rank == 0) {
                printf("bcast_bench mode=tput np=%d size=%d per_sec=%.0f "
                       "MBps=%.2f iters=%d\n",
                       np, size, rate, rate * size / 1e6, iters);
            }
        }
        fflush(stdout);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
