/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus MPI test: data-verifying all-to-all exchanges.
 *
 * For each block size (a few bytes up to the maximum, default 1 MiB per
 * peer) and each iteration, three exchanges run, and every 32-bit element
 * received is compared with value(sender, receiver, index, iteration, phase):
 *
 *   1. MPI_Alltoall, the same count to every peer;
 *   2. MPI_Alltoallv, counts that differ per (sender, receiver, iteration)
 *      and may be zero, with gaps between the blocks that must stay
 *      untouched;
 *   3. a pairwise exchange with MPI_Isend/MPI_Irecv: two messages to every
 *      peer on the same tag, posted in order, which MPI must match in order
 *      (non-overtaking), the second one of a different length.
 *
 * Usage: alltoall [-m MAX_BYTES] [-n MIN_BYTES] [-i ITERS] [-v]
 *   -m  largest block per peer in bytes (suffix k/m), default 1m
 *   -n  smallest block per peer in bytes, default 4
 *   -i  iterations per block size, default 3
 *   -v  print a line per block size on rank 0
 *
 * Each rank prints one line "alltoall rank R/N pid P: OK|FAIL ..." and rank 0
 * a final "alltoall: PASS|FAIL". Exits non-zero on any mismatch in any rank.
 */
#include <mpi.h>

#include "mpi_test.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POISON      0xDEADBEEFu
#define MAX_REPORTS 10
#define GAP         3 /* elements left untouched between alltoallv blocks */

enum { PHASE_ALLTOALL = 1, PHASE_ALLTOALLV, PHASE_PAIR_A, PHASE_PAIR_B };

static const char *phase_name[] = { "", "alltoall", "alltoallv", "pairwise-1st",
                                    "pairwise-2nd" };

static int rank, nranks, reports;
static long errors;

static inline uint32_t value(int src, int dst, size_t idx, int iter, int phase)
{
    uint32_t h = (uint32_t)src * 0x9E3779B1u ^ (uint32_t)dst * 0x85EBCA77u ^
                 (uint32_t)iter * 0xC2B2AE3Du ^ (uint32_t)phase * 0x27D4EB2Fu;

    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    return h + (uint32_t)idx * 0x01000193u + (uint32_t)(idx >> 20);
}

static void fill(uint32_t *buf, int dst, size_t count, int iter, int phase)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        buf[i] = value(rank, dst, i, iter, phase);
    }
}

static void report(const char *fmt, size_t elems, int src, int iter, int phase,
                   size_t idx, uint32_t got, uint32_t want)
{
    if (reports++ < MAX_REPORTS) {
        fprintf(stderr,
                "alltoall rank %d: %s block %zu elems iter %d from %d: ", rank,
                phase_name[phase], elems, iter, src);
        fprintf(stderr, fmt, idx, got, want);
        fputc('\n', stderr);
    }
}

/* Check 'count' elements from 'src' followed by 'gap' poison elements. */
static void check(const uint32_t *buf, int src, size_t count, size_t gap,
                  size_t block, int iter, int phase)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        uint32_t want = value(src, rank, i, iter, phase);
        if (buf[i] != want) {
            report("element %zu is 0x%08x, expected 0x%08x", block, src, iter,
                   phase, i, buf[i], want);
            ++errors;
        }
    }
    for (i = count; i < count + gap; ++i) {
        if (buf[i] != POISON) {
            report("overrun: element %zu is 0x%08x, expected untouched 0x%08x",
                   block, src, iter, phase, i, buf[i], POISON);
            ++errors;
        }
    }
}

static void poison(uint32_t *buf, size_t count)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        buf[i] = POISON;
    }
}

static void check_count(const MPI_Status *st, int src, size_t want,
                        size_t block, int iter, int phase)
{
    int count;

    MPI_Get_count(st, MPI_UINT32_T, &count);
    if ((size_t)count != want) {
        report("length: %zu elements received (%u), expected %u", block, src,
               iter, phase, (size_t)count, (uint32_t)count, (uint32_t)want);
        ++errors;
    }
}

/* Alltoallv count from s to r: up to 7 elements fewer than the block, and
 * sometimes nothing at all. */
static size_t vcount(int s, int r, size_t block, int iter)
{
    unsigned k = (unsigned)(s * 3 + r * 5 + iter * 7) % 9;

    if (k == 8) {
        return 0;
    }
    return (block > k) ? block - k : block;
}

