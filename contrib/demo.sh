#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus main job: set up, build and install the module, then show the
# transports at work: what UCX sees; ucx_perftest of ud_sr, rc_sr, rc_fp
# and aptus beside UCX's own tcp and cma; MPI jobs (Open MPI and MPICH)
# over each; the hybrid with heavy and light peers (who earned RC and the
# fast path, channel use by size, memory per process, pictures); the same
# all-to-all and the multicast MPI_Bcast between hosts of a cluster in a
# box, with loss; and a closing table. About 3 minutes on 2 cores once
# built. The pictures and logs stay in build/demo/.
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
DEMO_OUT=$top/build/demo
py=/usr/bin/python3 # Debian's, with python3-matplotlib
[ -x "$py" ] || py=python3
declare -A R
. contrib/demo/perftest.sh
. contrib/demo/mpi.sh
. contrib/demo/hosts.sh
# MPICH's ranks in one CPU cgroup (contrib/sched-group.sh)
. contrib/sched-group.sh
aptus_sched_group_open || true
trap 'demo_hosts_down; rm -rf "$work"; aptus_sched_group_close' EXIT

step "2. The transports UCX now has ($envcmd ucx_info -d)"
"$envcmd" ucx_info -d 2>/dev/null | awk '
    /Memory domain:/     { md = $4 }
    /Transport:/         { tl = $3 }
    /Device:/            { dev = $3 }
    /bandwidth:/         { bw = $3 " MB/s" }
    /latency:/           { lat = $3 " ns" }
    /am_bcopy:/          { am = $3 " " $4 }
    /error handling:/    { if (md ~ /^aptus/) printf "  %-6s on %-6s latency %-9s bandwidth %-14s am_bcopy %s\n", tl, dev, lat, bw, am }'
echo "  (rc_fp's fast path reaches only processes of this host: on other devices"
echo "   it says the latency of its RC-SR carrier)"
echo "  configuration: $("$envcmd" ucx_info -c 2>/dev/null | grep -c '^UCX_\(UD_SR\|RC_SR\|RC_FP\|APTUS\)_') variables (ucx_info -c | grep -E 'UD_SR|RC_SR|RC_FP|APTUS')"


step "3. ucx_perftest between two processes on lo: each transport beside UCX's tcp and cma"
demo_perftest

have_mpi=1
for flavour in openmpi mpich; do
    for prog in alltoall heavy_light bcast_check; do
        "mpicc.$flavour" -O2 -o "$work/$prog.$flavour" "test/mpi/$prog.c" \
            2>>"$work/cc.log" || have_mpi=0
    done
    "mpicc.$flavour" -O2 -o "$work/bcast_bench.$flavour" contrib/bench/bcast_bench.c \
        2>>"$work/cc.log" || have_mpi=0
done
if [ $have_mpi -eq 0 ]; then
    step "4-6. MPI: the test programs did not build, skipped"
    sed 's/^/  /' "$work/cc.log" | grep -i error | head -n 5
else
    step "4. MPI all-to-all inside this host, 4 ranks, 1 MB (UCX_TLS=<tl>,self: no shared memory)"
    demo_mpi_alltoall

    step "5. The hybrid at work: a few heavy peers, many light ones (UCX_TLS=aptus,self)"
    demo_mpi_aptus

    step "6. Between hosts: a cluster in a box ($DEMO_HOSTS network namespaces with their own PID namespaces, a bridge)"
    demo_hosts
fi

