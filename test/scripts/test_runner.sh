#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: checks the test runner's own bookkeeping (contrib/suite-lib.sh)
# on made-up suites: totals from "N passed, M failed" and GoogleTest
# summaries, a crashed suite counted as a failure even when another suite
# failed too, and logs of an earlier run ignored.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/scripts/lib.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs the made-up suites through the library in a subshell and prints
# "PASS FAIL SUITES_OK SUITES_FAILED".
run_suites() (
    log_dir=$work/logs
    . "$top/contrib/suite-lib.sh"
    mkdir -p "$log_dir"
    echo "100 passed, 7 failed" >"$log_dir/stale.log"
    suites_begin
    ok()      { echo "3 passed, 0 failed"; }
    one_bad() { echo "2 passed, 1 failed"; return 1; }
    crashed() { echo "[ RUN      ] t.x"; return 134; }
    gtest()   { printf '[  PASSED  ] 5 tests.\n[  FAILED  ] 2 tests, listed below:\n'; return 1; }
    quiet_ok() { echo "nothing to count"; }
    {
        suite ok ok
        suite one_bad one_bad
        suite crashed crashed
        suite gtest gtest
        suite quiet_ok quiet_ok
        suites_summary
    } >"$work/out" 2>&1
    echo "$total_pass $total_fail $suites_passed $suites_failed $?"
)

read -r pass fail sok sfail rc < <(run_suites)
want="10 4 2 3 1"
got="$pass $fail $sok $sfail $rc"
if [ "$got" = "$want" ]; then
    t_pass "runner totals (passed failed suites-ok suites-failed status): $got"
else
    t_fail "runner totals: got '$got', want '$want'"
    sed 's/^/    | /' "$work/out"
fi
if [ -e "$work/logs/stale.log" ]; then
    t_fail "a log of an earlier run is left to be counted"
else
    t_pass "logs of an earlier run are removed"
fi
if grep -q "^\[crashed: FAILED (exit 134)" "$work/out"; then
    t_pass "a crashed suite is reported with its exit status"
else
    t_fail "a crashed suite is not reported"
fi
t_summary
