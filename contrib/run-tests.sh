#!/bin/bash
# The whole UCX-Aptus test suite (what .ci/run calls):
#   set-up (packages, UCX headers), build, unit tests, the same under
#   AddressSanitizer+UBSan, ucx_perftest over ud_sr and rc_sr, MPI jobs with
#   Open MPI and MPICH over ud_sr and over rc_sr (one-sided too), and loss
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

# Runs a suite; it prints its own PASS/FAIL lines and "N passed, M failed".
suite() {
    local name=$1
    shift
    section "$name"
    local t0=$(date +%s) rc
    # the suite's own status, not tee's: a crash must count
    "$@" 2>&1 | tee "$log_dir/$name.log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        echo "[$name: ok in $(( $(date +%s) - t0 ))s]"
        suites_passed=$((suites_passed + 1))
    else
        echo "[$name: FAILED in $(( $(date +%s) - t0 ))s]"
        suites_failed=$((suites_failed + 1))
    fi
}

section "set-up"
contrib/setup-debian.sh || { echo "set-up failed"; exit 1; }
section "build"
contrib/build.sh --check || { echo "build failed"; exit 1; }
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
    suite loss test/scripts/test_loss.sh
fi

section "summary"
# Every suite closed on "N passed, M failed": add them up.
total_pass=0
total_fail=0
for f in "$log_dir"/*.log; do
    line=$(grep -E '^(\[  PASSED  \] [0-9]+ tests?|[0-9]+ passed, [0-9]+ failed)' "$f" | tail -n1)
    case "$line" in
        *PASSED*) n=$(echo "$line" | grep -oE '[0-9]+' | head -n1)
                  total_pass=$((total_pass + n)) ;;
        *passed*) n=$(echo "$line" | grep -oE '^[0-9]+')
                  m=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
                  total_pass=$((total_pass + n)); total_fail=$((total_fail + m)) ;;
    esac
    if grep -qE '^\[  FAILED  \] [0-9]+ tests?,' "$f"; then
        m=$(grep -E '^\[  FAILED  \] [0-9]+ tests?,' "$f" | grep -oE '[0-9]+' | head -n1)
        total_fail=$((total_fail + m))
    fi
done
echo "suites: $suites_passed ok, $suites_failed failed; $(( $(date +%s) - start ))s"
# a suite that crashed before its summary counts as one failure
if [ $suites_failed -gt 0 ] && [ $total_fail -eq 0 ]; then
    total_fail=$suites_failed
fi
echo "$total_pass passed, $total_fail failed"
[ $suites_failed -eq 0 ] && [ $total_fail -eq 0 ]
