/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: MPI_Bcast over reliable multicast, through the MPI profiling
 * interface. Built once per MPI (libaptus_bcast.so for Open MPI,
 * libaptus_bcast_mpich.so for MPICH); preload it or link it before the
 * MPI library (aptus-env --bcast does the former).
 *
 * What it serves, and what it leaves to the MPI library:
 * - A communicator is set up at its first MPI_Bcast (every rank calls it
 *   there, so the set-up's own collectives match): rank 0 draws a random
 *   key, every rank opens the sock wire's multicast (bcast_net.h) and the
 *   point-to-point addresses are exchanged with PMPI_Allgather; then every
 *   rank multicasts a probe and the ranks agree (PMPI_Allreduce) whether
 *   each heard all the others. If not, or a socket could not be opened,
 *   the communicator uses PMPI_Bcast for good, and one line says why.
 * - MPI_Comm_dup and MPI_Comm_split need nothing: the new communicator has
 *   no state (the keyval's copy function is the null one) and is set up
 *   at its own first broadcast. MPI_Comm_free waits in PMPI_Barrier (the
 *   progress thread serving repairs meanwhile: after it, every rank holds
 *   every message) and the attribute's delete function closes the
 *   communicator's engine. MPI_Finalize does the same for what is left.
 * - Broadcasts of intercommunicators, of one rank, of zero bytes or of
 *   more than APTUS_BCAST_MAX_MSG bytes go to PMPI_Bcast. Every rank
 *   makes the same choice: it depends only on the type signature's size,
 *   which MPI requires to match.
 * - Predefined contiguous types travel as they are; any other datatype
 *   is packed with PMPI_Pack at the root and unpacked with PMPI_Unpack.
 * - Errors (a silent peer, ranks that disagree on the root) go through
 *   the communicator's error handler, after one line that says what.
 */
#include "bcast_config.h"
#include "bcast_engine.h"
#include "bcast_progress.h"

#include <mpi.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#ifdef OPEN_MPI
#define APTUS_BC_BUILT_FOR APTUS_BC_MPI_OPEN_MPI
#else
#define APTUS_BC_BUILT_FOR APTUS_BC_MPI_MPICH
#endif

/* MPICH's MPI_MAX_LIBRARY_VERSION_STRING; Open MPI's is smaller. The
 * running MPI writes up to its own, whichever header this was built with. */
#define APTUS_BC_VERSION_MAX 8192

#define APTUS_BC_MODE_MCAST    1
#define APTUS_BC_MODE_FALLBACK 2

/* Per-rank information exchanged at set-up. */
typedef struct aptus_bc_info {
    aptus_bc_addr_t addr;
    uint32_t ok;     /* the multicast opened */
    uint32_t failed; /* multicast failed on an earlier communicator */
    uint32_t room;   /* payload bytes of one datagram */
    uint32_t wire;   /* aptus_bc_wire_t it opened on */
    uint32_t cfg[8]; /* the settings every rank must share */
} aptus_bc_info_t;

typedef struct aptus_bc_comm {
    int mode;
    MPI_Comm comm;
    uint32_t size;
    uint32_t rank;
    uint64_t key;
    aptus_bc_engine_t engine;
    uint8_t *pack_buf; /* max_msg bytes, for derived datatypes */
    uint32_t max_msg;
    uint64_t n_root;     /* broadcasts multicast as the root */
    uint64_t n_recv;     /* broadcasts received by multicast */
    uint64_t n_packed;   /* of those, derived datatypes */
    uint64_t n_fallback; /* left to PMPI_Bcast */
    struct aptus_bc_comm *next;
} aptus_bc_comm_t;

static pthread_mutex_t aptus_bc_lock = PTHREAD_MUTEX_INITIALIZER;
static int aptus_bc_keyval           = MPI_KEYVAL_INVALID;
static int aptus_bc_cfg_state; /* 0: unread, 1: good, -1: malformed */
static aptus_bc_config_t aptus_bc_cfg;
static char aptus_bc_cfg_err[256];
static int aptus_bc_fallback_reported; /* log the first fallback only */
static int aptus_bc_probe_failed;      /* a probe round failed before */
static aptus_bc_comm_t *aptus_bc_comms;
static FILE *aptus_bc_stats_file;

static void aptus_bc_log(const aptus_bc_comm_t *c, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "aptus_bcast: [rank %u of %u, pid %d] %s\n", c->rank,
            c->size, (int)getpid(), line);
    fflush(stderr);
}

/* Why a communicator falls back: the process's first such line, and every
 * one with APTUS_BCAST_VERBOSE=y. */
static void aptus_bc_log_fallback(const aptus_bc_comm_t *c, const char *why)
{
    if (aptus_bc_fallback_reported && !aptus_bc_cfg.verbose) {
        return;
    }
    aptus_bc_fallback_reported = 1;
    aptus_bc_log(c,
                 "%s; MPI_Bcast on this communicator of %u ranks uses the "
                 "MPI library's own%s",
                 why, c->size,
                 aptus_bc_cfg.verbose ? ""
                                      : " (further such lines: "
                                        "APTUS_BCAST_VERBOSE=y)");
}

/* ---- statistics -------------------------------------------------------- */

static FILE *aptus_bc_stats_open(void)
{
    char path[512];
    const char *s = aptus_bc_cfg.stats;
    size_t n      = 0;
    int wrank     = 0;

    if (aptus_bc_stats_file != NULL) {
        return aptus_bc_stats_file;
    }
    if (!strcmp(s, "stderr")) {
        return stderr;
    }
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    for (; (*s != '\0') && (n + 16 < sizeof(path)); ++s) {
        if ((s[0] == '%') && (s[1] == 'p')) {
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%d",
                                  (int)getpid());
            ++s;
        } else if ((s[0] == '%') && (s[1] == 'r')) {
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", wrank);
            ++s;
        } else {
            path[n++] = *s;
        }
    }
    path[n]             = '\0';
    aptus_bc_stats_file = fopen(path, "a");
    if (aptus_bc_stats_file == NULL) {
        fprintf(stderr, "aptus_bcast: APTUS_BCAST_STATS=%s: cannot open %s\n",
                aptus_bc_cfg.stats, path);
        aptus_bc_cfg.stats[0] = '\0';
    }
    return aptus_bc_stats_file;
}

