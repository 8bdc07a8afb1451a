/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus MPI test: data-verifying one-sided communication (MPI-3 RMA).
 *
 * Every rank allocates a window (MPI_Win_allocate) with one slot per rank of
 * the largest message size plus a little slack and a guard (rounded up to a
 * multiple of 64 bytes). For each message
 * size (8 bytes up to the maximum, default 4 MiB: powers of four and odd
 * sizes in between) and each round, four phases run, each against every
 * other rank, and every byte that moved is compared with
 * pattern(origin, target, size, round, phase, index):
 *
 *   1. fence-put: inside an MPI_Win_fence epoch every rank MPI_Put's into
 *      its own slot of every peer's window; after the closing fence each
 *      rank checks all slots of its window (payload, and poison before and
 *      after it, its own slot untouched);
 *   2. fence-get: every rank writes a pattern for each reader into its
 *      window; inside a fence epoch every rank MPI_Get's its slot from every
 *      peer and checks it after the closing fence;
 *   3. lock-put: passive target: MPI_Win_lock(shared) on each peer, MPI_Put
 *      of the first part, MPI_Win_flush, an MPI_Get of that part back (which
 *      the flush must have made visible) and MPI_Put of the rest, then
 *      MPI_Win_unlock; the targets check their windows after a barrier;
 *   4. lock-get: passive target: MPI_Win_lock(shared), MPI_Get,
 *      MPI_Win_flush, check, MPI_Win_unlock.
 *
 * The offset within the slot changes from round to round (0 .. 7 bytes), so
 * unaligned transfers are covered too. Local accesses to the window in the
 * passive phases are made under an exclusive lock of the own window.
 *
 * Usage: onesided [-m MAX_BYTES] [-n MIN_BYTES] [-i ROUNDS] [-q]
 *   -m  largest message size in bytes (suffix k/m), default 4m
 *   -n  smallest message size in bytes, default 8
 *   -i  rounds per message size, default 3
 *   -q  no table, only the summary lines
 *
 * Rank 0 prints a table of the bandwidth per rank (MB/s of payload a rank
 * moved, averaged over the ranks) for each size and phase. Each rank prints
 * one line "onesided rank R/N pid P: OK|FAIL ..." and rank 0 a final
 * "onesided: PASS|FAIL". A mismatch is reported on stderr with the first bad
 * offset; the program exits non-zero on any mismatch in any rank.
 */
#include <mpi.h>

#include "mpi_test.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POISON      0xA5
#define GUARD_BYTES 64
#define MAX_SHIFT   7 /* largest offset of the payload within a slot */
#define MAX_REPORTS 10
#define MAX_SIZES   64
/* Slots (and so windows) are a multiple of this: MPICH 4.0.2 misplaces the
 * data of node-local windows whose size is not a multiple of 8 bytes. */
#define SLOT_ALIGN 64

enum {
    PHASE_FENCE_PUT,
    PHASE_FENCE_GET,
    PHASE_LOCK_PUT,
    PHASE_LOCK_GET,
    PHASE_LAST
};

static const char *phase_name[] = { "fence-put", "fence-get", "lock-put",
                                    "lock-get" };

static int rank, nranks, reports;
static long errors;

/* The byte at index j of the message from 'origin' to 'target' (for gets:
 * the owner of the window is the origin of the data). */
static inline uint8_t pattern(int origin, int target, size_t size, int round,
                              int phase, size_t j)
{
    uint32_t h = (uint32_t)origin * 0x9E3779B1u ^
                 (uint32_t)target * 0x85EBCA77u ^ (uint32_t)size * 0xC2B2AE3Du ^
                 (uint32_t)round * 0x27D4EB2Fu ^
                 (uint32_t)(phase + 1) * 0x165667B1u;

    h += (uint32_t)j * 0x01000193u;
    h ^= h >> 15;
    return (uint8_t)(h ^ (h >> 8) ^ (j >> 12));
}

static void fill(uint8_t *buf, int origin, int target, size_t size, int round,
                 int phase)
{
    size_t j;

    for (j = 0; j < size; ++j) {
        buf[j] = pattern(origin, target, size, round, phase, j);
    }
}

