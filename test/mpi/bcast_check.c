/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus MPI test: data-verifying MPI_Bcast, as a user of the multicast
 * broadcast library (libaptus_bcast) would break it.
 *
 * Every byte received is compared with value(root, round, index), and
 * bytes a datatype leaves out must stay untouched. Phases:
 *   sizes     every root, 1 byte to 64 KiB (across the multicast limit and
 *             the datagram size), MPI_BYTE
 *   types     MPI_INT, MPI_DOUBLE, MPI_SHORT_INT (a named type with a
 *             hole), a strided vector and a struct with gaps
 *   comms     MPI_COMM_WORLD, a duplicate and an odd/even split used in
 *             interleaved order, every root of each
 *   burst     back-to-back 8-byte broadcasts from rotating roots
 *             (the window wraps, credits hold the roots)
 *   slow      the last rank sleeps while root 0 broadcasts 3 windows' worth
 *   cycle     communicators created, used and freed again and again
 *   threads   two threads broadcast at once, each on its own communicator
 *             (set up concurrently), under MPI_THREAD_MULTIPLE
 *
 * Usage: bcast_check [-i ROUNDS] [-b BURST] [-k|-s RANK:COUNT] [-p PHASES]
 *                    [-v]
 *   -i  rounds of the sizes and comms phases (default 2)
 *   -b  broadcasts in the burst phase (default 2000)
 *   -k  rank RANK kills itself (SIGKILL) at its COUNT-th broadcast of a
 *       long loop: the job must end with an error, not hang
 *   -s  the same with SIGSTOP: the rank stays, silent, and the library's
 *       own peer timeout must end the job
 *   -p  the phases to run, comma-separated (default all)
 *   -m  largest size of the sizes phase (default 65536)
 *   -v  a line per phase on rank 0
 *
 * Each rank prints "bcast_check rank R/N pid P: OK|FAIL ..." and rank 0 a
 * final "bcast_check: PASS|FAIL". Exits non-zero on any mismatch.
 */
#include <mpi.h>

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_REPORTS 10

static int rank, nranks, verbose, reports;
static long errors, checked;

static inline uint8_t value(int root, int round, size_t idx)
{
    uint32_t h = (uint32_t)root * 0x9E3779B1u ^ (uint32_t)round * 0x85EBCA77u ^
                 (uint32_t)idx * 0xC2B2AE3Du;

    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return (uint8_t)(h ^ (h >> 8));
}

static void report(const char *phase, int root, int round, size_t idx,
                   unsigned got, unsigned want)
{
    errors++;
    if (reports++ < MAX_REPORTS) {
        printf("bcast_check: FAIL rank %d: %s root %d round %d byte %zu: "
               "got 0x%02x want 0x%02x\n",
               rank, phase, root, round, idx, got, want);
    }
}

static void fill(uint8_t *buf, size_t n, int root, int round)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        buf[i] = value(root, round, i);
    }
}

static void verify(const char *phase, const uint8_t *buf, size_t n, int root,
                   int round)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        if (buf[i] != value(root, round, i)) {
            report(phase, root, round, i, buf[i], value(root, round, i));
            return;
        }
    }
    checked++;
}

static void bcast_bytes(const char *phase, MPI_Comm comm, size_t n, int root,
                        int round)
{
    int me;
    uint8_t *buf = malloc(n + 16);

    MPI_Comm_rank(comm, &me);
    memset(buf, 0x5a, n + 16);
    if (me == root) {
        fill(buf, n, root, round);
    }
    MPI_Bcast(buf, (int)n, MPI_BYTE, root, comm);
    verify(phase, buf, n, root, round);
    for (size_t i = n; i < n + 16; ++i) {
        if (buf[i] != 0x5a) {
            report(phase, root, round, i, buf[i], 0x5a);
            break;
        }
    }
    free(buf);
}

static size_t max_size = 65536;

static void phase_sizes(int rounds)
{
    static const size_t sizes[] = { 1,     7,     8,     100,  1000, 1324,
                                    1325,  2048,  4000,  8192, 8193, 16384,
                                    32767, 32768, 32769, 65536 };
    int round, root;
    unsigned i;

    for (round = 0; round < rounds; ++round) {
        for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
            if (sizes[i] > max_size) {
                continue;
            }
            for (root = 0; root < nranks; ++root) {
                bcast_bytes("sizes", MPI_COMM_WORLD, sizes[i], root,
                            round * 100 + (int)i);
            }
        }
    }
}

