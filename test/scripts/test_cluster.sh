#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: the cross-host suite, on a cluster in a box (contrib/cluster.sh):
# hosts are network namespaces with their own PID, UTS and mount namespaces
# on a bridge, so every byte between ranks of different hosts crosses a
# real (virtual) network device, eth0, with its own MTU, loss and black
# holes.
#
#   - isolation: each host sees only its own processes and has its name;
#     `ucx_info -d` inside a host lists tcp and our transports on eth0;
#   - the data-verifying all-to-all (test/mpi/alltoall.c -m 1m -i 2) under
#     Open MPI and MPICH over tcp, ud_sr, rc_sr, rc_fp and aptus
#     (UCX_TLS=<tl>,self, UCX_NET_DEVICES=eth0) in the host settings
#       mtu1500    every host 1500
#       mtu9000    every host 9000
#       mixed      9000,1500,9000,... (h2 has 1500)
#       blackhole  every host 9000; the switch drops UDP datagrams over
#                  1500 bytes between h1 and h2
#       loss1      every host drops 1% of the UDP datagrams it receives
#     A cell passes when the job ends in time with every rank OK, and, for
#     our transports, every rank's statistics show the transport on eth0.
#     Each cell has a time limit (a hang is a failed cell) and its wall
#     time is recorded; a job whose ranks all printed OK but which hangs in
#     MPI_Finalize is stopped 15 s after its verdict ("fin-hang"). tcp is
#     the baseline: its failures are printed as SKIP (MPICH 4.0.2 over UCX
#     1.13 tcp hangs in MPI_Finalize at 3 ranks and more, namespaces or
#     not);
#   - UCT-level ucx_perftest between h1 (server) and h2 (client) for each of
#     our transports: am_lat, am_bw, put_bw and get where the transport
#     offers put/get (from ucx_info -d in the host).
# It ends on a table (transport x setting, pass/FAIL with the time beside
# tcp's) and "N passed, M failed, K skipped".
#
# Usage: test/scripts/test_cluster.sh [--full] [OPTIONS] [WORKDIR]
#   (default)          the short form for CI: 3 hosts x 1 rank, every
#                      transport and every setting at least once, both MPIs,
#                      tcp in the same settings for comparison; ucx_perftest
#                      in mtu1500. About 1.5 minutes on 2 cores when
#                      nothing hangs (a hung cell adds its limit, 60 s).
#   --full             the whole matrix: 4 hosts x 2 ranks, every transport
#                      x setting x MPI (50 cells), ucx_perftest in every
#                      setting; 5 to 15 minutes
#   --hosts H --ranks R   hosts and ranks per host
#   --settings LIST --tls LIST --mpis LIST   restrict the full matrix
#                      (comma-separated; implies the full matrix's cells)
#   --timeout S        time limit of an MPI job (short 60, full 120; tcp's
#                      60 at most)
#   --no-perftest      MPI cells only
#   --write-doc FILE   put the tables into FILE under "## Cross-host matrix"
#   WORKDIR (or APTUS_TEST_DIR): binaries, logs, statistics; kept.
#   APTUS_LIB: the library (default: the newest build*/.libs one).
# Needs root, iproute2, nftables, util-linux; SKIP without them.
set -u

APTUS_SCRIPT=test_cluster
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$TOP/contrib/cluster.sh

ARGS_GIVEN=
full=0
hosts=
ranks=
settings=
tls=
mpis=
cell_timeout=
write_doc=
no_perf=0
while [ $# -gt 0 ]; do
    case $1 in
    --full | --no-perftest) ARGS_GIVEN+=" $1" ;;
    --write-doc) ;;
    -*) ARGS_GIVEN+=" $1 ${2:-}" ;;
    esac
    case $1 in
    --full) full=1; shift ;;
    --hosts) hosts=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --settings) settings=${2//,/ }; full=1; shift 2 ;;
    --tls) tls=${2//,/ }; full=1; shift 2 ;;
    --mpis) mpis=${2//,/ }; full=1; shift 2 ;;
    --timeout) cell_timeout=$2; shift 2 ;;
    --write-doc) write_doc=$2; shift 2 ;;
    --no-perftest) no_perf=1; shift ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;/^set -u/d'; exit 0 ;;
    -*) echo "test_cluster: unknown option $1" >&2; exit 2 ;;
    *) APTUS_TEST_DIR=$1; shift ;;
    esac
