#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: the configurations of the MVAPICH-Aptus paper side by
# side (Koop et al., IPDPS 2008, Table 2 and Figure 7), in one run:
#
#   RC       UCX_TLS=rc_sr,self   a connection to every peer
#   UD       UCX_TLS=ud_sr,self   UD-SR eager, UD-ZCopy rendezvous
#   UD-copy  ud_sr with UCX_UD_SR_ZCOPY=n
#   Aptus    UCX_TLS=aptus,self   UD for all, RC for the peers that earn it
#
# on four workloads, Open MPI (pml ucx), 4 to 16 ranks on this host:
#   halo3d     3-D nearest-neighbour halo exchange, 128 KB faces
#   halo_small the same with 512 B faces: small messages to six frequent
#              peers, where the fast path matters
#   a2a_small  MPI_Alltoall, 64 B per peer
#   lammps     LAMMPS (Debian's lmp), Lennard-Jones melt, 16k atoms
#
# For every run: time per iteration (halo3d, a2a_small) or loop time
# (lammps), normalised to RC; the largest peak resident size of a rank;
# and, for aptus, the channel each message took and the RC connections a
# rank held (from UCX_APTUS_STATS). Prints a table, writes results.csv,
# and with python3-matplotlib draws time.png, memory.png, channels.png and
# sizes.png (aptus' channel by message size, from its aptus-sizes lines).
#
#   contrib/bench/aptus_bench.sh [OUTDIR]
#   APTUS_LIB   libuct_aptus.so (default: build/.libs/libuct_aptus.so)
#   BENCH_NPS   job sizes (default "4 8 16")
#   BENCH_REPS  runs per point, the configurations taking turns; the best
#               is kept, the median shown beside it (default 3)
#   BENCH_WORKS workloads (default "halo3d halo_small a2a_small lammps";
#               between hosts "halo3d halo_small a2a_small")
#   BENCH_HOSTS N: run between N hosts of a cluster in a box
#               (contrib/cluster.sh, ranks spread over the hosts in turn,
#               UCX_NET_DEVICES=eth0), with UCX's tcp as a fifth
#               configuration and UD-copy left out (default 0: this host)
#   BENCH_MTU   the hosts' MTU list, as cluster.sh --mtu (default 1500)
#   BENCH_CONFIGS the configurations, of RC UD UD-copy FP Aptus TCP (FP:
#               UCX_TLS=rc_fp,self, a fast path to every peer; RC is the
#               reference of the ratios and always runs)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build/bench-aptus}
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
nps=${BENCH_NPS:-4 8 16}
reps=${BENCH_REPS:-3}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ ! -f "$lib" ]; then
    echo "aptus_bench: $lib not found (build first, or set APTUS_LIB)" >&2
    exit 2
fi
for prog in halo3d a2a_small; do
    mpicc.openmpi -O2 -o "$out/$prog" "$top/contrib/bench/$prog.c" || exit 1
done
have_lmp=0
if command -v lmp >/dev/null 2>&1; then
    have_lmp=1
    cat >"$out/in.lj" <<'EOF'
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 16 0 16 0 16
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 1.44 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    delay 0 every 20 check no
fix             1 all nve
thermo          100
run             300
EOF
else
    echo "# lmp not found (apt-get install lammps): the LAMMPS workload is skipped"
fi

hosts=${BENCH_HOSTS:-0}
configs="RC UD UD-copy Aptus"
launch=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
dev=lo
stats_name=s.%p
if [ "$hosts" -gt 0 ]; then
    cluster=ab$$
    max_np=0
    for np in $nps; do
        [ "$np" -gt "$max_np" ] && max_np=$np
    done
    slots=$(((max_np + hosts - 1) / hosts))
    "$top/contrib/cluster.sh" --name "$cluster" up "$hosts" --slots "$slots" \
        --mtu "${BENCH_MTU:-1500}" >"$out/cluster.log" 2>&1 || {
        echo "aptus_bench: no cluster (see $out/cluster.log)" >&2
        exit 2
    }
    trap '"$top/contrib/cluster.sh" --name "$cluster" down >/dev/null 2>&1' EXIT
    launch=("$top/contrib/cluster.sh" --name "$cluster" ompi --map-by node)
    dev=eth0
    stats_name=s.%h.%p # process ids repeat from host to host
    configs="TCP RC UD Aptus"
    have_lmp=0
    echo "# between $hosts hosts (MTU ${BENCH_MTU:-1500}), ranks spread over them in turn"
