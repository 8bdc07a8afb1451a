#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: the multicast MPI_Bcast (libaptus_bcast) between
# hosts, one rank per host, against each MPI's own MPI_Bcast over UCX's
# tcp and over ud_sr, on a cluster in a box (contrib/cluster.sh: network
# namespaces with PID namespaces of their own on a bridge).
#
# For every job size (--hosts, default 4 and 8 hosts, MTU 1500, the
# multicast group routed out of eth0) and every repetition, at every loss
# rate (--losses, percent of the UDP datagrams each host drops on input,
# nftables: cluster.sh --loss; TCP segments are not dropped), for every
# MPI the three broadcasts run one after another, their order turning
# from one repetition to the next:
#   tcp     the MPI's own MPI_Bcast, UCX_TLS=tcp,self
#   ud_sr   the MPI's own MPI_Bcast, UCX_TLS=ud_sr,self
#   aptus   libaptus_bcast (multicast), the MPI's other traffic over ud_sr
# Each is one job of contrib/bench/bcast_bench.c -c (every byte of every
# broadcast verified at every rank; a bad byte fails the run):
#   lat     8 B, 64 B, 512 B, 1 KB, 8 KB, a barrier after each broadcast, time inside it
#   tput    back-to-back broadcasts from one root, per second
#   skew    64 B, every rank away a random time in [0, SKEW] before each
#           broadcast, time inside it; SKEW 0, 200 us, 1 ms, 5 ms
# Every aptus job's statistics must show every rank's world communicator
# served by multicast (mode=mcast): the group crossed the bridge.
#
# Writes DIR/bcast_hosts.csv (every figure), DIR/bcast_hosts_stats.csv
# (the multicast jobs' statistics: repairs, NACKs, duplicates), DIR/jobs.csv
# (every job: status, bytes checked, bad bytes), DIR/table.md (medians,
# ratios ours/own, the targets), DIR/meta.txt, and with python3-matplotlib
# DIR/bcast_hosts_latency.png, _tput.png, _skew.png. Logs of failed jobs
# in DIR/logs/.
#
#   contrib/bench/bcast_hosts.sh [--hosts "4 8"] [--mpis "openmpi mpich"]
#       [--losses "0 1"] [--reps 3] [--sizes 8,64,...] [--tput-sizes ...]
#       [--skews "0 200 1000 5000"] [--iters LAT,TPUT,SKEW] [--quick]
#       [--out DIR]
#   --iters: iterations of lat, tput and skew at 4 hosts (scaled by 4/N at
#   N hosts), after 5 of warm-up per point; default 80,400,40 (on a
#   loaded 2-core machine a broadcast between 8 hosts takes milliseconds).
#   --quick: 1 repetition, 4 hosts, 20,100,10.
# Exit status 0 when every job ran and verified every byte, 1 otherwise,
# 2 on bad options or no cluster. Needs root, iproute2, nftables,
# util-linux. Takes the libraries from the build (APTUS_LIB to change).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
hosts_list="4 8"
mpis="openmpi mpich"
losses="0 1"
reps=3
sizes=8,64,512,1024,8192
tsizes=8,1024,8192
skews="0 200 1000 5000"
iters=80,400,40
out=
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) hosts_list=$2; shift ;;
    --mpis) mpis=$2; shift ;;
    --losses) losses=$2; shift ;;
    --reps) reps=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --tput-sizes) tsizes=$2; shift ;;
    --skews) skews=$2; shift ;;
    --iters) iters=$2; shift ;;
    --quick) reps=1; hosts_list=4; iters=20,100,10 ;;
    --out) out=$2; shift ;;
    *) echo "bcast_hosts: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