/* Offset of the payload within a slot in a round. */
static size_t shift_of(int round)
{
    return (size_t)(round * 5) % (MAX_SHIFT + 1);
}

/* Checks 'len' bytes at 'buf': poison in [0, shift), the first 'count'
 * bytes of the message of 'size' bytes from 'origin' to 'target' in
 * [shift, shift + count) (none when origin < 0: all poison) and poison up to
 * 'len'. Reports the first bad offset (relative to 'buf') and returns the
 * number of bad bytes. */
static long check(const uint8_t *buf, size_t len, size_t shift, int origin,
                  int target, size_t size, size_t count, int round, int phase,
                  const char *what)
{
    size_t j, first = 0;
    long bad    = 0;
    uint8_t got = 0, want = 0;

    for (j = 0; j < len; ++j) {
        uint8_t w;

        if ((origin >= 0) && (j >= shift) && (j < shift + count)) {
            w = pattern(origin, target, size, round, phase, j - shift);
        } else {
            w = POISON;
        }
        if (buf[j] != w) {
            if (bad++ == 0) {
                first = j;
                got   = buf[j];
                want  = w;
            }
        }
    }
    if (bad && (reports++ < MAX_REPORTS)) {
        fprintf(stderr,
                "onesided rank %d: %s size %zu round %d %s: %ld bad bytes,"
                " first at offset %zu (data at %zu..%zu): 0x%02x,"
                " expected 0x%02x\n",
                rank, phase_name[phase], size, round, what, bad, first, shift,
                shift + count, got, want);
    }
    errors += bad;
    return bad;
}

/* Peers in the order a rank talks to them: the next rank first, so that
 * not everyone starts with rank 0. */
static int peer_of(int k)
{
    return (rank + 1 + k) % nranks;
}

