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
 *   skew  for each size and skew: a barrier, then every rank is away
 *         (asleep) for a random time in [0, SKEW_US], then MPI_Bcast; the
 *         time inside it averaged over iterations and ranks. A receiver
 *         waits for the root either way; under a tree it also waits for
 *         the interior ranks on its path, a delay that grows with the
 *         tree's depth.
 *
 * Usage: bcast_bench [-m MODES] [-s SIZES] [-T SIZES] [-Z SIZES] [-i ITERS]
 *                    [-w WARMUP] [-k SKEWS] [-c] [-v]
 *   -m  modes, comma-separated, run in that order in one job; each may
 *       carry its own iteration count: -m lat:300,tput:2000,skew:100
 *       (default lat; without a count, -i)
 *   -s  sizes of lat (and of tput and skew unless -T / -Z say)
 *   -T  sizes of tput; -Z sizes of skew
 *   -k  skews in us, comma-separated (default 1000)
 *   -c  check: every broadcast (warm-up included) carries its own bytes
 *       (the broadcast's number in its first 4 bytes, then one of 61
 *       patterns, all made before the timing); every rank but the root
 *       compares every byte after every call, outside the timed part for
 *       lat and skew, inside the loop for tput (for every MPI_Bcast
 *       alike). A line per mode and size says checked=BYTES bad=BYTES,
 *       summed over ranks; any bad byte makes every rank exit 1.
 *   -v  every rank's own average and worst time on stderr.
 * Rank 0 prints one line per size (and skew):
 *   bcast_bench mode=lat np=8 size=64 usec=12.3 iters=300 [checked=.. bad=..]
 *   bcast_bench mode=skew np=8 size=64 usec=812.1 iters=100 skew_us=1000 ...
 * and at the end, before MPI_Finalize:
 *   bcast_bench: done np=8 checked=BYTES bad=BYTES (-c: PASS or FAIL)
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE  (1 << 20)
#define NPATTERNS 61 /* prime: a message off by a few positions differs */

static int rank, np, check, verbose;
static long long checked, bad; /* this rank's bytes */
static uint8_t *patterns[NPATTERNS];
static uint8_t *buf;

/* The skew: a rank is away (asleep, so that on a host with fewer cores
 * than ranks the others keep theirs) for usec. */
static void away_for(double usec)
{
    struct timespec ts;

    ts.tv_sec  = (time_t)(usec / 1e6);
    ts.tv_nsec = (long)((usec - (double)ts.tv_sec * 1e6) * 1e3);
    nanosleep(&ts, NULL);
}

static void make_patterns(size_t len)
{
    uint32_t h;
    int p;
    size_t i;

    for (p = 0; p < NPATTERNS; ++p) {
        patterns[p] = malloc(len);
        for (i = 0; i < len; ++i) {
            h = (uint32_t)p * 0x9E3779B1u ^ (uint32_t)i * 0xC2B2AE3Du;
            h ^= h >> 15;
            h *= 0x2C1B3C6Du;
            h ^= h >> 12;
            patterns[p][i] = (uint8_t)(h ^ (h >> 8));
        }
    }
}

/* Before broadcast number n: the root puts its bytes in buf. */
static void check_fill(uint32_t n, int size)
{
    if (!check || rank != 0) {
        return;
    }
    memcpy(buf, patterns[n % NPATTERNS], size);
    memcpy(buf, &n, size < 4 ? size : 4);
}

/* After broadcast number n: a receiver compares every byte. */
static void check_verify(uint32_t n, int size)
{
    const uint8_t *want = patterns[n % NPATTERNS];
    uint8_t head[4];
    int i, h = size < 4 ? size : 4;

    if (!check || rank == 0) {
        return;
    }
    checked += size;
    memcpy(head, &n, 4);
    if (memcmp(buf, head, h) == 0 && memcmp(buf + h, want + h, size - h) == 0) {
        return;
    }
    for (i = 0; i < size; ++i) {
        if (buf[i] != (i < h ? head[i] : want[i])) {
            if (bad < 5) {
                fprintf(stderr,
                        "bcast_bench: rank %d broadcast %u size %d byte %d: "
                        "got 0x%02x want 0x%02x\n",
                        rank, n, size, i, buf[i], i < h ? head[i] : want[i]);
            }
            bad++;
        }
    }
}

static void bcast(uint32_t *n, int size)
{
    check_fill(*n, size);
    MPI_Bcast(buf, size, MPI_BYTE, 0, MPI_COMM_WORLD);
    check_verify(*n, size);
    ++*n;
}

/* " checked=.. bad=.." of the bytes since the last call, summed over the
 * ranks (every rank calls it). */
static const char *check_fields(long long *from_checked, long long *from_bad)
{
    static char s[96];
    long long mine[2] = { checked - *from_checked, bad - *from_bad }, all[2];

    *from_checked = checked;
    *from_bad     = bad;
    if (!check) {
        return "";
    }
    MPI_Reduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    snprintf(s, sizeof(s), " checked=%lld bad=%lld", all[0], all[1]);
    return s;
}

static int parse_list(const char *arg, double *out, int max)
{
    char tmp[512], *tok, *save = NULL;
    int n = 0;

    snprintf(tmp, sizeof(tmp), "%s", arg);
    for (tok = strtok_r(tmp, ",", &save); tok != NULL && n < max;
         tok = strtok_r(NULL, ",", &save)) {
        out[n++] = atof(tok);
    }
    return n;
}