static void aptus_bc_stats_print(aptus_bc_comm_t *c)
{
    const aptus_mc_stats_t *s         = &c->engine.w.stats;
    const aptus_bc_engine_stats_t *es = &c->engine.stats;
    FILE *f;

    if ((aptus_bc_cfg.stats[0] == '\0') ||
        ((f = aptus_bc_stats_open()) == NULL)) {
        return;
    }
    if (c->mode != APTUS_BC_MODE_MCAST) {
        fprintf(f,
                "aptus-bcast rank=%u size=%u mode=fallback fallback=%" PRIu64
                "\n",
                c->rank, c->size, c->n_fallback);
    } else {
        fprintf(
            f,
            "aptus-bcast rank=%u size=%u mode=mcast key=%016" PRIx64
            " root=%" PRIu64 " recv=%" PRIu64 " packed=%" PRIu64
            " fallback=%" PRIu64 " delivered=%" PRIu64 " window_full=%" PRIu64
            " duplicates=%" PRIu64 " early=%" PRIu64 " out_of_window=%" PRIu64
            " malformed=%" PRIu64 " acks_sent=%" PRIu64 " nacks_sent=%" PRIu64
            " reports_sent=%" PRIu64 " polls_sent=%" PRIu64
            " repairs_sent=%" PRIu64 " rx_dgrams=%" PRIu64 " foreign=%" PRIu64
            " bad=%" PRIu64 " queued=%" PRIu64 " queued_bytes_max=%" PRIu64
            " tx_errors=%" PRIu64 " srtt_us=%u\n",
            c->rank, c->size, c->key, c->n_root, c->n_recv, c->n_packed,
            c->n_fallback, s->delivered, s->window_full, s->duplicates,
            s->early, s->out_of_window, s->malformed, s->acks_sent,
            s->nacks_sent, s->reports_sent, s->polls_sent, s->repairs_sent,
            es->rx_dgrams, es->foreign, es->bad, es->queued,
            es->queued_bytes_max, c->engine.net.tx_errors, c->engine.w.srtt_us);
    }
    fflush(f);
}

/* ---- communicator state ------------------------------------------------ */

