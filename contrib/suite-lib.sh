# SPDX-License-Identifier: BSD-3-Clause
# The test runner's bookkeeping, sourced by contrib/run-tests.sh (and by
# test/scripts/test_runner.sh, which checks it). Needs log_dir set.

# Only this run's logs count: a log left by an earlier run is removed.
suites_begin() {
    rm -rf "$log_dir"
    mkdir -p "$log_dir"
}

suites_passed=0
suites_failed=0

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

section() { printf '\n===== %s =====\n' "$*"; }

# The closing lines; returns non-zero when anything failed.
suites_summary() {
    echo "suites: $suites_passed ok, $suites_failed failed"
    echo "$total_pass passed, $total_fail failed"
    [ $suites_failed -eq 0 ] && [ $total_fail -eq 0 ]
}
