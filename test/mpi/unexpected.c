/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus MPI test: an application that holds many unexpected messages.
 *
 * Every rank but the last sends COUNT small messages (MPI_Send, eager) to
 * the last rank, then all ranks enter MPI_Barrier, and only then does the
 * last rank post its receives. Until then MPI keeps every message as an
 * unexpected one (UCP holds the transport's receive descriptors), so the
 * transport must go on receiving, acknowledging and granting credits while
 * the application holds tens of thousands of them. A second round does the
 * same with MPI_ANY_SOURCE receives. Every message is checked: the sender,
 * the sequence (MPI's non-overtaking order per sender and tag) and the
 * payload.
 *
 * Usage: unexpected [-c COUNT] [-s BYTES] [-r ROUNDS]
 *   -c  messages per sender per round, default 100000
 *   -s  payload bytes per message (4 .. 1024), default 4
 *   -r  rounds, default 2 (the second with MPI_ANY_SOURCE)
 *
 * Each rank prints "unexpected rank R/N pid P: OK|FAIL ..." and rank 0 a
 * final "unexpected: PASS|FAIL". Exits non-zero on any error in any rank.
 */
#include <mpi.h>

#include "mpi_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG         7
#define MAX_BYTES   1024
#define MAX_REPORTS 10

static int rank, nranks, reports;
static long errors;

static uint32_t word(int src, long seq, int round, int idx)
{
    uint32_t h = (uint32_t)src * 0x9E3779B1u ^ (uint32_t)seq * 0x85EBCA77u ^
                 (uint32_t)round * 0xC2B2AE3Du ^ (uint32_t)idx * 0x27D4EB2Fu;

    h ^= h >> 15;
    return h * 0x2C1B3C6Du;
}

static void fill(uint32_t *buf, size_t words, int src, long seq, int round)
{
    size_t i;

    buf[0] = (uint32_t)seq;
    for (i = 1; i < words; ++i) {
        buf[i] = word(src, seq, round, (int)i);
    }
}

static void report(const char *what, long src, long seq, long want)
{
    errors++;
    if (reports++ < MAX_REPORTS) {
        fprintf(stderr,
                "unexpected rank %d: from %ld: %s (%ld, expected %ld)\n", rank,
                src, what, seq, want);
    }
}

int main(int argc, char **argv)
{
    long count = 100000, *next_seq, total_errors = 0;
    size_t bytes = 4, words;
    int rounds   = 2, round, opt, src, last;
    uint32_t buf[MAX_BYTES / 4], expect[MAX_BYTES / 4];
    double t0, t_send = 0, t_recv = 0;
    MPI_Status st;
    long i, n;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    while ((opt = getopt(argc, argv, "c:s:r:")) != -1) {
        switch (opt) {
        case 'c':
            count = atol(optarg);
            break;
        case 's':
            bytes = mpi_test_parse_size("unexpected", optarg);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        default:
            if (rank == 0) {
                fprintf(
                    stderr,
                    "usage: unexpected [-c COUNT] [-s BYTES] [-r ROUNDS]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((nranks < 2) || (count <= 0) || (bytes < 4) || (bytes > MAX_BYTES) ||
        (bytes % 4) || (rounds < 1)) {
        if (rank == 0) {
            fprintf(stderr, "unexpected: needs 2+ ranks, COUNT > 0, BYTES a "
                            "multiple of 4 in 4..1024\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    words = bytes / 4;
    last  = nranks - 1;

    next_seq = calloc(nranks, sizeof(*next_seq));
    if (next_seq == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    for (round = 0; round < rounds; ++round) {
        t0 = MPI_Wtime();
        if (rank != last) {
            for (i = 0; i < count; ++i) {
                fill(buf, words, rank, i, round);
                MPI_Send(buf, (int)words, MPI_UINT32_T, last, TAG,
                         MPI_COMM_WORLD);
            }
        }
        t_send += MPI_Wtime() - t0;

        /* every message is sent before a single receive is posted */
        MPI_Barrier(MPI_COMM_WORLD);

        t0 = MPI_Wtime();
        if (rank == last) {
            memset(next_seq, 0, nranks * sizeof(*next_seq));
            for (n = 0; n < count * (nranks - 1); ++n) {
                memset(buf, 0xA5, sizeof(buf));
                /* round 0: in sender order; later rounds: any source */
                src = (round == 0) ? (int)(n / count) : MPI_ANY_SOURCE;
                MPI_Recv(buf, (int)words, MPI_UINT32_T, src, TAG,
                         MPI_COMM_WORLD, &st);
                src = st.MPI_SOURCE;
                if ((src < 0) || (src >= last)) {
                    report("bad source for message", src, n, -1);
                    continue;
                }
                if (buf[0] != (uint32_t)next_seq[src]) {
                    report("sequence", src, buf[0], next_seq[src]);
                }
                fill(expect, words, src, next_seq[src], round);
                if (memcmp(buf + 1, expect + 1, (words - 1) * 4)) {
                    report("payload of message", src, next_seq[src],
                           next_seq[src]);
                }
                next_seq[src]++;
            }
        }
        t_recv += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }

    printf("unexpected rank %d/%d pid %d: %s count=%ld bytes=%zu rounds=%d "
           "send=%.3fs recv=%.3fs errors=%ld\n",
           rank, nranks, (int)getpid(), (errors == 0) ? "OK" : "FAIL", count,
           bytes, rounds, t_send, t_recv, errors);
    fflush(stdout);
    MPI_Reduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("unexpected: %s (%d ranks, %ld held messages per round, %ld "
               "errors)\n",
               (total_errors == 0) ? "PASS" : "FAIL", nranks,
               count * (nranks - 1), total_errors);
    }
    free(next_seq);
    MPI_Finalize();
    return (total_errors == 0) ? 0 : 1;
}