static void phase_types(void)
{
    enum { N = 1000, STRIDE = 3 };
    int ints[N], root, i, me = rank;
    double dbl[N];
    struct {
        short s;
        int i;
    } si[N];
    int vec[N * STRIDE];
    struct rec {
        char c;
        double d;
        int k[3];
    } recs[64];
    MPI_Datatype vtype, stype, rtype;
    int blen[3]       = { 1, 1, 3 };
    MPI_Aint disp[3]  = { offsetof(struct rec, c), offsetof(struct rec, d),
                          offsetof(struct rec, k) };
    MPI_Datatype t[3] = { MPI_CHAR, MPI_DOUBLE, MPI_INT };

    MPI_Type_vector(N, 1, STRIDE, MPI_INT, &vtype);
    MPI_Type_commit(&vtype);
    MPI_Type_create_struct(3, blen, disp, t, &stype);
    MPI_Type_create_resized(stype, 0, sizeof(struct rec), &rtype);
    MPI_Type_commit(&rtype);

    for (root = 0; root < nranks; ++root) {
        for (i = 0; i < N; ++i) {
            ints[i] = (me == root) ? root * 100000 + i : -1;
            dbl[i]  = (me == root) ? root + i * 0.5 : -1.0;
            si[i].s = (short)((me == root) ? root + i : -1);
            si[i].i = (me == root) ? root * 7 + i : -1;
        }
        for (i = 0; i < N * STRIDE; ++i) {
            vec[i] = (me == root) ? root * 1000 + i : -2;
        }
        memset(recs, 0, sizeof(recs));
        for (i = 0; i < 64; ++i) {
            recs[i].c    = (char)((me == root) ? 'a' + i % 26 : 0);
            recs[i].d    = (me == root) ? root * 0.25 + i : 0;
            recs[i].k[0] = recs[i].k[1] = recs[i].k[2] =
                (me == root) ? root + i : 0;
        }
        MPI_Bcast(ints, N, MPI_INT, root, MPI_COMM_WORLD);
        MPI_Bcast(dbl, N, MPI_DOUBLE, root, MPI_COMM_WORLD);
        MPI_Bcast(si, N, MPI_SHORT_INT, root, MPI_COMM_WORLD);
        MPI_Bcast(vec, 1, vtype, root, MPI_COMM_WORLD);
        MPI_Bcast(recs, 64, rtype, root, MPI_COMM_WORLD);
        for (i = 0; i < N; ++i) {
            if ((ints[i] != root * 100000 + i) || (dbl[i] != root + i * 0.5) ||
                (si[i].s != (short)(root + i)) || (si[i].i != root * 7 + i)) {
                report("types/named", root, 0, (size_t)i, 0, 0);
                break;
            }
        }
        for (i = 0; i < N * STRIDE; ++i) {
            int want = ((i % STRIDE) == 0 || me == root) ? root * 1000 + i : -2;
            if (vec[i] != want) {
                report("types/vector", root, 0, (size_t)i, (unsigned)vec[i],
                       (unsigned)want);
                break;
            }
        }
        for (i = 0; i < 64; ++i) {
            if ((recs[i].c != 'a' + i % 26) || (recs[i].d != root * 0.25 + i) ||
                (recs[i].k[2] != root + i)) {
                report("types/struct", root, 0, (size_t)i, 0, 0);
                break;
            }
        }
        checked += 5;
    }
    MPI_Type_free(&vtype);
    MPI_Type_free(&stype);
    MPI_Type_free(&rtype);
}

static void phase_comms(int rounds)
{
    MPI_Comm dup, half;
    int round, r, hsize;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, nranks - rank, &half);
    MPI_Comm_size(half, &hsize);
    for (round = 0; round < rounds; ++round) {
        for (r = 0; r < nranks; ++r) {
            bcast_bytes("comms/dup", dup, 64 + (size_t)r, r, round);
            bcast_bytes("comms/world", MPI_COMM_WORLD, 3000, nranks - 1 - r,
                        round);
            bcast_bytes("comms/half", half, 200 + (size_t)round, r % hsize,
                        round + r);
            bcast_bytes("comms/dup-big", dup, 20000, (r + 1) % nranks, round);
        }
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
}