step "7. Summary"
demo_line() { printf '+%s+\n' "------------------------------------+------------+------------+------------+------------+------------"; }
demo_r() { printf '| %-34s | %10s | %10s | %10s | %10s | %10s |\n' "$@"; }
demo_ok_np() { # name np
    [ -n "${R[$1.rc]:-}" ] && demo_ok "$1" "$2" || echo -
}
demo_line
demo_r "" ud_sr rc_sr rc_fp aptus "tcp (UCX)"
demo_line
demo_r "latency 8 B, UCT (us)" "${R[uct8.ud_sr.lat]}" "${R[uct8.rc_sr.lat]}" "${R[uct8.rc_fp.lat]}" "${R[uct8.aptus.lat]}" "${R[uct8.tcp.lat]}"
demo_r "latency 8 B, UCP tag (us)" "${R[tag8.ud_sr.lat]}" "${R[tag8.rc_sr.lat]}" "${R[tag8.rc_fp.lat]}" "${R[tag8.aptus.lat]}" "${R[tag8.tcp.lat]}"
demo_r "bandwidth 1 MB, UCP tag (MB/s)" "${R[bw1m.ud_sr.bw]}" "${R[bw1m.rc_sr.bw]}" "${R[bw1m.rc_fp.bw]}" "${R[bw1m.aptus.bw]}" "${R[bw1m.tcp.bw]}"
demo_r "message rate 8 B (msg/s)" "${R[rate8.ud_sr.mr]}" "${R[rate8.rc_sr.mr]}" "${R[rate8.rc_fp.mr]}" "${R[rate8.aptus.mr]}" "${R[rate8.tcp.mr]}"
demo_r "get 1 MB, UCP (MB/s)" "${R[get1m.ud_sr.bw]}" "${R[get1m.rc_sr.bw]}" "${R[get1m.rc_fp.bw]}" "${R[get1m.aptus.bw]}" "${R[get1m.tcp.bw]}"
if [ $have_mpi -eq 1 ]; then
    demo_r "all-to-all, one host, Open MPI (s)" "${R[ompi-a2a-ud_sr.time]}" "${R[ompi-a2a-rc_sr.time]}" "${R[ompi-a2a-rc_fp.time]}" "${R[ompi-a2a-aptus.time]}" "${R[ompi-a2a-tcp.time]}"
    demo_r "  data verified, Open MPI / MPICH" "$(demo_ok_np ompi-a2a-ud_sr 4) / $(demo_ok_np mpich-a2a-ud_sr 4)" "$(demo_ok_np ompi-a2a-rc_sr 4) / $(demo_ok_np mpich-a2a-rc_sr 4)" "$(demo_ok_np ompi-a2a-rc_fp 4)" "$(demo_ok_np ompi-a2a-aptus 4) / $(demo_ok_np mpich-a2a-aptus 4)" "$(demo_ok_np ompi-a2a-tcp 4)"
    demo_r "all-to-all, $DEMO_HOSTS hosts, Open MPI (s)" "${R[hosts-a2a-ud_sr.time]:--}" "${R[hosts-a2a-rc_sr.time]:--}" "${R[hosts-a2a-rc_fp.time]:--}" "${R[hosts-a2a-aptus.time]:--}" "${R[hosts-a2a-tcp.time]:--}"
    demo_r "  data verified" "$(demo_ok_np hosts-a2a-ud_sr $DEMO_HOSTS)" "$(demo_ok_np hosts-a2a-rc_sr $DEMO_HOSTS)" "$(demo_ok_np hosts-a2a-rc_fp $DEMO_HOSTS)" "$(demo_ok_np hosts-a2a-aptus $DEMO_HOSTS)" "$(demo_ok_np hosts-a2a-tcp $DEMO_HOSTS)"
    demo_r "heavy/light 16 ranks, verified" "$(demo_ok_np ompi-hl-ud_sr 16)" "$(demo_ok_np ompi-hl-rc_sr 16)" "-" "$(demo_ok_np ompi-hl-aptus 16)" "-"
    demo_r "  state per peer or connection (B)" "${R[mem.ud_sr]:--}" "${R[mem.rc_sr]:--}" "-" "${R[mem.aptus]:--}" "-"
fi
demo_line
if [ -n "${R[bc.openmpi.own.8]:-}${R[bc.mpich.own.8]:-}" ]; then
    echo "MPI_Bcast of 8 B, a rank per host: multicast ${R[bc.openmpi.aptus.8]:--} us against" \
        "Open MPI's own ${R[bc.openmpi.own.8]:--} us; MPICH ${R[bc.mpich.aptus.8]:--} against ${R[bc.mpich.own.8]:--} us"
fi
echo "(yes = the job ended well and every rank verified its data; figures from one run"
echo " on this machine, medians where the tool gives them; logs and pictures: $DEMO_OUT)"
mkdir -p "$DEMO_OUT"
cp "$work"/*.log "$DEMO_OUT/" 2>/dev/null