static void aptus_bc_comm_destroy(aptus_bc_comm_t *c)
{
    aptus_bc_comm_t **p;

    pthread_mutex_lock(&aptus_bc_lock);
    for (p = &aptus_bc_comms; *p != NULL; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    pthread_mutex_unlock(&aptus_bc_lock);
    aptus_bc_stats_print(c);
    if (c->mode == APTUS_BC_MODE_MCAST) {
        aptus_bc_progress_remove(&c->engine);
        aptus_bc_engine_cleanup(&c->engine);
    }
    free(c->pack_buf);
    free(c);
}

static int aptus_bc_delete_fn(MPI_Comm comm, int keyval, void *attr,
                              void *extra)
{
    aptus_bc_comm_destroy(attr);
    return MPI_SUCCESS;
}

/* The rank as the launcher gives it, before any MPI call: -1 if none. */
static int aptus_bc_launcher_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                        "PMIX_RANK" };
    const char *s;
    unsigned i;

    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); ++i) {
        s = getenv(vars[i]);
        if ((s != NULL) && (s[0] != '\0')) {
            return atoi(s);
        }
    }
    return -1;
}

/* Before any handle reaches the MPI library: under the other MPI every
 * handle of this build's mpi.h means something else (MPI_BYTE is a
 * pointer in Open MPI, an integer in MPICH), and the job would abort on
 * every rank with "Invalid datatype". One line (from rank 0), then every
 * rank exits with 1. PMPI_Get_library_version may be called at any time,
 * and its arguments are plain C on both. */
static void aptus_bc_check_mpi_once(void)
{
    static char version[APTUS_BC_VERSION_MAX + 1];
    aptus_bc_mpi_t running;
    int len = 0, rank;
    char *nl;

    if (PMPI_Get_library_version(version, &len) != MPI_SUCCESS) {
        return; /* nothing to compare: carry on */
    }
    version[APTUS_BC_VERSION_MAX] = '\0';
    running                       = aptus_bc_mpi_family(version);
    if (running == APTUS_BC_BUILT_FOR) {
        return;
    }
    rank = aptus_bc_launcher_rank();
    if (rank <= 0) {
        nl = strchr(version, '\n');
        if (nl != NULL) {
            *nl = '\0';
        }
        fprintf(stderr,
                "aptus_bcast: %s is built for %s, but this job runs %s "
                "(%.60s): preload %s instead\n",
                aptus_bc_mpi_library(APTUS_BC_BUILT_FOR),
                aptus_bc_mpi_name(APTUS_BC_BUILT_FOR),
                aptus_bc_mpi_name(running), version,
                aptus_bc_mpi_library(running));
        fflush(stderr);
    } else {
        /* let rank 0's line out before the launcher kills the job */
        sleep(1);
    }
    /* not exit(): the MPI library's exit handlers would read this build's
     * handles too */
    _exit(1);
}

static pthread_once_t aptus_bc_mpi_once = PTHREAD_ONCE_INIT;

static inline void aptus_bc_check_mpi(void)
{
    pthread_once(&aptus_bc_mpi_once, aptus_bc_check_mpi_once);
}

/* Read the settings and create the keyval, once per process. A malformed
 * setting does not stop the set-up of communicators: every rank must take
 * part in it whatever its own settings say (they only make it offer no
 * multicast), or the set-up's collectives would not match. */
static void aptus_bc_global_init(void)
{
    pthread_mutex_lock(&aptus_bc_lock);
    if (aptus_bc_cfg_state == 0) {
        aptus_bc_cfg_state =
            (aptus_bc_config_read(&aptus_bc_cfg, NULL, aptus_bc_cfg_err,
                                  sizeof(aptus_bc_cfg_err)) == 0)
                ? 1
                : -1;
        if (aptus_bc_cfg_state < 0) {
            aptus_bc_cfg.enable = 0;
        }
        if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, aptus_bc_delete_fn,
                                    &aptus_bc_keyval, NULL) != MPI_SUCCESS) {
            fprintf(stderr, "aptus_bcast: MPI_Comm_create_keyval failed\n");
            abort();
        }
    }
    pthread_mutex_unlock(&aptus_bc_lock);
}

static void aptus_bc_config_words(const aptus_mc_config_t *mc, uint32_t *w)
{
    w[0] = mc->window;
    w[1] = mc->group_size;
    w[2] = mc->ack_every;
    w[3] = mc->frag_size;
    w[4] = mc->max_msg;
    w[5] = mc->ack_delay_us;
    w[6] = mc->rto_min_us;
    w[7] = mc->rto_max_us;
}

