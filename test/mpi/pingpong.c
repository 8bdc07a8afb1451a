/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus MPI test: data-verifying ping-pong between ranks 0 and 1.
 *
 * For every message size from 0 bytes up to the maximum (default 4 MiB:
 * 0, 1, 2, 4, ... plus a few odd sizes) rank 0 sends a message to rank 1 and
 * rank 1 answers with a message of the same size. Every payload is filled
 * with a pattern that depends on the size, the iteration and the direction,
 * and is checked in full on receipt (length included). Rank 0 prints a
 * latency/bandwidth table. Other ranks, if any, only take part in the final
 * reduction of the error count.
 *
 * Usage: pingpong [-m MAX_BYTES] [-i ITERS] [-w WARMUP] [-q]
 *   -m  largest message size (suffix k/m accepted), default 4m
 *   -i  timed iterations for small sizes (scaled down above 64 KiB), def. 100
 *   -w  untimed (but verified) warm-up iterations per size, default 2
 *   -q  no table, only the summary lines
 *
 * Each rank prints "pingpong rank R/N pid P: OK|FAIL ..." and the program
 * exits non-zero on any mismatch in any rank.
 */
#include <mpi.h>

#include "mpi_test.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GUARD_BYTES 64
#define POISON      0xA5
#define MAX_REPORTS 8

/* The byte at index j of a message of 'size' bytes, iteration 'iter',
 * direction 'dir' (0: rank 0 -> 1, 1: the reply). */
static inline uint8_t pattern(size_t size, int iter, int dir, size_t j)
{
    uint32_t h = (uint32_t)size * 0x9E3779B1u ^ (uint32_t)iter * 0x85EBCA77u ^
                 (uint32_t)dir * 0xC2B2AE3Du;

    h += (uint32_t)j * 0x01000193u;
    h ^= h >> 15;
    return (uint8_t)(h ^ (h >> 8) ^ (j >> 12));
}

static void fill(uint8_t *buf, size_t size, int iter, int dir)
{
    size_t j;

    for (j = 0; j < size; ++j) {
        buf[j] = pattern(size, iter, dir, j);
    }
}

