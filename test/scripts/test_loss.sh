#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: packet-loss tests of the ud_sr transport under MPI.
#
# The data-verifying all-to-all (test/mpi/alltoall.c, 4 ranks, Open MPI and
# MPICH, UCX_TLS=ud_sr,self on lo) runs
#   (a) in a network namespace made for the test, where nftables drops 5% of
#       the UDP datagrams on the input hook (TCP, which the MPI launchers
#       use, is untouched). Asserts: correct data, the job ends, the nft
#       rule really dropped datagrams and ud_sr retransmitted; then with
#       1 MiB to every peer, UD-ZCopy on (lost zero-copy datagrams were
#       asked for and resent) and off;
#   (b) on the host with ud_sr's own fault injector dropping, duplicating,
#       reordering and delaying datagrams. Asserts: correct data, and the
#       injector's counters (fault_drop, fault_dup, fault_reorder,
#       fault_delay) are non-zero.
# Every rank's UCX_APTUS_STATS line must show ud_sr traffic.
#
# Usage: APTUS_LIB=/path/to/libuct_aptus.so test/scripts/test_loss.sh [WORKDIR]
#   WORKDIR (or APTUS_TEST_DIR): where binaries, logs and stats go; kept.
#   APTUS_LOSS_PERCENT: nftables drop rate in percent (default 5).
#   APTUS_MPI_TIMEOUT: per-job limit in seconds (default 180).
#   APTUS_MPIS: MPI flavours to test (default "openmpi mpich").
#   APTUS_LOSS_PARTS: which of (a) and (b) to run (default "nft injector").
# Needs root, iproute2 and nftables for (a); prints SKIP when they are
# missing. "PASS: ..." / "FAIL: ... (reason)" per check, "N passed, M failed"
# at the end, non-zero exit when a check failed.
set -u

APTUS_SCRIPT=test_loss
if [ $# -gt 0 ]; then
    APTUS_TEST_DIR=$1
fi
. "$(dirname "${BASH_SOURCE[0]}")/mpi_common.sh"
aptus_setup

LOSS=${APTUS_LOSS_PERCENT:-5}
PARTS=${APTUS_LOSS_PARTS:-nft injector}
A2A_ARGS=(-m 1m -i 3)
NS=aptus-loss-$$
NS_MADE=0

ns_delete() {
    if [ "$NS_MADE" = 1 ]; then
        # processes still in the namespace would keep it alive: the jobs
        # are gone by now (timeout + leftover kill), so this is final.
        ip netns delete "$NS" 2>/dev/null || true
        NS_MADE=0
    fi
}
APTUS_CLEANUP_HOOKS+=(ns_delete)

# Namespaces of earlier runs that were killed before their cleanup ran.
ns_delete_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in
        aptus-loss-*)
            pid=${ns#aptus-loss-}
            if ! kill -0 "$pid" 2>/dev/null; then
                ip netns delete "$ns" 2>/dev/null &&
                    note "deleted stale namespace $ns"
            fi
            ;;
        esac
    done
}

# ns_setup: make the namespace and the drop rule; on failure prints why and
# returns non-zero.
ns_why=
ns_setup() {
    local out
    if [ "$(id -u)" -ne 0 ]; then
        ns_why="needs root"; return 1
    fi
    if ! command -v ip >/dev/null; then
        ns_why="iproute2 (ip) not installed"; return 1
    fi
    if ! command -v nft >/dev/null; then
        ns_why="nftables (nft) not installed: apt-get install nftables"
        return 1
    fi
    ns_delete_stale
    if ! out=$(ip netns add "$NS" 2>&1); then
        ns_why="ip netns add failed: $out"; return 1
    fi
    NS_MADE=1
    if ! out=$(ip -n "$NS" link set lo up 2>&1); then
        ns_why="ip link set lo up failed: $out"; return 1
    fi
    if ! out=$(ip netns exec "$NS" nft -f - 2>&1 <<EOF
table inet aptusloss {
    chain input {
        type filter hook input priority 0; policy accept;
        udp dport 1024-65535 numgen random mod 100 < $LOSS counter drop
    }
}
EOF
    ); then
        ns_why="nft rule refused: $out"; return 1
    fi
    return 0
}

# nft_dropped: packets the rule has dropped so far.
nft_dropped() {
    ip netns exec "$NS" nft list table inet aptusloss 2>/dev/null |
        sed -n 's/.*counter packets \([0-9]*\) .*drop.*/\1/p' | head -n 1
}

nft_reset() {
    ip netns exec "$NS" nft reset counters table inet aptusloss \
        >/dev/null 2>&1 || true
}

# check_messages NAME: every message the job's ud_sr interfaces sent was
# delivered exactly once (the ranks only talk to each other, so the sums
# over all ranks must agree), and the data check found nothing wrong.
# Prints "messages sent=S delivered=D duplicated=X corrupted=C lost=L".
check_messages() {
    local name=$1 sent delivered dup=0 lost=0 wrong
    sent=$(aptus_stat_total tx_msgs)
    delivered=$(aptus_stat_total rx_msgs)
    wrong=$(sed -n 's/.*alltoall: [A-Z]* ([0-9]* ranks, \([0-9]*\) wrong.*/\1/p' \
        "$APTUS_RUN_LOG" 2>/dev/null | tail -n 1)
    [ "$delivered" -gt "$sent" ] && dup=$((delivered - sent))
    [ "$sent" -gt "$delivered" ] && lost=$((sent - delivered))
    local detail="messages sent=$sent delivered=$delivered duplicated=$dup"
    detail="$detail corrupted=${wrong:-?} lost=$lost"
    if [ "$sent" -gt 0 ] && [ "$dup" -eq 0 ] && [ "$lost" -eq 0 ] &&
       [ "${wrong:-1}" -eq 0 ]; then
        pass "$name: exactly once, intact ($detail)"
    else
        fail "$name: exactly once, intact" "$detail"
    fi
}

