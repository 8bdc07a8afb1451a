#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: the multicast MPI_Bcast (libaptus_bcast) against
# each MPI's own MPI_Bcast over the same UCX transport, one run.
#
# contrib/bench/bcast_bench.c under Open MPI and MPICH, in a network
# namespace made for the run whose loopback carries multicast; both
# broadcasts alternate within each repetition; medians are printed.
#   latency      8 B to 32 KiB at 4, 8 and 16 ranks (OSU-style: a barrier
#                after each broadcast, time inside MPI_Bcast)
#   throughput   back-to-back broadcasts from one root, per second
#   skew         a barrier, every rank away (asleep) a random time in
#                [0, SKEW], then MPI_Bcast: time inside it, 64 B, against
#                the job size at SKEW = 1 ms and against SKEW (0 to 5 ms)
#                at 8 ranks
#   control      datagrams of control (ACK, NACK, REPORT, POLL) and repairs
#                per broadcast for four ACK schemes: ACK every message or
#                every 8th (lazy, skewed), with co-roots or one flat group
# Rows go to DIR/bcast.csv and DIR/bcast-control.csv; with
# python3-matplotlib, DIR/bcast_latency.png, bcast_tput.png, bcast_skew.png.
#
#   contrib/bench/bcast_bench.sh [--mpis "openmpi mpich"] [--nps "4 8 16"]
#       [--sizes 8,64,...] [--reps 3] [--tls ud_sr] [--skews "0 200 1000 5000"]
#       [--out DIR]
# Needs root, iproute2 (a namespace). Takes the libraries from the build.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
mpis="openmpi mpich"
nps="4 8 16"
sizes=8,64,512,1024,4096,8192,16384,32768
reps=3
tls=ud_sr
skews="0 200 1000 5000"
out=
while [ $# -gt 0 ]; do
    case "$1" in
    --mpis) mpis=$2; shift ;;
    --nps) nps=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --reps) reps=$2; shift ;;
    --tls) tls=$2; shift ;;
    --skews) skews=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "bcast_bench: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
out=${out:-$top/contrib/bench/results/bench-$(date +%Y-%m-%d)}
mkdir -p "$out"
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
libdir=$(dirname "$lib")
[ -f "$lib" ] || { echo "bcast_bench: build first (no $lib)" >&2; exit 2; }

ns=aptus-bcbench-$$
ip netns add "$ns" || { echo "bcast_bench: needs root (ip netns)" >&2; exit 2; }
# MPICH's ranks in one CPU cgroup: each is a session of its own, and with
# autogroup scheduling ranks that outnumber the cores starve (sched-group.sh)
. "$top/contrib/sched-group.sh"
if [[ " $mpis " == *" mpich "* ]] && ! aptus_sched_group_open; then
    echo "# MPICH ranks in a scheduling group each ($APTUS_SCHED_GROUP_WHY)" >&2
fi
trap 'ip netns delete "$ns" 2>/dev/null; aptus_sched_group_close' EXIT
ip -n "$ns" link set lo up
ip -n "$ns" link set lo multicast on
ip -n "$ns" route add 224.0.0.0/4 dev lo

declare -A blib=([openmpi]=$libdir/libaptus_bcast.so [mpich]=$libdir/libaptus_bcast_mpich.so)
for mpi in $mpis; do
    [ -f "${blib[$mpi]}" ] || { echo "bcast_bench: no ${blib[$mpi]}" >&2; exit 2; }
    cc=mpicc.$mpi
    $cc -O2 -o "$out/bcast_bench_$mpi" "$top/contrib/bench/bcast_bench.c" || exit 1
done

# job MPI NP IMPL ARGS...: one bcast_bench run; its result lines on stdout.
job() {
    local mpi=$1 np=$2 impl=$3 pre=$lib
    shift 3
    [ "$impl" = aptus ] && pre="${blib[$mpi]} $lib"
    local -a env=(LD_PRELOAD="$pre" UCX_TLS="$tls,self" UCX_NET_DEVICES=lo
                  UCX_WARN_UNUSED_ENV_VARS=n ${EXTRA_ENV[@]+"${EXTRA_ENV[@]}"})
    local -a launch group=()
    if [ "$mpi" = openmpi ]; then
        launch=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none
                --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
        for kv in "${env[@]}"; do launch+=(-x "${kv%%=*}"); done
        launch+=(-np "$np")
    else
        launch=(mpiexec.mpich -n "$np")
        group=(${APTUS_SCHED_GROUP_RUN[@]+"${APTUS_SCHED_GROUP_RUN[@]}"})
    fi
    ${group[@]+"${group[@]}"} timeout -k 5 600 ip netns exec "$ns" env "${env[@]}" "${launch[@]}" \
        "$out/bcast_bench_$mpi" "$@" </dev/null 2>&1 | grep '^bcast_bench '
}

# iterations: fewer where ranks outnumber the cores many times over
iters_for() {
    local np=$1 base=$2
    echo $((base * 4 / np))
}

field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

