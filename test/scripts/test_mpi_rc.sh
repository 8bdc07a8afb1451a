#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: MPI tests over a chosen transport list, made for rc_sr.
#
# Builds test/mpi/pingpong.c, alltoall.c and onesided.c with Open MPI and
# MPICH and runs, for each MPI, with UCX_TLS=$APTUS_MPI_TLS on lo:
#   pingpong      2 ranks, 0 B .. 4 MiB, every payload verified
#   alltoall      4 ranks, 4 B .. 1 MiB per peer, every element verified
#   alltoall      4 ranks, 1 MiB to every peer
#   onesided      2 ranks 8 B .. 4 MiB, 4 ranks 8 B .. 1 MiB: MPI_Put and
#                 MPI_Get in fence epochs and under MPI_Win_lock/flush,
#                 every byte verified
# Each job must exit 0 and report correct data from every rank, and every
# rank's UCX_APTUS_STATS lines of the transport $APTUS_MPI_TL must show
# traffic (tx_msgs > 0, rx_msgs > 0). For the one-sided jobs the bytes the
# transport moved in all ranks (tx_bytes + put_bytes + get_bytes of its
# statistics) must be at least the payload the ranks report. For a
# transport list without an aptus transport (e.g. tcp,self) these checks
# are skipped, with a SKIP line each.
#
# One-sided communication goes through UCX only where the MPI is told so:
#   Open MPI  its default osc is rdma (over its own BTLs; Debian also
#             disables osc/ucx in openmpi-mca-params.conf), so the jobs run
#             with --mca osc ucx. Two more jobs show that osc/ucx really
#             carries the data over the transport: with --mca pml ob1 (the
#             only UCX user left in the process is osc/ucx) the one-sided
#             test must pass with traffic on $APTUS_MPI_TL, and with
#             UCX_TLS=self (no transport that reaches a peer) it must fail
#             with an error from UCX.
#   MPICH     ch4:ucx does RMA through UCX itself.
#
# Usage: APTUS_LIB=/path/to/libuct_aptus.so test/scripts/test_mpi_rc.sh [WORKDIR]
#   WORKDIR (or APTUS_TEST_DIR): where binaries, logs and stats go; kept.
#   Without it a scratch directory is used and removed unless a check failed.
#   APTUS_MPI_TLS: UCX_TLS of the jobs (default "rc_sr,self").
#   APTUS_MPI_TL: the transport whose statistics are checked (default: the
#     first aptus transport in APTUS_MPI_TLS: ud_sr, rc_sr, rc_fp or aptus;
#     empty or not an aptus transport: traffic checks are skipped).
#   APTUS_MPI_TIMEOUT: per-job limit in seconds (default 180).
#   APTUS_MPIS: MPI flavours to test (default "openmpi mpich").
# Examples:
#   APTUS_LIB=build/.libs/libuct_aptus.so test/scripts/test_mpi_rc.sh
#   APTUS_MPI_TLS=ud_sr,self APTUS_LIB=... test/scripts/test_mpi_rc.sh
#   APTUS_MPI_TLS=tcp,self APTUS_LIB=... test/scripts/test_mpi_rc.sh
# Prints "PASS: name" / "FAIL: name (reason)" / "SKIP: name (reason)" per
# check and finally "N passed, M failed, K skipped"; exits non-zero when a
# check failed.
set -u

APTUS_SCRIPT=test_mpi_rc
if [ $# -gt 0 ]; then
    APTUS_TEST_DIR=$1
fi
. "$(dirname "${BASH_SOURCE[0]}")/mpi_common.sh"
aptus_setup

APTUS_TLS_NAMES="ud_sr rc_sr rc_fp aptus"
TLS=${APTUS_MPI_TLS:-rc_sr,self}
if [ -n "${APTUS_MPI_TL+set}" ]; then
    TL=$APTUS_MPI_TL
else
    TL=
    for t in ${TLS//,/ }; do
        case " $APTUS_TLS_NAMES " in
        *" $t "*) TL=$t; break ;;
        esac
    done
fi
STATS_TL=
case " $APTUS_TLS_NAMES " in
*" ${TL:-none} "*)
    STATS_TL=$TL
    why_no_stats=
    ;;
*)
    if [ -z "$TL" ]; then
        why_no_stats="no aptus transport in UCX_TLS=$TLS"
    else
        why_no_stats="$TL is not an aptus transport: it writes no aptus-stats lines"
    fi
    ;;
esac
echo "# $APTUS_SCRIPT: UCX_TLS=$TLS, statistics checked for:" \
     "${STATS_TL:-none ($why_no_stats)}"