/* While MPI_Bcast waits: let the MPI library progress too (a probe, which
 * receives nothing), so that its transport keeps receiving and
 * acknowledging; a rank that sat in MPI_Bcast for long would otherwise
 * look dead to its point-to-point peers. On the broadcast's own
 * communicator: MPICH answers a probe on MPI_COMM_SELF without polling
 * its network module. */
static void aptus_bc_mpi_progress(void *arg)
{
    aptus_bc_comm_t *c = arg;
    int flag;

    (void)PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &flag,
                      MPI_STATUS_IGNORE);
}

/* Whether the ranks that opened the multicast opened it on different
 * wires (APTUS_BCAST_WIRE=auto, verbs on some hosts only). */
static int aptus_bc_wires_differ(const aptus_bc_info_t *all, int size)
{
    uint32_t wire = 0;
    int r;

    for (r = 0; r < size; ++r) {
        if (!all[r].ok) {
            continue;
        }
        if ((wire != 0) && (all[r].wire != wire)) {
            return 1;
        }
        wire = all[r].wire;
    }
    return 0;
}

/* Set-up, collective over comm; the state is attached either way. */
static aptus_bc_comm_t *aptus_bc_comm_setup(MPI_Comm comm, int size, int rank)
{
    static const uint64_t probe_wait_us[] = { 250000, 250000, 500000 };
    aptus_bc_comm_t *c                    = calloc(1, sizeof(*c));
    aptus_bc_info_t *all                  = NULL, mine;
    aptus_mc_config_t mc                  = aptus_bc_cfg.mc;
    struct sockaddr_in group;
    aptus_bc_addr_t *peers = NULL;
    aptus_bc_net_t net;
    char err[256] = "", gstr[64], note[256] = "";
    unsigned min_room = UINT32_MAX, bad = UINT32_MAX, heard, heard_min = 0;
    uint32_t round;
    uint64_t t0;
    int r, rc;

    if (c == NULL) {
        return NULL;
    }
    t0      = aptus_bc_now_us();
    c->comm = comm;
    c->size = (uint32_t)size;
    c->rank = (uint32_t)rank;
    c->mode = APTUS_BC_MODE_FALLBACK;

    /* a key for this communicator of this job, drawn by its rank 0 */
    if (rank == 0) {
        while ((c->key == 0) &&
               (getrandom(&c->key, sizeof(c->key), 0) != sizeof(c->key))) {
        }
    }
    PMPI_Bcast(&c->key, sizeof(c->key), MPI_BYTE, 0, comm);
    if (aptus_bc_cfg.fixed_group) {
        group = aptus_bc_cfg.group;
    } else {
        aptus_bc_group_of_key(c->key, &group);
    }

    memset(&mine, 0, sizeof(mine));
    if (aptus_bc_cfg_state < 0) {
        rc = -1;
        snprintf(err, sizeof(err), "%s", aptus_bc_cfg_err);
    } else if (!aptus_bc_cfg.enable) {
        rc = -1;
        snprintf(err, sizeof(err), "APTUS_BCAST=n");
    } else {
        rc = aptus_bc_net_open(&net, aptus_bc_cfg.wire, &group,
                               aptus_bc_cfg.ifspec, aptus_bc_cfg.rcvbuf, err,
                               sizeof(err), note, sizeof(note));
    }
    mine.ok = (rc == 0);
    if (rc == 0) {
        mine.addr = net.self;
        mine.room = net.room;
        mine.wire = net.wire;
    }
    aptus_bc_config_words(&aptus_bc_cfg.mc, mine.cfg);
    mine.failed = aptus_bc_probe_failed;
    all         = malloc(sizeof(*all) * (size_t)size);
    peers       = malloc(sizeof(*peers) * (size_t)size);
    if ((all == NULL) || (peers == NULL)) {
        fprintf(stderr,
                "aptus_bcast: out of memory setting up a "
                "communicator of %d ranks\n",
                size);
        abort();
    }
    PMPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE,
                   comm);
    if (aptus_bc_wires_differ(all, size)) {
        /* auto took verbs on some hosts only: all take sock */
        if (mine.ok && (mine.wire == APTUS_BC_WIRE_VERBS)) {
            aptus_bc_net_close(&net);
            rc      = aptus_bc_net_open(&net, APTUS_BC_WIRE_SOCK, &group,
                                        aptus_bc_cfg.ifspec, aptus_bc_cfg.rcvbuf,
                                        err, sizeof(err), NULL, 0);
            mine.ok = (rc == 0);
            memset(&mine.addr, 0, sizeof(mine.addr));
            if (rc == 0) {
                mine.addr = net.self;
                mine.room = net.room;
                mine.wire = net.wire;
            }
        }
        PMPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine),
                       MPI_BYTE, comm);
    }
    for (r = 0; r < size; ++r) {
        if (!all[r].ok && (bad == UINT32_MAX)) {
            bad = (unsigned)r;
        }
        if (memcmp(all[r].cfg, all[0].cfg, sizeof(all[0].cfg)) != 0) {
            bad = UINT32_MAX - 1;
        }
        if (all[r].ok && (all[r].room < min_room)) {
            min_room = all[r].room;
        }
        peers[r] = all[r].addr;
    }
    if (bad == UINT32_MAX - 1) {
        if (rank == 0) {
            aptus_bc_log_fallback(c, "the ranks' APTUS_BCAST_* settings "
                                     "differ");
        }
        goto fallback;
    }
    if (bad != UINT32_MAX) {
        /* one line, from the first rank that could not; none where the
         * user turned it off */
        if (((unsigned)rank == bad) &&
            (aptus_bc_cfg.enable || (aptus_bc_cfg_state < 0))) {
            char why[300];

            snprintf(why, sizeof(why), "%s (%s)",
                     (aptus_bc_cfg_state < 0) ? "setting refused"
                                              : "multicast unavailable",
                     err);
            aptus_bc_log_fallback(c, why);
        }
        goto fallback;
    }
    for (r = 0; r < size; ++r) {
        if (all[r].failed) {
            /* it did not work for these ranks before: no probing again */
            if (rank == 0) {
                aptus_bc_log_fallback(c, "multicast failed on an earlier "
                                         "communicator");
            }
            goto fallback;
        }
    }

    /* the datagram follows the smallest MTU of the ranks' interfaces */
    if (mc.frag_size == 0) {
        mc.frag_size = min_room - APTUS_MC_HDR_LEN;
        if (mc.frag_size > 8192) {
            mc.frag_size = 8192;
        }
    }
    if (mc.max_msg > mc.frag_size * APTUS_MC_MAX_FRAGS) {
        mc.max_msg = mc.frag_size * APTUS_MC_MAX_FRAGS;
    }
    if (aptus_mc_config_check(&mc, (uint32_t)size) != NULL) {
        if (rank == 0) {
            snprintf(err, sizeof(err), "settings refused: %s",
                     aptus_mc_config_check(&mc, (uint32_t)size));
            aptus_bc_log_fallback(c, err);
        }
        aptus_bc_net_close(&net);
        goto fallback_all;
    }
    if (aptus_bc_engine_init(&c->engine, &mc, (uint32_t)size, (uint32_t)rank,
                             c->key, &net, peers,
                             aptus_bc_cfg.peer_timeout_us) != APTUS_BC_OK) {
        snprintf(err, sizeof(err), "out of memory");
        mine.ok = 0;
    } else {
        mine.ok = 1;
    }
    c->engine.idle_cb  = aptus_bc_mpi_progress;
    c->engine.idle_arg = c;
    c->pack_buf        = malloc(mc.max_msg);
    c->max_msg         = mc.max_msg;

    /* does the multicast reach every rank? */
    for (round = 0; round < 3; ++round) {
        heard = 0;
        if (mine.ok && (c->pack_buf != NULL)) {
            aptus_bc_engine_probe_send(&c->engine, round);
            heard =
                aptus_bc_engine_probe_wait(&c->engine, probe_wait_us[round]);
        }
        PMPI_Allreduce(&heard, &heard_min, 1, MPI_UNSIGNED, MPI_MIN, comm);
        if (heard_min == (unsigned)size - 1) {
            break;
        }
    }
    if (heard_min != (unsigned)size - 1) {
        aptus_bc_probe_failed = 1;
        if (rank == 0) {
            snprintf(err, sizeof(err),
                     "multicast to %s:%u does not reach every rank (one "
                     "heard %u of the %d others' probes)",
                     inet_ntoa(group.sin_addr), ntohs(group.sin_port),
                     heard_min, size - 1);
            aptus_bc_log_fallback(c, err);
        }
        if (mine.ok) {
            aptus_bc_engine_cleanup(&c->engine);
        }
        goto fallback_all;
    }
    if (aptus_bc_progress_add(&c->engine) != 0) {
        /* no thread: the engine still works, driven by MPI_Bcast only;
         * a root's repairs then wait for its next broadcast */
        aptus_bc_log(c, "no progress thread; repairs wait for the next "
                        "MPI_Bcast");
    }
    c->mode = APTUS_BC_MODE_MCAST;
    if (aptus_bc_cfg.verbose && (rank == 0)) {
        snprintf(gstr, sizeof(gstr), "%s", inet_ntoa(group.sin_addr));
        aptus_bc_log(
            c,
            "multicast group %s:%u on %s over %s%s%s, window %u, groups of "
            "%u, ACK every %u, %u-byte datagrams, up to %u bytes; set "
            "up in %.1f ms (%u probe rounds)",
            gstr, ntohs(group.sin_port), c->engine.net.where,
            (c->engine.net.wire == APTUS_BC_WIRE_VERBS) ? "verbs" : "sock",
            (note[0] != '\0') ? "; " : "", note, mc.window,
            c->engine.w.group_size, mc.ack_every, mc.frag_size, mc.max_msg,
            (double)(aptus_bc_now_us() - t0) / 1e3, round + 1);
    }
    goto out;