csv=$out/bcast.csv
echo "mpi,np,mode,size,skew_us,impl,rep,value,unit" >"$csv"
EXTRA_ENV=()
for rep in $(seq 1 "$reps"); do
    order="own aptus"
    [ $((rep % 2)) -eq 0 ] && order="aptus own"
    for mpi in $mpis; do
        for np in $nps; do
            for impl in $order; do
                echo "# rep $rep $mpi np$np $impl" >&2
                job "$mpi" "$np" "$impl" -m lat -s "$sizes" \
                    -i "$(iters_for "$np" 500)" -w 20 |
                while read -r line; do
                    echo "$mpi,$np,lat,$(field "$line" size),0,$impl,$rep,$(field "$line" usec),usec"
                done >>"$csv"
                job "$mpi" "$np" "$impl" -m tput -s 8,1024,8192,32768 \
                    -i "$(iters_for "$np" 2000)" -w 20 |
                while read -r line; do
                    echo "$mpi,$np,tput,$(field "$line" size),0,$impl,$rep,$(field "$line" per_sec),per_sec"
                done >>"$csv"
            done
        done
        # skew against the job size at 1 ms, and against the skew at 8
        for np in $nps; do
            for impl in $order; do
                job "$mpi" "$np" "$impl" -m skew -s 64 -k 1000 \
                    -i "$(iters_for "$np" 200)" -w 20 |
                while read -r line; do
                    echo "$mpi,$np,skew,64,1000,$impl,$rep,$(field "$line" usec),usec"
                done >>"$csv"
            done
        done
        for skew in $skews; do
            [ "$skew" = 1000 ] && case " $nps " in *" 8 "*) continue ;; esac
            for impl in $order; do
                job "$mpi" 8 "$impl" -m skew -s 64 -k "$skew" -i 100 -w 20 |
                while read -r line; do
                    echo "$mpi,8,skew,64,$skew,$impl,$rep,$(field "$line" usec),usec"
                done >>"$csv"
            done
        done
    done
done

# control datagrams per broadcast, per ACK scheme (Open MPI, 8 ranks)
ccsv=$out/bcast-control.csv
echo "scheme,ack_every,group_size,np,size,bcasts,acks,nacks,reports,polls,repairs,control_per_bcast,repairs_per_bcast,per_sec" >"$ccsv"
cmpi=${mpis%% *}
for scheme in "eager-flat 1 8" "lazy-flat 8 8" "eager-coroots 1 0" "lazy-coroots 8 0"; do
    set -- $scheme
    st=$out/ctl-stats.$1
    rm -rf "$st"; mkdir -p "$st"
    EXTRA_ENV=(APTUS_BCAST_ACK_EVERY=$2 APTUS_BCAST_GROUP_SIZE=$3
               APTUS_BCAST_STATS="$st/s.%r")
    line=$(job "$cmpi" 8 aptus -m tput -s 64 -i 5000 -w 0)
    EXTRA_ENV=()
    # the world communicator's lines (size=8 and the broadcasts' root)
    sums=$(cat "$st"/s.* | awk '$1 == "aptus-bcast" && / size=8 / {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        b += v["root"]; a += v["acks_sent"]; n += v["nacks_sent"];
        r += v["reports_sent"]; p += v["polls_sent"]; x += v["repairs_sent"] }
        END { printf "%d %d %d %d %d %d", b, a, n, r, p, x }')
    read -r b a n r p x <<<"$sums"
    echo "$1,$2,$3,8,64,$b,$a,$n,$r,$p,$x,$(awk -v b="$b" -v c=$((a + n + r + p)) 'BEGIN { printf "%.3f", c / b }'),$(awk -v b="$b" -v x="$x" 'BEGIN { printf "%.3f", x / b }'),$(field "$line" per_sec)" >>"$ccsv"
done

# the table: medians, the library against the MPI's own
/usr/bin/python3 - "$csv" "$ccsv" <<'PY'
import csv, statistics, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1])))
med = defaultdict(list)
for r in rows:
    med[(r["mpi"], int(r["np"]), r["mode"], int(r["size"]), int(r["skew_us"]), r["impl"])].append(float(r["value"]))
keys = sorted({k[:5] for k in med})
print("\n## MPI_Bcast: libaptus_bcast (multicast) against the MPI's own, medians")
print("| MPI | ranks | measure | size | skew us | MPI's own | aptus | aptus/own |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for k in keys:
    own = med.get(k + ("own",)); apt = med.get(k + ("aptus",))
    if not own or not apt:
        continue
    o, a = statistics.median(own), statistics.median(apt)
    unit = "us" if k[2] != "tput" else "/s"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {o:.1f} {unit} | {a:.1f} {unit} | {a / o:.2f} |")
print("\n## control datagrams per broadcast (aptus, 8 ranks, 64 B back to back)")
print("| scheme | ACK every | group | control/bcast | repairs/bcast | bcasts/s |")
print("| --- | --- | --- | --- | --- | --- |")
for r in csv.DictReader(open(sys.argv[2])):
    print(f"| {r['scheme']} | {r['ack_every']} | {r['group_size'] if r['group_size'] != '0' else 'auto'} | {r['control_per_bcast']} | {r['repairs_per_bcast']} | {r['per_sec']} |")
PY

py=/usr/bin/python3
if $py -c 'import matplotlib' 2>/dev/null; then
    $py "$top/contrib/bench/bcast_plot.py" "$csv" "$out"
else
    echo "# no plots: python3-matplotlib is not installed"
fi
echo "# rows in $csv and $ccsv"