done
if [ -n "$write_doc" ]; then
    write_doc=$(cd "$(dirname "$write_doc")" && pwd)/$(basename "$write_doc")
fi

ALL_SETTINGS="mtu1500 mtu9000 mixed blackhole loss1"
ALL_TLS="tcp ud_sr rc_sr rc_fp aptus"
ALL_MPIS="openmpi mpich"
A2A_ARGS=(-m 1m -i 2)
PERF_TLS="ud_sr rc_sr rc_fp aptus"
FIN_GRACE=15

if [ $full = 1 ]; then
    hosts=${hosts:-4}
    ranks=${ranks:-2}
    cell_timeout=${cell_timeout:-120}
    settings=${settings:-$ALL_SETTINGS}
    tls=${tls:-$ALL_TLS}
    mpis=${mpis:-$ALL_MPIS}
    perf_settings=$settings
    # every cell
    CELLS=()
    for s in $settings; do
        for t in $tls; do
            for m in $mpis; do
                CELLS+=("$s $t $m")
            done
        done
    done
else
    hosts=${hosts:-3}
    ranks=${ranks:-1}
    cell_timeout=${cell_timeout:-60}
    settings=$ALL_SETTINGS
    tls=$ALL_TLS
    mpis=$ALL_MPIS
    perf_settings=mtu1500
    # every transport and every setting at least once, both MPIs; tcp
    # beside each, in the same setting under the same MPI
    CELLS=("mtu1500 tcp mpich"      "mtu1500 rc_fp mpich"
           "mtu9000 tcp openmpi"    "mtu9000 rc_sr openmpi"
           "mixed tcp openmpi"      "mixed aptus openmpi"
           "blackhole tcp mpich"    "blackhole ud_sr mpich"
           "loss1 tcp openmpi"      "loss1 ud_sr openmpi"
           "loss1 tcp mpich"        "loss1 aptus mpich")
fi
[ $no_perf = 1 ] && perf_settings=
np=$((hosts * ranks))
if [ "$hosts" -lt 2 ]; then
    echo "test_cluster: --hosts must be at least 2 (mixed MTU and black hole need two)" >&2
    exit 2
fi
APTUS_MPI_TIMEOUT=$cell_timeout
if [ -z "${APTUS_LIB:-}" ]; then
    # shellcheck disable=SC2012  # the newest build; names are ours
    APTUS_LIB=$(ls -t "$TOP"/build*/.libs/libuct_aptus.so 2>/dev/null | head -n1)
fi
# shellcheck source=test/scripts/lib.sh
. "$TOP/test/scripts/lib.sh"
# shellcheck source=test/scripts/mpi_common.sh
. "$TOP/test/scripts/mpi_common.sh"
aptus_setup
LIB=$APTUS_LIB
# what was measured: the commit and the library, taken at the start
commit=$(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=
if [ -n "$(git -C "$TOP" status --porcelain -- src 2>/dev/null)" ]; then
    dirty=" (with uncommitted changes under src/)"
fi
lib_built=$(date -u -r "$LIB" '+%Y-%m-%d %H:%M UTC' 2>/dev/null)

echo "# $hosts hosts x $ranks ranks, ${#CELLS[@]} MPI cells, job limit ${cell_timeout}s," \
     "ucx_perftest in: $perf_settings"

# ---- the cluster ----------------------------------------------------------

CL_NAME=t$$
CL_UP=0
cl() { "$CLUSTER" --name "$CL_NAME" "$@"; }

cluster_down() {
    [ "$CL_UP" = 1 ] || return 0
    cl down >/dev/null 2>&1
    CL_UP=0
}
APTUS_CLEANUP_HOOKS+=(cluster_down)

# clusters of earlier runs of this script that were killed before their
# cleanup ran (named t<pid of a process that is gone)
cluster_down_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        if [[ $ns =~ ^aptus-t([0-9]+)-(sw|head|h[0-9]+)$ ]]; then
            pid=${BASH_REMATCH[1]}
            if [ "$pid" != $$ ] && ! kill -0 "$pid" 2>/dev/null; then
                "$CLUSTER" --name "t$pid" down >/dev/null 2>&1 &&
                    note "removed the stale cluster t$pid"
            fi
        fi
    done
}

