# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the benchmarks between two hosts of a cluster in a box
# (hosts_bench.sh, ab_hosts.sh): one ucx_perftest pair.
#
# hosts_perf TL LIB TEST SIZE ITERS FIELD: h1 serves, h2 measures, over TL
# (with the module LIB preloaded, but for UCX's own tcp); prints field
# FIELD of the client's Final: line, or nothing. Needs a function cl (the
# cluster), the variables port (incremented per pair) and out (a folder
# for the logs).
hosts_perf() {
    local tl=$1 lib=$2 test=$3 size=$4 iters=$5 field=$6 srv i
    local -a env=(UCX_TLS="$tl,self" UCX_NET_DEVICES=eth0 UCX_WARN_UNUSED_ENV_VARS=n)
    [ "$tl" = tcp ] || env+=(LD_PRELOAD="$lib")
    port=$((port + 1))
    cl exec h1 env "${env[@]}" timeout 60 ucx_perftest -p "$port" \
        -t "$test" -s "$size" -n "$iters" >"$out/server.log" 2>&1 &
    srv=$!
    for i in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        if cl exec h2 env "${env[@]}" timeout 60 ucx_perftest h1 -p "$port" \
               -t "$test" -s "$size" -n "$iters" >"$out/client.log" 2>&1; then
            break
        fi
        # again only while the server is not listening yet
        grep -qi "refused\|failed to connect" "$out/client.log" || break
    done
    wait "$srv" 2>/dev/null
    awk -v f="$field" '/^Final:/ { print $f }' "$out/client.log"
}
