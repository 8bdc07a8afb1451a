#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus fast-path benchmark (the Veloblock paper's figures, one run):
#
#   latency   UCT am_lat from 8 B to 2 KB (-D bcopy; 8 B also -D short) over
#             rc_fp in its three modes (Veloblock, Original: 32 x 8 KB slots
#             on each side, Original-Reduced: 32 KB in all), rc_sr (no fast
#             path) and UCX's posix; UCX's cma 8-byte get latency (-t get)
#   memory    fast-path bytes of one channel in each mode, receiver and
#             sender (the mirror of the original modes), from the
#             transport's own statistics
#   share     of the messages small enough for the fast path, the share
#             that took it, on a mixed-size data-verifying MPI exchange
#             (fp_mix.c, Open MPI over UCX_TLS=rc_fp,self), 4 to 16 ranks
#   channels  8-byte latency against the fast-path channels the receiver
#             polls, 1 to 64 (fp_channels.c), Veloblock and Original
#
# Every point is the best (lowest latency) of BENCH_REPS runs, the
# transports interleaved. Prints tables, writes results.csv and, with
# python3-matplotlib, fp_latency.png, fp_share.png and fp_channels.png.
#
#   contrib/bench/fp_bench.sh [OUTDIR]      (default build/bench-fp)
#   APTUS_LIB    libuct_aptus.so (default build/.libs/libuct_aptus.so)
#   BENCH_REPS   runs per point (default 3)
#   BENCH_NPS    MPI job sizes of the share section (default "4 8 16")
#   BENCH_CHANS  channel counts (default "1 2 4 8 16 32 64")
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build/bench-fp}
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
reps=${BENCH_REPS:-3}
nps=${BENCH_NPS:-4 8 16}
chans=${BENCH_CHANS:-1 2 4 8 16 32 64}
sizes="8 64 256 1024 2048"
modes="veloblock original original_reduced"
py=/usr/bin/python3
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -f "$lib" ]; then
    echo "fp_bench: $lib not found (build first, or set APTUS_LIB)" >&2
    exit 2
fi
gcc -O2 -o "$out/fp_channels" "$top/contrib/bench/fp_channels.c" \
    $(pkg-config --cflags --libs ucx) || exit 1
mpicc.openmpi -O2 -o "$out/fp_mix" "$top/contrib/bench/fp_mix.c" || exit 1
csv=$out/results.csv
echo "section,config,x,value" >"$csv"
failed=0
port=$((30000 + RANDOM % 5000))

# perftest LOG ENV... -- ARGS...: one ucx_perftest pair; prints the median
# latency (us) of the client's Final line, or nothing
perftest() {
    local log=$1 env=()
    shift
    while [ "$1" != "--" ]; do
        env+=("$1")
        shift
    done
    shift
    port=$((port + 1))
    env "${env[@]}" timeout 60 ucx_perftest -p $port "$@" >"$log.srv" 2>&1 &
    local srv=$! i
    for i in $(seq 1 50); do
        sleep 0.1
        if env "${env[@]}" timeout 60 ucx_perftest 127.0.0.1 -p $port "$@" \
            >"$log" 2>&1; then
            break
        fi
        grep -qi "refused\|failed to connect" "$log" || break
    done
    wait $srv
    awk '/^Final:/ { print $3 }' "$log"
}

# stat_sum DIR KEY: KEY summed over the rc_fp lines of the stats in DIR
stat_sum() {
    cat "$1"/s.* 2>/dev/null | awk -v key="$2" '
        $1 == "aptus-stats" && index($2, "rc_fp/") == 1 {
            for (i = 3; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == key) sum += kv[2]
            }
        }
        END { print sum + 0 }'
}

# stat_max DIR KEY: the largest KEY over the rc_fp lines
stat_max() {
    cat "$1"/s.* 2>/dev/null | awk -v key="$2" '
        $1 == "aptus-stats" && index($2, "rc_fp/") == 1 {
            for (i = 3; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == key && kv[2] > m) m = kv[2]
            }
        }
        END { print m + 0 }'
}

min() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || (b != "" && b < a)) print b; else print a }'; }

