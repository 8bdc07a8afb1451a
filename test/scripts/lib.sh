# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers of the test scripts: PASS/FAIL/SKIP lines and the closing
# "N passed, M failed, K skipped" line. Source it, call t_pass/t_fail/t_skip,
# end with t_summary (its exit status is non-zero if anything failed).
t_passed=0
t_failed=0
t_skipped=0

t_pass() { echo "PASS: $*"; t_passed=$((t_passed + 1)); }
t_fail() { echo "FAIL: $*"; t_failed=$((t_failed + 1)); }
t_skip() { echo "SKIP: $*"; t_skipped=$((t_skipped + 1)); }

# t_check WHAT FOUND: passes WHAT when FOUND is empty, else fails it and
# lists FOUND beneath, indented (a check that collects offenders).
t_check() {
    local what=$1 found=$2
    if [ -z "$found" ]; then
        t_pass "$what"
    else
        t_fail "$what:"
        echo "$found" | sed 's/^/    /'
    fi
}

t_summary() {
    echo "$t_passed passed, $t_failed failed, $t_skipped skipped"
    [ "$t_failed" -eq 0 ]
}

# t_stacks PID: the stacks of every thread of PID's children (PID is a
# timeout wrapper), else of PID itself, for the report of a hang.
t_stacks() {
    local p pids
    pids=$(pgrep -P "$1")
    for p in ${pids:-$1}; do
        echo "== pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"
        command -v gdb >/dev/null || continue
        timeout 30 gdb -p "$p" -batch -ex "thread apply all bt" 2>&1 |
            grep -v '^\[New \|^Using \|^warning' | head -n 120
    done
}

# The library under test: APTUS_LIB, else the newest build.
t_find_lib() {
    local top=$1
    if [ -n "${APTUS_LIB:-}" ]; then
        echo "$APTUS_LIB"
        return
    fi
    ls -t "$top"/build*/.libs/libuct_aptus.so 2>/dev/null | head -n1
}

# perftest_pair OUTDIR PORT -- ENV... -- ARGS...
# Runs a ucx_perftest server and client on 127.0.0.1 with the environment
# assignments ENV (e.g. LD_PRELOAD=... UCX_TLS=...) and perftest ARGS.
# Leaves OUTDIR/server.log and OUTDIR/client.log; returns 0 when both sides
# finished and the client printed its "Final:" line.
perftest_pair() {
    local out=$1 port=$2
    shift 2
    [ "$1" = "--" ] && shift
    local env=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        env+=("$1")
        shift
    done
    shift
    env "${env[@]}" timeout 120 ucx_perftest -p "$port" "$@" \
        >"$out/server.log" 2>&1 &
    local server=$! ok=1 client='' _ ticks
    # an interrupted caller must not leave the processes behind
    trap 'kill $server $client 2>/dev/null' INT TERM
    for _ in $(seq 1 50); do
        sleep 0.1
        env "${env[@]}" timeout 120 ucx_perftest 127.0.0.1 -p "$port" "$@" \
            >"$out/client.log" 2>&1 &
        client=$!
        # both sides end within seconds of the client's last line; two
        # still running 30 s after it wait for each other for ever: keep
        # their stacks for the report, then end them
        ticks=0
        while kill -0 "$client" 2>/dev/null; do
            sleep 0.1
            grep -q "^Final:" "$out/client.log" && ticks=$((ticks + 1))
            if [ $ticks -ge 300 ]; then
                { echo "client:"; t_stacks "$client"
                  echo "server:"; t_stacks "$server"; } >"$out/server.stacks" 2>&1
                kill "$client" "$server" 2>/dev/null
                break
            fi
        done
        if wait "$client"; then
            ok=0
            break
        fi
        # retry only while the server is not listening yet
        grep -qi "refused\|failed to connect" "$out/client.log" || break
    done
    # a server still running well after its client finished is hung
    ticks=0
    while kill -0 "$server" 2>/dev/null && [ $ticks -lt 300 ]; do
        sleep 0.1
        ticks=$((ticks + 1))
    done
    if kill -0 "$server" 2>/dev/null; then
        t_stacks "$server" >>"$out/server.stacks" 2>&1
        kill "$server" 2>/dev/null
    fi
    wait "$server" || ok=1
    trap - INT TERM
    grep -q "^Final:" "$out/client.log" || ok=1
    return $ok
}

# perftest_final FILE FIELD: a field of the client's "Final:" line:
# 2 iterations, 3 median latency (us), 4 average latency (us),
# 6 bandwidth (MB/s), 8 message rate (msg/s).
perftest_final() {
    awk -v f="$2" '/^Final:/ { print $f }' "$1"
}
