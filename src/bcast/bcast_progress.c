/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the broadcast's progress thread (see bcast_progress.h).
 */
#include "bcast_progress.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define APTUS_BC_IDLE_SLEEP_US 50000u

/* An engine whose application left MPI_Bcast less than this ago is left
 * to it: it is likely back soon and drains the sockets itself, and a
 * thread woken by every multicast datagram would take the cores from the
 * ranks that wait for it (ranks often outnumber cores). Due timers wait
 * at most this long. */
#define APTUS_BC_AWAY_US 1000u

static pthread_mutex_t aptus_bc_list_lock = PTHREAD_MUTEX_INITIALIZER;
static aptus_bc_engine_t *aptus_bc_list;
static pthread_t aptus_bc_thread;
static int aptus_bc_running;
static int aptus_bc_stopping;
static int aptus_bc_wake_fd = -1;

static void aptus_bc_wake(void)
{
    uint64_t one = 1;

    if (aptus_bc_wake_fd >= 0) {
        (void)!write(aptus_bc_wake_fd, &one, sizeof(one));
    }
}

/* fds with room for at least 'need' entries (the thread cannot go on
 * without them: it serves every engine's repairs) */
static struct pollfd *aptus_bc_fds_reserve(struct pollfd *fds, unsigned *cap,
                                           unsigned need)
{
    if (need <= *cap) {
        return fds;
    }
    *cap = 2 * need + 8;
    fds  = realloc(fds, *cap * sizeof(*fds));
    if (fds == NULL) {
        abort();
    }
    return fds;
}

static void *aptus_bc_progress_main(void *arg)
{
    struct pollfd *fds = NULL;
    unsigned cap       = 0, n;
    int more           = 0; /* an engine left datagrams waiting */
    uint64_t timeout_us, drained, now;
    struct timespec ts;
    aptus_bc_engine_t *e;

    /* SCHED_BATCH: woken by a datagram, this thread does not preempt the
     * thread that runs (on a crowded host, often the root that sent it,
     * inside MPI_Bcast); it runs at its next turn. Unprivileged; where it
     * is refused the thread runs as before. */
    struct sched_param param = { 0 };
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);

    pthread_mutex_lock(&aptus_bc_list_lock);
    while (!aptus_bc_stopping) {
        /* the sockets of the engines the application is not driving */
        n          = 0;
        timeout_us = more ? 0 : APTUS_BC_IDLE_SLEEP_US;
        more       = 0;
        for (e = aptus_bc_list; e != NULL; e = e->next_engine) {
            fds = aptus_bc_fds_reserve(fds, &cap, n + 3);
            if (e->in_call) {
                continue;
            }
            now = aptus_bc_now_us();
            if (now - e->left_us < APTUS_BC_AWAY_US) {
                /* look again when it has been away long enough */
                if (e->left_us + APTUS_BC_AWAY_US - now < timeout_us) {
                    timeout_us = e->left_us + APTUS_BC_AWAY_US - now;
                }
                continue;
            }
            fds[n].fd       = e->net.mfd;
            fds[n++].events = POLLIN;
            fds[n].fd       = e->net.ufd;
            fds[n++].events = POLLIN;
            if (pthread_mutex_trylock(&e->lock) == 0) {
                if (aptus_bc_engine_busy(e) &&
                    (e->w.cfg.ack_delay_us < timeout_us)) {
                    timeout_us = e->w.cfg.ack_delay_us;
                }
                pthread_mutex_unlock(&e->lock);
            }
        }
        fds             = aptus_bc_fds_reserve(fds, &cap, n + 1);
        fds[n].fd       = aptus_bc_wake_fd;
        fds[n++].events = POLLIN;
        pthread_mutex_unlock(&aptus_bc_list_lock);

        ts.tv_sec  = timeout_us / 1000000u;
        ts.tv_nsec = (long)(timeout_us % 1000000u) * 1000;
        (void)ppoll(fds, n, &ts, NULL);
        if (fds[n - 1].revents & POLLIN) {
            (void)!read(aptus_bc_wake_fd, &drained, sizeof(drained));
        }

        pthread_mutex_lock(&aptus_bc_list_lock);
        for (e = aptus_bc_list; e != NULL; e = e->next_engine) {
            /* the application's thread is in a call, or was just now:
             * it progresses */
            if (!e->in_call &&
                (aptus_bc_now_us() - e->left_us >= APTUS_BC_AWAY_US) &&
                (pthread_mutex_trylock(&e->lock) == 0)) {
                /* a full drain leaves the rest unannounced (verbs: the
                 * completion queue is armed only once it is empty) */
                if (aptus_bc_engine_progress(e, aptus_bc_now_us()) >=
                    APTUS_BC_DRAIN_MAX) {
                    more = 1;
                }
                pthread_mutex_unlock(&e->lock);
            }
        }
    }
    pthread_mutex_unlock(&aptus_bc_list_lock);
    free(fds);
    return NULL;
}

int aptus_bc_progress_add(aptus_bc_engine_t *e)
{
    int rc = 0;

    pthread_mutex_lock(&aptus_bc_list_lock);
    if (!aptus_bc_running) {
        aptus_bc_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (aptus_bc_wake_fd < 0) {
            rc = -errno;
            goto out;
        }
        aptus_bc_stopping = 0;
        rc = -pthread_create(&aptus_bc_thread, NULL, aptus_bc_progress_main,
                             NULL);
        if (rc != 0) {
            close(aptus_bc_wake_fd);
            aptus_bc_wake_fd = -1;
            goto out;
        }
        aptus_bc_running = 1;
    }
    e->next_engine = aptus_bc_list;
    aptus_bc_list  = e;
    aptus_bc_wake();
out:
    pthread_mutex_unlock(&aptus_bc_list_lock);
    return rc;
}

void aptus_bc_progress_remove(aptus_bc_engine_t *e)
{
    aptus_bc_engine_t **p;

    pthread_mutex_lock(&aptus_bc_list_lock);
    for (p = &aptus_bc_list; *p != NULL; p = &(*p)->next_engine) {
        if (*p == e) {
            *p = e->next_engine;
            break;
        }
    }
    aptus_bc_wake(); /* out of poll() on its sockets before they close */
    pthread_mutex_unlock(&aptus_bc_list_lock);
}

void aptus_bc_progress_stop(void)
{
    pthread_mutex_lock(&aptus_bc_list_lock);
    if (!aptus_bc_running) {
        pthread_mutex_unlock(&aptus_bc_list_lock);
        return;
    }
    aptus_bc_stopping = 1;
    aptus_bc_wake();
    pthread_mutex_unlock(&aptus_bc_list_lock);
    pthread_join(aptus_bc_thread, NULL);
    close(aptus_bc_wake_fd);
    aptus_bc_wake_fd = -1;
    aptus_bc_running = 0;
}