why_no_cluster=
if [ "$(id -u)" -ne 0 ]; then
    why_no_cluster="needs root"
else
    for tool in ip nft nsenter unshare; do
        command -v $tool >/dev/null || why_no_cluster="$tool not installed"
    done
fi
if [ -n "$why_no_cluster" ]; then
    skip "cluster in a box" "$why_no_cluster"
    aptus_summary
    exit $?
fi

# setting_opts SETTING: the options of cluster.sh set for it.
setting_opts() {
    case $1 in
    mtu1500) echo "--mtu 1500 --loss 0 --tcp-loss 0 --blackhole none" ;;
    mtu9000) echo "--mtu 9000 --loss 0 --tcp-loss 0 --blackhole none" ;;
    mixed) echo "--mtu 9000,1500,9000 --loss 0 --tcp-loss 0 --blackhole none" ;;
    blackhole) echo "--mtu 9000 --loss 0 --tcp-loss 0 --blackhole h1,h2" ;;
    loss1) echo "--mtu 1500 --loss 1 --tcp-loss 0 --blackhole none" ;;
    *) return 1 ;;
    esac
}
for s in $settings; do
    setting_opts "$s" >/dev/null || { echo "test_cluster: unknown setting $s" >&2; exit 2; }
done

cluster_down_stale
if out=$(cl up "$hosts" --slots "$ranks" 2>&1); then
    CL_UP=1
    pass "cluster up: $hosts hosts ($(echo "$out" | head -n1))"
else
    fail "cluster up" "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
    aptus_summary
    exit $?
fi

# ---- isolation and ucx_info -------------------------------------------------

check_isolation() {
    local marker="sleep 29.$$" h1ps h2ps name
    # a process in h2 that h1 must not see
    cl exec h2 sleep "29.$$" >/dev/null 2>&1 &
    local bg=$!
    sleep 0.5
    h1ps=$(cl exec h1 ps ax 2>&1)
    h2ps=$(cl exec h2 ps ax 2>&1)
    cl clean >/dev/null 2>&1
    wait "$bg" 2>/dev/null
    if [[ $h2ps == *"$marker"* ]] && [[ $h1ps != *"$marker"* ]] &&
       [ "$(echo "$h1ps" | wc -l)" -le 6 ]; then
        pass "isolation: h1 sees $(($(echo "$h1ps" | wc -l) - 1)) processes (its own), not h2's"
    else
        fail "isolation: h1 must not see h2's processes" \
             "h1: $(echo "$h1ps" | tr '\n' ';') h2: $(echo "$h2ps" | tr '\n' ';')"
    fi
    name=$(cl exec h2 hostname 2>&1)
    if [ "$name" = h2 ] && [ "$(cl exec h1 getent hosts h2 2>&1 | awk '{print $1}')" = 10.213.0.2 ]; then
        pass "names: h2 is called h2, h1 resolves h2 to 10.213.0.2"
    else
        fail "names" "hostname in h2: '$name'"
    fi
}