flavours=
for flavour in $APTUS_MPIS; do
    aptus_build "$flavour" alltoall && flavours="$flavours $flavour"
done

# (a) nftables loss in a namespace
if [[ " $PARTS " != *" nft "* ]]; then
    :
elif ns_setup; then
    echo "# (a) namespace $NS: nftables drops $LOSS% of UDP datagrams (input)"
    for flavour in $flavours; do
        name=$flavour/alltoall/np4/nft-loss-$LOSS%
        nft_reset
        APTUS_RUN_PREFIX=(ip netns exec "$NS")
        aptus_mpirun "$name" "$flavour" 4 alltoall "${A2A_ARGS[@]}"
        unset APTUS_RUN_PREFIX
        dropped=$(nft_dropped)
        aptus_check_run "$name" alltoall 4
        aptus_check_traffic "$name" 4
        check_messages "$name"
        rto=$(aptus_stat_total retransmits)
        fast=$(aptus_stat_total fast_retransmits)
        dup=$(aptus_stat_total rx_duplicates)
        held=$(aptus_stat_total rx_held)
        detail="nft dropped ${dropped:-?} datagrams, retransmits=$rto"
        detail="$detail fast_retransmits=$fast rx_held=$held rx_duplicates=$dup"
        if [ "${dropped:-0}" -gt 0 ] && [ $((rto + fast)) -gt 0 ]; then
            pass "$name: loss happened and was repaired ($detail)"
        else
            fail "$name: loss happened and was repaired" "$detail"
        fi

        for mode in on off; do
            name=$flavour/alltoall-1MiB/np4/nft-loss-$LOSS%/zcopy-$mode
            zcopy=y
            [ $mode = off ] && zcopy=n
            nft_reset
            APTUS_RUN_PREFIX=(ip netns exec "$NS")
            APTUS_RUN_ENV=(UCX_UD_SR_ZCOPY=$zcopy)
            aptus_mpirun "$name" "$flavour" 4 alltoall -n 1m -m 1m -i 3
            unset APTUS_RUN_PREFIX APTUS_RUN_ENV
            dropped=$(nft_dropped)
            aptus_check_run "$name" alltoall 4
            aptus_check_zcopy "$name" $mode
            check_messages "$name"
            resent=$(aptus_stat_total zc_dgrams_resent)
            rto=$(aptus_stat_total retransmits)
            fast=$(aptus_stat_total fast_retransmits)
            detail="nft dropped ${dropped:-?}, zc_dgrams_resent=$resent"
            detail="$detail zc_nacks=$(aptus_stat_total zc_nacks)"
            detail="$detail zc_probes=$(aptus_stat_total zc_probes)"
            detail="$detail retransmits=$rto fast_retransmits=$fast"
            if [ "${dropped:-0}" -gt 0 ] &&
               { { [ $mode = on ] && [ "$resent" -gt 0 ]; } ||
                 { [ $mode = off ] && [ $((rto + fast)) -gt 0 ]; }; }; then
                pass "$name: loss happened and was repaired ($detail)"
            else
                fail "$name: loss happened and was repaired" "$detail"
            fi
        done
    done
else
    skip "nftables loss in a network namespace" "$ns_why"
fi
ns_delete

# (b) the built-in fault injector, no namespace
[[ " $PARTS " == *" injector "* ]] &&
    echo "# (b) ud_sr fault injector: drop 3%, duplicate 2%, reorder 2%, delay 1%"
for flavour in $flavours; do
    [[ " $PARTS " == *" injector "* ]] || break
    name=$flavour/alltoall/np4/injector
    APTUS_RUN_ENV=(UCX_UD_SR_FAULT_DROP=0.03 UCX_UD_SR_FAULT_DUP=0.02
                   UCX_UD_SR_FAULT_REORDER=0.02 UCX_UD_SR_FAULT_DELAY=0.01)
    aptus_mpirun "$name" "$flavour" 4 alltoall "${A2A_ARGS[@]}"
    unset APTUS_RUN_ENV
    aptus_check_run "$name" alltoall 4
    aptus_check_traffic "$name" 4
    check_messages "$name"
    why=
    detail=
    for key in fault_drop fault_dup fault_reorder fault_delay; do
        v=$(aptus_stat_total $key)
        detail="$detail $key=$v"
        [ "$v" -gt 0 ] || why="${why:+$why, }$key=0"
    done
    for key in retransmits fast_retransmits rx_duplicates rx_held; do
        detail="$detail $key=$(aptus_stat_total $key)"
    done
    if [ -z "$why" ]; then
        pass "$name: faults were injected ($detail )"
    else
        fail "$name: faults were injected" "$why;$detail"
    fi
done

aptus_summary