APTUS_RUN_TLS=$TLS

# The aptus transports named in UCX_TLS must be known to UCX with the
# library loaded; without them every job would only time out.
missing=
for t in ${TLS//,/ }; do
    case " $APTUS_TLS_NAMES " in
    *" $t "*)
        if ! LD_PRELOAD="$APTUS_LIB${LD_PRELOAD:+ $LD_PRELOAD}" ucx_info -d \
                2>/dev/null | grep -q "Transport: $t\$"; then
            missing="$missing $t"
        fi
        ;;
    esac
done
if [ -n "$missing" ]; then
    fail "transports in ucx_info -d" \
         "not offered with $APTUS_LIB loaded:$missing"
    aptus_summary
    exit
fi

# check_traffic NAME NP: traffic on $STATS_TL in every rank, or a SKIP.
check_traffic() {
    if [ -n "$STATS_TL" ]; then
        aptus_check_traffic "$1" "$2" "$STATS_TL"
    else
        skip "$1: traffic in every rank" "$why_no_stats"
    fi
}

# hang_note: after a failed job, say when every rank had reported and the
# verdict was PASS, i.e. the job hung or died afterwards (in MPI_Finalize).
hang_note() {
    local prog=$1 np=$2
    if grep -q "^$prog: PASS" "$APTUS_RUN_LOG" &&
        [ "${#APTUS_RUN_PIDS[@]}" -eq "$np" ]; then
        note "every rank reported correct data and the verdict was PASS;" \
             "the job did not end afterwards (MPI_Finalize)"
    fi
}

# check_rma_payload NAME NP: the bytes the transport moved in all ranks
# (tx_bytes of its messages plus put_bytes and get_bytes of its RMA, where
# it counts those) must be at least the one-sided payload that the ranks
# report, i.e. no payload went another way. Also says how many statistics
# lines (UCX interfaces) each rank wrote.
check_rma_payload() {
    local name=$1 np=$2 r pid f lines='' payload tx put get moved
    if [ -z "$STATS_TL" ]; then
        skip "$name: one-sided payload over the transport" "$why_no_stats"
        return 0
    fi
    payload=$(sed -n 's/^onesided rank .* bytes=\([0-9]*\) .*/\1/p' \
                  "$APTUS_RUN_LOG" | awk '{ s += $1 } END { print s + 0 }')
    tx=$(aptus_stat_total tx_bytes "$STATS_TL")
    put=$(aptus_stat_total put_bytes "$STATS_TL")
    get=$(aptus_stat_total get_bytes "$STATS_TL")
    moved=$((tx + put + get))
    for ((r = 0; r < np; r++)); do
        pid=${APTUS_RUN_PIDS[$r]:-}
        f=$APTUS_RUN_STATS/stats.$pid
        if [ -n "$pid" ] && [ -f "$f" ]; then
            lines="$lines r$r:$(grep -c "^aptus-stats $STATS_TL/" "$f")"
        else
            lines="$lines r$r:?"
        fi
    done
    if [ "$payload" -gt 0 ] && [ "$moved" -ge "$payload" ]; then
        pass "$name: one-sided payload over $STATS_TL ($STATS_TL moved\
 $moved >= payload $payload: tx_bytes=$tx put_bytes=$put get_bytes=$get)"
    else
        fail "$name: one-sided payload over $STATS_TL" "$STATS_TL moved\
 $moved (tx_bytes=$tx put_bytes=$put get_bytes=$get), payload $payload"
    fi
    note "$STATS_TL statistics lines (UCX interfaces) per rank:$lines"
}

