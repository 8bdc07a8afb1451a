#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: MPI tests of the multicast MPI_Bcast library (libaptus_bcast.so
# for Open MPI, libaptus_bcast_mpich.so for MPICH), as a user would break it.
#
# Jobs run in network namespaces the test makes and removes: one where the
# loopback carries multicast (lo MULTICAST, 224.0.0.0/4 routed to it), one
# where it does not. Over ud_sr,self for the MPI's own traffic; MPICH's
# ranks in one CPU cgroup (mpi_common.sh, contrib/sched-group.sh). Per MPI:
#   - test/mpi/bcast_check at 2, 4, 8 and 16 ranks: every root, 1 B to
#     64 KiB (past the multicast limit), named and derived datatypes, three
#     communicators in interleaved order, a burst that wraps the window, a
#     rank that sleeps, communicators created and freed; every byte checked,
#     and every rank's statistics say the world was served by multicast;
#   - the same with 5% of multicast datagrams dropped by nftables (input
#     hook): the data intact and repairs counted;
#   - every communicator on one fixed group: the others' datagrams are
#     dropped and counted (foreign), the data intact;
#   - no multicast on the host: one log line, MPI_Bcast of the MPI library,
#     the data intact; a malformed setting: the same, naming the variable;
#   - a rank killed in the middle of a broadcast loop: the job ends with an
#     error, not a hang; a rank stopped (SIGSTOP): the library's own peer
#     timeout ends the job with an error naming the rank;
#   - between hosts: on a cluster in a box (contrib/cluster.sh) of 4 hosts,
#     one rank per host, every host dropping 1% of the UDP datagrams it
#     receives (nftables), bcast_check's sizes, types and burst phases:
#     every byte checked, every rank's world served by multicast across the
#     bridge, datagrams dropped and repaired.
# Ends with "N passed, M failed, K skipped".
#
# Environment: APTUS_LIB (libuct_aptus.so; the broadcast libraries are
# taken from its directory), APTUS_MPIS, APTUS_MPI_TIMEOUT (see
# mpi_common.sh), APTUS_BCAST_NPS (default "2 4 8 16"), APTUS_TEST_BCAST_HOSTS
# (hosts of the cross-host cell, default 4; 0 leaves it out),
# APTUS_TEST_BCAST_HOSTS_ONLY=y (that cell alone).
APTUS_SCRIPT=test_bcast
. "$(dirname "$0")/mpi_common.sh"
aptus_setup

NPS=${APTUS_BCAST_NPS:-2 4 8 16}
HOSTS=${APTUS_TEST_BCAST_HOSTS:-4}
NS=aptus-bcast-$$
NS_OFF=aptus-bcastoff-$$
NS_MADE=

ns_delete() {
    local ns
    for ns in $NS_MADE; do
        ip netns delete "$ns" 2>/dev/null || true
    done
    NS_MADE=
}
APTUS_CLEANUP_HOOKS+=(ns_delete)

ns_delete_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in
        aptus-bcast-*|aptus-bcastoff-*)
            pid=${ns##*-}
            if ! kill -0 "$pid" 2>/dev/null; then
                ip netns delete "$ns" 2>/dev/null
            fi
            ;;
        esac
    done
}

# ns_make NAME multicast|plain
ns_why=
ns_make() {
    local ns=$1 kind=$2 out
    if ! out=$(ip netns add "$ns" 2>&1); then
        ns_why="ip netns add failed: $out"; return 1
    fi
    NS_MADE="$NS_MADE $ns"
    if ! out=$(ip -n "$ns" link set lo up 2>&1); then
        ns_why="ip link set lo up failed: $out"; return 1
    fi
    [ "$kind" = plain ] && return 0
    if ! out=$( (ip -n "$ns" link set lo multicast on &&
                 ip -n "$ns" route add 224.0.0.0/4 dev lo) 2>&1); then
        ns_why="multicast on lo refused: $out"; return 1
    fi
    if ! out=$(ip netns exec "$ns" nft -f - 2>&1 <<NFT
table inet aptusbcast {
    chain input {
        type filter hook input priority 0; policy accept;
        ip daddr 224.0.0.0/4 meta l4proto udp numgen random mod 100 < 0 counter drop
    }
}
NFT
    ); then
        ns_why="nft rule refused: $out"; return 1
    fi
    return 0
}