# TL_OPS[tl]: the one-sided operations the transport offers on eth0
declare -A TL_OPS=()
check_ucx_info() {
    local log=$APTUS_WORK/ucx_info-h1.log tl pairs why=
    if ! cl exec h1 env LD_PRELOAD="$LIB" timeout 60 ucx_info -d >"$log" 2>&1; then
        fail "ucx_info -d in h1" "exit status $?; log $log"
        return
    fi
    pairs=$(awk '/# *Transport:/ { tl = $3 } /# *Device:/ { print tl "/" $3 }' "$log" |
            tr '\n' ' ')
    for tl in tcp $PERF_TLS; do
        [[ " $pairs " == *" $tl/eth0 "* ]] || why="${why:+$why, }no $tl on eth0"
        TL_OPS[$tl]=$(awk -v want="$tl" '
            /# *Transport:/ { tl = $3 } /# *Device:/ { dev = $3 }
            tl == want && dev == "eth0" && /put_zcopy:/ { put = 1 }
            tl == want && dev == "eth0" && /get_zcopy:/ { get = 1 }
            END { if (put) printf "put "; if (get) printf "get" }' "$log")
    done
    if [ -z "$why" ]; then
        pass "ucx_info -d in h1: tcp ud_sr rc_sr rc_fp aptus on eth0 ($pairs)"
    else
        fail "ucx_info -d in h1" "$why; devices: $pairs"
    fi
    # UCP picks lanes by these figures: rc_fp's fast path reaches only
    # processes of its own host, so on eth0 it must promise what its RC-SR
    # carrier gives, and its sub-microsecond figure only on lo
    local fp_eth sr_eth fp_lo
    fp_eth=$(ucx_info_latency "$log" rc_fp eth0)
    sr_eth=$(ucx_info_latency "$log" rc_sr eth0)
    fp_lo=$(ucx_info_latency "$log" rc_fp lo)
    if [ -n "$fp_eth" ] && [ "$fp_eth" = "$sr_eth" ] &&
       awk -v a="$fp_lo" -v b="$fp_eth" 'BEGIN { exit !(a != "" && a + 0 < b + 0) }'; then
        pass "ucx_info -d in h1: rc_fp's latency is its carrier's on eth0 ($fp_eth ns), the fast path's on lo only ($fp_lo ns)"
    else
        fail "ucx_info -d in h1: rc_fp's latency" \
            "rc_fp/eth0 ${fp_eth:-?} ns, rc_sr/eth0 ${sr_eth:-?} ns, rc_fp/lo ${fp_lo:-?} ns; log $log"
    fi
}

# ucx_info_latency LOG TL DEV: the latency ucx_info -d gives TL on DEV (ns).
ucx_info_latency() {
    awk -v want="$2" -v wdev="$3" '
        /# *Transport:/ { tl = $3 } /# *Device:/ { dev = $3 }
        tl == want && dev == wdev && /# *latency:/ { print $3; exit }' "$1"
}

check_isolation
check_ucx_info

# ---- MPI cells ------------------------------------------------------------

declare -A RES=()     # "setting tl mpi" -> "pass 3.1" or "FAIL 60.0"
declare -A WHY=()
flavours=
for m in $mpis; do
    if aptus_build "$m" alltoall; then
        flavours="$flavours $m"
    fi
done
# MPICH makes every rank a session of its own: its jobs run in a CPU cgroup
# (contrib/sched-group.sh), made once here; cluster.sh sees it and makes none
aptus_mpich_group

# run_cell SETTING TL MPI
run_cell() {
    local setting=$1 tl=$2 mpi=$3 tag log stats bin t0 rc secs why=
    local -a job env=()
    tag=$setting-$tl-$mpi
    log=$APTUS_WORK/$tag.log
    stats=$APTUS_WORK/$tag.stats
    bin=$APTUS_WORK/alltoall_$mpi
    rm -rf "$stats" && mkdir -p "$stats"
    # shellcheck disable=SC2054  # the commas are meant
    env=(LD_PRELOAD="$LIB" UCX_TLS="$tl,self" UCX_NET_DEVICES=eth0
         UCX_WARN_UNUSED_ENV_VARS=n
         UCX_APTUS_STATS="$stats/stats.%h.%p")
    case $mpi in
    openmpi)
        job=(ompi -np "$np")
        for kv in "${env[@]}"; do job+=(-x "$kv"); done
        ;;
    mpich)
        job=(mpich -n "$np")
        for kv in "${env[@]}"; do job+=(-genv "${kv%%=*}" "${kv#*=}"); done
        ;;
    esac
    # a hung baseline (MPICH's finalize over UCX's tcp) costs a minute at most
    local limit=$cell_timeout
    [ "$tl" = tcp ] && [ "$limit" -gt 60 ] && limit=60
    t0=$(date +%s.%N)
    env -u UCX_UD_SR_FAULT_DROP -u UCX_UD_SR_FAULT_DUP -u UCX_UD_SR_FAULT_REORDER \
        -u UCX_UD_SR_FAULT_DELAY -u UCX_APTUS_FAULT_DROP -u UCX_TLS \
        -u UCX_NET_DEVICES -u LD_PRELOAD \
        ${APTUS_SCHED_GROUP_RUN[@]+"${APTUS_SCHED_GROUP_RUN[@]}"} \
        timeout -k 5 "$limit" "$CLUSTER" --name "$CL_NAME" "${job[@]}" \
        "$bin" "${A2A_ARGS[@]}" </dev/null >"$log" 2>&1 &
    APTUS_JOB_PID=$!
    # A job whose ranks all printed OK and rank 0 the verdict, but that
    # does not end within FIN_GRACE seconds, hangs in MPI_Finalize: it is
    # stopped then, and its time is the time to the verdict.
    local verdict_at='' verdict_secs='' finhang=0 tick=0
    while kill -0 "$APTUS_JOB_PID" 2>/dev/null; do
        sleep 0.1
        # the log is looked at every half second
        tick=$(((tick + 1) % 5))
        [ $tick = 0 ] || continue
        if [ -z "$verdict_at" ]; then
            if grep -q "^alltoall: PASS" "$log" &&
               [ "$(grep -c "^alltoall rank [0-9]*/$np pid [0-9]*: OK" "$log")" -eq "$np" ]; then
                verdict_at=$(date +%s.%N)
                verdict_secs=$(aptus_elapsed "$t0")
            fi
        elif [ "$(aptus_elapsed "$verdict_at" | cut -d. -f1)" -ge "$FIN_GRACE" ]; then
            finhang=1
            kill -TERM "$APTUS_JOB_PID" 2>/dev/null
            break
        fi
    done
    wait "$APTUS_JOB_PID"
    rc=$?
    APTUS_JOB_PID=
    secs=$(aptus_elapsed "$t0")
    # what a killed job left in the hosts and the head
    cl clean >/dev/null 2>&1

    if [ $finhang = 1 ]; then
        why="all ranks OK at ${verdict_secs}s, then hung in MPI_Finalize (stopped ${FIN_GRACE}s later)"
        secs=$verdict_secs
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        why="timed out after ${limit}s"
    elif [ $rc -ne 0 ]; then
        why="exit status $rc"
    fi
    if grep -q "^alltoall: FAIL" "$log"; then
        why="${why:+$why, }data mismatch: $(grep -m1 "^alltoall: FAIL" "$log")"
    elif ! grep -q "^alltoall: PASS" "$log"; then
        why="${why:+$why, }no verdict line"
    fi
    local ok
    ok=$(grep -c "^alltoall rank [0-9]*/$np pid [0-9]*: OK" "$log")
    [ "$ok" -eq "$np" ] || why="${why:+$why, }$ok of $np ranks OK"
    if [ "$tl" != tcp ] && { [ -z "$why" ] || [ $finhang = 1 ]; }; then
        # every rank opened the transport on eth0 (not lo)
        local files lines
        files=$(find "$stats" -name 'stats.*' | wc -l)
        lines=$(cat "$stats"/stats.* 2>/dev/null | grep -c "^aptus-stats $tl/eth0 ")
        if [ "$files" -ne "$np" ] || [ "$lines" -lt "$np" ]; then
            why="${why:+$why, }statistics: $files files of $np ranks, $lines $tl/eth0 lines"
        fi
        if [ "$tl" = aptus ] && [ "$hosts" -gt 1 ]; then
            # peers on the other hosts are known remote, and none of them
            # was sent to over a fast path (it cannot reach their memory)
            local remote fp_remote
            remote=$(cat "$stats"/stats.* | grep '^aptus-stats aptus-peer/' |
                     grep -c ' remote=1')
            fp_remote=$(cat "$stats"/stats.* | grep '^aptus-stats aptus-peer/' |
                        grep ' remote=1' | grep -vc ' rc_fp_msgs=0 ')
            if [ "$remote" -eq 0 ] || [ "$fp_remote" -ne 0 ]; then
                why="${why:+$why, }statistics: $remote peer lines say remote, $fp_remote of them used a fast path"
            fi
        fi
    fi
    local key="$setting $tl $mpi"
    if [ -z "$why" ]; then
        RES[$key]="pass $secs"
        pass "$setting/$tl/$mpi: alltoall ${hosts}x$ranks (${secs}s)"
    elif [ "$tl" = tcp ]; then
        # the baseline is UCX's, not ours: reported, not counted (MPICH
        # 4.0.2 over UCX 1.13 tcp hangs in MPI_Finalize at 3 ranks and
        # more, here and on lo outside any namespace)
        RES[$key]="FAIL $secs"
        [ $finhang = 1 ] && RES[$key]="fin-hang $secs"
        WHY[$key]="$why (baseline, not counted)"
        skip "$setting/$tl/$mpi: alltoall ${hosts}x$ranks" \
             "baseline failed: $why; not ours; log $log"
    else
        RES[$key]="FAIL $secs"
        [ $finhang = 1 ] && RES[$key]="FAIL(fin-hang) $secs"
        WHY[$key]=$why
        fail "$setting/$tl/$mpi: alltoall ${hosts}x$ranks" "$why; log $log"
        grep -E 'FAIL|rror|Abort|abort|signal|timeout|timed out|unreachable' "$log" |
            head -n 6 | sed 's/^/    | /'
    fi
}

