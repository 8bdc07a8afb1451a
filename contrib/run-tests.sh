#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole UCX-Aptus test suite (what .ci/run calls):
#   set-up (packages, UCX headers), build, unit tests, the same under
#   AddressSanitizer+UBSan, ucx_perftest over ud_sr, rc_sr and aptus, MPI jobs with
#   Open MPI and MPICH over ud_sr, rc_sr and aptus (one-sided too; heavy
#   and light peers at 8 to 32 ranks with the channel caps checked), the
#   cross-host suite on a cluster in a box (test_cluster.sh), 100,000
#   held unexpected messages and 64-rank all-to-all beside tcp, and the
#   robustness campaign's short form (loss from nftables in a network
#   namespace and the built-in fault injector, CRC, peer death, stalls,
#   forgery, scale, fuzz, sanitizers), and the multicast MPI_Bcast library
#   under both MPIs, and the Debian package (built, installed, used,
#   purged). Ends with "N passed, M failed"; exits non-zero on any
#   failure.
#
#   contrib/run-tests.sh [--quick]   (--quick: unit tests only)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. test/scripts/lib.sh

quick=0
[ "${1:-}" = "--quick" ] && quick=1
start=$(date +%s)
log_dir=$top/build/test-logs
. contrib/suite-lib.sh

section "set-up"
contrib/setup-debian.sh || { echo "set-up failed"; exit 1; }
section "build"
contrib/build.sh --check || { echo "build failed"; exit 1; }
suites_begin
export APTUS_LIB=$top/build/.libs/libuct_aptus.so

# The 10,000-endpoint scale tests run once, in the campaign's scale row:
# on a slow machine it takes minutes (the resends of 10,000 streams
# opening at once), and under ASan it would measure only ASan.
unit_filter='-*ten_thousand*'
run_unit() {
    set -o pipefail
    "$top/build/test/unit/aptus_unit" --gtest_color=no --gtest_filter="$unit_filter" 2>&1 |
        grep -v "UCX  ERROR [a-z_]*: invalid configuration\|UCX  ERROR Invalid value\|UCX  WARN  aptus/lo: a message on a connection"
}
run_unit_asan() {
    set -o pipefail
    local bin=$top/build/test/unit/aptus_unit_asan
    if [ ! -x "$bin" ]; then
        echo "aptus_unit_asan was not built (compiler without -fsanitize)"
        return 1
    fi
    # UCX's memory hooks patch malloc/mmap; leave those to ASan
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
        "$bin" --gtest_color=no --gtest_filter="$unit_filter" 2>&1 |
        grep -v "UCX  ERROR [a-z_]*: invalid configuration\|UCX  ERROR Invalid value\|UCX  WARN  aptus/lo: a message on a connection"
}

suite format contrib/check-format.sh
suite layers contrib/check-layers.sh
suite docs contrib/check-docs-vars.sh
suite runner test/scripts/test_runner.sh
suite unit run_unit
suite unit-asan run_unit_asan
suite fuzz contrib/fuzz.sh "$top/build/fuzz"
if [ $quick -eq 0 ]; then
    suite perftest test/scripts/test_perftest.sh
    suite ucp test/scripts/test_ucp.sh
    suite mpi test/scripts/test_mpi.sh
    suite mpi-rc test/scripts/test_mpi_rc.sh
    suite mpi-aptus test/scripts/test_mpi_aptus.sh
    suite mpi-over-aptus env APTUS_MPI_TLS=aptus,self test/scripts/test_mpi_rc.sh
    suite mpi-over-rc_fp env APTUS_MPI_TLS=rc_fp,self test/scripts/test_mpi_rc.sh
    suite scale test/scripts/test_scale.sh
    # between hosts: a cluster in a box (network namespaces with their own
    # PID namespaces on a bridge), every transport and host setting (MTU
    # 1500, 9000, mixed, a black hole at 1500, 1% loss) at least once,
    # both MPIs, and ucx_perftest between two hosts
    suite cluster test/scripts/test_cluster.sh "$top/build/cluster"
    # the multicast MPI_Bcast library (libaptus_bcast), both MPIs, 2 to 16
    # ranks, loss, no multicast, dead and silent ranks
    suite bcast test/scripts/test_bcast.sh
    # the robustness campaign, short form: loss at 1% and 5% (nftables),
    # the injector, CRC, peer death, stalls, forgery, scale, fuzz and the
    # sanitizers, ending on its table
    suite campaign contrib/campaign.sh "$top/build/campaign"
    # the Debian package: built from a copy of the tree (dpkg-buildpackage),
    # its contents and exact libucx0 dependency, lintian, installed,
    # aptus-env and its manual page used, purged
    suite package test/scripts/test_package.sh
fi

section "summary"
echo "time: $(( $(date +%s) - start ))s"
suites_summary
