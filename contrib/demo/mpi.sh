# SPDX-License-Identifier: BSD-3-Clause
# Main job, part: MPI jobs inside this host. The all-to-all over every
# transport, and the hybrid at work: a job where every rank has a few heavy
# peers and many light ones, over aptus and, for the memory, over ud_sr and
# rc_sr. Sourced by contrib/demo.sh (needs R, lib, work, py).

# demo_mpirun NAME FLAVOUR TL NP PROGRAM ARGS...: one job on lo with
# statistics in $work/stats-NAME; R[NAME.time|rc|verified].
# DEMO_ENV: more VAR=VALUE for the ranks.
demo_mpirun() {
    local name=$1 flavour=$2 tl=$3 np=$4 prog=$5 t0 rc kv
    shift 5
    local stats=$work/stats-$name
    mkdir -p "$stats"
    local env=(UCX_TLS="$tl,self" UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n
               UCX_APTUS_STATS="$stats/%p,$stats/%p.csv"
               ${DEMO_ENV[@]+"${DEMO_ENV[@]}"})
    t0=$(date +%s.%N)
    if [ "$flavour" = openmpi ]; then
        local xs=()
        for kv in "${env[@]}"; do xs+=(-x "$kv"); done
        timeout 300 env LD_PRELOAD="$lib" mpirun.openmpi --allow-run-as-root \
            --oversubscribe --bind-to none -np "$np" --mca pml ucx \
            --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl self \
            -x LD_PRELOAD "${xs[@]}" \
            "$work/$prog.openmpi" "$@" >"$work/$name.log" 2>&1
        rc=$?
    else
        ${APTUS_SCHED_GROUP_RUN[@]+"${APTUS_SCHED_GROUP_RUN[@]}"} \
            timeout 300 env LD_PRELOAD="$lib" "${env[@]}" \
            mpiexec.mpich -n "$np" "$work/$prog.$flavour" "$@" \
            >"$work/$name.log" 2>&1
        rc=$?
    fi
    R[$name.time]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    R[$name.rc]=$rc
    R[$name.verified]=$(grep -c ": OK" "$work/$name.log")
    printf '  %-28s %-6s np=%-3s %6s s  rc=%s  ranks verified: %s\n' "$name" \
        "$tl" "$np" "${R[$name.time]}" "$rc" "${R[$name.verified]}"
}

# demo_ok NAME NP: "yes" when the job ended well and every rank verified.
demo_ok() {
    if [ "${R[$1.rc]:-1}" = 0 ] && [ "${R[$1.verified]:-0}" -ge "$2" ]; then
        echo yes
    else
        echo NO
    fi
}

# demo_stat DIR RECORD KEY sum|max|mean: KEY over the RECORD lines (e.g.
# "aptus/lo") of every process.
demo_stat() {
    # the CSV files beside the lines hold no "aptus-stats" record
    cat "$1"/[0-9]* 2>/dev/null |
        awk -v rec="aptus-stats $2" -v key="$3" -v op="$4" '
            index($0, rec " ") == 1 {
                for (i = 3; i <= NF; i++) {
                    split($i, kv, "=")
                    if (kv[1] == key) { s += kv[2]; n++; if (kv[2] > m) m = kv[2] }
                }
            }
            END {
                if (op == "max") print m + 0
                else if (op == "mean") printf "%.0f\n", n ? s / n : 0
                else print s + 0
            }'
}

demo_mpi_alltoall() {
    local tl
    for tl in ud_sr rc_sr rc_fp aptus tcp; do
        demo_mpirun "ompi-a2a-$tl" openmpi "$tl" 4 alltoall -m 1m -i 2
    done
    for tl in ud_sr rc_sr aptus; do
        demo_mpirun "mpich-a2a-$tl" mpich "$tl" 4 alltoall -m 1m -i 2
    done
}