# ---- ucx_perftest ------------------------------------------------------------

declare -A PERF=()    # "setting tl test" -> "pass FIGURE" / "FAIL" / "skip"
declare -A PWHY=()
PERF_TIMEOUT=30
port=$((21000 + $$ % 4000))

# perf_pair NAME ARGS...: server in h1, client in h2 with h1's address.
perf_pair() {
    local name=$1
    shift
    local slog=$APTUS_WORK/perf-$name.server.log clog=$APTUS_WORK/perf-$name.client.log
    local srv ok=1 _ crc=0
    port=$((port + 1))
    cl exec h1 env LD_PRELOAD="$LIB" UCX_APTUS_STATS=stdout \
        timeout -k 2 "$PERF_TIMEOUT" ucx_perftest -p "$port" "$@" >"$slog" 2>&1 &
    srv=$!
    APTUS_JOB_PID=$srv
    for _ in $(seq 1 50); do
        sleep 0.1
        if cl exec h2 env LD_PRELOAD="$LIB" timeout -k 2 "$PERF_TIMEOUT" \
               ucx_perftest 10.213.0.1 -p "$port" "$@" >"$clog" 2>&1; then
            ok=0
            break
        else
            crc=$?
        fi
        # retry only while the server is not listening yet
        grep -qi "refused\|failed to connect" "$clog" || break
    done
    wait "$srv" || ok=1
    APTUS_JOB_PID=
    grep -q "^Final:" "$clog" || ok=1
    PERF_CLOG=$clog
    PERF_SLOG=$slog
    PERF_CRC=$crc
    return $ok
}

