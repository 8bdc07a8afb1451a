# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: one CPU cgroup for the processes of an MPI job. Sourced (bash).
#
# Why: MPICH's launcher (Hydra) starts every rank with setsid(), so every
# rank is a session of its own, and a kernel with autogroup scheduling
# (kernel.sched_autogroup_enabled=1, the default where it is built in)
# makes every session a scheduling group that competes for the CPUs as a
# whole. With more ranks
# than cores that is not the ranks' fair share: measured with MPICH, 8 ranks
# on 2 cores, a runnable rank got no CPU time for 5 s while another had a
# core to itself, and MPI_Bcast calls took 1 to 17 s instead of
# milliseconds. Autogroups apply only to tasks of the root CPU cgroup, so
# the ranks of a job started inside a cgroup of its own are scheduled as
# threads of one group again. Open MPI's ranks share their launcher's
# session and need none of this; with one rank per core it does not matter.
#
#   aptus_sched_group_open   make the group; sets APTUS_SCHED_GROUP_RUN, a
#                            command prefix that runs a command inside it
#                            ("${APTUS_SCHED_GROUP_RUN[@]}" mpiexec ...).
#                            Where no group can be made (not root, no CPU
#                            controller) the prefix is empty and
#                            APTUS_SCHED_GROUP_WHY says why (returns 1).
#   aptus_sched_group_close  remove it (its processes must have ended).
# shellcheck shell=bash disable=SC2034  # the variables are the interface

APTUS_SCHED_GROUP_DIR=
APTUS_SCHED_GROUP_WHY=
APTUS_SCHED_GROUP_RUN=()

aptus_sched_group_open() {
    local v1=/sys/fs/cgroup/cpu v2=/sys/fs/cgroup dir procs

    [ -n "$APTUS_SCHED_GROUP_DIR" ] && return 0
    APTUS_SCHED_GROUP_RUN=()
    if [ "$(id -u)" -ne 0 ]; then
        APTUS_SCHED_GROUP_WHY="not root"
        return 1
    fi
    if [ -f "$v1/tasks" ]; then
        dir=$v1/aptus-job.$$
        procs=tasks
    elif [ -f "$v2/cgroup.controllers" ] &&
         grep -qw cpu "$v2/cgroup.controllers"; then
        # the CPU controller must reach the child, or its tasks stay in
        # the root CPU group (and in their autogroups)
        if ! grep -qw cpu "$v2/cgroup.subtree_control" &&
           ! { echo +cpu >"$v2/cgroup.subtree_control"; } 2>/dev/null; then
            APTUS_SCHED_GROUP_WHY="cannot enable the cpu controller in $v2"
            return 1
        fi
        dir=$v2/aptus-job.$$
        procs=cgroup.procs
    else
        APTUS_SCHED_GROUP_WHY="no CPU cgroup controller mounted"
        return 1
    fi
    if ! mkdir -p "$dir" 2>/dev/null; then
        APTUS_SCHED_GROUP_WHY="cannot create $dir"
        return 1
    fi
    APTUS_SCHED_GROUP_DIR=$dir
    # shellcheck disable=SC2016  # expanded by the inner shell
    APTUS_SCHED_GROUP_RUN=(sh -c 'echo $$ >"$0" && exec "$@"' "$dir/$procs")
    return 0
}

aptus_sched_group_close() {
    [ -n "$APTUS_SCHED_GROUP_DIR" ] || return 0
    # a killed job's last processes may take a moment to be reaped
    for _ in 1 2 3 4 5; do
        rmdir "$APTUS_SCHED_GROUP_DIR" 2>/dev/null && break
        sleep 0.2
    done
    APTUS_SCHED_GROUP_DIR=
    APTUS_SCHED_GROUP_RUN=()
}