# nft_loss PERCENT: replace the drop rule's rate (0: none) and reset it.
nft_loss() {
    ip netns exec "$NS" nft -f - >/dev/null 2>&1 <<NFT
flush chain inet aptusbcast input
add rule inet aptusbcast input ip daddr 224.0.0.0/4 meta l4proto udp numgen random mod 100 < $1 counter drop
NFT
}

nft_dropped() {
    ip netns exec "$NS" nft list table inet aptusbcast 2>/dev/null |
        sed -n 's/.*counter packets \([0-9]*\) .*drop.*/\1/p' | head -n 1
}

# bcast_lib FLAVOUR: the library of that MPI, or nothing.
bcast_lib() {
    local dir
    dir=$(dirname "$APTUS_LIB")
    case $1 in
    openmpi) [ -f "$dir/libaptus_bcast.so" ] && echo "$dir/libaptus_bcast.so" ;;
    mpich) [ -f "$dir/libaptus_bcast_mpich.so" ] && echo "$dir/libaptus_bcast_mpich.so" ;;
    esac
}

# bcast_stat KEY [SIZE]: KEY summed over the lines of communicators of SIZE
# ranks (any size when empty) in the last job's statistics.
bcast_stat() {
    cat "$STATS"/bcast.* 2>/dev/null | awk -v key="$1" -v size="${2:-}" '
        $1 == "aptus-bcast" {
            ok = (size == "")
            for (i = 2; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == "size" && kv[2] == size) ok = 1
                v[kv[1]] = kv[2]
            }
            if (ok) sum += v[key]
            delete v
        }
        END { print sum + 0 }'
}

# bcast_mode_count MODE SIZE: statistics lines of SIZE-rank communicators
# in MODE (mcast or fallback).
bcast_mode_count() {
    cat "$STATS"/bcast.* 2>/dev/null |
        grep -c "^aptus-bcast .*size=$2 mode=$1" || true
}

