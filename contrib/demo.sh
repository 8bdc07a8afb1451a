#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus main job: set up, build and install the module, then show the
# transports at work: what UCX sees, ucx_perftest of ud_sr and rc_sr
# against UCX's own tcp (and cma for rendezvous), MPI jobs (Open MPI and
# MPICH) over ud_sr and rc_sr with their statistics, and a closing table.
#
#   bash contrib/demo.sh [--prefix DIR]    (default prefix /usr/local)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. test/scripts/lib.sh

prefix=/usr/local
[ "${1:-}" = "--prefix" ] && prefix=$2

step() { printf '\n== %s\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

step "1. Set-up and build (Debian packages, UCX $(dpkg-query -W -f='${Version}' libucx-dev 2>/dev/null) headers, configure, make, install)"
contrib/setup-debian.sh >/dev/null || die "set-up failed"
contrib/build.sh --install --prefix "$prefix" || die "build failed"
lib=$prefix/lib/libuct_aptus.so
envcmd=$prefix/bin/aptus-env
[ -f "$lib" ] && [ -x "$envcmd" ] || die "installation incomplete ($lib, $envcmd)"
echo "installed $lib and $envcmd"

work=$(mktemp -d /tmp/aptus-demo.XXXXXX)
# MPICH's ranks in one CPU cgroup (contrib/sched-group.sh)
. contrib/sched-group.sh
aptus_sched_group_open || true
trap 'rm -rf "$work"; aptus_sched_group_close' EXIT

step "2. The transports UCX now has ($envcmd ucx_info -d)"
"$envcmd" ucx_info -d 2>/dev/null | awk '
    /Memory domain:/     { md = $4 }
    /Transport:/         { tl = $3 }
    /Device:/            { dev = $3 }
    /bandwidth:/         { bw = $3 " MB/s" }
    /latency:/           { lat = $3 " ns" }
    /am_bcopy:/          { am = $3 " " $4 }
    /error handling:/    { if (md ~ /^aptus/) printf "  %-6s on %-6s latency %-9s bandwidth %-14s am_bcopy %s\n", tl, dev, lat, bw, am }'
echo "  configuration: $("$envcmd" ucx_info -c 2>/dev/null | grep -c '^UCX_UD_SR_') UCX_UD_SR_* and $("$envcmd" ucx_info -c 2>/dev/null | grep -c '^UCX_RC_SR_') UCX_RC_SR_* variables (ucx_info -c)"

step "3. ucx_perftest between two processes on lo: ud_sr and rc_sr against UCX's tcp (and cma)"
declare -A R
extra=() # more VAR=VALUE for the next measure
port=$((23000 + RANDOM % 4000))
measure() { # key tl perftest-args...
    local key=$1 tl=$2
    shift 2
    port=$((port + 1))
    local env=(UCX_NET_DEVICES=lo ${extra[@]+"${extra[@]}"})
    case "$tl" in ud_sr|rc_sr) env+=(LD_PRELOAD="$lib") ;; esac
    case "$1,$tl" in
        am_*) set -- -t "$@" -x "$tl" -d lo ;;
        # cma has no active messages: tcp carries eager data and the
        # rendezvous handshake, cma the large messages
        *,cma) env+=(UCX_TLS="cma,tcp,self"); set -- -t "$@" ;;
        *)    env+=(UCX_TLS="$tl,self"); set -- -t "$@" ;;
    esac
    if perftest_pair "$work" $port -- "${env[@]}" -- "$@"; then
        R[$key.$tl.lat]=$(perftest_final "$work/client.log" 3)
        R[$key.$tl.bw]=$(perftest_final "$work/client.log" 6)
        R[$key.$tl.mr]=$(perftest_final "$work/client.log" 8)
    else
        R[$key.$tl.lat]=n/a; R[$key.$tl.bw]=n/a; R[$key.$tl.mr]=n/a
    fi
}
for tl in ud_sr rc_sr tcp; do
    measure uct8   $tl am_lat -D short -s 8 -n 20000
    measure tag8   $tl tag_lat -s 8 -n 20000
    measure tag4k  $tl tag_lat -s 4096 -n 10000
    measure bw64k  $tl tag_bw -s 65536 -n 2000
    measure bw1m   $tl tag_bw -s 1048576 -n 200
    measure rate8  $tl tag_bw -s 8 -n 100000
done
# ud_sr with UD-ZCopy off: large messages through active messages (UD-copy)
extra=(UCX_UD_SR_ZCOPY=n)
measure bw1mcopy ud_sr tag_bw -s 1048576 -n 200
extra=()
measure bw1m cma tag_bw -s 1048576 -n 200
measure bw64k cma tag_bw -s 65536 -n 2000
row3() { # label key field
    printf '  %-30s %12s %12s %12s %12s\n' "$1" "${R[$2.ud_sr.$3]:--}" \
        "${R[$2.rc_sr.$3]:--}" "${R[$2.tcp.$3]:--}" "${R[$2.cma.$3]:--}"
}
printf '  %-30s %12s %12s %12s %12s\n' "test" "ud_sr" "rc_sr" "tcp" "cma+tcp"
row3 "UCT am_lat 8 B (us, median)" uct8 lat
row3 "UCP tag_lat 8 B (us)" tag8 lat
row3 "UCP tag_lat 4 KB (us)" tag4k lat
row3 "UCP tag_bw 64 KB (MB/s)" bw64k bw
row3 "UCP tag_bw 1 MB (MB/s)" bw1m bw
printf '  %-30s %12s %12s %12s %12s\n' "  ud_sr with UD-ZCopy off" "${R[bw1mcopy.ud_sr.bw]}" "-" "-" "-"
row3 "UCP tag_bw 8 B (msg/s)" rate8 mr