int main(int argc, char **argv)
{
    size_t max_size = 4u << 20, min_size = 8, size, slot, nsizes = 0;
    size_t sizes[MAX_SIZES], k, total_bytes = 0;
    int rounds = 3, quiet = 0, opt, round, i, p, ph;
    uint8_t *win_base, *sbuf, *rbuf;
    long total_errors = 0;
    double t_start, t_end, bw[PHASE_LAST], bw_sum[PHASE_LAST];
    char what[64];
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    while ((opt = getopt(argc, argv, "m:n:i:q")) != -1) {
        switch (opt) {
        case 'm':
            max_size = mpi_test_parse_size("onesided", optarg);
            break;
        case 'n':
            min_size = mpi_test_parse_size("onesided", optarg);
            break;
        case 'i':
            rounds = atoi(optarg);
            break;
        case 'q':
            quiet = 1;
            break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: onesided [-m MAX] [-n MIN] [-i ROUNDS]"
                                " [-q]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    slot = (max_size + MAX_SHIFT + GUARD_BYTES + SLOT_ALIGN - 1) / SLOT_ALIGN *
           SLOT_ALIGN;
    if ((nranks < 2) || (rounds < 1) || (min_size < 1) ||
        (min_size > max_size) ||
        ((double)slot * nranks * 3 > (double)(1u << 30)) ||
        (max_size > (size_t)1 << 30)) {
        if (rank == 0) {
            fprintf(stderr, "onesided: needs >= 2 ranks, rounds >= 1,"
                            " 1 <= min <= max, max * ranks within 1 GiB\n");
        }
        MPI_Finalize();
        return 2;
    }

    /* min, then powers of four from 8 on, each followed by an odd size
     * 1.5 * 2^k - 1 while that is below the maximum (8, 11, 32, 47, 128,
     * 191, ... for -n 8), ending exactly at the maximum. */
    sizes[nsizes++] = min_size;
    for (size = 8; (size < max_size) && (nsizes < MAX_SIZES - 2); size <<= 2) {
        if (size > min_size) {
            sizes[nsizes++] = size;
        }
        if ((size + size / 2 - 1 > min_size) &&
            (size + size / 2 - 1 < max_size)) {
            sizes[nsizes++] = size + size / 2 - 1;
        }
    }
    if (sizes[nsizes - 1] != max_size) {
        sizes[nsizes++] = max_size;
    }

    /* sbuf: one message per target; rbuf: one slot per peer for gets. */
    sbuf = malloc(nranks * slot);
    rbuf = malloc(nranks * slot);
    if ((sbuf == NULL) || (rbuf == NULL)) {
        fprintf(stderr, "onesided rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Win_allocate((MPI_Aint)(nranks * slot), 1, MPI_INFO_NULL,
                     MPI_COMM_WORLD, &win_base, &win);

    if ((rank == 0) && !quiet) {
        printf("# onesided: %d ranks, window %zu bytes per rank, %zu sizes"
               " %zu .. %zu bytes, %d rounds\n",
               nranks, nranks * slot, nsizes, sizes[0], max_size, rounds);
        printf("# MB/s per rank (payload to/from %d peers, average over"
               " ranks)\n",
               nranks - 1);
        printf("# %10s %12s %12s %12s %12s\n", "bytes", phase_name[0],
               phase_name[1], phase_name[2], phase_name[3]);
        fflush(stdout);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    t_start = MPI_Wtime();
    for (k = 0; k < nsizes; ++k) {
        double t[PHASE_LAST] = { 0.0 }, t0;

        size = sizes[k];
        for (round = 0; round < rounds; ++round) {
            size_t shift = shift_of(round), part = size / 2;

            /* 1. fence-put */
            for (i = 0; i < nranks - 1; ++i) {
                p = peer_of(i);
                fill(sbuf + p * slot, rank, p, size, round, PHASE_FENCE_PUT);
            }
            memset(win_base, POISON, nranks * slot);
            MPI_Win_fence(0, win);
            t0 = MPI_Wtime();
            for (i = 0; i < nranks - 1; ++i) {
                p = peer_of(i);
                MPI_Put(sbuf + p * slot, (int)size, MPI_BYTE, p,
                        (MPI_Aint)(rank * slot + shift), (int)size, MPI_BYTE,
                        win);
            }
            MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
            t[PHASE_FENCE_PUT] += MPI_Wtime() - t0;
            for (p = 0; p < nranks; ++p) {
                snprintf(what, sizeof(what), "window slot of rank %d", p);
                check(win_base + p * slot, slot, shift, (p == rank) ? -1 : p,
                      rank, size, size, round, PHASE_FENCE_PUT, what);
            }

            /* 2. fence-get: the window holds a message for every reader */
            for (p = 0; p < nranks; ++p) {
                memset(win_base + p * slot, POISON, slot);
                fill(win_base + p * slot + shift, rank, p, size, round,
                     PHASE_FENCE_GET);
            }
            memset(rbuf, POISON, nranks * slot);
            MPI_Win_fence(0, win);
            t0 = MPI_Wtime();
            for (i = 0; i < nranks - 1; ++i) {
                p = peer_of(i);
                MPI_Get(rbuf + p * slot + shift, (int)size, MPI_BYTE, p,
                        (MPI_Aint)(rank * slot + shift), (int)size, MPI_BYTE,
                        win);
            }
            MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
            t[PHASE_FENCE_GET] += MPI_Wtime() - t0;
            for (i = 0; i < nranks - 1; ++i) {
                p = peer_of(i);
                snprintf(what, sizeof(what), "from rank %d", p);
                check(rbuf + p * slot, slot, shift, p, rank, size, size, round,
                      PHASE_FENCE_GET, what);
            }

            /* 3. lock-put: first part, flush, read it back, the rest */
            for (i = 0; i < nranks - 1; ++i) {
                p = peer_of(i);
                fill(sbuf + p * slot, rank, p, size, round, PHASE_LOCK_PUT);
            }
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
            memset(win_base, POISON, nranks * slot);
            MPI_Win_unlock(rank, win);
            memset(rbuf, POISON, nranks * slot);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (i = 0; i < nranks - 1; ++i) {
                MPI_Aint disp = (MPI_Aint)(rank * slot + shift);

                p = peer_of(i);
                MPI_Win_lock(MPI_LOCK_SHARED, p, 0, win);
                if (part > 0) {
                    MPI_Put(sbuf + p * slot, (int)part, MPI_BYTE, p, disp,
                            (int)part, MPI_BYTE, win);
                    MPI_Win_flush(p, win);
                    MPI_Get(rbuf + p * slot + shift, (int)part, MPI_BYTE, p,
                            disp, (int)part, MPI_BYTE, win);
                }
                MPI_Put(sbuf + p * slot + part, (int)(size - part), MPI_BYTE, p,
                        disp + (MPI_Aint)part, (int)(size - part), MPI_BYTE,
                        win);
                MPI_Win_unlock(p, win);
            }
            t[PHASE_LOCK_PUT] += MPI_Wtime() - t0;
            for (i = 0; i < nranks - 1; ++i) {
                p = peer_of(i);
                snprintf(what, sizeof(what),
                         "first part read back from rank %d after flush", p);
                check(rbuf + p * slot, slot, shift, rank, p, size, part, round,
                      PHASE_LOCK_PUT, what);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
            for (p = 0; p < nranks; ++p) {
                snprintf(what, sizeof(what), "window slot of rank %d", p);
                check(win_base + p * slot, slot, shift, (p == rank) ? -1 : p,
                      rank, size, size, round, PHASE_LOCK_PUT, what);
            }

            /* 4. lock-get */
            for (p = 0; p < nranks; ++p) {
                memset(win_base + p * slot, POISON, slot);
                fill(win_base + p * slot + shift, rank, p, size, round,
                     PHASE_LOCK_GET);
            }
            MPI_Win_unlock(rank, win);
            memset(rbuf, POISON, nranks * slot);
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (i = 0; i < nranks - 1; ++i) {
                p = peer_of(i);
                MPI_Win_lock(MPI_LOCK_SHARED, p, 0, win);
                MPI_Get(rbuf + p * slot + shift, (int)size, MPI_BYTE, p,
                        (MPI_Aint)(rank * slot + shift), (int)size, MPI_BYTE,
                        win);
                MPI_Win_flush(p, win);
                t[PHASE_LOCK_GET] += MPI_Wtime() - t0;
                snprintf(what, sizeof(what), "from rank %d after flush", p);
                check(rbuf + p * slot, slot, shift, p, rank, size, size, round,
                      PHASE_LOCK_GET, what);
                t0 = MPI_Wtime();
                MPI_Win_unlock(p, win);
            }
            t[PHASE_LOCK_GET] += MPI_Wtime() - t0;
            /* nobody may change its window before all gets are done */
            MPI_Barrier(MPI_COMM_WORLD);
            total_bytes += 4 * (nranks - 1) * size;
        }

        for (ph = 0; ph < PHASE_LAST; ++ph) {
            bw[ph] = (t[ph] > 0.0)
                         ? (double)size * (nranks - 1) * rounds / t[ph] / 1e6
                         : 0.0;
        }
        MPI_Reduce(bw, bw_sum, PHASE_LAST, MPI_DOUBLE, MPI_SUM, 0,
                   MPI_COMM_WORLD);
        if ((rank == 0) && !quiet) {
            printf("  %10zu %12.2f %12.2f %12.2f %12.2f\n", size,
                   bw_sum[0] / nranks, bw_sum[1] / nranks, bw_sum[2] / nranks,
                   bw_sum[3] / nranks);
            fflush(stdout);
        }
    }
    t_end = MPI_Wtime();

    MPI_Win_free(&win);
    MPI_Allreduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("onesided rank %d/%d pid %d: %s sizes=%zu max=%zu rounds=%d"
           " bytes=%zu errors=%ld time=%.2fs\n",
           rank, nranks, (int)getpid(), (errors == 0) ? "OK" : "FAIL", nsizes,
           max_size, rounds, total_bytes, errors, t_end - t_start);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("onesided: %s (%d ranks, %ld wrong bytes in all ranks)\n",
               (total_errors == 0) ? "PASS" : "FAIL", nranks, total_errors);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return (total_errors == 0) ? 0 : 1;
}