fallback:
    if (rc == 0) {
        aptus_bc_net_close(&net);
    }
fallback_all:
    c->mode = APTUS_BC_MODE_FALLBACK;
    free(c->pack_buf);
    c->pack_buf = NULL;
out:
    free(all);
    free(peers);
    pthread_mutex_lock(&aptus_bc_lock);
    c->next        = aptus_bc_comms;
    aptus_bc_comms = c;
    pthread_mutex_unlock(&aptus_bc_lock);
    PMPI_Comm_set_attr(comm, aptus_bc_keyval, c);
    return c;
}

/* The state of comm; sets it up at the first broadcast. NULL: use
 * PMPI_Bcast. */
static aptus_bc_comm_t *aptus_bc_comm_get(MPI_Comm comm, int root)
{
    aptus_bc_comm_t *c;
    int inter, size, rank, found;

    aptus_bc_global_init();
    /* a communicator set up before: one attribute lookup per broadcast */
    if (PMPI_Comm_get_attr(comm, aptus_bc_keyval, &c, &found) != MPI_SUCCESS) {
        return NULL;
    }
    if (found) {
        if ((root < 0) || ((uint32_t)root >= c->size)) {
            return NULL;
        }
    } else {
        if ((PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) || inter ||
            (PMPI_Comm_size(comm, &size) != MPI_SUCCESS) || (size < 2) ||
            (root < 0) || (root >= size)) {
            return NULL;
        }
        PMPI_Comm_rank(comm, &rank);
        c = aptus_bc_comm_setup(comm, size, rank);
        if (c == NULL) {
            return NULL;
        }
    }
    if (c->mode != APTUS_BC_MODE_MCAST) {
        c->n_fallback++;
        return NULL;
    }
    return c;
}

