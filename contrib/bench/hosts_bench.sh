#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: the transports between hosts, against UCX's tcp in
# the same repetition, on a cluster in a box (contrib/cluster.sh: network
# namespaces with their own PID namespaces on a bridge).
#
#   ucx_perftest from h2 (client) to h1 (server), UCP level, for every
#   transport and MTU (both hosts' eth0 at that MTU):
#     tag_lat 8 B and 4 KB, tag_bw 64 KB and 1 MB, get 1 MB, 8 B message
#     rate; the median of the repetitions and its ratio to tcp's median
#     (latency: tcp / ours, so that above 1 is better everywhere);
#   the multicast MPI_Bcast (libaptus_bcast) against the MPI's own over
#     ud_sr, one rank per host on 4 hosts, 8 B to 8 KB (bcast_bench -m
#     lat), the ratio ours / own (below 1 is better);
#   the MPI all-to-all (test/mpi/alltoall.c -m 1m -i 2) on 2 hosts x 2
#     ranks with 1% of TCP segments lost, over tcp, rc_sr and aptus.
# Writes DIR/perftest.csv, DIR/bcast.csv, DIR/alltoall.csv and DIR/table.txt
# (what it prints); with python3-matplotlib, DIR/hosts_ratio.png.
#
#   contrib/bench/hosts_bench.sh [--reps N] [--mtus "1500 9000"]
#       [--tls "ud_sr rc_sr rc_fp aptus"] [--no-mpi] [--out DIR]
# Needs root, iproute2, nftables, util-linux. Takes the library from the
# build (APTUS_LIB to change it). Noisy on a busy machine: figures are
# reported, never asserted.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
reps=3
mtus="1500 9000"
tls="ud_sr rc_sr rc_fp aptus"
mpi=1
out=
while [ $# -gt 0 ]; do
    case "$1" in
    --reps) reps=$2; shift ;;
    --mtus) mtus=$2; shift ;;
    --tls) tls=$2; shift ;;
    --no-mpi) mpi=0 ;;
    --out) out=$2; shift ;;
    *) echo "hosts_bench: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
out=${out:-$top/contrib/bench/results/hosts-$(date +%Y-%m-%d)}
mkdir -p "$out"
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
[ -f "$lib" ] || { echo "hosts_bench: build first (no $lib)" >&2; exit 2; }
name=hb$$
cl() { contrib/cluster.sh --name "$name" "$@"; }
trap 'cl down >/dev/null 2>&1' EXIT
py=/usr/bin/python3
[ -x "$py" ] || py=python3

# The tests: KEY TEST SIZE ITERATIONS FIELD (of ucx_perftest's Final line:
# 3 latency, 6 bandwidth, 8 message rate)
tests=("lat8 tag_lat 8 5000 3" "lat4k tag_lat 4096 3000 3"
       "bw64k tag_bw 65536 1000 6" "bw1m tag_bw 1048576 100 6"
       "get1m ucp_get 1048576 100 6" "rate8 tag_bw 8 50000 8")

port=$((24000 + RANDOM % 4000))
. "$top/contrib/bench/hosts_perf.sh"

# cluster_job, cluster_multicast, bench_median
. "$top/contrib/bench/cluster_job.sh"
median() { bench_median; }

echo "mtu,test,tl,rep,value" >"$out/perftest.csv"
for mtu in $mtus; do
    cl down >/dev/null 2>&1
    cl up 2 --mtu "$mtu" >/dev/null 2>&1 || { echo "hosts_bench: no cluster (root, iproute2, nftables?)" >&2; exit 2; }
    for rep in $(seq 1 "$reps"); do
        for t in "${tests[@]}"; do
            read -r key test size iters field <<<"$t"
            for tl in tcp $tls; do
                echo "$mtu,$key,$tl,$rep,$(hosts_perf "$tl" "$lib" "$test" "$size" "$iters" "$field")" \
                    >>"$out/perftest.csv"
            done
        done
    done
