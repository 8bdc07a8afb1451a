#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Before/after of rc_sr's one-sided operations between two hosts,
# interleaved: in every repetition each test runs over tcp, then over
# rc_sr with each library in turn (the order alternating), on one cluster
# in a box at MTU 1500, so that the load of a shared machine falls on both
# alike. UCP tag_bw 1 MB as in contrib/bench/hosts_bench.sh; UCT get and
# put_bw 1 MB of rc_sr (ucx_perftest -t get / -t put_bw -D zcopy, one
# operation outstanding); tcp runs only tag_bw 1 MB, the targets'
# reference.
#   ab.sh BEFORE.so AFTER.so OUTDIR [REPS]
set -u
top=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$top" || exit 2
before=$1 after=$2 out=$3 reps=${4:-5}
mkdir -p "$out"
name=rr$$
cl() { contrib/cluster.sh --name "$name" "$@"; }
trap 'cl down >/dev/null 2>&1' EXIT
# KEY TEST SIZE ITERATIONS FIELD (of the Final line: 6 bandwidth)
tests=("bw1m tag_bw 1048576 100 6" "get1m get 1048576 100 6"
       "put1m put_bw 1048576 100 6")
port=$((28000 + RANDOM % 4000))
perf() {
    local tl=$1 lib=$2 test=$3 size=$4 iters=$5 field=$6 srv i
    local -a env=(UCX_NET_DEVICES=eth0 UCX_WARN_UNUSED_ENV_VARS=n)
    local -a args=(-t "$test" -s "$size" -n "$iters")
    case "$test" in
    get | put_bw) args+=(-x "$tl" -d eth0 -D zcopy) ;;
    *) env+=(UCX_TLS="$tl,self") ;;
    esac
    [ "$tl" = tcp ] || env+=(LD_PRELOAD="$lib")
    port=$((port + 1))
    cl exec h1 env "${env[@]}" timeout 60 nice ucx_perftest -p "$port" \
        "${args[@]}" >"$out/server.log" 2>&1 &
    srv=$!
    for i in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        if cl exec h2 env "${env[@]}" timeout 60 nice ucx_perftest h1 -p "$port" \
               "${args[@]}" >"$out/client.log" 2>&1; then
            break
        fi
        grep -qi "refused\|failed to connect" "$out/client.log" || break
    done
    wait "$srv" 2>/dev/null
    awk -v f="$field" '/^Final:/ { print $f }' "$out/client.log"
}
echo "mtu,test,tl,lib,rep,value" >"$out/ab.csv"
mtu=1500
cl down >/dev/null 2>&1
cl up 2 --mtu "$mtu" >/dev/null 2>&1 || exit 2
for rep in $(seq 1 "$reps"); do
    libs="before after"
    [ $((rep % 2)) = 0 ] && libs="after before"
    for t in "${tests[@]}"; do
        read -r key test size iters field <<<"$t"
        [ "$test" = tag_bw ] &&
            echo "$mtu,$key,tcp,-,$rep,$(perf tcp - "$test" "$size" "$iters" "$field")" >>"$out/ab.csv"
        for l in $libs; do
            lib=$before; [ "$l" = after ] && lib=$after
            echo "$mtu,$key,rc_sr,$l,$rep,$(perf rc_sr "$lib" "$test" "$size" "$iters" "$field")" >>"$out/ab.csv"
        done
    done
done
