# SPDX-License-Identifier: BSD-3-Clause
# Main job, part: between hosts, on a cluster in a box (contrib/cluster.sh:
# network namespaces with their own PID namespaces on a bridge), one rank
# per host. The all-to-all over every transport with mixed MTUs, and the
# multicast MPI_Bcast beside the MPI's own, with datagrams lost. Sourced by
# contrib/demo.sh (needs R, lib, work, demo_ok from mpi.sh).

DEMO_CLUSTER=demo$$
DEMO_HOSTS=4

demo_cluster() { contrib/cluster.sh --name "$DEMO_CLUSTER" "$@"; }

# demo_cl_job NAME FLAVOUR TL PRELOAD PROGRAM ARGS...: one job, a rank per
# host; R[NAME.time|rc|verified]. DEMO_ENV: more VAR=VALUE.
demo_cl_job() {
    local name=$1 flavour=$2 tl=$3 pre=$4 prog=$5 t0 kv
    shift 5
    local -a env=(UCX_TLS="$tl,self" UCX_NET_DEVICES=eth0
                  UCX_WARN_UNUSED_ENV_VARS=n ${DEMO_ENV[@]+"${DEMO_ENV[@]}"})
    local -a job
    [ -n "$pre" ] && env+=(LD_PRELOAD="$pre")
    if [ "$flavour" = openmpi ]; then
        job=(ompi -np "$DEMO_HOSTS")
        for kv in "${env[@]}"; do job+=(-x "$kv"); done
    else
        job=(mpich -n "$DEMO_HOSTS")
        for kv in "${env[@]}"; do job+=(-genv "${kv%%=*}" "${kv#*=}"); done
    fi
    t0=$(date +%s.%N)
    timeout -k 5 120 env -u LD_PRELOAD -u UCX_TLS \
        ${APTUS_SCHED_GROUP_RUN[@]+"${APTUS_SCHED_GROUP_RUN[@]}"} \
        contrib/cluster.sh --name "$DEMO_CLUSTER" "${job[@]}" \
        "$work/$prog.$flavour" "$@" </dev/null >"$work/$name.log" 2>&1
    R[$name.rc]=$?
    R[$name.time]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    R[$name.verified]=$(grep -c ": OK" "$work/$name.log")
}

demo_hosts() {
    local tl mpi size blib
    if ! demo_cluster up "$DEMO_HOSTS" --slots 1 --mtu 9000,1500 >"$work/cluster.log" 2>&1; then
        echo "  no cluster in a box here (needs root, iproute2, nftables): skipped"
        sed 's/^/    /' "$work/cluster.log" | tail -n 3
        return 0
    fi
    R[hosts]=1
    # the broadcast library's group traffic goes out of eth0
    demo_cluster each ip route add 224.0.0.0/4 dev eth0 >/dev/null 2>&1
    echo "  hosts h1..h$DEMO_HOSTS, one rank each; eth0 MTU: h1 9000, the others 1500"

    for tl in tcp ud_sr rc_sr rc_fp aptus; do
        demo_cl_job "hosts-a2a-$tl" openmpi "$tl" "$lib" alltoall -m 1m -i 2
    done
    demo_cl_job hosts-a2a-mpich mpich aptus "$lib" alltoall -m 1m -i 2
    printf '  %-34s' "all-to-all 1 MB, Open MPI (s)"
    for tl in tcp ud_sr rc_sr rc_fp aptus; do
        printf ' %7s %-3s' "${R[hosts-a2a-$tl.time]}" \
            "$(demo_ok "hosts-a2a-$tl" "$DEMO_HOSTS")"
    done
    printf '\n  %-34s %s\n' "                  MPICH over aptus (s)" \
        "${R[hosts-a2a-mpich.time]} $(demo_ok hosts-a2a-mpich "$DEMO_HOSTS")"
    echo "  (columns: tcp ud_sr rc_sr rc_fp aptus; yes = every rank verified its data)"

    echo
    echo "  The multicast MPI_Bcast, a rank per host, the MPI's own traffic over ud_sr:"
    for mpi in openmpi mpich; do
        blib=$(dirname "$lib")/libaptus_bcast.so
        [ "$mpi" = mpich ] && blib=$(dirname "$lib")/libaptus_bcast_mpich.so
        [ -f "$blib" ] || continue
        for impl in own aptus; do
            local pre=$lib
            [ "$impl" = aptus ] && pre="$blib $lib"
            demo_cl_job "bc-$mpi-$impl" "$mpi" ud_sr "$pre" bcast_bench \
                -m lat -s 8,1024,8192 -i 300 -w 20
            for size in 8 1024 8192; do
                R[bc.$mpi.$impl.$size]=$(sed -n \
                    "s/^bcast_bench mode=lat np=[0-9]* size=$size usec=\([0-9.]*\).*/\1/p" \
                    "$work/bc-$mpi-$impl.log")
            done
        done
        # every byte checked, 3% of the datagrams each host receives dropped
        demo_cluster set --loss 3 >/dev/null 2>&1
        DEMO_ENV=(APTUS_BCAST_STATS="$work/bcstats-$mpi.%r")
        demo_cl_job "bc-check-$mpi" "$mpi" ud_sr "$blib $lib" bcast_check -i 1 -b 500
        DEMO_ENV=()
        demo_cluster set --loss 0 >/dev/null 2>&1
        R[bc.$mpi.mode]=$(cat "$work/bcstats-$mpi".* 2>/dev/null |
            grep " size=$DEMO_HOSTS mode=mcast" | grep -o '^aptus-bcast rank=[0-9]*' |
            sort -u | wc -l)
        R[bc.$mpi.repairs]=$(cat "$work/bcstats-$mpi".* 2>/dev/null |
            grep -o ' repairs_sent=[0-9]*' | awk -F= '{ s += $2 } END { print s + 0 }')
    done
    printf '  %-22s %10s %10s %10s   %s\n' "MPI_Bcast latency (us)" 8 1024 8192 \
        "with 3% loss: data checked, served by multicast, repairs"
    for mpi in openmpi mpich; do
        for impl in own aptus; do
            printf '  %-22s %10s %10s %10s' "$mpi $impl" "${R[bc.$mpi.$impl.8]:--}" \
                "${R[bc.$mpi.$impl.1024]:--}" "${R[bc.$mpi.$impl.8192]:--}"
            if [ "$impl" = aptus ]; then
                printf '   %s, %s of %s ranks, %s' "$(demo_ok "bc-check-$mpi" "$DEMO_HOSTS")" \
                    "${R[bc.$mpi.mode]:-0}" "$DEMO_HOSTS" "${R[bc.$mpi.repairs]:-0}"
            fi
            printf '\n'
        done
    done
}

demo_hosts_down() {
    [ -n "${R[hosts]:-}" ] && demo_cluster down >/dev/null 2>&1
    return 0
}