done

{
echo "# ucx_perftest between two hosts (UCP): median of $reps, ratio to tcp"
echo "# (latency: tcp/ours; bandwidth, rate: ours/tcp; above 1 is better)"
for mtu in $mtus; do
    printf '%-22s %12s' "MTU $mtu" "tcp"
    for tl in $tls; do printf ' %18s' "$tl"; done
    printf '\n'
    for t in "${tests[@]}"; do
        read -r key test size _ field <<<"$t"
        base=$(awk -F, -v m="$mtu" -v k="$key" '$1 == m && $2 == k && $3 == "tcp" && $5 != "" { print $5 }' "$out/perftest.csv" | median)
        unit="us"; [ "$field" = 6 ] && unit="MB/s"; [ "$field" = 8 ] && unit="msg/s"
        printf '%-22s %12s' "$test $size ($unit)" "${base:--}"
        for tl in $tls; do
            v=$(awk -F, -v m="$mtu" -v k="$key" -v t="$tl" '$1 == m && $2 == k && $3 == t && $5 != "" { print $5 }' "$out/perftest.csv" | median)
            r=$(awk -v v="$v" -v b="$base" -v lat="$([ "$field" = 3 ] && echo 1)" \
                'BEGIN { if (v == "" || b == "" || v + 0 == 0 || b + 0 == 0) print "-"; else printf "%.2fx", lat ? b / v : v / b }')
            printf ' %10s %7s' "${v:--}" "$r"
        done
        printf '\n'
    done
    printf '\n'
done
} | tee "$out/table.txt"

if [ "$mpi" = 1 ]; then
    work=$(mktemp -d /tmp/aptus-hosts-bench.XXXXXX)
    trap 'cl down >/dev/null 2>&1; rm -rf "$work"' EXIT
    for m in openmpi mpich; do
        "mpicc.$m" -O2 -o "$work/bcast_bench.$m" contrib/bench/bcast_bench.c 2>/dev/null &&
        "mpicc.$m" -O2 -o "$work/alltoall.$m" test/mpi/alltoall.c 2>/dev/null || exit 2
    done
    # job MPI NP TL PRELOAD PROGRAM ARGS...: a rank per slot of the hosts
    job() {
        local m=$1 np=$2 tl=$3 pre=$4 prog=$5
        shift 5
        cluster_job "$name" "$m" "$np" 120 UCX_TLS="$tl,self" UCX_NET_DEVICES=eth0 \
            UCX_WARN_UNUSED_ENV_VARS=n ${pre:+LD_PRELOAD="$pre"} -- "$work/$prog.$m" "$@"
    }
    cl down >/dev/null 2>&1
    cl up 4 --slots 1 --mtu 1500 >/dev/null 2>&1 || exit 2
    cluster_multicast "$name" >/dev/null 2>&1
    echo "mpi,impl,rep,size,usec" >"$out/bcast.csv"
    for rep in $(seq 1 "$reps"); do
        for m in openmpi mpich; do
            blib=$(dirname "$lib")/libaptus_bcast.so
            [ "$m" = mpich ] && blib=$(dirname "$lib")/libaptus_bcast_mpich.so
            for impl in own aptus; do
                pre=$lib
                [ "$impl" = aptus ] && pre="$blib $lib"
                job "$m" 4 ud_sr "$pre" bcast_bench -m lat -s 8,1024,8192 -i 500 -w 50 |
                    sed -n "s/^bcast_bench mode=lat np=4 size=\([0-9]*\) usec=\([0-9.]*\).*/$m,$impl,$rep,\1,\2/p" \
                    >>"$out/bcast.csv"
            done
        done
    done
    cl down >/dev/null 2>&1
    cl up 2 --slots 2 --mtu 1500 --tcp-loss 1 >/dev/null 2>&1 || exit 2
    echo "tl,rep,seconds,ok" >"$out/alltoall.csv"
    for rep in $(seq 1 "$reps"); do
        for tl in tcp rc_sr aptus; do
            t0=$(date +%s.%N)
            job openmpi 4 "$tl" "$lib" alltoall -m 1m -i 2 >"$work/a2a.log"
            n=$(grep -c ": OK" "$work/a2a.log")
            echo "$tl,$rep,$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'),$n" \
                >>"$out/alltoall.csv"
            # a failed job's log stays with the figures
            [ "$n" -eq 4 ] || cp "$work/a2a.log" "$out/alltoall-$tl-$rep.log"
        done
    done
    {
    echo "# MPI_Bcast, one rank per host on 4 hosts, MTU 1500, over ud_sr: median of $reps (us)"
    printf '%-10s %8s %12s %12s %8s\n' mpi size own multicast ratio
    for m in openmpi mpich; do
        for size in 8 1024 8192; do
            own=$(awk -F, -v m="$m" -v s="$size" '$1 == m && $2 == "own" && $4 == s { print $5 }' "$out/bcast.csv" | median)
            mc=$(awk -F, -v m="$m" -v s="$size" '$1 == m && $2 == "aptus" && $4 == s { print $5 }' "$out/bcast.csv" | median)
            printf '%-10s %8s %12s %12s %8s\n' "$m" "$size" "${own:--}" "${mc:--}" \
                "$(awk -v a="$mc" -v b="$own" 'BEGIN { if (a == "" || b + 0 == 0) print "-"; else printf "%.2fx", a / b }')"
        done
    done
    echo
    echo "# Open MPI all-to-all 1 MB, 2 hosts x 2 ranks, 1% of TCP segments lost: median of $reps (s)"
    for tl in tcp rc_sr aptus; do
        printf '%-8s %8s s   ranks verified in every run: %s\n' "$tl" \
            "$(awk -F, -v t="$tl" '$1 == t { print $3 }' "$out/alltoall.csv" | median)" \
            "$(awk -F, -v t="$tl" '$1 == t && $4 < 4 { bad = 1 } END { print bad ? "NO" : "yes" }' "$out/alltoall.csv")"
    done
    } | tee -a "$out/table.txt"