static void run_mode(const char *mode, int iters, int warmup,
                     const char *sizes_arg, const double *skews, int nskews)
{
    double sizes[64], t, t0, sum, all, rate, worst, skew_us;
    long long from_checked = checked, from_bad = bad;
    int nsizes, s, k, i, size, is_skew = !strcmp(mode, "skew");
    unsigned seed = 12345u + 7919u * (unsigned)rank;
    uint32_t n    = 0;

    nsizes = parse_list(sizes_arg, sizes, 64);
    for (s = 0; s < nsizes; ++s) {
        size = (int)sizes[s];
        if (size < 1 || size > MAX_SIZE) {
            continue;
        }
        for (k = 0; k < (is_skew ? nskews : 1); ++k) {
            skew_us = is_skew ? skews[k] : 0;
            for (i = 0; i < warmup; ++i) {
                bcast(&n, size);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            sum   = 0;
            worst = 0;
            if (!strcmp(mode, "lat") || is_skew) {
                for (i = 0; i < iters; ++i) {
                    if (is_skew) {
                        /* all start together, then each is away a while */
                        MPI_Barrier(MPI_COMM_WORLD);
                        away_for(skew_us * rand_r(&seed) / RAND_MAX);
                    }
                    check_fill(n, size);
                    t = MPI_Wtime();
                    MPI_Bcast(buf, size, MPI_BYTE, 0, MPI_COMM_WORLD);
                    t = MPI_Wtime() - t;
                    check_verify(n++, size);
                    sum += t;
                    if (t > worst) {
                        worst = t;
                    }
                    if (!is_skew) {
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
                MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0,
                           MPI_COMM_WORLD);
                const char *cf = check_fields(&from_checked, &from_bad);
                if (rank == 0) {
                    printf("bcast_bench mode=%s np=%d size=%d usec=%.2f "
                           "iters=%d",
                           mode, np, size, all / np * 1e6, iters);
                    if (is_skew) {
                        printf(" skew_us=%.0f", skew_us);
                    }
                    printf("%s\n", cf);
                }
            } else {
                t0 = MPI_Wtime();
                for (i = 0; i < iters; ++i) {
                    bcast(&n, size);
                }
                MPI_Barrier(MPI_COMM_WORLD);
                t              = MPI_Wtime() - t0;
                rate           = iters / t;
                const char *cf = check_fields(&from_checked, &from_bad);
                if (rank == 0) {
                    printf("bcast_bench mode=tput np=%d size=%d per_sec=%.0f "
                           "MBps=%.2f iters=%d%s\n",
                           np, size, rate, rate * size / 1e6, iters, cf);
                }
            }
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    char modes_arg[256]  = "lat";
    char sizes_arg[512]  = "8,64,512,1024,4096,8192,16384,32768";
    char tsizes_arg[512] = "", zsizes_arg[512] = "";
    double skews[32] = { 1000 };
    int nskews = 1, iters = 1000, warmup = 50, opt, miters, failed;
    long long mine[2], all[2];
    char *tok, *save = NULL, *colon;
    const char *sz;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    while ((opt = getopt(argc, argv, "m:s:T:Z:i:w:k:cv")) != -1) {
        switch (opt) {
        case 'm':
            snprintf(modes_arg, sizeof(modes_arg), "%s", optarg);
            break;
        case 's':
            snprintf(sizes_arg, sizeof(sizes_arg), "%s", optarg);
            break;
        case 'T':
            snprintf(tsizes_arg, sizeof(tsizes_arg), "%s", optarg);
            break;
        case 'Z':
            snprintf(zsizes_arg, sizeof(zsizes_arg), "%s", optarg);
            break;
        case 'i':
            iters = atoi(optarg);
            break;
        case 'w':
            warmup = atoi(optarg);
            break;
        case 'k':
            nskews = parse_list(optarg, skews, 32);
            break;
        case 'c':
            check = 1;
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: bcast_bench [-m lat,tput,skew[:ITERS]] "
                                "[-s SIZES] [-T SIZES] [-Z SIZES] [-i ITERS] "
                                "[-w WARMUP] [-k SKEWS] [-c] [-v]\n");
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    buf = malloc(MAX_SIZE);
    memset(buf, rank, MAX_SIZE);
    if (check) {
        /* as long as the largest size any mode uses */
        double v[64];
        size_t len           = 4;
        const char *lists[3] = { sizes_arg, tsizes_arg, zsizes_arg };
        for (int l = 0; l < 3; ++l) {
            for (int j = parse_list(lists[l], v, 64) - 1; j >= 0; --j) {
                if (v[j] > len && v[j] <= MAX_SIZE) {
                    len = (size_t)v[j];
                }
            }
        }
        make_patterns(len);
    }

    for (tok = strtok_r(modes_arg, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        miters = iters;
        colon  = strchr(tok, ':');
        if (colon != NULL) {
            *colon = '\0';
            miters = atoi(colon + 1);
        }
        if (strcmp(tok, "lat") && strcmp(tok, "tput") && strcmp(tok, "skew")) {
            if (rank == 0) {
                fprintf(stderr, "bcast_bench: unknown mode %s\n", tok);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        sz = sizes_arg;
        if (!strcmp(tok, "tput") && tsizes_arg[0]) {
            sz = tsizes_arg;
        } else if (!strcmp(tok, "skew") && zsizes_arg[0]) {
            sz = zsizes_arg;
        }
        run_mode(tok, miters, warmup, sz, skews, nskews);
    }

    mine[0] = checked;
    mine[1] = bad;
    MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    failed = check && all[1] > 0;
    if (rank == 0) {
        printf("bcast_bench: done np=%d checked=%lld bad=%lld%s\n", np, all[0],
               all[1],
               !check   ? ""
               : failed ? " FAIL"
                        : " PASS");
        fflush(stdout);
    }
    free(buf);
    MPI_Finalize();
    return failed ? 1 : 0;
}