# Every rank sends 1 KB bursts to its 4 ring neighbours (heavy) and 64 B
# now and then to everyone else (light); 256 KB messages to the heavy
# ones go by rendezvous. Caps: 4 RC connections and 4 fast paths.
demo_mpi_aptus() {
    local tl np=16 d f
    DEMO_ENV=(UCX_APTUS_MAX_RC=4 UCX_APTUS_MAX_FP=4)
    demo_mpirun ompi-hl-aptus openmpi aptus $np heavy_light -i 100 -h 2 -s 1k
    demo_mpirun mpich-hl-aptus mpich aptus 8 heavy_light -i 100 -h 2 -s 1k
    DEMO_ENV=()
    demo_mpirun ompi-hl-ud_sr openmpi ud_sr $np heavy_light -i 100 -h 2 -s 1k
    demo_mpirun ompi-hl-rc_sr openmpi rc_sr $np heavy_light -i 100 -h 2 -s 1k

    echo
    echo "  Who earned what (Open MPI, $np ranks, 4 heavy peers each, caps 4 RC / 4 fast paths):"
    printf '  %-10s %6s %9s %9s %14s %16s %14s\n' process peers "RC/cap" "FP/cap" \
        "peers with RC" "their share of" "light peers"
    printf '  %-10s %6s %9s %9s %14s %16s %14s\n' "" "" "" "" "" "bytes sent" "on UD only"
    d=$work/stats-ompi-hl-aptus
    for f in "$d"/[0-9]*; do
        case $f in *.csv) continue ;; esac
        awk -v pid="${f##*/}" '
            function get(k,   i, kv) {
                for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
                return 0
            }
            $2 ~ /^aptus\// { rcp = get("rc_peak"); rcm = get("rc_max");
                              fpp = get("fp_peak"); fpm = get("fp_max") }
            $2 ~ /^aptus-peer\// {
                n++
                b = get("ud_sr_bytes") + get("rc_sr_bytes") + get("rc_rdma_bytes") + \
                    get("ud_zcopy_bytes") + get("rc_fp_bytes")
                all += b
                if (get("rc_now") > 0 || get("rc_sr_msgs") + get("rc_rdma_msgs") > 0) { rc++; rcb += b }
                else light++
            }
            END { printf "  %-10s %6d %9s %9s %14d %15.1f%% %14d\n", pid, n, \
                      rcp "/" rcm, fpp "/" fpm, rc, all ? 100 * rcb / all : 0, light }
        ' "$f"
    done | sort -n -k2 | head -n 8
    echo "  (first 8 of $np processes; a peer is listed once the process sent to it)"

    echo
    echo "  Messages per channel by size (all $np processes, from the CSV statistics):"
    "$py" contrib/aptus_stats_plot.py "$work/plots" "$d"/*.csv 2>&1 |
        sed -n '/^messages by size/,/^$/p' | sed 's/^/    /'
    if [ -f "$work/plots/channel_by_size.png" ]; then
        mkdir -p "$DEMO_OUT"
        cp "$work/plots/"*.png "$DEMO_OUT/"
        echo "  pictures: $DEMO_OUT/channel_by_size.png (channel use by message size),"
        echo "            $DEMO_OUT/channels_per_process.png (connections per process against the cap)"
    else
        echo "  (no pictures: python3-matplotlib missing)"
    fi

    echo
    echo "  Memory the transport holds per process, same job ($np ranks; bytes, mean of the processes):"
    printf '  %-8s %8s %12s %12s %13s %16s\n' transport peers "state/peer" connections \
        "fast-path" "recv buffers a"
    printf '  %-8s %8s %12s %12s %13s %16s\n' "" "" "" "" "blocks" "conn may hold"
    R[mem.ud_sr]=$(demo_stat "$work/stats-ompi-hl-ud_sr" ud_sr/lo peer_bytes mean)
    R[mem.rc_sr]=$(demo_stat "$work/stats-ompi-hl-rc_sr" rc_sr/lo conn_state_bytes mean)
    R[mem.aptus]=$(demo_stat "$d" aptus/lo peer_bytes mean)
    printf '  %-8s %8s %12s %12s %13s %16s\n' ud_sr \
        "$(demo_stat "$work/stats-ompi-hl-ud_sr" ud_sr/lo peers mean)" "${R[mem.ud_sr]}" 0 0 0
    printf '  %-8s %8s %12s %12s %13s %16s\n' rc_sr - "${R[mem.rc_sr]}" \
        "$(demo_stat "$work/stats-ompi-hl-rc_sr" rc_sr/lo connects mean)" 0 \
        "$(demo_stat "$work/stats-ompi-hl-rc_sr" rc_sr/lo conn_descriptor_bytes mean)"
    printf '  %-8s %8s %12s %12s %13s %16s\n' aptus \
        "$(demo_stat "$d" aptus/lo peers mean)" "${R[mem.aptus]}" \
        "$(demo_stat "$d" aptus/lo rc_peak mean)" \
        "$(demo_stat "$d" aptus/lo fp_blocks_bytes mean)" "-"
    echo "  (state/peer: endpoint state per peer, per connection for rc_sr; connections: opened"
    echo "   over the job by rc_sr, held at most by aptus: only heavy peers earn one, under the cap)"
}
