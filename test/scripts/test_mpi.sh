#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: MPI tests of the ud_sr transport.
#
# Builds test/mpi/pingpong.c and test/mpi/alltoall.c with Open MPI and MPICH
# and runs, for each MPI, with UCX_TLS=ud_sr,self on lo:
#   pingpong  2 ranks, 0 B .. 4 MiB, every payload verified
#   alltoall  4 and 8 ranks, 4 B .. 1 MiB per peer, every element verified
#   alltoall  4 ranks, 1 MiB to every peer, with UD-ZCopy on and off (the
#             statistics must show zero-copy gets, or none)
# Each job must exit 0, report correct data from every rank, and every rank's
# UCX_APTUS_STATS line must show ud_sr traffic (tx_msgs > 0).
#
# Usage: APTUS_LIB=/path/to/libuct_aptus.so test/scripts/test_mpi.sh [WORKDIR]
#   WORKDIR (or APTUS_TEST_DIR): where binaries, logs and stats go; kept.
#   Without it a scratch directory is used and removed unless a check failed.
#   APTUS_MPI_TIMEOUT: per-job limit in seconds (default 180).
#   APTUS_MPIS: MPI flavours to test (default "openmpi mpich").
# Prints "PASS: name" / "FAIL: name (reason)" per check and finally
# "N passed, M failed"; exits non-zero when a check failed.
set -u

APTUS_SCRIPT=test_mpi
if [ $# -gt 0 ]; then
    APTUS_TEST_DIR=$1
fi
. "$(dirname "${BASH_SOURCE[0]}")/mpi_common.sh"
aptus_setup

# 8 ranks on this class of machine (2 cores) are oversubscribed 4x: keep the
# iteration count there at 2.
for flavour in $APTUS_MPIS; do
    aptus_build "$flavour" pingpong alltoall || continue

    name=$flavour/pingpong/np2
    aptus_mpirun "$name" "$flavour" 2 pingpong
    aptus_check_run "$name" pingpong 2 && \
        grep -E '^# +bytes|^ +(0|1|1024|65536|1048576|4194304) ' \
            "$APTUS_RUN_LOG" | \
            sed 's/^ */    /'
    aptus_check_traffic "$name" 2

    for np in 4 8; do
        iters=3
        [ "$np" -gt 4 ] && iters=2
        name=$flavour/alltoall/np$np
        aptus_mpirun "$name" "$flavour" "$np" alltoall -m 1m -i "$iters"
        aptus_check_run "$name" alltoall "$np"
        aptus_check_traffic "$name" "$np"
        note "retransmits=$(aptus_stat_total retransmits)" \
             "rx_duplicates=$(aptus_stat_total rx_duplicates)" \
             "(all ranks)"
    done

    for mode in on off; do
        name=$flavour/alltoall-1MiB/np4/zcopy-$mode
        zcopy=y
        [ $mode = off ] && zcopy=n
        APTUS_RUN_ENV=(UCX_UD_SR_ZCOPY=$zcopy)
        aptus_mpirun "$name" "$flavour" 4 alltoall -n 1m -m 1m -i 3
        unset APTUS_RUN_ENV
        aptus_check_run "$name" alltoall 4
        aptus_check_traffic "$name" 4
        aptus_check_zcopy "$name" $mode
    done
done

aptus_summary