IFS=, read -r it_lat it_tput it_skew <<<"$iters"
out=${out:-$top/contrib/bench/results/bcast-hosts-$(date +%Y-%m-%d)}
mkdir -p "$out/logs"
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
libdir=$(cd "$(dirname "$lib")" && pwd)
lib=$libdir/$(basename "$lib")
[ -f "$lib" ] || { echo "bcast_hosts: build first (no $lib)" >&2; exit 2; }
declare -A blib=([openmpi]=$libdir/libaptus_bcast.so [mpich]=$libdir/libaptus_bcast_mpich.so)
work=$(mktemp -d /tmp/aptus-bcast-hosts.XXXXXX)
name=bh$$
cl() { contrib/cluster.sh --name "$name" "$@"; }
trap 'cl down >/dev/null 2>&1; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# cluster_job, cluster_multicast, bench_median
. "$top/contrib/bench/cluster_job.sh"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

for m in $mpis; do
    [ -f "${blib[$m]}" ] || { echo "bcast_hosts: no ${blib[$m]}" >&2; exit 2; }
    "mpicc.$m" -O2 -o "$work/bcast_bench.$m" contrib/bench/bcast_bench.c || exit 2
done

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "tree: $(git rev-parse --short HEAD 2>/dev/null)$(git status --porcelain -- src contrib/bench 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')"
    echo "library: $lib (built $(date -u -r "$lib" '+%Y-%m-%d %H:%M UTC'))"
    echo "machine: $(nproc) cores, $(uname -r)"
    echo "mpis: $(mpirun.openmpi --version 2>/dev/null | head -n1); $(mpiexec.mpich --version 2>/dev/null | grep -m1 Version | tr -s ' ')"
    echo "ucx: $(ucx_info -v 2>/dev/null | sed -n '1s/^# Version //p')"
    echo "command: contrib/bench/bcast_hosts.sh --hosts \"$hosts_list\" --mpis \"$mpis\" --losses \"$losses\" --reps $reps --sizes $sizes --tput-sizes $tsizes --skews \"$skews\" --iters $iters"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/meta.txt"

csv=$out/bcast_hosts.csv
scsv=$out/bcast_hosts_stats.csv
jcsv=$out/jobs.csv
echo "hosts,loss,mpi,mode,size,skew_us,impl,rep,value,unit,checked,bad" >"$csv"
echo "hosts,loss,mpi,rep,ranks_mcast,delivered,repairs_sent,nacks_sent,duplicates,foreign,srtt_us_max" >"$scsv"
echo "hosts,loss,mpi,impl,rep,status,seconds,checked,bad,verdict" >"$jcsv"
failures=0

