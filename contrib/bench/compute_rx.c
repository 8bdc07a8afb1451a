/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus benchmark: a receiver that computes.
 *
 * Rank 0 streams eager messages at rank 1 for a fixed time, keeping a
 * window of non-blocking sends in flight; rank 1 computes for a fixed time
 * (a busy loop that calls no MPI) between progress passes (each takes
 * what has arrived, until nothing more has), as an application between
 * two MPI calls does. What the transport buffers and
 * acknowledges while the receiver computes decides how fast the sender
 * goes: the sender's throughput (bytes whose sends completed, per second)
 * is the figure. Every message is received and checked at the end.
 *
 *   mpirun -np 2 compute_rx [-s SIZE] [-t SECONDS] [-c COMPUTE_MS] [-w WINDOW]
 *
 * Prints one line: "compute_rx size=... compute_ms=... sender_MBps=...
 * messages=... recv_passes=...".
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_DATA 1
#define TAG_STOP 2

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Work that calls no MPI: the receiver is "away" for this long. */
static void compute(double seconds)
{
    volatile uint64_t x = 1;
    double end          = now_s() + seconds;

    while (now_s() < end) {
        for (int i = 0; i < 1000; ++i) {
            x = x * 6364136223846793005ull + 1;
        }
    }
}

static void fill(uint8_t *buf, size_t size, uint64_t seq)
{
    memcpy(buf, &seq, sizeof(seq) < size ? sizeof(seq) : size);
    for (size_t i = sizeof(seq); i < size; ++i) {
        buf[i] = (uint8_t)(seq + i);
    }
}

static int check(const uint8_t *buf, size_t size, uint64_t seq)
{
    uint64_t got = 0;

    memcpy(&got, buf, sizeof(got) < size ? sizeof(got) : size);
    if ((size >= sizeof(got)) && (got != seq)) {
        return 0;
    }
    for (size_t i = sizeof(seq); i < size; ++i) {
        if (buf[i] != (uint8_t)(seq + i)) {
            return 0;
        }
    }
    return 1;
}

static void sender(size_t size, double seconds, int window)
{
    MPI_Request *reqs = calloc(window, sizeof(*reqs));
    uint8_t *bufs     = malloc((size_t)window * size);
    uint64_t sent = 0, done = 0;
    double start, end, elapsed;
    int i, flag;

    for (i = 0; i < window; ++i) {
        reqs[i] = MPI_REQUEST_NULL;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    start = now_s();
    end   = start + seconds;
    while (now_s() < end) {
        for (i = 0; i < window; ++i) {
            if (reqs[i] != MPI_REQUEST_NULL) {
                MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                if (!flag) {
                    continue;
                }
                ++done;
            }
            fill(bufs + (size_t)i * size, size, sent);
            MPI_Isend(bufs + (size_t)i * size, (int)size, MPI_BYTE, 1, TAG_DATA,
                      MPI_COMM_WORLD, &reqs[i]);
            ++sent;
        }
    }
    elapsed = now_s() - start;
    MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
    MPI_Send(&sent, 1, MPI_UINT64_T, 1, TAG_STOP, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("compute_rx size=%zu seconds=%.2f sender_MBps=%.1f messages=%llu\n",
           size, elapsed, done * (double)size / elapsed / 1e6,
           (unsigned long long)sent);
    free(bufs);
    free(reqs);
}

static void receiver(size_t size, double compute_s, int window)
{
    MPI_Request *reqs = calloc(window, sizeof(*reqs));
    uint8_t *bufs     = malloc((size_t)window * size);
    uint64_t *seqs    = calloc(window, sizeof(*seqs));
    uint64_t next = 0, received = 0, total = UINT64_MAX, bad = 0;
    unsigned long passes = 0, got;
    MPI_Request stop_req;
    int i, flag, stopped = 0;

    for (i = 0; i < window; ++i) {
        seqs[i] = next++;
        MPI_Irecv(bufs + (size_t)i * size, (int)size, MPI_BYTE, 0, TAG_DATA,
                  MPI_COMM_WORLD, &reqs[i]);
    }
    MPI_Irecv(&total, 1, MPI_UINT64_T, 0, TAG_STOP, MPI_COMM_WORLD, &stop_req);
    MPI_Barrier(MPI_COMM_WORLD);
    while (!stopped || (received < total)) {
        if (!stopped) {
            compute(compute_s);
            MPI_Test(&stop_req, &stopped, MPI_STATUS_IGNORE);
        }
        /* one pass: take what arrived and repost, until a sweep over the
         * receives finds nothing more (then back to work) */
        ++passes;
        do {
            got = 0;
            for (i = 0; i < window; ++i) {
                if (reqs[i] == MPI_REQUEST_NULL) {
                    continue;
                }
                MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                if (!flag) {
                    continue;
                }
                bad += !check(bufs + (size_t)i * size, size, seqs[i]);
                ++received;
                ++got;
                if (!stopped || (next < total)) {
                    seqs[i] = next++;
                    MPI_Irecv(bufs + (size_t)i * size, (int)size, MPI_BYTE, 0,
                              TAG_DATA, MPI_COMM_WORLD, &reqs[i]);
                }
            }
        } while (got > 0);
    }
    /* receives posted past the last message are cancelled */
    for (i = 0; i < window; ++i) {
        if (reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&reqs[i]);
            MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (bad != 0) {
        fprintf(stderr, "compute_rx: %llu messages corrupted or out of order\n",
                (unsigned long long)bad);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("compute_rx receiver messages=%llu recv_passes=%lu\n",
           (unsigned long long)received, passes);
    free(seqs);
    free(bufs);
    free(reqs);
}

int main(int argc, char **argv)
{
    size_t size    = 4096;
    double seconds = 2.0, compute_ms = 100;
    int window = 64, rank, nprocs, opt;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "s:t:c:w:")) != -1) {
        switch (opt) {
        case 's':
            size = strtoul(optarg, NULL, 0);
            break;
        case 't':
            seconds = atof(optarg);
            break;
        case 'c':
            compute_ms = atof(optarg);
            break;
        case 'w':
            window = atoi(optarg);
            break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: compute_rx [-s size] [-t seconds] "
                                "[-c compute_ms] [-w window]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if ((nprocs != 2) || (window < 1) || (size < 1)) {
        if (rank == 0) {
            fprintf(stderr, "compute_rx: 2 ranks, window and size >= 1\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0) {
        sender(size, seconds, window);
    } else {
        receiver(size, compute_ms / 1e3, window);
    }
    MPI_Finalize();
    return 0;
}