/* Returns the number of wrong bytes (payload and the guard after it). */
static long check(int rank, const uint8_t *buf, size_t size, int iter, int dir,
                  const MPI_Status *status, int *reports)
{
    long bad = 0;
    int count;
    size_t j;

    MPI_Get_count(status, MPI_BYTE, &count);
    if ((size_t)count != size) {
        if ((*reports)++ < MAX_REPORTS) {
            fprintf(stderr,
                    "pingpong rank %d: size %zu iter %d: received %d bytes\n",
                    rank, size, iter, count);
        }
        ++bad;
    }
    for (j = 0; j < size; ++j) {
        uint8_t want = pattern(size, iter, dir, j);
        if (buf[j] != want) {
            if ((*reports)++ < MAX_REPORTS) {
                fprintf(
                    stderr,
                    "pingpong rank %d: size %zu iter %d: byte %zu is 0x%02x,"
                    " expected 0x%02x\n",
                    rank, size, iter, j, buf[j], want);
            }
            ++bad;
        }
    }
    for (j = size; j < size + GUARD_BYTES; ++j) {
        if (buf[j] != POISON) {
            if ((*reports)++ < MAX_REPORTS) {
                fprintf(stderr,
                        "pingpong rank %d: size %zu iter %d: overrun at byte"
                        " %zu\n",
                        rank, size, iter, j);
            }
            ++bad;
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    size_t max_size = 4u << 20, size, nsizes = 0, sizes[128];
    int iters = 100, warmup = 2, quiet = 0, rank, nranks, opt, i, reports = 0;
    long errors = 0, total_errors = 0;
    uint8_t *sbuf, *rbuf;
    double t_start;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    while ((opt = getopt(argc, argv, "m:i:w:q")) != -1) {
        switch (opt) {
        case 'm':
            max_size = mpi_test_parse_size("pingpong", optarg);
            break;
        case 'i':
            iters = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        case 'q':
            quiet = 1;
            break;
        default:
            if (rank == 0) {
                fprintf(stderr,
                        "usage: pingpong [-m MAX] [-i ITERS] [-w WARMUP]"
                        " [-q]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    if ((nranks < 2) || (iters < 1) || (warmup < 0) ||
        (max_size > (1u << 30))) {
        if (rank == 0) {
            fprintf(stderr,
                    "pingpong: needs >= 2 ranks, iters >= 1, warmup >= 0,"
                    " max <= 1g\n");
        }
        MPI_Finalize();
        return 2;
    }

    /* 0, 1, 2, 4, ..., max; after every odd power of two from 8 on also an
     * odd size 2^k + 2^(k-1) - 1 (11, 47, 191, ..., 3071, 12287, ...) so that
     * sizes just off datagram and segment boundaries are covered too. */
    sizes[nsizes++] = 0;
    for (size = 1; (size <= max_size) && (nsizes < 120); size <<= 1) {
        sizes[nsizes++] = size;
        if ((size >= 8) && ((size & 0xAAAAAAAAAAAAAAAAull) != 0) &&
            (size + size / 2 - 1 <= max_size)) {
            sizes[nsizes++] = size + size / 2 - 1;
        }
    }
    if (sizes[nsizes - 1] != max_size) {
        sizes[nsizes++] = max_size;
    }

    sbuf = malloc(max_size + GUARD_BYTES);
    rbuf = malloc(max_size + GUARD_BYTES);
    if ((sbuf == NULL) || (rbuf == NULL)) {
        fprintf(stderr, "pingpong rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }

    if ((rank == 0) && !quiet) {
        printf(
            "# pingpong: %d ranks, max %zu bytes, %d iterations (scaled above"
            " 64 KiB), %d warm-up\n",
            nranks, max_size, iters, warmup);
        printf("# %10s %7s %12s %12s %12s\n", "bytes", "iters", "lat_us",
               "min_lat_us", "MB/s");
        fflush(stdout);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    t_start = MPI_Wtime();
    if (rank < 2) {
        int peer = 1 - rank;
        size_t k;

        for (k = 0; k < nsizes; ++k) {
            int n      = iters, total;
            double sum = 0.0, min = 1e30;

            size = sizes[k];
            if (size > 65536) {
                n = (int)((double)iters * 65536.0 / (double)size);
                if (n < 5) {
                    n = 5;
                }
            }
            total = warmup + n;
            for (i = 0; i < total; ++i) {
                MPI_Status st;
                int tag = (int)((k * 1000 + i) % 30000);

                memset(rbuf, POISON, size + GUARD_BYTES);
                if (rank == 0) {
                    double t0, dt;

                    fill(sbuf, size, i, 0);
                    t0 = MPI_Wtime();
                    MPI_Send(sbuf, (int)size, MPI_BYTE, peer, tag,
                             MPI_COMM_WORLD);
                    MPI_Recv(rbuf, (int)size + GUARD_BYTES, MPI_BYTE, peer, tag,
                             MPI_COMM_WORLD, &st);
                    dt = MPI_Wtime() - t0;
                    errors += check(rank, rbuf, size, i, 1, &st, &reports);
                    if (i >= warmup) {
                        sum += dt;
                        if (dt < min) {
                            min = dt;
                        }
                    }
                } else {
                    /* The reply is prepared before the request arrives and the
                     * request is checked after the reply left, so rank 0
                     * times only the communication. */
                    fill(sbuf, size, i, 1);
                    MPI_Recv(rbuf, (int)size + GUARD_BYTES, MPI_BYTE, peer, tag,
                             MPI_COMM_WORLD, &st);
                    MPI_Send(sbuf, (int)size, MPI_BYTE, peer, tag,
                             MPI_COMM_WORLD);
                    errors += check(rank, rbuf, size, i, 0, &st, &reports);
                }
            }
            if ((rank == 0) && !quiet) {
                double lat = sum / n / 2.0;
                printf("  %10zu %7d %12.2f %12.2f %12.2f\n", size, n, lat * 1e6,
                       min / 2.0 * 1e6,
                       (lat > 0.0) ? (double)size / lat / 1e6 : 0.0);
                fflush(stdout);
            }
        }
    }

    MPI_Allreduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("pingpong rank %d/%d pid %d: %s sizes=%zu max=%zu errors=%ld"
           " time=%.2fs\n",
           rank, nranks, (int)getpid(), (errors == 0) ? "OK" : "FAIL",
           (rank < 2) ? nsizes : (size_t)0, max_size, errors,
           MPI_Wtime() - t_start);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("pingpong: %s (%ld wrong bytes in all ranks)\n",
               (total_errors == 0) ? "PASS" : "FAIL", total_errors);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return (total_errors == 0) ? 0 : 1;
}
