#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: sender throughput while the receiver computes.
#
# contrib/bench/compute_rx.c under Open MPI (pml/ucx, 2 ranks): rank 0
# streams eager messages for a few seconds while rank 1 computes for
# COMPUTE_MS between progress passes. ud_sr acknowledges from the async
# thread, woken by the socket while the user is away; tcp buffers in the
# kernel. The transports alternate within each repetition (same run);
# medians are printed, rows go to DIR/compute-rx.csv.
#
#   contrib/bench/compute_rx.sh [--sizes "4096 16384"] [--compute-ms 100]
#                               [--seconds 2] [--reps 3] [--tls "ud_sr tcp"]
#                               [--out DIR]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
sizes="4096 16384"
compute_ms=100
seconds=2
reps=3
tls="ud_sr tcp"
out=
while [ $# -gt 0 ]; do
    case "$1" in
    --sizes) sizes=$2; shift ;;
    --compute-ms) compute_ms=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --reps) reps=$2; shift ;;
    --tls) tls=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "compute_rx: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
out=${out:-$top/contrib/bench/results/bench-$(date +%Y-%m-%d)}
mkdir -p "$out"
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
[ -f "$lib" ] || { echo "compute_rx: build first (no $lib)" >&2; exit 2; }
mpicc.openmpi -O2 -o "$out/compute_rx" "$top/contrib/bench/compute_rx.c" || exit 1

csv=$out/compute-rx.csv
echo "size,transport,rep,compute_ms,sender_MBps,messages" >"$csv"
for size in $sizes; do
    for rep in $(seq 1 "$reps"); do
        order=$tls
        [ $((rep % 2)) -eq 0 ] && order=$(echo "$tls" | tr ' ' '\n' | tac | tr '\n' ' ')
        for tl in $order; do
            line=$(timeout -k 5 $((seconds * 30 + 60)) \
                env LD_PRELOAD="$lib" UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n \
                mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none \
                --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
                -x LD_PRELOAD -x UCX_NET_DEVICES -x UCX_WARN_UNUSED_ENV_VARS \
                -x UCX_TLS="$tl,self" -np 2 "$out/compute_rx" -s "$size" \
                -t "$seconds" -c "$compute_ms" 2>&1 | grep '^compute_rx size=')
            if [ -z "$line" ]; then
                echo "compute_rx: $tl at $size B produced no result" >&2
                continue
            fi
            bw=$(echo "$line" | sed -E 's/.*sender_MBps=([0-9.]+).*/\1/')
            n=$(echo "$line" | sed -E 's/.*messages=([0-9]+).*/\1/')
            echo "$size,$tl,$rep,$compute_ms,$bw,$n" >>"$csv"
        done
    done
done

echo
echo "Sender throughput (MB/s, median of $reps) while the receiver computes ${compute_ms} ms between progress passes"
printf '%-8s' size
for tl in $tls; do printf ' %10s' "$tl"; done
printf '   %s\n' "first/second"
for size in $sizes; do
    printf '%-8s' "$size"
    first=
    for tl in $tls; do
        med=$(awk -F, -v s="$size" -v t="$tl" '$1 == s && $2 == t { print $5 }' "$csv" |
            sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
        printf ' %10s' "$med"
        if [ -z "$first" ]; then first=$med; else second=$med; fi
    done
    awk -v a="$first" -v b="${second:-nan}" 'BEGIN { if (b + 0 > 0) printf "   %.2fx\n", a / b; else print "   -" }'
done
echo "csv: $csv"
