#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: MPICH's own test suite, its broadcast tests (test/mpi/coll of
# `apt-get source mpich`, built with its configure: the coll testlist and
# the datatype (DTP) testlist), run as a user would
# with the multicast MPI_Bcast library preloaded, and beside it the same
# tests without the library, in a network namespace whose loopback carries
# multicast. MPI traffic over ud_sr,self; each job's ranks in one CPU
# cgroup (contrib/sched-group.sh: Hydra makes every rank a scheduling
# group of its own, which starves ranks that outnumber the cores).
#
#   test/scripts/run_mpich_bcast_suite.sh MPICH_TEST_MPI_DIR
#
# MPICH_TEST_MPI_DIR is the built test/mpi directory (coll/ holds the
# binaries). Prints one line per test and mode and a table; exits non-zero
# when a test fails with the library but not without it.
# Environment: APTUS_LIB (libuct_aptus.so; libaptus_bcast_mpich.so next
# to it), APTUS_MPI_TIMEOUT (default 120).
set -u
dir=${1:?usage: run_mpich_bcast_suite.sh MPICH_TEST_MPI_DIR}
coll=$dir/coll
lib=${APTUS_LIB:?set APTUS_LIB to libuct_aptus.so}
blib=$(dirname "$lib")/libaptus_bcast_mpich.so
timeout=${APTUS_MPI_TIMEOUT:-120}
[ -f "$blib" ] || { echo "no $blib" >&2; exit 2; }
[ -f "$coll/testlist" ] || { echo "no $coll/testlist" >&2; exit 2; }

ns=aptus-mpichbc-$$
ip netns add "$ns" || exit 2
. "$(dirname "$0")/../../contrib/sched-group.sh"
aptus_sched_group_open ||
    echo "# ranks in a scheduling group each ($APTUS_SCHED_GROUP_WHY)" >&2
trap 'ip netns delete "$ns" 2>/dev/null; aptus_sched_group_close' EXIT
ip -n "$ns" link set lo up
ip -n "$ns" link set lo multicast on
ip -n "$ns" route add 224.0.0.0/4 dev lo

work=$(mktemp -d /tmp/aptus-mpichbc.XXXXXX)
regress=0
printf '%-26s %-10s %-10s %s\n' test without with "served by multicast"
n=0
while read -r name np rest; do
    case $name in *bcast*) ;; *) continue ;; esac
    [ -x "$coll/$name" ] || { printf '%-26s not built\n' "$name/np$np"; continue; }
    args=()
    for tok in $rest; do
        case $tok in arg=*) args+=("${tok#arg=}") ;; esac
    done
    n=$((n + 1))
    res=()
    for mode in without with; do
        pre=$lib
        [ $mode = with ] && pre="$blib $lib"
        rm -f "$work"/st.*
        (cd "$coll" && ${APTUS_SCHED_GROUP_RUN[@]+"${APTUS_SCHED_GROUP_RUN[@]}"} \
            timeout -k 5 "$timeout" ip netns exec "$ns" env \
            LD_PRELOAD="$pre" UCX_TLS=ud_sr,self UCX_NET_DEVICES=lo \
            UCX_WARN_UNUSED_ENV_VARS=n APTUS_BCAST_STATS="$work/st.%p" \
            mpiexec.mpich -n "$np" "./$name" ${args[@]+"${args[@]}"}) </dev/null >"$work/$n.$name.$np.$mode.log" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -q "No Errors" "$work/$n.$name.$np.$mode.log"; then
            res+=(pass)
        elif [ $rc -eq 124 ]; then
            res+=(timeout)
        else
            res+=("fail($rc)")
        fi
    done
    served=$(cat "$work"/st.* 2>/dev/null | grep -c "mode=mcast")
    printf '%-26s %-10s %-10s %s rank-communicators  %s\n' "$name/np$np" "${res[0]}" "${res[1]}" "$served" "${args[*]:-}"
    if [ "${res[1]}" != pass ] && [ "${res[0]}" = pass ]; then
        regress=$((regress + 1))
        sed 's/^/    | /' "$work/$n.$name.$np.with.log" | head -n 10
    fi
done < <(cat "$coll/testlist" "$coll/testlist.dtp" 2>/dev/null)
echo "logs in $work"
[ $regress -eq 0 ]