# ---- latency ----------------------------------------------------------
lat_configs="veloblock original original_reduced rc_sr posix"
declare -A lat
for ((rep = 0; rep < reps; rep++)); do
    for size in short8 $sizes; do
        for cfg in $lat_configs; do
            env=(LD_PRELOAD="$lib" UCX_NET_DEVICES=lo)
            case $cfg in
            rc_sr) args=(-x rc_sr -d lo) ;;
            posix) args=(-x posix -d memory) ;;
            *) args=(-x rc_fp -d lo); env+=(UCX_RC_FP_MODE=$cfg) ;;
            esac
            if [ $size = short8 ]; then
                args+=(-D short -s 8)
            else
                args+=(-D bcopy -s $size)
            fi
            v=$(perftest "$out/lat-$cfg-$size.log" "${env[@]}" -- \
                -t am_lat "${args[@]}" -n 20000 -w 2000)
            [ -n "$v" ] || { echo "fp_bench: no result, see $out/lat-$cfg-$size.log" >&2; failed=1; }
            lat[$cfg,$size]=$(min "${lat[$cfg,$size]:-}" "$v")
        done
    done
    v=$(perftest "$out/lat-cma-get8.log" LD_PRELOAD="$lib" -- \
        -t get -x cma -d memory -D zcopy -s 8 -n 20000 -w 2000)
    lat[cma_get,8]=$(min "${lat[cma_get,8]:-}" "$v")
done

echo
echo "Latency (UCT am_lat, us, half round trip; best of $reps)"
printf "%-10s" size
for cfg in $lat_configs; do printf " %16s" "$cfg"; done
echo
for size in short8 $sizes; do
    label=$size
    [ $size = short8 ] && label="8 short"
    printf "%-10s" "$label"
    for cfg in $lat_configs; do
        printf " %16s" "${lat[$cfg,$size]:-NA}"
        echo "latency,$cfg,$size,${lat[$cfg,$size]:-}" >>"$csv"
    done
    echo
done
echo "cma 8-byte get latency (UCT get -D zcopy, a full round trip): ${lat[cma_get,8]:-NA} us"
echo "latency,cma_get,8,${lat[cma_get,8]:-}" >>"$csv"
vb=${lat[veloblock,short8]:-}
if [ -n "$vb" ] && [ -n "${lat[rc_sr,short8]:-}" ]; then
    awk -v v="$vb" -v r="${lat[rc_sr,short8]}" -v c="${lat[cma_get,8]:-0}" 'BEGIN {
        printf "rc_fp (veloblock) 8 B: %.2fx rc_sr (target <= 0.4x); %s cma get (%.3f vs %.3f us)\n",
               v / r, (c > 0 && v <= c) ? "at most" : "above", v, c }'
fi

# ---- channels (also gives the memory of one channel per mode) -----------
declare -A chl mem_rx mem_tx
for ((rep = 0; rep < reps; rep++)); do
    for n in $chans; do
        for mode in veloblock original; do
            st=$out/stats-ch
            rm -rf "$st"
            mkdir -p "$st"
            line=$(UCX_RC_FP_MODE=$mode UCX_RC_FP_MAX_CHANNELS=$((n + 1)) \
                UCX_APTUS_STATS="$st/s.%p" LD_PRELOAD="$lib" \
                timeout 120 "$out/fp_channels" -n $n -i 20000 2>"$out/ch-$mode-$n.err")
            v=$(echo "$line" | sed -n 's/.*lat_us=\([0-9.]*\).*/\1/p')
            peak=$(stat_max "$st" fp_rx_peak)
            [ -n "$v" ] || { echo "fp_bench: fp_channels -n $n ($mode) failed, see $out/ch-$mode-$n.err" >&2; failed=1; }
            if [ -n "$v" ] && [ "$peak" -lt "$n" ]; then
                echo "fp_bench: $mode -n $n: the server polled only $peak channels" >&2
            fi
            chl[$mode,$n]=$(min "${chl[$mode,$n]:-}" "$v")
            mem_rx[$mode]=$(stat_max "$st" fp_recv_bytes_per_channel)
            mem_tx[$mode]=$(stat_max "$st" fp_send_bytes_per_channel)
        done
    done