run_perf() {
    local setting=$1 tl=$2 test=$3 name figure
    local -a args
    case $test in
    am_lat) args=(-t am_lat -D short -s 8 -n 2000) ;;
    am_bw) args=(-t am_bw -D bcopy -s 8000 -n 2000) ;;
    put_bw) args=(-t put_bw -D zcopy -s 65536 -n 200) ;;
    get) args=(-t get -D zcopy -s 65536 -n 200) ;;
    esac
    name=$setting-$tl-$test
    if perf_pair "$name" -x "$tl" -d eth0 "${args[@]}" -w 10; then
        case $test in
        am_lat) figure="$(perftest_final "$PERF_CLOG" 3)us" ;;
        *) figure="$(perftest_final "$PERF_CLOG" 6)MB/s" ;;
        esac
        PERF["$setting $tl $test"]="pass $figure"
        pass "$setting/ucx_perftest -x $tl -d eth0 -t ${args[1]} ${args[*]:2} (h2 -> h1): $figure"
        if [ "$tl" = ud_sr ] && [ "$test" = am_bw ] && [ "$setting" = mtu1500 ]; then
            # 8000-byte messages are trains of 6 datagrams: h2 sends each
            # in one call, h1's driver and socket take it whole (GRO)
            local trains
            trains=$(sed -n 's/^aptus-stats ud_sr\/eth0 .* rx_trains=\([0-9]*\).*/\1/p' \
                     "$PERF_SLOG" | head -n1)
            if [ "${trains:-0}" -gt 0 ]; then
                pass "$setting/ud_sr: h1 took $trains trains of datagrams whole (UDP GRO)"
            else
                fail "$setting/ud_sr: h1 took no train whole (UDP GRO)" \
                     "rx_trains=${trains:-none}; log $PERF_SLOG"
            fi
        fi
    else
        PERF["$setting $tl $test"]=FAIL
        PWHY["$setting $tl $test"]=$(grep -m1 -E 'ERROR|rror' "$PERF_CLOG")
        if [ "$PERF_CRC" = 124 ] || [ "$PERF_CRC" = 137 ]; then
            PERF["$setting $tl $test"]="FAIL(timeout)"
            PWHY["$setting $tl $test"]="timed out after ${PERF_TIMEOUT}s, last: $(
                grep -E '^\[thread|^ *[0-9]' "$PERF_CLOG" | tail -n1 | tr -s ' ')"
        fi
        [ -n "${PWHY["$setting $tl $test"]}" ] ||
            PWHY["$setting $tl $test"]="exit status $PERF_CRC, no Final: line"
        fail "$setting/ucx_perftest -x $tl -d eth0 ${args[*]} (h2 -> h1)" \
             "$(grep -m2 -E 'ERROR|rror|Final' "$PERF_CLOG" | tr '\n' ' ')log $PERF_CLOG"
    fi
    cl clean >/dev/null 2>&1
}