# check_fast_path NAME: over rc_fp, small messages took the fast path
# (fp_tx_msgs > 0 over all ranks, as many received), no ring was found
# corrupt, and no rank gave or used more channels than the cap.
check_fast_path() {
    local name=$1 tx rx corrupt
    [ "$STATS_TL" = rc_fp ] || return 0
    tx=$(aptus_stat_total fp_tx_msgs rc_fp)
    rx=$(aptus_stat_total fp_rx_msgs rc_fp)
    corrupt=$(aptus_stat_total fp_rx_corrupt rc_fp)
    over=$(cat "$APTUS_RUN_STATS"/stats.* 2>/dev/null | awk '
        $1 == "aptus-stats" && index($2, "rc_fp/") == 1 {
            for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            if (v["fp_rx_peak"] > v["fp_max_channels"] ||
                v["fp_tx_peak"] > v["fp_max_channels"]) n++
        }
        END { print n + 0 }')
    if [ "${tx:-0}" -gt 0 ] && [ "$tx" = "$rx" ] && [ "${corrupt:-0}" -eq 0 ] &&
        [ "$over" -eq 0 ]; then
        pass "$name: fast path carried $tx messages (all received, none corrupt, cap held)"
    else
        fail "$name: fast path" "fp_tx_msgs=$tx fp_rx_msgs=$rx fp_rx_corrupt=$corrupt, interfaces over the cap: $over"
    fi
}

for flavour in $APTUS_MPIS; do
    aptus_build "$flavour" pingpong alltoall onesided || continue

    name=$flavour/pingpong/np2
    aptus_mpirun "$name" "$flavour" 2 pingpong
    if aptus_check_run "$name" pingpong 2; then
        grep -E '^# +bytes|^ +(0|1|1024|65536|1048576|4194304) ' \
            "$APTUS_RUN_LOG" | sed 's/^/  /'
    else
        hang_note pingpong 2
    fi
    check_traffic "$name" 2
    check_fast_path "$name"

    name=$flavour/alltoall/np4
    aptus_mpirun "$name" "$flavour" 4 alltoall -m 1m -i 3
    aptus_check_run "$name" alltoall 4 || hang_note alltoall 4
    check_traffic "$name" 4
    check_fast_path "$name"

    name=$flavour/alltoall-1MiB/np4
    aptus_mpirun "$name" "$flavour" 4 alltoall -n 1m -m 1m -i 3
    aptus_check_run "$name" alltoall 4 || hang_note alltoall 4
    check_traffic "$name" 4

    if [ "$flavour" = openmpi ]; then
        APTUS_RUN_MCA=(osc ucx)
    fi
    for np in 2 4; do
        max=4m
        [ "$np" -gt 2 ] && max=1m
        name=$flavour/onesided/np$np
        aptus_mpirun "$name" "$flavour" "$np" onesided -m "$max" -i 3
        if aptus_check_run "$name" onesided "$np"; then
            grep -E '^# +bytes|^ +(8|2048|32768|524288|1048576|4194304) ' \
                "$APTUS_RUN_LOG" | sed 's/^/  /'
        else
            hang_note onesided "$np"
        fi
        check_traffic "$name" "$np"
        check_rma_payload "$name" "$np"
    done
    APTUS_RUN_MCA=()

    if [ "$flavour" = openmpi ]; then
        # osc/ucx alone: pml ob1 over shared memory for the rest.
        # shellcheck disable=SC2054  # the comma in self,vader is meant
        APTUS_RUN_MCA=(pml ob1 btl self,vader osc ucx)
        name=$flavour/onesided-osc-ucx-only/np2
        aptus_mpirun "$name" "$flavour" 2 onesided -m 256k -i 2 -q
        aptus_check_run "$name" onesided 2 || hang_note onesided 2
        check_traffic "$name" 2
        check_rma_payload "$name" 2

        # ... and without a UCX transport that reaches the peer it fails.
        name=$flavour/onesided-osc-ucx-no-transport/np2
        APTUS_RUN_TLS=self
        timeout_saved=$APTUS_MPI_TIMEOUT
        [ "$APTUS_MPI_TIMEOUT" -gt 60 ] && APTUS_MPI_TIMEOUT=60
        aptus_mpirun "$name" "$flavour" 2 onesided -m 64k -i 1 -q
        APTUS_MPI_TIMEOUT=$timeout_saved
        APTUS_RUN_TLS=$TLS
        APTUS_RUN_MCA=()
        ucx_error=$(grep -m1 -E 'UCX +ERROR' "$APTUS_RUN_LOG" |
                        sed 's/^.*UCX  *ERROR *//')
        what="$name: osc/ucx fails without a UCX transport"
        if [ "$APTUS_RUN_RC" -eq 124 ] || [ "$APTUS_RUN_RC" -eq 137 ]; then
            fail "$what" "timed out instead; log $APTUS_RUN_LOG"
        elif [ "$APTUS_RUN_RC" -eq 0 ] ||
            grep -q '^onesided: PASS' "$APTUS_RUN_LOG"; then
            fail "$what" "it ran (exit $APTUS_RUN_RC), so one-sided did not\
 go through UCX; log $APTUS_RUN_LOG"
        elif [ -z "$ucx_error" ]; then
            fail "$what" "exit $APTUS_RUN_RC but no error from UCX; log\
 $APTUS_RUN_LOG"
        else
            pass "$what (exit $APTUS_RUN_RC, UCX: $ucx_error)"
        fi
    fi
done

aptus_summary