done
st=$out/stats-ch
rm -rf "$st"
mkdir -p "$st"
UCX_RC_FP_MODE=original_reduced UCX_APTUS_STATS="$st/s.%p" LD_PRELOAD="$lib" \
    timeout 60 "$out/fp_channels" -n 1 -i 100 >/dev/null 2>&1
mem_rx[original_reduced]=$(stat_max "$st" fp_recv_bytes_per_channel)
mem_tx[original_reduced]=$(stat_max "$st" fp_send_bytes_per_channel)

echo
echo "Fast-path memory of one channel (bytes, from the transport's statistics)"
printf "%-18s %12s %12s %12s %14s\n" mode receiver sender total "vs Original"
orig=$(( ${mem_rx[original]:-0} + ${mem_tx[original]:-0} ))
for mode in $modes; do
    t=$(( ${mem_rx[$mode]:-0} + ${mem_tx[$mode]:-0} ))
    ratio=$(awk -v o=$orig -v t=$t 'BEGIN { if (t > 0) printf "1/%.0f", o / t; else print "NA" }')
    printf "%-18s %12s %12s %12s %14s\n" $mode "${mem_rx[$mode]:-NA}" "${mem_tx[$mode]:-NA}" $t "$ratio"
    echo "memory,$mode,receiver,${mem_rx[$mode]:-}" >>"$csv"
    echo "memory,$mode,sender,${mem_tx[$mode]:-}" >>"$csv"
done

echo
echo "8-byte latency (us, median of 20,000) against the channels the receiver polls"
printf "%-10s %12s %12s\n" channels veloblock original
for n in $chans; do
    printf "%-10s %12s %12s\n" $n "${chl[veloblock,$n]:-NA}" "${chl[original,$n]:-NA}"
    echo "channels,veloblock,$n,${chl[veloblock,$n]:-}" >>"$csv"
    echo "channels,original,$n,${chl[original,$n]:-}" >>"$csv"
done

# ---- share -------------------------------------------------------------
declare -A share
for np in $nps; do
    for mode in $modes; do
        st=$out/stats-share-$mode-$np
        rm -rf "$st"
        mkdir -p "$st"
        iters=$((np >= 16 ? 100 : 300))
        timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe \
            --bind-to none --mca pml ucx --mca pml_ucx_tls any \
            --mca pml_ucx_devices any --mca osc ^ucx \
            -x LD_PRELOAD="$lib" -x UCX_TLS=rc_fp,self -x UCX_NET_DEVICES=lo \
            -x UCX_WARN_UNUSED_ENV_VARS=n -x UCX_RC_FP_MODE=$mode \
            -x UCX_APTUS_STATS="$st/s.%p" -np $np \
            "$out/fp_mix" -i $iters >"$out/share-$mode-$np.log" 2>&1
        if ! grep -q " OK$" "$out/share-$mode-$np.log"; then
            echo "fp_bench: fp_mix np=$np $mode failed, see $out/share-$mode-$np.log" >&2
            failed=1
            continue
        fi
        tx=$(stat_sum "$st" fp_tx_msgs)
        el=$(stat_sum "$st" fp_eligible)
        share[$mode,$np]=$(awk -v t=$tx -v e=$el 'BEGIN { if (e > 0) printf "%.1f", 100 * t / e }')
        echo "share,$mode,$np,${share[$mode,$np]}" >>"$csv"
    done
done
echo
echo "Share of eligible messages (<= 8 KB) on the fast path, fp_mix (%)"
printf "%-6s" ranks
for mode in $modes; do printf " %18s" $mode; done
echo
for np in $nps; do
    printf "%-6s" $np
    for mode in $modes; do printf " %18s" "${share[$mode,$np]:-NA}"; done
    echo
done

if $py -c "import matplotlib" 2>/dev/null; then
    $py "$top/contrib/bench/fp_plot.py" "$csv" "$out" && echo && echo "plots: $out/fp_*.png"
else
    echo "(python3-matplotlib not installed: no plots)"
fi
echo "results: $csv"
exit $failed