step "4. MPI jobs over ud_sr and rc_sr (UCX_TLS=<tl>,self: no shared memory; data verified by every rank)"
mpirun_job() { # name flavour tls np program args...
    local name=$1 flavour=$2 tls=$3 np=$4 prog=$5
    shift 5
    local stats=$work/stats-$name
    mkdir -p "$stats"
    local env=(UCX_TLS="$tls,self" UCX_NET_DEVICES=lo UCX_APTUS_STATS="$stats/%p")
    local t0=$(date +%s.%N) rc
    if [ "$flavour" = openmpi ]; then
        local xs=()
        for e in "${env[@]}"; do xs+=(-x "$e"); done
        # osc ucx: one-sided MPI over UCX too (Debian turns it off)
        timeout 300 env LD_PRELOAD="$lib" mpirun.openmpi --allow-run-as-root \
            --oversubscribe -np "$np" --mca pml ucx --mca pml_ucx_tls any \
            --mca pml_ucx_devices any --mca btl self --mca osc ucx \
            -x LD_PRELOAD "${xs[@]}" \
            "$work/$prog.openmpi" "$@" >"$work/$name.log" 2>&1
        rc=$?
    else
        ${APTUS_SCHED_GROUP_RUN[@]+"${APTUS_SCHED_GROUP_RUN[@]}"} \
            timeout 300 env LD_PRELOAD="$lib" "${env[@]}" mpiexec.mpich -n "$np" \
            "$work/$prog.mpich" "$@" >"$work/$name.log" 2>&1
        rc=$?
    fi
    R[$name.time]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    R[$name.rc]=$rc
    R[$name.verified]=$(grep -c ": OK" "$work/$name.log")
    printf '  %-26s %-8s np=%s  %s s  rc=%s  ranks verified: %s\n' "$name" "$tls" \
        "$np" "${R[$name.time]}" "$rc" "${R[$name.verified]}"
}
have_mpi=1
for flavour in openmpi mpich; do
    for prog in alltoall pingpong onesided; do
        "mpicc.$flavour" -O2 -o "$work/$prog.$flavour" "test/mpi/$prog.c" ||
            have_mpi=0
    done
done
if [ $have_mpi -eq 1 ]; then
    mpirun_job ompi-alltoall-udsr openmpi ud_sr 4 alltoall -m 1m -i 2
    mpirun_job ompi-alltoall-tcp  openmpi tcp   4 alltoall -m 1m -i 2
    mpirun_job mpich-alltoall-udsr mpich  ud_sr 4 alltoall -m 1m -i 2
    mpirun_job ompi-pingpong-udsr openmpi ud_sr 2 pingpong
    mpirun_job ompi-alltoall-rcsr openmpi rc_sr 4 alltoall -m 1m -i 2
    mpirun_job mpich-alltoall-rcsr mpich  rc_sr 4 alltoall -m 1m -i 2
    mpirun_job ompi-pingpong-rcsr openmpi rc_sr 2 pingpong
    mpirun_job ompi-onesided-rcsr openmpi rc_sr 2 onesided -m 1m -q
    mpirun_job mpich-onesided-rcsr mpich  rc_sr 2 onesided -m 1m -q
    echo
    echo "  Open MPI ping-pong over ud_sr (rank 0):"
    grep -E '^ *[0-9]+ ' "$work/ompi-pingpong-udsr.log" | head -n 12 | sed 's/^/   /'
    echo "  Open MPI ping-pong over rc_sr (rank 0):"
    grep -E '^ *[0-9]+ ' "$work/ompi-pingpong-rcsr.log" | head -n 12 | sed 's/^/   /'
else
    echo "  MPI compilers missing: skipped"
fi

