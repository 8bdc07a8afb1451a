# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# UCX-Aptus benchmarks: what the benchmarks between hosts of a cluster in a
# box (contrib/cluster.sh) share. Sourced (bash), not run; by
# hosts_bench.sh and bcast_hosts.sh.
#
#   cluster_job CLUSTER MPI NP LIMIT [VAR=VALUE...] -- PROGRAM [ARGS...]
#       one MPI job from the head, ranks on the hosts (the host file's
#       slots), MPI openmpi or mpich; every VAR=VALUE reaches every rank
#       (-x for Open MPI, -genv for MPICH), nothing else of the caller's
#       LD_PRELOAD or UCX_TLS does. Output (both streams) on stdout; the
#       status is the job's (124/137: it ran past LIMIT seconds).
#       CLUSTER_JOB_DONE: an extended regular expression; once a line of
#       the output matches it, the job is stopped CLUSTER_JOB_GRACE seconds
#       later (default 10) if it has not ended (a job that hangs in
#       MPI_Finalize after its work is done, as MPICH 4.0.2 over UCX 1.13's
#       tcp at three ranks and more), and the status is 0.
#   cluster_multicast CLUSTER
#       routes 224.0.0.0/4 out of eth0 in every host (the cluster has no
#       default route; the multicast MPI_Bcast needs a route to its group)
#   bench_median
#       the median of the numbers on stdin (one a line), or nothing

cluster_job() {
    local cl=$1 mpi=$2 np=$3 limit=$4 kv log pid rc t=0 done_at=
    shift 4
    local -a env=() job
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        env+=("$1")
        shift
    done
    [ "${1:-}" = -- ] && shift
    if [ "$mpi" = openmpi ]; then
        job=(ompi -np "$np")
        for kv in ${env[@]+"${env[@]}"}; do job+=(-x "$kv"); done
    else
        job=(mpich -n "$np")
        for kv in ${env[@]+"${env[@]}"}; do job+=(-genv "${kv%%=*}" "${kv#*=}"); done
    fi
    local top
    top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    if [ -z "${CLUSTER_JOB_DONE:-}" ]; then
        timeout -k 5 "$limit" env -u LD_PRELOAD -u UCX_TLS \
            "$top/contrib/cluster.sh" --name "$cl" "${job[@]}" "$@" </dev/null 2>&1
        return
    fi
    log=$(mktemp "${TMPDIR:-/tmp}/aptus-cluster-job.XXXXXX")
    timeout -k 5 "$limit" env -u LD_PRELOAD -u UCX_TLS \
        "$top/contrib/cluster.sh" --name "$cl" "${job[@]}" "$@" </dev/null >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.2
        t=$((t + 1))
        if [ -z "$done_at" ]; then
            grep -Eq "$CLUSTER_JOB_DONE" "$log" && done_at=$t
        elif [ $(((t - done_at) / 5)) -ge "${CLUSTER_JOB_GRACE:-10}" ]; then
            kill -TERM "$pid" 2>/dev/null
            break
        fi
    done
    wait "$pid"
    rc=$?
    if [ -n "$done_at" ] && [ $(((t - done_at) / 5)) -ge "${CLUSTER_JOB_GRACE:-10}" ]; then
        # what the stopped job left in the hosts
        "$top/contrib/cluster.sh" --name "$cl" clean >/dev/null 2>&1
        echo "cluster_job: stopped ${CLUSTER_JOB_GRACE:-10} s after its work was done (status $rc)"
        rc=0
    fi
    cat "$log"
    rm -f "$log"
    return $rc
}

cluster_multicast() {
    local top
    top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    "$top/contrib/cluster.sh" --name "$1" each ip route replace 224.0.0.0/4 dev eth0
}

bench_median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