/* Length of the second pairwise message: about half the block (at most the
 * block itself plus 2, which fits the receive buffer of block + GAP). */
static size_t pcount(int s, int r, size_t block)
{
    return block / 2 + (size_t)((s + r) % 3);
}

int main(int argc, char **argv)
{
    size_t max_bytes = 1u << 20, min_bytes = 4, block, max_block;
    size_t nblocks = 0, blocks[64], total_rx = 0, k;
    int iters = 3, verbose = 0, opt, iter, p;
    uint32_t *sbuf, *rbuf, *pbuf, *qbuf;
    int *scounts, *sdispls, *rcounts, *rdispls;
    MPI_Request *reqs;
    MPI_Status *stats;
    long total_errors = 0;
    double t_start, t_end;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    while ((opt = getopt(argc, argv, "m:n:i:v")) != -1) {
        switch (opt) {
        case 'm':
            max_bytes = mpi_test_parse_size("alltoall", optarg);
            break;
        case 'n':
            min_bytes = mpi_test_parse_size("alltoall", optarg);
            break;
        case 'i':
            iters = atoi(optarg);
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: alltoall [-m MAX] [-n MIN] [-i ITERS]"
                                " [-v]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    max_block = max_bytes / sizeof(uint32_t);
    if ((iters < 1) || (max_block < 1) || (min_bytes > max_bytes) ||
        ((double)max_block * (nranks + 1) * (GAP + 1) > (double)(1u << 30))) {
        if (rank == 0) {
            fprintf(stderr,
                    "alltoall: bad options (iters >= 1, 4 <= min <= max,"
                    " max * ranks within 1 GiB)\n");
        }
        MPI_Finalize();
        return 2;
    }

    /* Block sizes in elements: growing about 8x each step with odd sizes in
     * between, ending exactly at the maximum. */
    block = (min_bytes + sizeof(uint32_t) - 1) / sizeof(uint32_t);
    if (block < 1) {
        block = 1;
    }
    while ((block < max_block) && (nblocks < 60)) {
        blocks[nblocks++] = block;
        block             = block * 8 + (nblocks % 2 ? 3 : 1);
    }
    blocks[nblocks++] = max_block;

    sbuf    = malloc(nranks * (max_block + GAP) * sizeof(uint32_t));
    rbuf    = malloc(nranks * (max_block + GAP) * sizeof(uint32_t));
    pbuf    = malloc(nranks * (max_block + GAP) * sizeof(uint32_t));
    qbuf    = malloc(nranks * (max_block + GAP) * sizeof(uint32_t));
    scounts = malloc(4 * nranks * sizeof(int));
    reqs    = malloc(4 * nranks * sizeof(MPI_Request));
    stats   = malloc(4 * nranks * sizeof(MPI_Status));
    if (!sbuf || !rbuf || !pbuf || !qbuf || !scounts || !reqs || !stats) {
        fprintf(stderr, "alltoall rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    sdispls = scounts + nranks;
    rcounts = scounts + 2 * nranks;
    rdispls = scounts + 3 * nranks;

    MPI_Barrier(MPI_COMM_WORLD);
    t_start = MPI_Wtime();
    for (k = 0; k < nblocks; ++k) {
        long errors_before = errors;
        double t0          = MPI_Wtime();

        block = blocks[k];
        for (iter = 0; iter < iters; ++iter) {
            /* 1. MPI_Alltoall */
            for (p = 0; p < nranks; ++p) {
                fill(sbuf + p * block, p, block, iter, PHASE_ALLTOALL);
            }
            poison(rbuf, nranks * block);
            MPI_Alltoall(sbuf, (int)block, MPI_UINT32_T, rbuf, (int)block,
                         MPI_UINT32_T, MPI_COMM_WORLD);
            for (p = 0; p < nranks; ++p) {
                check(rbuf + p * block, p, block, 0, block, iter,
                      PHASE_ALLTOALL);
                total_rx += block * sizeof(uint32_t);
            }

            /* 2. MPI_Alltoallv with uneven counts and gaps; the receive
             * blocks are laid out in reverse peer order. */
            for (p = 0; p < nranks; ++p) {
                scounts[p] = (int)vcount(rank, p, block, iter);
                sdispls[p] = (int)(p * (block + GAP));
                rcounts[p] = (int)vcount(p, rank, block, iter);
                rdispls[p] = (int)((nranks - 1 - p) * (block + GAP));
                fill(sbuf + sdispls[p], p, scounts[p], iter, PHASE_ALLTOALLV);
            }
            poison(rbuf, nranks * (block + GAP));
            MPI_Alltoallv(sbuf, scounts, sdispls, MPI_UINT32_T, rbuf, rcounts,
                          rdispls, MPI_UINT32_T, MPI_COMM_WORLD);
            for (p = 0; p < nranks; ++p) {
                check(rbuf + rdispls[p], p, rcounts[p], GAP, block, iter,
                      PHASE_ALLTOALLV);
                total_rx += rcounts[p] * sizeof(uint32_t);
            }

            /* 3. Pairwise: two messages per peer on the same tag; the
             * receive buffers are larger than either, so only MPI's
             * ordering decides which lands where. */
            poison(rbuf, nranks * (block + GAP));
            poison(pbuf, nranks * (block + GAP));
            for (p = 0; p < nranks; ++p) {
                int tag = (iter * 64 + (int)k) % 16384;
                MPI_Irecv(rbuf + p * (block + GAP), (int)(block + GAP),
                          MPI_UINT32_T, p, tag, MPI_COMM_WORLD, &reqs[2 * p]);
                MPI_Irecv(pbuf + p * (block + GAP), (int)(block + GAP),
                          MPI_UINT32_T, p, tag, MPI_COMM_WORLD,
                          &reqs[2 * p + 1]);
            }
            for (p = 0; p < nranks; ++p) {
                /* start with the next rank so that not everyone sends to
                 * rank 0 first */
                int dst     = (rank + 1 + p) % nranks;
                int tag     = (iter * 64 + (int)k) % 16384;
                uint32_t *a = sbuf + dst * (block + GAP);
                uint32_t *b = qbuf + dst * (block + GAP);
                size_t n    = pcount(rank, dst, block);

                fill(a, dst, block, iter, PHASE_PAIR_A);
                fill(b, dst, n, iter, PHASE_PAIR_B);
                MPI_Isend(a, (int)block, MPI_UINT32_T, dst, tag, MPI_COMM_WORLD,
                          &reqs[2 * nranks + 2 * dst]);
                MPI_Isend(b, (int)n, MPI_UINT32_T, dst, tag, MPI_COMM_WORLD,
                          &reqs[2 * nranks + 2 * dst + 1]);
            }
            MPI_Waitall(4 * nranks, reqs, stats);
            for (p = 0; p < nranks; ++p) {
                size_t n = pcount(p, rank, block);
                check_count(&stats[2 * p], p, block, block, iter, PHASE_PAIR_A);
                check(rbuf + p * (block + GAP), p, block, GAP, block, iter,
                      PHASE_PAIR_A);
                check_count(&stats[2 * p + 1], p, n, block, iter, PHASE_PAIR_B);
                check(pbuf + p * (block + GAP), p, n, block + GAP - n, block,
                      iter, PHASE_PAIR_B);
                total_rx += (block + n) * sizeof(uint32_t);
            }
        }
        if (verbose) {
            long e = errors - errors_before, sum = 0;
            double dt = MPI_Wtime() - t0, maxdt = 0.0;

            MPI_Reduce(&e, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&dt, &maxdt, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("# block %9zu bytes x %d iters: %.3fs, errors %ld\n",
                       block * sizeof(uint32_t), iters, maxdt, sum);
                fflush(stdout);
            }
        }
    }
    t_end = MPI_Wtime();

    MPI_Allreduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("alltoall rank %d/%d pid %d: %s blocks=%zu max=%zu iters=%d"
           " rx_bytes=%zu errors=%ld time=%.2fs\n",
           rank, nranks, (int)getpid(), (errors == 0) ? "OK" : "FAIL", nblocks,
           max_block * sizeof(uint32_t), iters, total_rx, errors,
           t_end - t_start);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("alltoall: %s (%d ranks, %ld wrong elements in all ranks)\n",
               (total_errors == 0) ? "PASS" : "FAIL", nranks, total_errors);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    free(pbuf);
    free(qbuf);
    free(scounts);
    free(reqs);
    free(stats);
    MPI_Finalize();
    return (total_errors == 0) ? 0 : 1;
}
