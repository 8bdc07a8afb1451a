#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: MPI at scale and with held messages, beside UCX's own tcp.
#
# Two ways users break transports that small tests do not:
#   unexpected  2 ranks: rank 0 sends 100,000 4-byte messages, both ranks
#               enter MPI_Barrier, and only then rank 1 posts its receives,
#               twice (the second time with MPI_ANY_SOURCE). UCP holds every
#               message's receive descriptor meanwhile; the transport must
#               keep receiving, acknowledging and granting credits.
#   alltoall    64 ranks (32x oversubscribed on 2 cores), blocks of 4 B to
#               4 KiB per peer, every element verified: every rank talks to
#               63 peers at once.
# Each runs over tcp,self (the baseline, same run) and over ud_sr,self,
# rc_sr,self and aptus,self (APTUS_SCALE_TLS), with Open MPI and with
# MPICH. The baseline's result is
# reported but only our transports' jobs count: a tcp failure is printed as
# SKIP with its reason (MPICH 4.0.2 over UCX 1.13 tcp sometimes hangs in
# MPI_Finalize).
#
# Usage: APTUS_LIB=/path/to/libuct_aptus.so test/scripts/test_scale.sh [WORKDIR]
#   APTUS_SCALE_COUNT  held messages (default 100000)
#   APTUS_SCALE_NP     ranks of the all-to-all (default 64)
#   APTUS_MPIS, APTUS_MPI_TIMEOUT: as for test_mpi.sh
# Prints "PASS: name" / "FAIL: name (reason)" per check and finally
# "N passed, M failed, K skipped".
set -u

APTUS_SCRIPT=test_scale
if [ $# -gt 0 ]; then
    APTUS_TEST_DIR=$1
fi
. "$(dirname "${BASH_SOURCE[0]}")/mpi_common.sh"
aptus_setup

count=${APTUS_SCALE_COUNT:-100000}
np=${APTUS_SCALE_NP:-64}

# run_case NAME FLAVOUR TL NP PROG [ARGS...]: one job; tcp is the baseline.
run_case() {
    local name=$1 flavour=$2 tl=$3 n=$4 prog=$5
    shift 5
    APTUS_RUN_TLS=$tl,self
    if [ "$tl" = tcp ]; then
        # a hung baseline (MPICH's finalize over tcp) costs a minute, not 3
        local saved=$APTUS_MPI_TIMEOUT
        APTUS_MPI_TIMEOUT=$((saved < 60 ? saved : 60))
        aptus_mpirun "$name" "$flavour" "$n" "$prog" "$@"
        APTUS_MPI_TIMEOUT=$saved
    else
        aptus_mpirun "$name" "$flavour" "$n" "$prog" "$@"
    fi
    if [ "$tl" = tcp ]; then
        if grep -q "^$prog: PASS" "$APTUS_RUN_LOG" &&
           [ "$APTUS_RUN_RC" -eq 0 ]; then
            note "baseline $name: ${APTUS_RUN_SECS}s"
        else
            skip "$name" "baseline failed (exit $APTUS_RUN_RC), not ours"
        fi
        return 0
    fi
    aptus_check_run "$name" "$prog" "$n" && aptus_check_traffic "$name" "$n" "$tl"
}

for flavour in $APTUS_MPIS; do
    aptus_build "$flavour" unexpected alltoall || continue
    for tl in ${APTUS_SCALE_TLS:-tcp ud_sr rc_sr aptus}; do
        run_case "$flavour/unexpected/$tl/np2" "$flavour" "$tl" 2 \
            unexpected -c "$count" -r 2
        grep -E '^unexpected rank' "$APTUS_RUN_LOG" | sed 's/^/    /'
    done
    for tl in ${APTUS_SCALE_TLS:-tcp ud_sr rc_sr aptus}; do
        run_case "$flavour/alltoall/$tl/np$np" "$flavour" "$tl" "$np" \
            alltoall -m 4k -i 1
    done
done
unset APTUS_RUN_TLS

aptus_summary