fi
if [ -n "${BENCH_CONFIGS:-}" ]; then
    configs="RC ${BENCH_CONFIGS//RC/}"
fi
tls_of() {
    case $1 in
    TCP) echo tcp,self ;;
    FP) echo rc_fp,self ;;
    RC) echo rc_sr,self ;;
    UD|UD-copy) echo ud_sr,self ;;
    Aptus) echo aptus,self ;;
    esac
}

# run_once CONFIG NP WORKLOAD REP: one run; prints "time_us rss_kb" (NA
# when it failed) and leaves its statistics in $out/stats.tmp
run_once() {
    local config=$1 np=$2 work=$3 rep=$4 t rss log st=$out/stats.tmp
    rm -rf "$st"
    mkdir -p "$st"
    log=$out/log-$config-$np-$work.$rep
    local -a cmd
    case $work in
    halo3d)    cmd=("$out/halo3d" -n 128 -i 100 -w 10) ;;
    halo_small) cmd=("$out/halo3d" -n 8 -i 2000 -w 200) ;;
    a2a_small) cmd=("$out/a2a_small" -b 64 -i 1000 -w 50) ;;
    lammps)    cmd=(/usr/bin/time -f "maxrss_kb=%M" lmp -in "$out/in.lj"
                    -log none -echo none) ;;
    esac
    timeout 600 "${launch[@]}" --mca osc ^ucx \
        -x LD_PRELOAD="$lib" -x UCX_TLS="$(tls_of "$config")" \
        -x UCX_NET_DEVICES=$dev -x UCX_WARN_UNUSED_ENV_VARS=n \
        -x UCX_UD_SR_ZCOPY="$([ "$config" = UD-copy ] && echo n || echo y)" \
        -x UCX_APTUS_STATS="$st/$stats_name" -np "$np" \
        "${cmd[@]}" >"$log" 2>&1
    case $work in
    lammps)
        t=$(sed -n 's/^Loop time of \([0-9.]*\) on.*/\1/p' "$log" |
            awk '{ printf "%.0f", $1 * 1e6 }')
        # ranks' lines may run into each other: every number, wherever
        rss=$(grep -o 'maxrss_kb=[0-9]*' "$log" | cut -d= -f2 | sort -n |
              tail -1)
        ;;
    *)
        t=$(sed -n 's/.*time_per_iter_us=\([0-9.]*\).*OK$/\1/p' "$log")
        rss=$(sed -n 's/.*max_rss_kb=\([0-9]*\).*/\1/p' "$log")
        ;;
    esac
    echo "${t:-NA} ${rss:-NA}"
}

# median of the numbers on stdin (NA when none)
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) print "NA"
        else if (NR % 2) print v[(NR + 1) / 2]
        else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# aptus_channels DIR: "ud_sr rc_sr rc_rdma ud_zcopy max_rc_per_rank rc_fp"
aptus_channels() {
    cat "$1"/s.* 2>/dev/null | awk '
        $1 == "aptus-stats" && index($2, "aptus/") == 1 {
            for (i = 3; i <= NF; i++) {
                split($i, kv, "=")
                v[kv[1]] += kv[2]
                if (kv[1] == "rc_peak" && kv[2] > peak) peak = kv[2]
            }
        }
        END { printf "%d %d %d %d %d %d", v["ud_sr_msgs"], v["rc_sr_msgs"],
                     v["rc_rdma_msgs"], v["ud_zcopy_msgs"], peak,
                     v["rc_fp_msgs"] }'
}