# ---- the run ---------------------------------------------------------------

for s in $settings; do
    ran=0
    # shellcheck disable=SC2046  # the options are words
    if ! out=$(cl set $(setting_opts "$s") 2>&1); then
        fail "$s: cluster set" "$(echo "$out" | tr '\n' ' ')"
        continue
    fi
    echo "# setting $s: $(echo "$out" | tr -s ' \n' ' ')"
    for c in "${CELLS[@]}"; do
        read -r cs ct cm <<<"$c"
        [ "$cs" = "$s" ] || continue
        [[ " $flavours " == *" $cm "* ]] || continue
        run_cell "$cs" "$ct" "$cm"
        ran=1
    done
    if [[ " $perf_settings " == *" $s "* ]]; then
        for t in $PERF_TLS; do
            for test in am_lat am_bw put_bw get; do
                op=${test%_bw}
                if { [ "$op" = put ] || [ "$op" = get ]; } &&
                   [[ " ${TL_OPS[$t]:-} " != *" $op "* ]]; then
                    PERF["$s $t $test"]=skip
                    skip "$s/ucx_perftest -x $t -t $test" "$t offers no ${op}_zcopy on eth0"
                    continue
                fi
                run_perf "$s" "$t" "$test"
                ran=1
            done
        done
    fi
    [ $ran = 1 ] || note "setting $s: nothing to run"
    dropped=$(cl status 2>/dev/null | grep -E 'dropped' | tr -s ' \n' ' ')
    [ -n "$dropped" ] && note "$s: nft drop counters:$dropped"
done

cluster_down
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -c "^aptus-$CL_NAME-")
if [ "$left" -eq 0 ]; then
    pass "cluster down: no namespace left"
else
    fail "cluster down" "$left namespaces left: $(ip netns list | grep "aptus-$CL_NAME-" | tr '\n' ' ')"
fi

# ---- the tables -------------------------------------------------------------

short_mpi() { case $1 in openmpi) echo ompi ;; *) echo "$1" ;; esac; }