step "5. Statistics of the MPI jobs (UCX_APTUS_STATS; one line per process and interface)"
stat_sum() { # dir key
    cat "$1"/* 2>/dev/null | grep -o " $2=[0-9]*" | awk -F= '{ s += $2 } END { print s + 0 }'
}
stat_max() {
    cat "$1"/* 2>/dev/null | grep -o " $2=[0-9]*" | awk -F= '$2 > m { m = $2 } END { print m + 0 }'
}
printf '  %-22s %6s %10s %12s %10s %8s %8s %8s %6s %10s %8s %12s\n' job ranks msgs bytes datagrams acks retrans probes peers bytes/peer zc_gets zc_bytes
for job in ompi-alltoall-udsr mpich-alltoall-udsr ompi-pingpong-udsr; do
    d=$work/stats-$job
    [ -d "$d" ] || continue
    printf '  %-22s %6s %10s %12s %10s %8s %8s %8s %6s %10s %8s %12s\n' "$job" \
        "$(cat "$d"/* 2>/dev/null | grep -c '^aptus-stats ud_sr')" \
        "$(stat_sum "$d" tx_msgs)" "$(stat_sum "$d" tx_bytes)" \
        "$(stat_sum "$d" tx_dgrams)" "$(stat_sum "$d" tx_acks)" \
        "$(( $(stat_sum "$d" retransmits) + $(stat_sum "$d" fast_retransmits) ))" \
        "$(stat_sum "$d" probes)" "$(stat_max "$d" peers)" "$(stat_max "$d" peer_bytes)" \
        "$(stat_sum "$d" zc_gets)" "$(stat_sum "$d" zc_bytes)"
    R[$job.bytes]=$(stat_sum "$d" tx_bytes)
done

echo
printf '  %-22s %6s %10s %12s %8s %12s %8s %8s %7s %11s %11s\n' job ranks msgs bytes gets get_bytes puts credits conns state/conn bufs/conn
for job in ompi-alltoall-rcsr mpich-alltoall-rcsr ompi-pingpong-rcsr ompi-onesided-rcsr mpich-onesided-rcsr; do
    d=$work/stats-$job
    [ -d "$d" ] || continue
    printf '  %-22s %6s %10s %12s %8s %12s %8s %8s %7s %11s %11s\n' "$job" \
        "$(cat "$d"/* 2>/dev/null | grep -c '^aptus-stats rc_sr')" \
        "$(stat_sum "$d" tx_msgs)" "$(stat_sum "$d" tx_bytes)" \
        "$(stat_sum "$d" gets)" "$(stat_sum "$d" get_bytes)" \
        "$(stat_sum "$d" puts)" "$(stat_sum "$d" tx_credit_msgs)" \
        "$(stat_sum "$d" connects)" "$(stat_max "$d" conn_state_bytes)" \
        "$(stat_max "$d" conn_descriptor_bytes)"
done
echo "  (state/conn: bytes of user-space state per connection while idle; bufs/conn: receive"
echo "   buffers a connection may occupy at the peer, credits x buffer -- the pool is shared)"

step "6. Summary"
ok() { [ "${R[$1.rc]:-1}" = 0 ] && echo yes || echo NO; }
line() { printf '+----------------------------------+--------------+--------------+--------------+\n'; }
r4() { printf '| %-32s | %12s | %12s | %12s |\n' "$@"; }
line
r4 "" "ud_sr" "rc_sr" "tcp (UCX)"
line
r4 "latency 8 B, UCT (us)" "${R[uct8.ud_sr.lat]}" "${R[uct8.rc_sr.lat]}" "${R[uct8.tcp.lat]}"
r4 "latency 8 B, UCP tag (us)" "${R[tag8.ud_sr.lat]}" "${R[tag8.rc_sr.lat]}" "${R[tag8.tcp.lat]}"
r4 "bandwidth 1 MB, UCP tag (MB/s)" "${R[bw1m.ud_sr.bw]}" "${R[bw1m.rc_sr.bw]}" "${R[bw1m.tcp.bw]}"
r4 "  cma (+tcp) 1 MB (MB/s)" "-" "-" "${R[bw1m.cma.bw]}"
r4 "  ud_sr UD-ZCopy off (UD-copy)" "${R[bw1mcopy.ud_sr.bw]}" "-" "-"
r4 "message rate 8 B (msg/s)" "${R[rate8.ud_sr.mr]}" "${R[rate8.rc_sr.mr]}" "${R[rate8.tcp.mr]}"
if [ $have_mpi -eq 1 ]; then
r4 "Open MPI alltoall 4 ranks (s)" "${R[ompi-alltoall-udsr.time]}" "${R[ompi-alltoall-rcsr.time]}" "${R[ompi-alltoall-tcp.time]}"
r4 "  data verified" "$(ok ompi-alltoall-udsr)" "$(ok ompi-alltoall-rcsr)" "$(ok ompi-alltoall-tcp)"
r4 "MPICH alltoall 4 ranks (s)" "${R[mpich-alltoall-udsr.time]}" "${R[mpich-alltoall-rcsr.time]}" "-"
r4 "  data verified" "$(ok mpich-alltoall-udsr)" "$(ok mpich-alltoall-rcsr)" "-"
r4 "one-sided MPI, Open MPI / MPICH" "-" "$(ok ompi-onesided-rcsr) / $(ok mpich-onesided-rcsr)" "-"
r4 "bytes per peer / connection" "$(stat_max "$work/stats-ompi-alltoall-udsr" peer_bytes)" "$(stat_max "$work/stats-ompi-alltoall-rcsr" conn_state_bytes)" "-"
fi
line
echo "(rc=0 and every rank's data check passed = 'yes'; latency is the median; figures from one run on this machine)"