static int aptus_bc_error(aptus_bc_comm_t *c, aptus_bc_status_t st, int root)
{
    int code;

    switch (st) {
    case APTUS_BC_ERR_TRUNCATE:
        code = MPI_ERR_TRUNCATE;
        aptus_bc_log(c, "MPI_Bcast from root %d: %s", root,
                     aptus_bc_status_str(st));
        break;
    case APTUS_BC_ERR_ORDER:
        code = MPI_ERR_ROOT;
        aptus_bc_log(c, "MPI_Bcast from root %d: %s", root,
                     aptus_bc_status_str(st));
        break;
    case APTUS_BC_ERR_NOMEM:
        code = MPI_ERR_NO_MEM;
        aptus_bc_log(c, "MPI_Bcast from root %d: %s", root,
                     aptus_bc_status_str(st));
        break;
    default:
        code = MPI_ERR_OTHER;
        aptus_bc_log(c, "MPI_Bcast from root %d: %s: %s", root,
                     aptus_bc_status_str(st), c->engine.why);
        break;
    }
    PMPI_Comm_call_errhandler(c->comm, code);
    return code;
}

/* A predefined datatype whose bytes lie contiguous. */
static int aptus_bc_is_contig(MPI_Datatype dt, int tsize)
{
    int ni, na, nd, combiner;
    MPI_Aint lb, extent;

    if ((PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) != MPI_SUCCESS) ||
        (combiner != MPI_COMBINER_NAMED) ||
        (PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS)) {
        return 0;
    }
    return (lb == 0) && (extent == tsize);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    aptus_bc_comm_t *c;
    aptus_bc_status_t st;
    uint64_t bytes;
    uint32_t len;
    int tsize, contig, pos = 0;

    aptus_bc_check_mpi();
    if ((comm == MPI_COMM_NULL) || (buf == MPI_IN_PLACE) || (count <= 0) ||
        (dt == MPI_DATATYPE_NULL) ||
        ((c = aptus_bc_comm_get(comm, root)) == NULL)) {
        return PMPI_Bcast(buf, count, dt, root, comm);
    }
    if (PMPI_Type_size(dt, &tsize) != MPI_SUCCESS) {
        return PMPI_Bcast(buf, count, dt, root, comm);
    }
    bytes = (uint64_t)tsize * (uint64_t)count;
    if ((bytes == 0) || (bytes > c->max_msg)) {
        c->n_fallback++;
        return PMPI_Bcast(buf, count, dt, root, comm);
    }
    contig = aptus_bc_is_contig(dt, tsize);

    if ((uint32_t)root == c->rank) {
        if (contig) {
            st = aptus_bc_engine_bcast(&c->engine, buf, (uint32_t)bytes);
        } else {
            if (PMPI_Pack(buf, count, dt, c->pack_buf, (int)c->max_msg, &pos,
                          comm) != MPI_SUCCESS) {
                st = APTUS_BC_ERR_TRUNCATE;
            } else {
                st = aptus_bc_engine_bcast(&c->engine, c->pack_buf,
                                           (uint32_t)pos);
            }
            c->n_packed++;
        }
        c->n_root++;
    } else {
        st = aptus_bc_engine_recv(&c->engine, (uint32_t)root,
                                  contig ? buf : c->pack_buf,
                                  contig ? (uint32_t)bytes : c->max_msg, &len);
        if ((st == APTUS_BC_OK) && contig && (len != bytes)) {
            st = APTUS_BC_ERR_TRUNCATE;
        }
        if ((st == APTUS_BC_OK) && !contig) {
            if (PMPI_Unpack(c->pack_buf, (int)len, &pos, buf, count, dt,
                            comm) != MPI_SUCCESS) {
                st = APTUS_BC_ERR_TRUNCATE;
            }
            c->n_packed++;
        }
        c->n_recv++;
    }
    return (st == APTUS_BC_OK) ? MPI_SUCCESS : aptus_bc_error(c, st, root);
}