works=${BENCH_WORKS:-halo3d halo_small a2a_small lammps}
[ "$hosts" -gt 0 ] && works=${BENCH_WORKS:-halo3d halo_small a2a_small}
[ $have_lmp = 1 ] || works=${works/lammps/}
csv=$out/results.csv
echo "workload,np,config,time_us,rel_to_rc,max_rss_kb,rss_rel_to_ud,ud_sr_msgs,rc_sr_msgs,rc_rdma_msgs,ud_zcopy_msgs,rc_per_rank,rc_fp_msgs,time_med_us" >"$csv"
printf '%-10s %3s %-8s %12s %7s %12s %11s %7s  %s\n' workload np config \
    "time(us)" "vs RC" "median(us)" "rss(KB)" "vs UD" \
    "aptus channels (msgs) / RC per rank"
for work in $works; do
    for np in $nps; do
        # the configurations take turns within each repetition, so that
        # a drift of the machine falls on all of them alike; the best run
        # counts (its statistics are kept), the median is shown beside it
        declare -A T=() R=() ALL=()
        for ((rep = 0; rep < reps; rep++)); do
            for config in $configs; do
                read -r t rss < <(run_once "$config" "$np" "$work" "$rep")
                [ "$t" = NA ] && continue
                ALL[$config]+="$t "
                if [ -z "${T[$config]:-}" ] ||
                   awk -v a="$t" -v b="${T[$config]}" 'BEGIN { exit !(a < b) }'; then
                    T[$config]=$t
                    R[$config]=$rss
                    rm -rf "$out/stats-$config-$np-$work"
                    mv "$out/stats.tmp" "$out/stats-$config-$np-$work"
                fi
            done
        done
        for config in $configs; do
            T[$config]=${T[$config]:-NA}
            R[$config]=${R[$config]:-NA}
            med=$(printf '%s\n' ${ALL[$config]:-} | median)
            rel=$(awk -v a="${T[$config]}" -v b="${T[RC]}" \
                  'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.2f", a / b }')
            rrel=$(awk -v a="${R[$config]}" -v b="${R[UD]}" \
                   'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.3f", a / b }')
            ch="0 0 0 0 0 0"
            chtxt=
            if [ "$config" = Aptus ]; then
                ch=$(aptus_channels "$out/stats-$config-$np-$work")
                read -r a b c d e f <<<"$ch"
                chtxt="ud_sr=$a rc_sr=$b rc_rdma=$c ud_zcopy=$d rc_fp=$f, RC/rank<=$e"
            fi
            printf '%-10s %3s %-8s %12s %7s %12s %11s %7s  %s\n' "$work" "$np" \
                "$config" "${T[$config]}" "$rel" "$med" "${R[$config]}" "$rrel" \
                "$chtxt"
            echo "$work,$np,$config,${T[$config]},$rel,${R[$config]},$rrel,${ch// /,},$med" >>"$csv"
        done
        unset T R ALL
    done
done
# channel usage by message size (aptus-sizes lines of the Aptus runs)
sizes_csv=$out/sizes.csv
echo "workload,np,channel,le64,le256,le1k,le4k,le16k,le64k,le256k,le1m,gt1m" >"$sizes_csv"
for work in $works; do
    for np in $nps; do
        cat "$out/stats-Aptus-$np-$work"/s.* 2>/dev/null | awk -v w="$work" -v n="$np" '
            $1 == "aptus-stats" && index($2, "aptus-sizes/") == 1 {
                split($2, p, "/"); ch = p[3]
                for (i = 3; i <= NF; i++) {
                    split($i, kv, "=")
                    if (kv[1] ~ /^(le|gt)/) { v[ch, kv[1]] += kv[2]; seen[ch] = 1 }
                }
            }
            END {
                split("le64 le256 le1k le4k le16k le64k le256k le1m gt1m", k, " ")
                for (ch in seen) {
                    line = w "," n "," ch
                    for (j = 1; j <= 9; j++) line = line "," (v[ch, k[j]] + 0)
                    print line
                }
            }' >>"$sizes_csv"
    done
done
echo "# results: $csv $sizes_csv"
py=/usr/bin/python3 # Debian's, where python3-matplotlib installs
if $py -c 'import matplotlib' 2>/dev/null; then
    $py "$top/contrib/bench/aptus_plot.py" "$csv" "$out" "$sizes_csv" &&
        echo "# plots: $out/time.png $out/memory.png $out/channels.png $out/sizes.png"
else
    echo "# no plots: python3-matplotlib is not installed"
fi
