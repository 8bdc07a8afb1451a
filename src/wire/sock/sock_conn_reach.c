/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: this process's identity as the connection wire names it: its
 * pid, cached, and the reach id of its host and PID namespace (conn.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wire/conn.h"

#include <ucs/sys/compiler_def.h>
#include <ucs/sys/uid.h>

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

static pid_t aptus_conn_pid_cached; /* 0: not known in this process */

static void aptus_conn_pid_forget(void)
{
    aptus_conn_pid_cached = 0; /* the child of a fork */
}

static void aptus_conn_pid_init(void)
{
    (void)pthread_atfork(NULL, NULL, aptus_conn_pid_forget);
}

pid_t aptus_conn_pid(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pid_t pid = __atomic_load_n(&aptus_conn_pid_cached, __ATOMIC_RELAXED);

    if (ucs_unlikely(pid == 0)) {
        (void)pthread_once(&once, aptus_conn_pid_init);
        pid = getpid();
        __atomic_store_n(&aptus_conn_pid_cached, pid, __ATOMIC_RELAXED);
    }
    return pid;
}

uint64_t aptus_conn_reach_id(void)
{
    /* A process's own PID namespace never changes (unshare changes its
     * children's), so the id is kept per pid: remote keys are packed on
     * the rendezvous path. A forked child, which may be in another
     * namespace, has another pid and reads its own (UCX's ucs_sys_get_ns
     * would hand it the parent's). */
    static uint64_t id;
    static pid_t id_pid;
    pid_t pid = aptus_conn_pid();
    struct stat st;
    uint64_t ns = 0;

    if (__atomic_load_n(&id_pid, __ATOMIC_ACQUIRE) == pid) {
        return id;
    }
    if (stat("/proc/self/ns/pid", &st) == 0) {
        ns = st.st_ino;
    }
    id = ucs_get_system_id() ^ (ns * 0x9e3779b97f4a7c15ull);
    __atomic_store_n(&id_pid, pid, __ATOMIC_RELEASE);
    return id;
}