static void phase_burst(int count)
{
    uint64_t v;
    int i, root;

    for (i = 0; i < count; ++i) {
        root = i % nranks;
        v    = (rank == root) ? (uint64_t)i * 0x9E3779B97F4A7C15ull : 0;
        MPI_Bcast(&v, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
        if (v != (uint64_t)i * 0x9E3779B97F4A7C15ull) {
            report("burst", root, i, 0, (unsigned)v, 0);
            return;
        }
    }
    checked += count;
}

static void phase_slow(void)
{
    int i;

    if (rank == nranks - 1) {
        usleep(300000); /* does not progress MPI at all meanwhile */
    }
    for (i = 0; i < 200; ++i) {
        bcast_bytes("slow", MPI_COMM_WORLD, 512, 0, i);
    }
}

static void phase_cycle(void)
{
    MPI_Comm c;
    int i, size;

    for (i = 0; i < 6; ++i) {
        MPI_Comm_split(MPI_COMM_WORLD, (rank + i) % 3 == 0, rank, &c);
        MPI_Comm_size(c, &size);
        bcast_bytes("cycle", c, 100 + (size_t)i, i % size, i);
        bcast_bytes("cycle", c, 5000, (i + 1) % size, i);
        MPI_Comm_free(&c);
    }
}

/* Two threads, each broadcasting on its own communicator at once (set-up
 * included), when the MPI offers MPI_THREAD_MULTIPLE. */
struct thread_arg {
    MPI_Comm comm;
    int id;
    long errors, checked;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    uint8_t buf[3000];
    int i, r, me, size;
    size_t n, j;

    MPI_Comm_rank(a->comm, &me);
    MPI_Comm_size(a->comm, &size);
    for (i = 0; i < 400; ++i) {
        r = (i * (a->id + 1)) % size;
        n = 1 + (size_t)(i * 37 + a->id * 101) % sizeof(buf);
        if (me == r) {
            fill(buf, n, r, i * 2 + a->id);
        } else {
            memset(buf, 0, n);
        }
        MPI_Bcast(buf, (int)n, MPI_BYTE, r, a->comm);
        for (j = 0; j < n; ++j) {
            if (buf[j] != value(r, i * 2 + a->id, j)) {
                a->errors++;
                break;
            }
        }
        a->checked++;
    }
    return NULL;
}

static void phase_threads(int provided)
{
    struct thread_arg args[2];
    pthread_t tid[2];
    int t;

    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            printf("bcast_check: threads: skipped (MPI_THREAD_MULTIPLE not "
                   "provided)\n");
        }
        return;
    }
    for (t = 0; t < 2; ++t) {
        MPI_Comm_dup(MPI_COMM_WORLD, &args[t].comm);
        args[t].id      = t;
        args[t].errors  = 0;
        args[t].checked = 0;
    }
    for (t = 0; t < 2; ++t) {
        pthread_create(&tid[t], NULL, thread_main, &args[t]);
    }
    for (t = 0; t < 2; ++t) {
        pthread_join(tid[t], NULL);
        if (args[t].errors != 0) {
            report("threads", t, 0, 0, 0, 0);
        }
        checked += args[t].checked;
        MPI_Comm_free(&args[t].comm);
    }
}

static void kill_loop(int victim, int at, int sig)
{
    int i;
    uint8_t buf[256];

    for (i = 0; i < 1000000; ++i) {
        if ((rank == victim) && (i == at)) {
            printf("bcast_check rank %d: %s at broadcast %d\n", rank,
                   (sig == SIGKILL) ? "killing myself" : "stopping myself", i);
            fflush(stdout);
            raise(sig);
        }
        fill(buf, sizeof(buf), 0, i);
        MPI_Bcast(buf, sizeof(buf), MPI_BYTE, 0, MPI_COMM_WORLD);
        usleep(1000);
    }
}

int main(int argc, char **argv)
{
    int rounds = 2, burst = 2000, opt, victim = -1, at = 0, sig = SIGKILL;
    const char *phases = "sizes,types,comms,burst,slow,cycle,threads";
    long total_errors  = 0;
    int provided;
    double t0;

    while ((opt = getopt(argc, argv, "i:b:k:s:p:m:v")) != -1) {
        switch (opt) {
        case 'i':
            rounds = atoi(optarg);
            break;
        case 'b':
            burst = atoi(optarg);
            break;
        case 's':
            sig = SIGSTOP;
            /* fall through */
        case 'k':
            if (sscanf(optarg, "%d:%d", &victim, &at) != 2) {
                fprintf(stderr, "bcast_check: -k/-s RANK:COUNT\n");
                return 2;
            }
            break;
        case 'p':
            phases = optarg;
            break;
        case 'm':
            max_size = (size_t)atol(optarg);
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            fprintf(stderr, "usage: bcast_check [-i ROUNDS] [-b BURST] "
                            "[-k|-s RANK:COUNT] [-p PHASES] [-m MAX] [-v]\n");
            return 2;
        }
    }
    /* MPI_THREAD_MULTIPLE only where the threads phase needs it: it
     * changes how the MPI progresses */
    MPI_Init_thread(&argc, &argv,
                    strstr(phases, "threads") ? MPI_THREAD_MULTIPLE
                                              : MPI_THREAD_SINGLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (victim >= 0) {
        kill_loop(victim, at, sig);
    }

#define PHASE(name, call)                                                      \
    do {                                                                       \
        if (!strstr(phases, name)) {                                           \
            break;                                                             \
        }                                                                      \
        t0 = MPI_Wtime();                                                      \
        call;                                                                  \
        if (verbose && (rank == 0)) {                                          \
            printf("bcast_check: %-6s %.3f s\n", name, MPI_Wtime() - t0);      \
            fflush(stdout);                                                    \
        }                                                                      \
    } while (0)

    PHASE("sizes", phase_sizes(rounds));
    PHASE("types", phase_types());
    PHASE("comms", phase_comms(rounds));
    PHASE("burst", phase_burst(burst));
    PHASE("slow", phase_slow());
    PHASE("cycle", phase_cycle());
    PHASE("threads", phase_threads(provided));

    printf("bcast_check rank %d/%d pid %d: %s checked=%ld errors=%ld\n", rank,
           nranks, (int)getpid(), (errors == 0) ? "OK" : "FAIL", checked,
           errors);
    fflush(stdout);
    MPI_Reduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("bcast_check: %s ranks=%d errors=%ld\n",
               (total_errors == 0) ? "PASS" : "FAIL", nranks, total_errors);
    }
    MPI_Finalize();
    return (errors == 0) ? 0 : 1;
}