# run_bcast NAME FLAVOUR NP NAMESPACE [ARGS...]: bcast_check with the
# library preloaded and statistics in $STATS. The MPI's own traffic goes
# over ud_sr.
run_bcast() {
    local name=$1 flavour=$2 np=$3 ns=$4
    shift 4
    APTUS_RUN_TLS=ud_sr,self
    STATS=$APTUS_WORK/${name//[^A-Za-z0-9._-]/_}.bcast-stats
    rm -rf "$STATS"
    mkdir -p "$STATS"
    # BCAST_LIB_FLAVOUR: preload the library built for another MPI
    APTUS_RUN_PRELOAD=$(bcast_lib "${BCAST_LIB_FLAVOUR:-$flavour}")
    APTUS_RUN_PREFIX=(ip netns exec "$ns")
    APTUS_RUN_ENV=(APTUS_BCAST_STATS="$STATS/bcast.%r" ${EXTRA_ENV[@]+"${EXTRA_ENV[@]}"})
    aptus_mpirun "$name" "$flavour" "$np" bcast_check "$@"
    EXTRA_ENV=()
}

# check_mcast NAME NP: PASS when every rank served the world by multicast.
check_mcast() {
    local name=$1 np=$2 n delivered foreign
    n=$(bcast_mode_count mcast "$np")
    delivered=$(bcast_stat delivered "$np")
    foreign=$(bcast_stat foreign)
    if [ "$n" -ge "$np" ] && [ "$delivered" -gt 0 ] && [ "$foreign" -eq 0 ]; then
        pass "$name: served by multicast ($n rank lines, delivered=$delivered, repairs=$(bcast_stat repairs_sent))"
    else
        fail "$name: served by multicast" "$n of $np ranks in mode mcast, delivered=$delivered foreign=$foreign"
    fi
}

# check_error_end NAME WHAT [PATTERN]: the job ended with an error (not a
# time-out, not success), and the log holds PATTERN when given.
check_error_end() {
    local name=$1 what=$2 pattern=${3:-}
    # 137 is also what a launcher returns for a rank killed by SIGKILL
    if [ "$APTUS_RUN_RC" -eq 124 ] ||
       { [ "$APTUS_RUN_RC" -eq 137 ] &&
         awk -v s="$APTUS_RUN_SECS" -v t="$APTUS_MPI_TIMEOUT" 'BEGIN { exit !(s >= t) }'; }; then
        fail "$name: $what" "timed out after ${APTUS_MPI_TIMEOUT}s; log $APTUS_RUN_LOG"
    elif [ "$APTUS_RUN_RC" -eq 0 ]; then
        fail "$name: $what" "the job ended with status 0; log $APTUS_RUN_LOG"
    elif [ -n "$pattern" ] && ! grep -q "$pattern" "$APTUS_RUN_LOG"; then
        fail "$name: $what" "no '$pattern' in $APTUS_RUN_LOG"
    else
        pass "$name: $what (status $APTUS_RUN_RC after ${APTUS_RUN_SECS}s)"
    fi
}

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v nft >/dev/null; then
    skip "multicast broadcast" "needs root, iproute2 and nftables"
    aptus_summary
    exit $?
fi
ns_delete_stale
if ! ns_make "$NS" multicast || ! ns_make "$NS_OFF" plain; then
    skip "multicast broadcast" "$ns_why"
    aptus_summary
    exit $?
fi
EXTRA_ENV=()
echo "# namespaces $NS (loopback multicast) and $NS_OFF (none)"

for flavour in $APTUS_MPIS; do
    if [ -z "$(bcast_lib "$flavour")" ]; then
        skip "$flavour multicast broadcast" "library for $flavour not built"
        continue
    fi
    aptus_build "$flavour" bcast_check || continue
    [ "${APTUS_TEST_BCAST_HOSTS_ONLY:-n}" = y ] && continue

    for np in $NPS; do
        name=$flavour/bcast/np$np
        args=(-i 2)
        # at 16 ranks on a few cores the MPIs' own collectives (which every
        # communicator set-up uses, and which serve the sizes past the
        # multicast limit) crawl: no communicator churn and no fallback
        # sizes there
        [ "$np" -ge 16 ] && args=(-i 1 -b 500 -m 32768 -p sizes,types,comms,burst,slow)
        run_bcast "$name" "$flavour" "$np" "$NS" "${args[@]}"
        aptus_check_run "$name" bcast_check "$np" && check_mcast "$name" "$np"
    done

    for np in 4 16; do
        name=$flavour/bcast/np$np/mcast-loss-5%
        nft_loss 5
        args=(-i 1)
        [ "$np" -ge 16 ] && args=(-i 1 -b 500 -m 32768 -p sizes,types,comms,burst,slow)
        run_bcast "$name" "$flavour" "$np" "$NS" "${args[@]}"
        dropped=$(nft_dropped)
        nft_loss 0
        if aptus_check_run "$name" bcast_check "$np"; then
            repairs=$(bcast_stat repairs_sent)
            if [ "${dropped:-0}" -gt 0 ] && [ "$repairs" -gt 0 ]; then
                pass "$name: losses repaired (nft dropped $dropped, repairs_sent=$repairs nacks_sent=$(bcast_stat nacks_sent) duplicates=$(bcast_stat duplicates))"
            else
                fail "$name: losses repaired" "nft dropped ${dropped:-?}, repairs_sent=$repairs"
            fi
        fi
    done

    name=$flavour/bcast/np4/one-group
    EXTRA_ENV=(APTUS_BCAST_GROUP=239.1.2.3:5000)
    run_bcast "$name" "$flavour" 4 "$NS" -i 1
    if aptus_check_run "$name" bcast_check 4; then
        foreign=$(bcast_stat foreign)
        if [ "$foreign" -gt 0 ] && [ "$(bcast_mode_count mcast 4)" -ge 4 ]; then
            pass "$name: other communicators' datagrams dropped and counted (foreign=$foreign)"
        else
            fail "$name: foreign datagrams counted" "foreign=$foreign"
        fi
    fi

    name=$flavour/bcast/np4/no-multicast
    run_bcast "$name" "$flavour" 4 "$NS_OFF" -i 1
    if aptus_check_run "$name" bcast_check 4; then
        lines=$(grep -c "^aptus_bcast: .*multicast unavailable" "$APTUS_RUN_LOG")
        if [ "$(bcast_mode_count fallback 4)" -ge 4 ] && [ "$lines" -ge 1 ] &&
           [ "$lines" -le 4 ]; then
            pass "$name: MPI's own MPI_Bcast, $lines log line(s): $(grep -m1 "^aptus_bcast: " "$APTUS_RUN_LOG" | cut -c1-140)"
        else
            fail "$name: fallback" "$lines log lines, $(bcast_mode_count fallback 4) fallback ranks"
        fi
    fi

    name=$flavour/bcast/np2/malformed-setting
    EXTRA_ENV=(APTUS_BCAST_WINDOW=abc)
    run_bcast "$name" "$flavour" 2 "$NS" -i 1 -b 100
    if aptus_check_run "$name" bcast_check 2; then
        if grep -q "setting refused (APTUS_BCAST_WINDOW=abc" "$APTUS_RUN_LOG" &&
           [ "$(bcast_mode_count fallback 2)" -ge 2 ]; then
            pass "$name: refused, named, MPI's own MPI_Bcast"
        else
            fail "$name: refused and named" "see $APTUS_RUN_LOG"
        fi
    fi

    name=$flavour/bcast/np4/rank-killed
    run_bcast "$name" "$flavour" 4 "$NS" -k 2:40
    check_error_end "$name" "the job ends with an error"

    name=$flavour/bcast/np4/rank-stopped
    EXTRA_ENV=(APTUS_BCAST_PEER_TIMEOUT=2)
    run_bcast "$name" "$flavour" 4 "$NS" -s 2:40
    check_error_end "$name" "the peer timeout ends the job" "rank 2 answered no repair or poll"

    # the library built for the other MPI: one line naming the right one
    # and status 1, where every rank aborted with "Invalid datatype"
    other=openmpi
    [ "$flavour" = openmpi ] && other=mpich
    if [ -n "$(bcast_lib "$other")" ]; then
        name=$flavour/bcast/np2/$other-library
        BCAST_LIB_FLAVOUR=$other run_bcast "$name" "$flavour" 2 "$NS" -i 1
        check_error_end "$name" "refused in one line" \
            "^aptus_bcast: $(basename "$(bcast_lib "$other")") is built for .*: preload $(basename "$(bcast_lib "$flavour")") instead"
        if grep -q "Invalid datatype" "$APTUS_RUN_LOG"; then
            fail "$name: no Invalid datatype" "see $APTUS_RUN_LOG"
        fi
    fi
done


# ---- between hosts: a rank per host, 1% of the datagrams lost ------------

# cluster_job, cluster_multicast
. "$APTUS_REPO/contrib/bench/cluster_job.sh"
CL_NAME=tb$$
CL_UP=0
cl() { "$APTUS_REPO/contrib/cluster.sh" --name "$CL_NAME" "$@"; }
cluster_down() {
    [ "$CL_UP" = 1 ] || return 0
    cl down >/dev/null 2>&1
    CL_UP=0
}
APTUS_CLEANUP_HOOKS+=(cluster_down)

# run_bcast_hosts NAME FLAVOUR ARGS...: bcast_check on the cluster, a rank
# per host, the library preloaded, statistics in $STATS; sets what
# aptus_check_run reads.
run_bcast_hosts() {
    local name=$1 flavour=$2 t0
    shift 2
    local tag=${name//[^A-Za-z0-9._-]/_}
    STATS=$APTUS_WORK/$tag.bcast-stats
    APTUS_RUN_LOG=$APTUS_WORK/$tag.log
    rm -rf "$STATS" && mkdir -p "$STATS"
    [ "$flavour" = mpich ] && aptus_mpich_group
    t0=$(date +%s.%N)
    # shellcheck disable=SC2054  # the comma in ud_sr,self is meant
    cluster_job "$CL_NAME" "$flavour" "$HOSTS" "$HOSTS_TIMEOUT" \
        LD_PRELOAD="$(bcast_lib "$flavour") $APTUS_LIB" UCX_TLS=ud_sr,self \
        UCX_NET_DEVICES=eth0 UCX_WARN_UNUSED_ENV_VARS=n \
        APTUS_BCAST_STATS="$STATS/bcast.%r" -- \
        "$APTUS_WORK/bcast_check_$flavour" "$@" >"$APTUS_RUN_LOG" 2>&1
    APTUS_RUN_RC=$?
    APTUS_RUN_SECS=$(aptus_elapsed "$t0")
    cl clean >/dev/null 2>&1
    APTUS_RUN_PIDS=()
    while read -r r p; do
        APTUS_RUN_PIDS[r]=$p
    done < <(sed -n "s|^bcast_check rank \([0-9]*\)/$HOSTS pid \([0-9]*\): .*|\1 \2|p" \
                 "$APTUS_RUN_LOG")
}

# cl_dropped: UDP datagrams the hosts' loss rules dropped so far.
cl_dropped() {
    cl status 2>/dev/null | sed -n 's/.*udp-loss \([0-9]*\).*/\1/p' |
        awk '{ s += $1 } END { print s + 0 }'
}

HOSTS_TIMEOUT=90
if [ "$HOSTS" -ge 2 ] 2>/dev/null; then
    if ! command -v nsenter >/dev/null || ! command -v unshare >/dev/null; then
        skip "bcast between hosts" "needs util-linux (nsenter, unshare)"
    elif ! out=$(cl up "$HOSTS" --slots 1 --mtu 1500 --loss 1 2>&1); then
        fail "bcast between hosts: cluster up" "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    else
        CL_UP=1
        if ! out=$(cluster_multicast "$CL_NAME" 2>&1); then
            fail "bcast between hosts: route to the group" "$(echo "$out" | tr '\n' ' ')"
        fi
        echo "# cluster $CL_NAME: $HOSTS hosts, a rank each, 1% of UDP datagrams dropped on input"
        for flavour in $APTUS_MPIS; do
            [ -n "$(bcast_lib "$flavour")" ] || continue
            [ -x "$APTUS_WORK/bcast_check_$flavour" ] || continue
            name=$flavour/bcast/hosts$HOSTS/loss-1%
            before=$(cl_dropped)
            run_bcast_hosts "$name" "$flavour" -i 1 -b 1000 -m 32768 -p sizes,types,burst
            dropped=$(($(cl_dropped) - before))
            if aptus_check_run "$name" bcast_check "$HOSTS"; then
                check_mcast "$name" "$HOSTS"
                repairs=$(bcast_stat repairs_sent)
                if [ "$dropped" -gt 0 ] && [ "$repairs" -gt 0 ]; then
                    pass "$name: losses repaired (hosts dropped $dropped datagrams, repairs_sent=$repairs nacks_sent=$(bcast_stat nacks_sent))"
                else
                    fail "$name: losses repaired" "hosts dropped $dropped datagrams, repairs_sent=$repairs"
                fi
            fi
        done
        cluster_down
    fi
fi

aptus_summary
