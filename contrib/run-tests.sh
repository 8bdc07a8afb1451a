#!/bin/bash
# The whole UCX-Aptus test suite (what .ci/run calls):
#   set-up (packages, UCX headers), build, unit tests, the same under
#   AddressSanitizer+UBSan, ucx_perftest over ud_sr and rc_sr, MPI jobs with
#   Open MPI and MPICH over ud_sr and over rc_sr (one-sided too), 100,000
#   held unexpected messages and 64-rank all-to-all beside tcp, and loss
#   tests (nftables in a network namespace, built-in
#   fault injector). Ends with "N passed, M failed"; exits non-zero on any
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
suites_passed=0
suites_failed=0

section() { printf '\n===== %s =====\n' "$*"; }

total_pass=0
total_fail=0

# Reads "N passed, M failed" (or GoogleTest's summary) from one suite's log
# and adds it to the totals; leaves the suite's own failure count in
# log_failed (no subshell: the totals must stick).
count_log() {
    local f=$1 line n=0 m=0
    line=$(grep -E '^(\[  PASSED  \] [0-9]+ tests?|[0-9]+ passed, [0-9]+ failed)' "$f" | tail -n1)
    case "$line" in
        *PASSED*) n=$(echo "$line" | grep -oE '[0-9]+' | head -n1) ;;
        *passed*) n=$(echo "$line" | grep -oE '^[0-9]+')
                  m=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+') ;;
    esac
    if grep -qE '^\[  FAILED  \] [0-9]+ tests?,' "$f"; then
        m=$(grep -E '^\[  FAILED  \] [0-9]+ tests?,' "$f" | grep -oE '[0-9]+' | head -n1)
    fi
    total_pass=$((total_pass + n))
    total_fail=$((total_fail + m))
    log_failed=$m
}

# Runs a suite; it prints its own PASS/FAIL lines and "N passed, M failed".
# A suite that exits non-zero without reporting a failure (a crash, a
# sanitizer abort) counts as one failure of its own.
suite() {
    local name=$1
    shift
    section "$name"
    local t0=$(date +%s) rc
    # the suite's own status, not tee's: a crash must count
    "$@" 2>&1 | tee "$log_dir/$name.log"
    rc=${PIPESTATUS[0]}
    count_log "$log_dir/$name.log"
    if [ "$rc" -eq 0 ]; then
        echo "[$name: ok in $(( $(date +%s) - t0 ))s]"
        suites_passed=$((suites_passed + 1))
    else
        echo "[$name: FAILED (exit $rc) in $(( $(date +%s) - t0 ))s]"
        suites_failed=$((suites_failed + 1))
        if [ "$log_failed" -eq 0 ]; then
            total_fail=$((total_fail + 1))
        fi
    fi
}

section "set-up"
contrib/setup-debian.sh || { echo "set-up failed"; exit 1; }
section "build"
contrib/build.sh --check || { echo "build failed"; exit 1; }
# only this run's logs count
rm -rf "$log_dir"
mkdir -p "$log_dir"
export APTUS_LIB=$top/build/.libs/libuct_aptus.so

run_unit() {
    set -o pipefail
    "$top/build/test/unit/aptus_unit" --gtest_color=no 2>&1 |
        grep -v "UCX  ERROR ud_sr: invalid configuration\|UCX  ERROR Invalid value"
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
        "$bin" --gtest_color=no 2>&1 |
        grep -v "UCX  ERROR ud_sr: invalid configuration\|UCX  ERROR Invalid value"
}

suite unit run_unit
suite unit-asan run_unit_asan
if [ $quick -eq 0 ]; then
    suite perftest test/scripts/test_perftest.sh
    suite ucp test/scripts/test_ucp.sh
    suite mpi test/scripts/test_mpi.sh
    suite mpi-rc test/scripts/test_mpi_rc.sh
    suite scale test/scripts/test_scale.sh
    suite loss test/scripts/test_loss.sh
fi

section "summary"
echo "suites: $suites_passed ok, $suites_failed failed; $(( $(date +%s) - start ))s"
echo "$total_pass passed, $total_fail failed"
[ $suites_failed -eq 0 ] && [ $total_fail -eq 0 ]
