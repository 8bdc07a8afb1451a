/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus MPI test: each rank talks heavily to a few peers and lightly
 * to all others -- the traffic pattern the hybrid transport is built for
 * (Koop et al., "MVAPICH-Aptus", IPDPS 2008): only the heavy peers should
 * earn the expensive channels.
 *
 * Heavy peers of rank r are r+1 .. r+H and r-1 .. r-H (modulo the job
 * size, H = -h, default 1): every iteration a rank sends each of them -b
 * messages of -s bytes and, every 8th iteration, one of -l bytes (above
 * UCP's rendezvous threshold). Every -e iterations it sends every other
 * rank one small message. Every byte received is compared with a pattern
 * of (sender, receiver, iteration, message, byte).
 *
 * Usage: heavy_light [-i ITERS] [-h HEAVY] [-b BURST] [-s SIZE]
 *                    [-l LARGE] [-e EVERY]
 * Each rank prints "heavy_light rank R/N pid P: OK|FAIL ..." and rank 0 a
 * final "heavy_light: PASS|FAIL". Exits non-zero on any mismatch.
 */
#include <mpi.h>

#include "mpi_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_HEAVY 1
#define TAG_LARGE 2
#define TAG_LIGHT 3
#define LIGHT_LEN 64

static int rank, nranks;
static long errors;

static inline uint8_t byte_of(int src, int dst, int iter, int msg, size_t i)
{
    uint32_t h = (uint32_t)src * 0x9E3779B1u ^ (uint32_t)dst * 0x85EBCA77u ^
                 (uint32_t)iter * 0xC2B2AE3Du ^ (uint32_t)msg * 0x27D4EB2Fu;

    h ^= h >> 15;
    return (uint8_t)(h + i * 131 + (i >> 8));
}

static void fill(uint8_t *buf, int dst, int iter, int msg, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        buf[i] = byte_of(rank, dst, iter, msg, i);
    }
}

static void check(const uint8_t *buf, int src, int iter, int msg, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        if (buf[i] != byte_of(src, rank, iter, msg, i)) {
            if (errors++ < 5) {
                fprintf(stderr,
                        "heavy_light rank %d: from %d iter %d msg %d byte "
                        "%zu: got 0x%02x expected 0x%02x\n",
                        rank, src, iter, msg, i, buf[i],
                        byte_of(src, rank, iter, msg, i));
            }
            return;
        }
    }
}

static int is_heavy(int peer, int heavy)
{
    int d = (peer - rank + nranks) % nranks;

    return (d != 0) && ((d <= heavy) || (d >= nranks - heavy));
}

int main(int argc, char **argv)
{
    int iters = 400, heavy = 1, burst = 16, every = 50;
    size_t size = 4096, large = 256 * 1024;
    int opt, iter, peer, m, nreq, nheavy, k;
    uint8_t **sbuf, **rbuf;
    MPI_Request *req;
    long total_errors = 0;
    double t0;
    int *peers;
    size_t bytes = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "i:h:b:s:l:e:")) != -1) {
        switch (opt) {
        case 'i':
            iters = atoi(optarg);
            break;
        case 'h':
            heavy = atoi(optarg);
            break;
        case 'b':
            burst = atoi(optarg);
            break;
        case 's':
            size = mpi_test_parse_size("heavy_light", optarg);
            break;
        case 'l':
            large = mpi_test_parse_size("heavy_light", optarg);
            break;
        case 'e':
            every = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: heavy_light [-i ITERS] [-h HEAVY] "
                            "[-b BURST] [-s SIZE] [-l LARGE] [-e EVERY]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (2 * heavy >= nranks) {
        heavy = (nranks - 1) / 2;
    }

    peers  = malloc(sizeof(*peers) * nranks);
    nheavy = 0;
    for (peer = 0; peer < nranks; ++peer) {
        if (is_heavy(peer, heavy)) {
            peers[nheavy++] = peer;
        }
    }
    /* per heavy peer: burst messages and a large one; per light peer: one */
    nreq = 2 * (nheavy * (burst + 1) + nranks);
    req  = malloc(sizeof(*req) * nreq);
    sbuf = malloc(sizeof(*sbuf) * nreq);
    rbuf = malloc(sizeof(*rbuf) * nreq);
    for (k = 0; k < nreq; ++k) {
        sbuf[k] = malloc(large > size ? large : size);
        rbuf[k] = malloc(large > size ? large : size);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (iter = 0; iter < iters; ++iter) {
        int nr = 0, ns = 0, light = (iter % every) == 0;
        int big = (iter % 8) == 0;
        struct {
            int src, msg;
            size_t len;
        } expect[nreq];

        for (k = 0; k < nheavy; ++k) {
            for (m = 0; m < burst + big; ++m) {
                size_t len     = (m == burst) ? large : size;
                expect[nr].src = peers[k];
                expect[nr].msg = m;
                expect[nr].len = len;
                MPI_Irecv(rbuf[nr], (int)len, MPI_BYTE, peers[k],
                          (m == burst) ? TAG_LARGE : TAG_HEAVY, MPI_COMM_WORLD,
                          &req[nr]);
                ++nr;
            }
        }
        for (peer = 0; light && (peer < nranks); ++peer) {
            if ((peer == rank) || is_heavy(peer, heavy)) {
                continue;
            }
            expect[nr].src = peer;
            expect[nr].msg = 1000;
            expect[nr].len = LIGHT_LEN;
            MPI_Irecv(rbuf[nr], LIGHT_LEN, MPI_BYTE, peer, TAG_LIGHT,
                      MPI_COMM_WORLD, &req[nr]);
            ++nr;
        }
        ns = nr;
        for (k = 0; k < nheavy; ++k) {
            for (m = 0; m < burst + big; ++m) {
                size_t len = (m == burst) ? large : size;
                fill(sbuf[ns], peers[k], iter, m, len);
                MPI_Isend(sbuf[ns], (int)len, MPI_BYTE, peers[k],
                          (m == burst) ? TAG_LARGE : TAG_HEAVY, MPI_COMM_WORLD,
                          &req[ns]);
                bytes += len;
                ++ns;
            }
        }
        for (peer = 0; light && (peer < nranks); ++peer) {
            if ((peer == rank) || is_heavy(peer, heavy)) {
                continue;
            }
            fill(sbuf[ns], peer, iter, 1000, LIGHT_LEN);
            MPI_Isend(sbuf[ns], LIGHT_LEN, MPI_BYTE, peer, TAG_LIGHT,
                      MPI_COMM_WORLD, &req[ns]);
            bytes += LIGHT_LEN;
            ++ns;
        }
        MPI_Waitall(ns, req, MPI_STATUSES_IGNORE);
        for (k = 0; k < nr; ++k) {
            check(rbuf[k], expect[k].src, iter, expect[k].msg, expect[k].len);
        }
    }

    printf("heavy_light rank %d/%d pid %d: %s heavy_peers=%d bytes_sent=%zu "
           "time=%.3fs\n",
           rank, nranks, (int)getpid(), errors ? "FAIL" : "OK", nheavy, bytes,
           MPI_Wtime() - t0);
    fflush(stdout);
    MPI_Reduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("heavy_light: %s (%d ranks, %d iterations, %d heavy peers "
               "each)\n",
               total_errors ? "FAIL" : "PASS", nranks, iters, nheavy);
    }
    for (k = 0; k < nreq; ++k) {
        free(sbuf[k]);
        free(rbuf[k]);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(peers);
    MPI_Finalize();
    return (errors || total_errors) ? 1 : 0;
}