# mpi_table: rows transport/MPI, columns the settings; each non-tcp entry
# carries tcp's time in the same setting under the same MPI.
mpi_table() {
    local t m s row e tcp v secs
    row="| transport | MPI |"
    for s in $settings; do row+=" $s |"; done
    echo "$row"
    row="| --- | --- |"
    for s in $settings; do row+=" --- |"; done
    echo "$row"
    for t in $tls; do
        for m in $mpis; do
            row="| $t | $(short_mpi "$m") |"
            local any=0
            for s in $settings; do
                v=${RES["$s $t $m"]:-}
                if [ -z "$v" ]; then
                    row+=" - |"
                    continue
                fi
                any=1
                secs=${v#* }
                e="${v%% *} ${secs}s"
                tcp=${RES["$s tcp $m"]:-}
                if [ "$t" != tcp ] && [ -n "$tcp" ]; then
                    e+=" (tcp ${tcp#* }s)"
                fi
                row+=" $e |"
            done
            [ $any = 1 ] && echo "$row"
        done
    done
}

perf_table() {
    local s t test row
    echo "| setting | transport | am_lat | am_bw 8000 B | put_bw 64 KiB | get 64 KiB |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for s in $perf_settings; do
        for t in $PERF_TLS; do
            row="| $s | $t |"
            for test in am_lat am_bw put_bw get; do
                row+=" ${PERF["$s $t $test"]:--} |"
            done
            echo "$row"
        done
    done
}

{
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on commit $commit$dirty," \
         "library $LIB (built $lib_built), $(nproc) cores; $hosts hosts x $ranks ranks" \
         "($np ranks), alltoall ${A2A_ARGS[*]}, job limit ${cell_timeout}s;" \
         "\`test/scripts/test_cluster.sh$ARGS_GIVEN\`."
    echo
    echo "Times and figures come from $(nproc) cores shared by all ranks" \
         "(and whatever else runs): for pass/FAIL and rough comparison, not" \
         "benchmarks."
    echo
    echo "MPI all-to-all (wall time of the whole job, launch included; in" \
         "brackets tcp's in the same setting under the same MPI):"
    echo
    mpi_table
    echo
    echo "fin-hang: every rank verified its data in the time shown, then the" \
         "job hung in MPI_Finalize and was stopped ${FIN_GRACE}s later. For" \
         "tcp under MPICH that is MPICH 4.0.2 over UCX 1.13 tcp's own hang" \
         "(at 3 ranks and more, also on lo outside any namespace): reported," \
         "not counted."
    if [ -n "$perf_settings" ]; then
        echo
        echo "UCT ucx_perftest, server in h1, client in h2 (am_lat: median" \
             "latency; the others: bandwidth):"
        echo
        perf_table
    fi
    if [ ${#WHY[@]} -gt 0 ] || [ ${#PWHY[@]} -gt 0 ]; then
        echo
        echo "Failed cells:"
        echo
        for k in "${!WHY[@]}"; do
            echo "- ${k// //}: ${WHY[$k]}"
        done | sort
        # ucx_perftest: one line per transport and reason, with the tests
        # and settings it hit
        for k in "${!PWHY[@]}"; do
            read -r ks kt kx <<<"$k"
            # the UCX log line without its time stamp and pid
            printf '%s\t%s\t%s\t%s\n' "$kt" "$ks" "$kx" "$(echo "${PWHY[$k]}" |
                sed 's/^\[[0-9.]*\] *\[\([a-z0-9]*\):[0-9 ]*:[0-9]*\] */\1: /;s/  */ /g')"
        done | awk -F'\t' -v order="$perf_settings" '
            BEGIN { n = split(order, o, " ")
                    split("am_lat am_bw put_bw get", t, " ") }
            {   g = $1 "\t" $4
                if (!(g in seen)) { seen[g] = 1; groups[++ng] = g }
                T[g, $2, $3] = 1 }
            END {
                # per transport and reason: the settings with the same tests
                for (j = 1; j <= ng; j++) {
                    g = groups[j]; split(g, f, "\t"); nl = 0
                    delete where
                    for (i = 1; i <= n; i++) {
                        ts = ""
                        for (k = 1; k <= 4; k++)
                            if ((g, o[i], t[k]) in T) ts = ts (ts ? ", " : "") t[k]
                        if (ts == "") continue
                        if (!(ts in where)) { lists[++nl] = ts; where[ts] = o[i] }
                        else where[ts] = where[ts] ", " o[i]
                    }
                    for (k = 1; k <= nl; k++)
                        printf "- ucx_perftest -x %s (%s) in %s: %s\n", f[1], lists[k],
                               where[lists[k]], f[2]
                } }' | sort
    fi
} >"$APTUS_WORK/table.md"
echo
echo "# Cross-host matrix"
sed 's/^/  /' "$APTUS_WORK/table.md"
echo

if [ -n "$write_doc" ]; then
    if [ -f "$write_doc" ] && grep -q "^## Cross-host matrix" "$write_doc"; then
        # replace the section (up to the next "## " heading)
        awk -v table="$APTUS_WORK/table.md" '
            /^## Cross-host matrix/ {
                print; print ""
                while ((getline line < table) > 0) print line
                print ""; skip = 1; next
            }
            skip && /^## / { skip = 0 }
            !skip { print }' "$write_doc" >"$write_doc.new" &&
            mv "$write_doc.new" "$write_doc"
    else
        { echo; echo "## Cross-host matrix"; echo; cat "$APTUS_WORK/table.md"; } >>"$write_doc"
    fi
    note "tables written into $write_doc"
fi

aptus_summary
