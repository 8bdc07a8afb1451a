#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two builds of the module (before and after a change) between two hosts,
# interleaved: in every repetition each test runs over tcp, then over each
# transport with each library in turn (the order of the libraries
# alternates), on one cluster in a box per MTU (contrib/cluster.sh), so
# that the load of a shared machine falls on both alike. Same perftest
# calls as contrib/bench/hosts_bench.sh; ab_hosts_summary.py makes the
# tables (medians and paired after/before ratios).
#   contrib/bench/ab_hosts.sh BEFORE.so AFTER.so OUTDIR [REPS]
#   AB_TLS (default "ud_sr aptus"), AB_MTUS (default "1500 9000")
# Writes OUTDIR/ab.csv and, per MTU and library, the statistics lines of
# both ends of one 64 KB run over the first transport (OUTDIR/stats.txt).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
before=$1 after=$2 out=$3 reps=${4:-5}
tls=${AB_TLS:-ud_sr aptus}
mtus=${AB_MTUS:-1500 9000}
mkdir -p "$out"
name=ab$$
cl() { contrib/cluster.sh --name "$name" "$@"; }
trap 'cl down >/dev/null 2>&1' EXIT
tests=("lat4k tag_lat 4096 3000 3" "bw64k tag_bw 65536 1000 6"
       "bw1m tag_bw 1048576 100 6")
port=$((28000 + RANDOM % 4000))
. "$top/contrib/bench/hosts_perf.sh"
echo "mtu,test,tl,lib,rep,value" >"$out/ab.csv"
for mtu in $mtus; do
    cl down >/dev/null 2>&1
    cl up 2 --mtu "$mtu" >/dev/null 2>&1 || exit 2
    for rep in $(seq 1 "$reps"); do
        libs="before after"
        [ $((rep % 2)) = 0 ] && libs="after before"
        for t in "${tests[@]}"; do
            read -r key test size iters field <<<"$t"
            echo "$mtu,$key,tcp,-,$rep,$(hosts_perf tcp - "$test" "$size" "$iters" "$field")" >>"$out/ab.csv"
            for tl in $tls; do
                for l in $libs; do
                    lib=$before; [ "$l" = after ] && lib=$after
                    echo "$mtu,$key,$tl,$l,$rep,$(hosts_perf "$tl" "$lib" "$test" "$size" "$iters" "$field")" >>"$out/ab.csv"
                done
            done
        done
    done
    # the statistics of one 64 KB run of each library (client)
    tl=${tls%% *}
    for l in before after; do
        lib=$before; [ "$l" = after ] && lib=$after
        port=$((port + 1))
        cl exec h1 env UCX_TLS="$tl,self" UCX_NET_DEVICES=eth0 LD_PRELOAD="$lib" \
            UCX_APTUS_STATS=stdout timeout 60 ucx_perftest -p "$port" \
            -t tag_bw -s 65536 -n 1000 2>&1 | grep "aptus-stats $tl/eth0" |
            sed "s/^/mtu $mtu $l server: /" >"$out/stats-server.tmp" &
        sleep 0.5
        cl exec h2 env UCX_TLS="$tl,self" UCX_NET_DEVICES=eth0 LD_PRELOAD="$lib" \
            UCX_APTUS_STATS=stdout timeout 60 ucx_perftest h1 -p "$port" \
            -t tag_bw -s 65536 -n 1000 2>&1 | grep "aptus-stats $tl/eth0" |
            sed "s/^/mtu $mtu $l client: /" >>"$out/stats.txt"
        wait
        cat "$out/stats-server.tmp" >>"$out/stats.txt"
        rm -f "$out/stats-server.tmp"
    done
done