field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# job N LOSS MPI IMPL REP: one bcast_bench job, its rows into the CSVs.
job() {
    local n=$1 loss=$2 m=$3 impl=$4 rep=$5 t0 rc secs log line done_line why=
    local tag=$n-$loss-$m-$impl-$rep st
    st=$work/stats-$tag
    local -a env=(UCX_NET_DEVICES=eth0 UCX_WARN_UNUSED_ENV_VARS=n)
    # shellcheck disable=SC2054  # the commas are meant
    case $impl in
    tcp) env+=(UCX_TLS=tcp,self) ;;
    ud_sr) env+=(UCX_TLS=ud_sr,self LD_PRELOAD="$lib") ;;
    aptus)
        mkdir -p "$st"
        env+=(UCX_TLS=ud_sr,self LD_PRELOAD="${blib[$m]} $lib"
              APTUS_BCAST_STATS="$st/s.%r")
        ;;
    esac
    log=$work/$tag.log
    t0=$(date +%s.%N)
    CLUSTER_JOB_DONE='^bcast_bench: done' cluster_job "$name" "$m" "$n" 300 "${env[@]}" -- \
        "$work/bcast_bench.$m" -c -w 5 \
        -m "lat:$((it_lat * 4 / n)),tput:$((it_tput * 4 / n)),skew:$((it_skew * 4 / n))" \
        -s "$sizes" -T "$tsizes" -Z 64 -k "${skews// /,}" >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    cl clean >/dev/null 2>&1
    while read -r line; do
        local mode size skew=0 value unit
        mode=$(field "$line" mode)
        size=$(field "$line" size)
        if [ "$mode" = tput ]; then
            value=$(field "$line" per_sec); unit=per_sec
        else
            value=$(field "$line" usec); unit=usec
            [ "$mode" = skew ] && skew=$(field "$line" skew_us)
        fi
        echo "$n,$loss,$m,$mode,$size,$skew,$impl,$rep,$value,$unit,$(field "$line" checked),$(field "$line" bad)" >>"$csv"
    done < <(grep '^bcast_bench mode=' "$log")
    done_line=$(grep -m1 '^bcast_bench: done' "$log")
    [ $rc -eq 0 ] || why="status $rc"
    [ -n "$done_line" ] || why="${why:+$why, }no done line"
    [[ $done_line == *" PASS" ]] || why="${why:+$why, }not verified: ${done_line:-none}"
    if [ "$impl" = aptus ]; then
        # every rank's world communicator (size=n) served by multicast
        local s
        s=$(cat "$st"/s.* 2>/dev/null | awk -v n="$n" '
            $1 == "aptus-bcast" && $3 == "size=" n {
                for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                if (v["mode"] == "mcast") mc++
                d += v["delivered"]; r += v["repairs_sent"]; k += v["nacks_sent"]
                u += v["duplicates"]; f += v["foreign"]
                if (v["srtt_us"] > sm) sm = v["srtt_us"]
                delete v }
            END { printf "%d,%d,%d,%d,%d,%d,%d", mc, d, r, k, u, f, sm }')
        echo "$n,$loss,$m,$rep,$s" >>"$scsv"
        [ "${s%%,*}" = "$n" ] || why="${why:+$why, }${s%%,*} of $n ranks served by multicast"
    fi
    echo "$n,$loss,$m,$impl,$rep,$rc,$secs,$(field "$done_line" checked),$(field "$done_line" bad),${why:-ok}" >>"$jcsv"
    printf '  %-8s %-6s %4.0fs  %s\n' "$m" "$impl" "$secs" "${why:-ok: $(field "$done_line" checked) bytes checked, 0 bad}" >&2
    if [ -n "$why" ]; then
        failures=$((failures + 1))
        cp "$log" "$out/logs/$tag.log"
        [ -d "$st" ] && cp -r "$st" "$out/logs/stats-$tag"
    fi
}

impls=(tcp ud_sr aptus)
for n in $hosts_list; do
    cl down >/dev/null 2>&1
    if ! cl up "$n" --slots 1 --mtu 1500 >"$work/up.log" 2>&1; then
        cat "$work/up.log" >&2
        echo "bcast_hosts: no cluster (root, iproute2, nftables?)" >&2
        exit 2
    fi
    cluster_multicast "$name" >/dev/null || { echo "bcast_hosts: no multicast route" >&2; exit 2; }
    echo "cluster of $n hosts: bridge $(ip -n "aptus-$name-sw" -d link show aptus-br0 2>/dev/null |
        grep -o 'mcast_snooping [0-9]*\|mcast_querier [0-9]*' | tr '\n' ' ')" >>"$out/meta.txt"
    for rep in $(seq 1 "$reps"); do
        # the order of the three turns with the repetition
        k=$(((rep - 1) % 3))
        order="${impls[*]:k} ${impls[*]:0:k}"
        for loss in $losses; do
            cl set --loss "$loss" >/dev/null 2>&1 || { echo "bcast_hosts: cl set --loss $loss failed" >&2; exit 2; }
            echo "# $n hosts, rep $rep/$reps, UDP loss $loss%" >&2
            for m in $mpis; do
                for impl in $order; do
                    job "$n" "$loss" "$m" "$impl" "$rep"
                done
            done
        done
    done
    echo "cluster of $n hosts, drops: $(cl status 2>/dev/null | grep -i drop | tr -s ' \n' ' ')" >>"$out/meta.txt"
done
cl down >/dev/null 2>&1
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/meta.txt"
echo "jobs that failed: $failures" >>"$out/meta.txt"

"$py" "$top/contrib/bench/bcast_plot.py" --hosts "$csv" "$out" "$jcsv" | tee "$out/table.md"
echo "# results in $out ($failures jobs failed)"
[ "$failures" -eq 0 ]