fi

"$py" - "$out" "$tls" <<'EOF' 2>/dev/null && echo "plot: $out/hosts_ratio.png"
import csv, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, tls = sys.argv[1], sys.argv[2].split()
rows = list(csv.DictReader(open(out + "/perftest.csv")))
vals = {}
for r in rows:
    if r["value"]:
        vals.setdefault((r["mtu"], r["test"], r["tl"]), []).append(float(r["value"]))
mtus = sorted({r["mtu"] for r in rows}, key=int)
tests = [t for t in ["lat8", "lat4k", "bw64k", "bw1m", "get1m", "rate8"]
         if any(k[1] == t for k in vals)]
fig, axes = plt.subplots(1, len(mtus), figsize=(6 * len(mtus), 4), squeeze=False)
for ax, mtu in zip(axes[0], mtus):
    w = 0.8 / len(tls)
    for i, tl in enumerate(tls):
        ratios = []
        for t in tests:
            b = vals.get((mtu, t, "tcp"))
            v = vals.get((mtu, t, tl))
            if not b or not v:
                ratios.append(0)
                continue
            b, v = statistics.median(b), statistics.median(v)
            ratios.append(b / v if t.startswith("lat") else v / b)
        ax.bar([x + i * w for x in range(len(tests))], ratios, w, label=tl)
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks([x + 0.4 - w / 2 for x in range(len(tests))])
    ax.set_xticklabels(tests)
    ax.set_ylabel("against tcp (above 1: better)")
    ax.set_title("between two hosts, MTU %s" % mtu)
    ax.legend()
fig.tight_layout()
fig.savefig(out + "/hosts_ratio.png")
EOF
rm -f "$out/server.log" "$out/client.log"
echo "results: $out"