/* After the barrier every rank has entered the call, so every rank holds
 * every message of comm: the engine may close. */
int MPI_Comm_free(MPI_Comm *comm)
{
    aptus_bc_comm_t *c;
    int found = 0;

    aptus_bc_check_mpi();
    if ((comm != NULL) && (*comm != MPI_COMM_NULL) &&
        (aptus_bc_keyval != MPI_KEYVAL_INVALID) &&
        (PMPI_Comm_get_attr(*comm, aptus_bc_keyval, &c, &found) ==
         MPI_SUCCESS) &&
        found && (c->mode == APTUS_BC_MODE_MCAST)) {
        PMPI_Barrier(*comm);
    }
    return PMPI_Comm_free(comm);
}

int MPI_Finalize(void)
{
    aptus_bc_comm_t *c;
    int any;

    aptus_bc_check_mpi();
    pthread_mutex_lock(&aptus_bc_lock);
    any = (aptus_bc_comms != NULL);
    pthread_mutex_unlock(&aptus_bc_lock);
    if (any) {
        PMPI_Barrier(MPI_COMM_WORLD);
        for (;;) {
            pthread_mutex_lock(&aptus_bc_lock);
            c = aptus_bc_comms;
            pthread_mutex_unlock(&aptus_bc_lock);
            if (c == NULL) {
                break;
            }
            /* its delete function unlinks and frees it */
            if (PMPI_Comm_delete_attr(c->comm, aptus_bc_keyval) !=
                MPI_SUCCESS) {
                aptus_bc_comm_destroy(c);
            }
        }
    }
    aptus_bc_progress_stop();
    if ((aptus_bc_stats_file != NULL) && (aptus_bc_stats_file != stderr)) {
        fclose(aptus_bc_stats_file);
        aptus_bc_stats_file = NULL;
    }
    return PMPI_Finalize();
}
