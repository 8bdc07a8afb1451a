#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# UCX-Aptus: benchmark of the ud_sr transport against UCX's own tcp, both on
# the loopback, measured in the same run and interleaved.
#
#   contrib/bench/ud_sr_bench.sh [--quick] [--out DIR] [--reps N]
#
# Measures latency (UCT am_lat, UCP tag_lat), bandwidth (UCP tag_bw, UCT
# am_bw), message rate (UCT am_bw short 8 B, UCP tag_bw 8 B) and the memory
# of an idle endpoint (test/perf/ud_sr_ep_memory.c), prints a table against
# the targets, and writes CSV files and PNG plots to the output directory.
# Its UD-ZCopy section compares large-message bandwidth and CPU time per
# transferred megabyte of UD-ZCopy, copy-based ud_sr and tcp, at the
# default datagram size and at the largest the wire allows.
# Its rc section compares the rc_sr transport (RC-SR eager over a TCP
# connection per endpoint, RC-RDMA get/put by process_vm_readv/writev) with
# UCX's tcp and cma, and counts the resources of one connection
# (test/perf/rc_conn_memory.c and rc_sr's own aptus-stats figures).
# Targets are reported, never asserted: the exit status is non-zero only
# when a measurement could not be taken. See contrib/bench/README.md.
#
set -u -o pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)

QUICK=0
REPS=
OUT=
PLOTS=1
INSTALL=1
STAT=best
ONLY=all
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-120}  # seconds per ucx_perftest run

usage() {
    cat <<EOF
usage: $0 [options]
  --quick          short run (one repetition, fewer sizes and iterations;
                   under a minute)
  --out DIR        output directory (default: results/bench-<date> in the
                   source tree)
  --reps N         repetitions of every point (default 3, quick 1)
  --stat best|median
                   how repetitions are combined (default best: lowest
                   latency, highest bandwidth and rate, which is the least
                   disturbed by other load on the machine)
  --only base|zcopy|rc
                   run one section: the ud_sr/tcp comparison and endpoint
                   memory (base), UD-ZCopy bandwidth and CPU (zcopy), or
                   rc_sr against tcp and cma and the resources of a
                   connection (rc); default: all three
  --no-plots       do not draw the PNG plots
  --no-install     do not apt-get install gnuplot when it is missing
  -h, --help       this text
Environment:
  APTUS_LIB        libuct_aptus.so to load (default: the newest
                   build*/.libs/libuct_aptus.so under $ROOT)
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
    --quick)      QUICK=1 ;;
    --out)        OUT=$2; shift ;;
    --out=*)      OUT=${1#--out=} ;;
    --reps)       REPS=$2; shift ;;
    --reps=*)     REPS=${1#--reps=} ;;
    --stat)       STAT=$2; shift ;;
    --stat=*)     STAT=${1#--stat=} ;;
    --only)       ONLY=$2; shift ;;
    --only=*)     ONLY=${1#--only=} ;;
    --no-plots)   PLOTS=0 ;;
    --no-install) INSTALL=0 ;;
    -h|--help)    usage; exit 0 ;;
    *)            echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$REPS" ]; then
    REPS=$([ $QUICK = 1 ] && echo 1 || echo 3)
fi
case "$REPS" in
''|*[!0-9]*|0) echo "--reps: positive integer expected" >&2; exit 2 ;;
esac
case "$STAT" in
best|median) ;;
*) echo "--stat: best or median expected" >&2; exit 2 ;;
esac
case "$ONLY" in
all|base|zcopy|rc) ;;
*) echo "--only: base, zcopy or rc expected" >&2; exit 2 ;;
esac
OUT=${OUT:-$ROOT/results/bench-$(date +%Y%m%d-%H%M%S)}

die() {
    echo "ud_sr_bench: $*" >&2
    exit 1
}

# ---------------------------------------------------------------------------
# Environment

LIB=${APTUS_LIB:-}
if [ -z "$LIB" ]; then
    LIB=$(ls -t "$ROOT"/build*/.libs/libuct_aptus.so 2>/dev/null | head -1)
fi
[ -n "$LIB" ] && [ -f "$LIB" ] ||
    die "libuct_aptus.so not found: build it or set APTUS_LIB"
LIB=$(readlink -f "$LIB")
command -v ucx_perftest >/dev/null || die "ucx_perftest not found (ucx-utils)"
command -v ucx_info >/dev/null || die "ucx_info not found (ucx-utils)"
LD_PRELOAD="$LIB" ucx_info -d 2>/dev/null | grep 'Transport: ud_sr' >/dev/null ||
    die "ud_sr not listed by 'LD_PRELOAD=$LIB ucx_info -d'"
# the rc section needs rc_sr (an older library lacks it) and UCX's cma
RC_SKIP=
if [ "$ONLY" = all ] || [ "$ONLY" = rc ]; then
    if ! LD_PRELOAD="$LIB" ucx_info -d 2>/dev/null | grep 'Transport: rc_sr' >/dev/null; then
        RC_SKIP="rc_sr not listed by 'LD_PRELOAD=$LIB ucx_info -d' (an older library? set APTUS_LIB)"
    elif ! ucx_info -d 2>/dev/null | grep 'Transport: cma' >/dev/null; then
        RC_SKIP="UCX's cma transport not available (ucx_info -d)"
    fi
    [ "$ONLY" = rc ] && [ -n "$RC_SKIP" ] && die "$RC_SKIP"
fi

mkdir -p "$OUT/logs" "$OUT/bin" || die "cannot create $OUT"
RAW=$OUT/raw.csv
echo "level,test,layout,tl,size,rep,iters,lat50_us,latavg_us,bw_MBps,msgrate" \
    > "$RAW"
CPUCSV=$OUT/cpu.csv
echo "level,test,layout,tl,size,rep,messages,bw_MBps,client_user_s,client_sys_s,server_user_s,server_sys_s" \
    > "$CPUCSV"

# Same environment for both transports; only UCX_TLS / -x differ.
export LD_PRELOAD="$LIB${LD_PRELOAD:+ $LD_PRELOAD}"
export UCX_NET_DEVICES=lo
export UCX_WARN_UNUSED_ENV_VARS=n
unset UCX_TLS UCX_APTUS_STATS

START=$(date +%s)
{
    echo "date: $(date -Is)"
    echo "host: $(hostname) cpus: $(nproc) load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "ucx: $(ucx_info -v | head -1)"
    echo "lib: $LIB (built $(date -r "$LIB" -Is))"
    echo "tree: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) (the source tree; the library may be older)"
    echo "env: $(env | grep '^UCX_' | sort | tr '\n' ' ')"
    echo "mode: $([ $QUICK = 1 ] && echo quick || echo full) reps: $REPS stat: $STAT"
} | tee "$OUT/meta.txt"
echo "output: $OUT"
LOAD_WARN="load average above the number of CPUs: other work disturbs the run; compare ratios only"
if awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    echo "WARNING: $LOAD_WARN"
fi
echo

# ---------------------------------------------------------------------------
# One ucx_perftest measurement: server and client on the loopback.

PORT=$((20000 + $$ % 20000))
FAILED=0

next_port() {
    local tries=0
    while :; do
        PORT=$((PORT + 1))
        [ $PORT -ge 65000 ] && PORT=20000
        if ! ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; then
            return 0
        fi
        tries=$((tries + 1))
        [ $tries -gt 100 ] && return 1
    done
}

# wait_listen PID: wait until the server listens on $PORT (or died)
wait_listen() {
    for _ in $(seq 200); do
        ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# The processes of the run in flight, ended on exit or interrupt. (timeout
# puts each in a process group of its own, so a ^C does not reach them.)
SRV_PID=
CLI_PID=
cleanup() {
    local p
    for p in $CLI_PID $SRV_PID; do
        kill "$p" 2>/dev/null
    done
    CLI_PID=
    SRV_PID=
}
trap cleanup EXIT
trap 'echo "ud_sr_bench: interrupted" >&2; exit 130' INT TERM

# perftest_once LOG TL_ENV ARGS...: sets PERF_RES to the Final: line
# fields (p50, average latency, overall MB/s, overall msg/s). Not to be run
# in a subshell: the trap must see the processes.
PERF_RES=
PERF_ENV=() # VAR=VALUE settings of the run in hand (transport variants)
# Each side runs under a shell that records its CPU time (user, system) in
# LOG.cpu (the client) and LOG.server.cpu, from the 'times' builtin.
TIMED='ucx_perftest "$@"; rc=$?; times > "$0"; exit $rc'
perftest_once() {
    local log=$1 tls=$2 rc
    shift 2
    PERF_RES=
    rm -f "$log.cpu" "$log.server.cpu"
    next_port || return 1
    env ${tls:+UCX_TLS=$tls} ${PERF_ENV[@]+"${PERF_ENV[@]}"} timeout $RUN_TIMEOUT \
        bash -c "$TIMED" "$log.server.cpu" -p $PORT "$@" > "$log.server" 2>&1 &
    SRV_PID=$!
    if ! wait_listen $SRV_PID; then
        cleanup
        return 1
    fi
    env ${tls:+UCX_TLS=$tls} ${PERF_ENV[@]+"${PERF_ENV[@]}"} timeout $RUN_TIMEOUT \
        bash -c "$TIMED" "$log.cpu" 127.0.0.1 -p $PORT "$@" > "$log" 2>&1 &
    CLI_PID=$!
    wait $CLI_PID
    rc=$?
    CLI_PID=
    if [ $rc -ne 0 ]; then
        [ $rc = 124 ] && echo "timed out after $RUN_TIMEOUT s" >> "$log"
        cleanup
    fi
    wait $SRV_PID 2>/dev/null
    SRV_PID=
    [ $rc -eq 0 ] || return 1
    PERF_RES=$(grep '^Final:' "$log" | tail -1 | awk '{print $3, $4, $7, $9}')
    [ -n "$PERF_RES" ]
}

# measure LEVEL TEST LAYOUT TL SIZE ITERS REP: one run (retried once),
# appended to raw.csv. TL: ud_sr (and its variants below), tcp, rc_sr, cma
# (UCT: -x cma -d memory; UCP: UCX_TLS=cma,tcp,self, as cma has no active
# messages: tcp carries eager messages and the rendezvous handshake, cma
# moves the data). LAYOUT: the -D of UCT tests, "-" for UCP; a section's own
# rows carry its tag ("zc"; "rc" and "rc-<layout>") so that they do not mix
# with another section's repetitions of the same point.
measure() {
    local level=$1 test=$2 layout=$3 tl=$4 size=$5 iters=$6 rep=$7
    local warmup=$(( iters / 10 < 10 ? 10 : (iters / 10 > 1000 ? 1000 : iters / 10) ))
    local log="$OUT/logs/$level-$test-$layout-$tl-$size-$rep.log"
    local args=(-t "$test" -s "$size" -n "$iters" -w "$warmup") tls="" res
    # a get completes only when its data is back: with one in flight the
    # test measures the round trip, not the bandwidth tag_bw streams at
    [ "$test" = ucp_get ] && args+=(-O 16)
    local xtl=$tl dev=lo
    # ud_sr*: variants of ud_sr -- 2k: at an InfiniBand-like 2 KiB datagram
    # (the default follows the device: 16 KiB on the loopback); 4k: at
    # 4 KiB; copy: UD-ZCopy off (the paper's UD-copy)
    case $tl in
    ud_sr*) xtl=ud_sr ;;
    esac
    PERF_ENV=()
    case $tl in
    *4k) PERF_ENV+=(UCX_UD_SR_MTU=4096) ;;
    *2k) PERF_ENV+=(UCX_UD_SR_MTU=2048) ;;
    esac
    case $tl in
    ud_sr_copy*) PERF_ENV+=(UCX_UD_SR_ZCOPY=n) ;;
    esac
    # UD-ZCopy rows of the zcopy section: rendezvous (and so get_zcopy) from
    # 32 KB; UCP sends tag_send_nbr messages below 256 KB eagerly otherwise
    if [ "$layout" = zc ] && { [ $tl = ud_sr ] || [ $tl = ud_sr4k ]; }; then
        PERF_ENV+=(UCX_RNDV_THRESH=32k UCX_UD_SR_ZCOPY=y)
    fi
    # rc section: rc_sr prints its counters (gets, puts, messages) into the
    # logs, to tell which protocol UCP chose
    case $layout in
    rc|rc-*) [ $tl = rc_sr ] && PERF_ENV+=(UCX_APTUS_STATS=stderr) ;;
    esac
    [ $xtl = cma ] && dev=memory
    if [ "$level" = uct ]; then
        args+=(-x "$xtl" -d "$dev" -D "${layout#rc-}")
    elif [ $xtl = cma ]; then
        tls="cma,tcp,self"
    else
        tls="$xtl,self"
    fi
    for _ in first retry; do
        res=
        perftest_once "$log" "$tls" "${args[@]}" && res=$PERF_RES && break
    done
    PERF_ENV=()
    if [ -z "$res" ]; then
        echo "  FAILED: $level $test $layout $tl $size B (see $log)" >&2
        FAILED=$((FAILED + 1))
        return 1
    fi
    set -- $res
    echo "$level,$test,$layout,$tl,$size,$rep,$iters,$1,$2,$3,$4" >> "$RAW"
    # CPU seconds of each side (client: sender in bandwidth tests)
    echo "$level,$test,$layout,$tl,$size,$rep,$((iters + warmup)),$3,$(cpu_of "$log.cpu"),$(cpu_of "$log.server.cpu")" \
        >> "$CPUCSV"
}

# cpu_of FILE: "user,sys" seconds of the child recorded by 'times'
cpu_of() {
    awk 'NR == 2 {
        n = split($0, f, " ")
        for (i = 1; i <= 2; i++) {
            split(f[i], ms, /[ms]/)
            t[i] = ms[1] * 60 + ms[2]
        }
        printf "%.3f,%.3f", t[1], t[2]
    }' "$1" 2>/dev/null
}

# combine LEVEL TEST LAYOUT TL SIZE COLUMN(lat50_us|latavg_us|bw_MBps|msgrate):
# the repetitions of one point combined by $STAT (best: the lowest latency
# or the highest bandwidth and rate; median)
combine() {
    local order=-g
    case "$6" in bw_MBps|msgrate) order=-gr ;; esac
    awk -F, -v l="$1" -v t="$2" -v y="$3" -v tl="$4" -v s="$5" -v col="$6" '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $1 == l && $2 == t && $3 == y && $4 == tl && $5 == s { print $c[col] }
    ' "$RAW" | sort $order | awk -v stat="$STAT" '{ v[NR] = $1 }
        END { if (NR == 0)              print ""
              else if (stat == "best")  print v[1]
              else if (NR % 2)          print v[(NR + 1) / 2]
              else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Iterations for a size: about BUDGET bytes per run, within [MIN, MAX].
iters_for() {
    local size=$1 budget=$2 min=$3 max=$4 n
    n=$(( budget / size ))
    [ $n -lt $min ] && n=$min
    [ $n -gt $max ] && n=$max
    echo $n
}

fmt_size() {
    local s=$1
    if [ $s -ge 1048576 ] && [ $((s % 1048576)) -eq 0 ]; then echo "$((s / 1048576)) MB"
    elif [ $s -ge 1024 ] && [ $((s % 1024)) -eq 0 ]; then echo "$((s / 1024)) KB"
    else echo "$s B"; fi
}

# point LEVEL TEST LAYOUT SIZE KIND(lat|bw): both transports, REPS times,
# interleaved (the order alternates between repetitions), then one line.
point() {
    local level=$1 test=$2 layout=$3 size=$4 kind=$5 iters rep tl order
    if [ $kind = lat ]; then
        iters=$(iters_for $size $LAT_BUDGET $LAT_MIN $LAT_MAX)
    else
        iters=$(iters_for $size $BW_BUDGET $BW_MIN $BW_MAX)
    fi
    for rep in $(seq $REPS); do
        order="ud_sr tcp"
        [ $((rep % 2)) = 0 ] && order="tcp ud_sr"
        for tl in $order; do
            measure $level $test $layout $tl $size $iters $rep
        done
    done
    if [ $kind = lat ]; then
        printf '  %-4s %-8s %-6s %7s  p50/avg us  ud_sr %9s %9s   tcp %9s %9s\n' \
            "$level" "$test" "$layout" "$(fmt_size $size)" \
            "$(combine $level $test $layout ud_sr $size lat50_us)" \
            "$(combine $level $test $layout ud_sr $size latavg_us)" \
            "$(combine $level $test $layout tcp $size lat50_us)" \
            "$(combine $level $test $layout tcp $size latavg_us)"
    else
        printf '  %-4s %-8s %-6s %7s  MB/s,msg/s ud_sr %9s %9s   tcp %9s %9s\n' \
            "$level" "$test" "$layout" "$(fmt_size $size)" \
            "$(combine $level $test $layout ud_sr $size bw_MBps)" \
            "$(combine $level $test $layout ud_sr $size msgrate)" \
            "$(combine $level $test $layout tcp $size bw_MBps)" \
            "$(combine $level $test $layout tcp $size msgrate)"
    fi
}

# ---------------------------------------------------------------------------
# gnuplot for the plots: installed (apt-get) when missing, if allowed
ensure_gnuplot() {
    [ $PLOTS = 1 ] || return 1
    if ! command -v gnuplot >/dev/null && [ $INSTALL = 1 ] &&
       [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
       [ ! -e "$OUT/logs/apt-gnuplot.log" ]; then
        echo
        echo "installing gnuplot-nox (apt-get) for the plots"
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox ||
          { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -q gnuplot-nox; }; } \
            > "$OUT/logs/apt-gnuplot.log" 2>&1
    fi
    command -v gnuplot >/dev/null
}

# ---------------------------------------------------------------------------
# Section "base": ud_sr against tcp, and the memory of an endpoint (the
# whole block, down to its plots; run by default and with --only base)

if [ "$ONLY" = all ] || [ "$ONLY" = base ]; then

# What to measure

if [ $QUICK = 1 ]; then
    LAT_BUDGET=$((16 << 20)); LAT_MIN=20;  LAT_MAX=3000
    BW_BUDGET=$((64 << 20));  BW_MIN=50;   BW_MAX=30000
    UCP_LAT_SIZES="8 1024 4096 65536"
    UCP_BW_SIZES="8 4096 65536 1048576"
else
    LAT_BUDGET=$((128 << 20)); LAT_MIN=100; LAT_MAX=10000
    BW_BUDGET=$((256 << 20));  BW_MIN=200; BW_MAX=100000
    UCP_LAT_SIZES="8 64 256 1024 4096 16384 65536 262144 1048576 4194304"
    UCP_BW_SIZES="8 64 256 1024 4096 16384 65536 262144 1048576 4194304"
fi

echo "== UCT latency (am_lat; 8 B and 1 KB am_short, 4 KB am_bcopy: above ud_sr's short limit)"
point uct am_lat short 8 lat
point uct am_lat short 1024 lat
point uct am_lat bcopy 4096 lat

echo "== UCT bandwidth and message rate (am_bw)"
point uct am_bw short 8 bw
point uct am_bw bcopy 8192 bw     # largest am_bcopy of tcp (ud_sr: 32 KB)
point uct am_bw zcopy 32768 bw    # largest am_zcopy of ud_sr (tcp: 64 KB)

echo "== UCP latency (tag_lat)"
for s in $UCP_LAT_SIZES; do point ucp tag_lat - $s lat; done

echo "== UCP bandwidth and message rate (tag_bw)"
for s in $UCP_BW_SIZES; do point ucp tag_bw - $s bw; done

echo "== ud_sr with 2048-byte datagrams (UCX_UD_SR_MTU=2048, as an IB UD MTU; the default follows the device)"
for rep in $(seq $REPS); do
    measure uct am_lat bcopy ud_sr2k 4096 $(iters_for 4096 $LAT_BUDGET $LAT_MIN $LAT_MAX) $rep
    measure ucp tag_lat - ud_sr2k 4096 $(iters_for 4096 $LAT_BUDGET $LAT_MIN $LAT_MAX) $rep
    for s in 16384 65536 1048576; do
        measure ucp tag_bw - ud_sr2k $s $(iters_for $s $BW_BUDGET $BW_MIN $BW_MAX) $rep
    done
done
printf '  uct am_lat bcopy 4 KB p50 %s us   ucp tag_lat 4 KB p50 %s us   ucp tag_bw 64 KB %s MB/s\n' \
    "$(combine uct am_lat bcopy ud_sr2k 4096 lat50_us)" \
    "$(combine ucp tag_lat - ud_sr2k 4096 lat50_us)" \
    "$(combine ucp tag_bw - ud_sr2k 65536 bw_MBps)"

echo "== UCP one-sided at 1 MB over ud_sr (ucp_put_bw, ucp_get with 16 in flight; beside its own tag_bw)"
for rep in $(seq $REPS); do
    for t in ucp_put_bw ucp_get; do
        measure ucp $t - ud_sr 1048576 $(iters_for 1048576 $BW_BUDGET $BW_MIN $BW_MAX) $rep
    done
done

# ---------------------------------------------------------------------------
# Memory of an idle endpoint

echo "== Bytes per endpoint (test/perf/ud_sr_ep_memory.c)"
EPMEM=$OUT/bin/ud_sr_ep_memory
MEMCSV=$OUT/ep_memory.csv
echo "tl,eps,peer_bytes,bytes_per_ep_malloc,rss_per_ep,create_ns_per_ep,idle_cpu_pct,kernel_sock_bytes_per_ep,note" \
    > "$MEMCSV"
# shellcheck disable=SC2046 # pkg-config output is a list of flags
if ! gcc -O2 -Wall -o "$EPMEM" "$ROOT/test/perf/ud_sr_ep_memory.c" \
        $(pkg-config --cflags --libs ucx) > "$OUT/logs/ep_memory-build.log" 2>&1; then
    echo "  FAILED: cannot build ud_sr_ep_memory (see $OUT/logs/ep_memory-build.log)" >&2
    FAILED=$((FAILED + 1))
else
    for tl in ud_sr tcp; do
        for n in 1000 10000; do
            log=$OUT/logs/ep_memory-$tl-$n.log
            UCX_APTUS_STATS=stdout timeout $RUN_TIMEOUT \
                "$EPMEM" -t $tl -d lo -n $n > "$log" 2>&1
            rc=$?
            line=$(grep "^tl=$tl " "$log" | tail -1)
            get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
            peer=$(grep "^aptus-stats ud_sr/" "$log" | tr ' ' '\n' |
                   sed -n 's/^peer_bytes=//p' | tail -1)
            skipped=$(get skipped)
            if [ $rc -eq 3 ] && [ -n "$skipped" ]; then
                echo "  $tl $n eps: skipped ($skipped)"
                echo "$tl,$n,,,,,,,skipped: $skipped" >> "$MEMCSV"
                continue
            fi
            if [ $rc -ne 0 ] || [ -z "$(get bytes_per_ep_malloc)" ] ||
               { [ $tl = ud_sr ] && [ -z "$peer" ]; }; then
                echo "  FAILED: ep memory $tl $n (see $log)" >&2
                FAILED=$((FAILED + 1))
                continue
            fi
            note=
            [ $tl = tcp ] && note="1 socket+fd per ep; kernel bytes count both ends of the loopback connection"
            echo "$tl,$n,$peer,$(get bytes_per_ep_malloc),$(get rss_per_ep),$(get create_ns_per_ep),$(get idle_cpu_pct),$(get kernel_sock_bytes_per_ep),$note" \
                >> "$MEMCSV"
            printf '  %-5s %6d eps: peer_bytes %4s  malloc/ep %7s  rss/ep %7s  create %6s ns/ep%s\n' \
                $tl $n "${peer:--}" "$(get bytes_per_ep_malloc)" "$(get rss_per_ep)" \
                "$(get create_ns_per_ep)" \
                "$([ $tl = tcp ] && echo "  kernel socket/ep $(get kernel_sock_bytes_per_ep)")"
        done
    done
fi

memval() { # TL EPS COLUMN
    awk -F, -v tl="$1" -v n="$2" -v col="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $1 == tl && $2 == n { print $c[col] }' "$MEMCSV"
}

# ---------------------------------------------------------------------------
# The table

SUMMARY=$OUT/summary.csv
echo "metric,ud_sr,tcp,ratio,target,met" > "$SUMMARY"

# row METRIC UD_SR TCP TARGET: TARGET is "<=tcp", ">=tcp", "<=N" or "-";
# ratio is always ud_sr/tcp.
row() {
    local metric=$1 u=$2 t=$3 target=$4
    awk -v m="$metric" -v u="${u:-n/a}" -v t="${t:-n/a}" -v tg="$target" 'BEGIN {
        num = "^[0-9.eE+-]+$"
        r = (u ~ num && t ~ num && t + 0 != 0) ? sprintf("%.2f", u / t) : "-"
        met = "-"
        if (tg == "<=tcp" && r != "-")      met = (u + 0 <= t + 0) ? "yes" : "NO"
        else if (tg == ">=tcp" && r != "-") met = (u + 0 >= t + 0) ? "yes" : "NO"
        else if (tg ~ /^<=[0-9]+$/ && u ~ num) {
            lim = substr(tg, 3); met = (u + 0 <= lim + 0) ? "yes" : "NO"
        } else if (tg != "-")               met = "n/a"
        printf "%s,%s,%s,%s,%s,%s\n", m, u, t, r, tg, met
    }' >> "$SUMMARY"
}

for s in 8 1024 4096; do
    layout=$([ $s -le 1024 ] && echo short || echo bcopy)
    for stat in lat50_us latavg_us; do
        name=$([ $stat = lat50_us ] && echo "p50" || echo "avg")
        row "UCT am_lat $layout $(fmt_size $s) $name (us)" \
            "$(combine uct am_lat $layout ud_sr $s $stat)" \
            "$(combine uct am_lat $layout tcp $s $stat)" "<=tcp"
    done
done
for s in 8 1024 4096; do
    for stat in lat50_us latavg_us; do
        name=$([ $stat = lat50_us ] && echo "p50" || echo "avg")
        row "UCP tag_lat $(fmt_size $s) $name (us)" \
            "$(combine ucp tag_lat - ud_sr $s $stat)" \
            "$(combine ucp tag_lat - tcp $s $stat)" "<=tcp"
    done
done
row "UCT am_lat bcopy 4 KB p50 (us) @MTU 2048" \
    "$(combine uct am_lat bcopy ud_sr2k 4096 lat50_us)" \
    "$(combine uct am_lat bcopy tcp 4096 lat50_us)" "<=tcp"
row "UCP tag_lat 4 KB p50 (us) @MTU 2048" \
    "$(combine ucp tag_lat - ud_sr2k 4096 lat50_us)" \
    "$(combine ucp tag_lat - tcp 4096 lat50_us)" "<=tcp"
for s in 16384 65536; do
    row "UCP tag_bw $(fmt_size $s) (MB/s)" \
        "$(combine ucp tag_bw - ud_sr $s bw_MBps)" \
        "$(combine ucp tag_bw - tcp $s bw_MBps)" ">=tcp"
done
row "UCP tag_bw 1 MB (MB/s)" \
    "$(combine ucp tag_bw - ud_sr 1048576 bw_MBps)" \
    "$(combine ucp tag_bw - tcp 1048576 bw_MBps)" "-"
for s in 16384 65536 1048576; do
    row "UCP tag_bw $(fmt_size $s) (MB/s) @MTU 2048" \
        "$(combine ucp tag_bw - ud_sr2k $s bw_MBps)" \
        "$(combine ucp tag_bw - tcp $s bw_MBps)" "-"
done
# one-sided against ud_sr's own tag bandwidth (the tcp column holds it)
tagbw=$(combine ucp tag_bw - ud_sr 1048576 bw_MBps)
for t in ucp_put_bw ucp_get; do
    v=$(combine ucp $t - ud_sr 1048576 bw_MBps)
    r=$(awk -v a="$v" -v b="$tagbw" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
    m=$(awk -v r="$r" 'BEGIN { if (r == "-") print "n/a"; else print (r + 0 >= 0.8) ? "yes" : "NO" }')
    echo "UCP $t 1 MB (MB/s) vs ud_sr tag_bw,$v,$tagbw,$r,>=0.8x,$m" >> "$SUMMARY"
done
row "UCT am_bw bcopy 8 KB (MB/s)" \
    "$(combine uct am_bw bcopy ud_sr 8192 bw_MBps)" \
    "$(combine uct am_bw bcopy tcp 8192 bw_MBps)" "-"
row "UCT am_bw zcopy 32 KB (MB/s)" \
    "$(combine uct am_bw zcopy ud_sr 32768 bw_MBps)" \
    "$(combine uct am_bw zcopy tcp 32768 bw_MBps)" "-"
row "UCT am_bw short 8 B (msg/s)" \
    "$(combine uct am_bw short ud_sr 8 msgrate)" \
    "$(combine uct am_bw short tcp 8 msgrate)" ">=tcp"
row "UCP tag_bw 8 B (msg/s)" \
    "$(combine ucp tag_bw - ud_sr 8 msgrate)" \
    "$(combine ucp tag_bw - tcp 8 msgrate)" ">=tcp"
for n in 1000 10000; do
    row "bytes/idle ep @$n eps (peer_bytes)" \
        "$(memval ud_sr $n peer_bytes)" "" "<=128"
    row "bytes/idle ep @$n eps (malloc)" \
        "$(memval ud_sr $n bytes_per_ep_malloc)" \
        "$(memval tcp $n bytes_per_ep_malloc)" "<=128"
    row "bytes/idle ep @$n eps (RSS)" \
        "$(memval ud_sr $n rss_per_ep)" "$(memval tcp $n rss_per_ep)" "-"
done

echo
echo "== Summary ($STAT of $REPS; ratio = ud_sr/tcp: < 1 is better for latency"
echo "   and bytes, > 1 for bandwidth and rate)"
TABLE=$OUT/table.txt
awk -F, '
    function fmt(v) {
        if (v !~ /^[0-9.eE+-]+$/) return v
        if (v + 0 >= 1000)        return sprintf("%.0f", v)
        return sprintf("%.3g", v)
    }
    NR == 1 {
        printf "%-38s | %10s | %10s | %6s | %7s | %s\n", "metric", "ud_sr", "tcp", "ratio", "target", "met?"
        print "---------------------------------------+------------+------------+--------+---------+-----"
        next
    }
    { printf "%-38s | %10s | %10s | %6s | %7s | %s\n", $1, fmt($2), fmt($3), $4, $5, $6 }
' "$SUMMARY" | tee "$TABLE"
notmet=$(awk -F, 'NR > 1 && $6 == "NO"' "$SUMMARY" | wc -l)
met=$(awk -F, 'NR > 1 && $6 == "yes"' "$SUMMARY" | wc -l)
echo "targets met: $met, missed: $notmet (reported, not asserted)"

# ---------------------------------------------------------------------------
# Sweep CSV and plots

SWEEP=$OUT/sweep.csv
echo "size,ud_sr_lat50_us,ud_sr_latavg_us,tcp_lat50_us,tcp_latavg_us,ud_sr_bw_MBps,tcp_bw_MBps,ud_sr_msgrate,tcp_msgrate" \
    > "$SWEEP"
for s in $(echo $UCP_LAT_SIZES $UCP_BW_SIZES | tr ' ' '\n' | sort -n -u); do
    m() { local v; v=$(combine ucp "$1" - "$2" $s "$3"); echo "${v:-NaN}"; }
    echo "$s,$(m tag_lat ud_sr lat50_us),$(m tag_lat ud_sr latavg_us),$(m tag_lat tcp lat50_us),$(m tag_lat tcp latavg_us),$(m tag_bw ud_sr bw_MBps),$(m tag_bw tcp bw_MBps),$(m tag_bw ud_sr msgrate),$(m tag_bw tcp msgrate)" \
        >> "$SWEEP"
done

if [ $PLOTS = 1 ]; then
    if ensure_gnuplot; then
        XTICS=$(tail -n +2 "$SWEEP" | cut -d, -f1 | while read -r s; do
                    printf '"%s" %s, ' "$(fmt_size $s | tr -d ' ')" $s; done)
        XTICS=${XTICS%, }
        title="ud_sr vs tcp, loopback, UCP ($(hostname), $(date +%F), $STAT of $REPS, load at start $(sed -n 's/^host: .* load: \([^ ]*\).*/\1/p' "$OUT/meta.txt"))"
        # the largest ud_sr message in one datagram, marked on the plots
        DGRAM=$(ucx_info -d 2>/dev/null | awk '
            /Transport: ud_sr/ { t = 1 } /Device:/ && t == 1 { t = ($NF == "lo") ? 2 : 0 }
            t == 2 && /am_short:/ {
                v = $NF       # ucx_info prints 32K for 32768
                m = (v ~ /K$/) ? 1024 : ((v ~ /M$/) ? 1048576 : 1)
                sub(/[KM]$/, "", v)
                print v * m; exit }')
        XMIN=$(tail -n +2 "$SWEEP" | cut -d, -f1 | head -1)
        XMAX=$(tail -n +2 "$SWEEP" | cut -d, -f1 | tail -1)
        gnuplot > "$OUT/logs/gnuplot.log" 2>&1 <<EOF
set datafile separator ","
set datafile missing "NaN"
set terminal pngcairo size 1000,650 font "sans,11" noenhanced
set key top left box opaque
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set logscale x 2
set xrange [$XMIN / 1.5 : $XMAX * 1.5]
set xtics ($XTICS)
if ("$DGRAM" ne "") {
    set arrow 1 from $DGRAM, graph 0 to $DGRAM, graph 1 nohead dt 3 lc rgb "#888888"
    set label 1 "ud_sr: one datagram up to $DGRAM B" at $DGRAM, graph 0.04 right offset -0.5,0 textcolor rgb "#666666"
}
set xlabel "message size (bytes)"

set output "$OUT/latency.png"
set title "Latency vs size: UCP tag_lat ping-pong, one-way\n$title" noenhanced
set logscale y 10
set ylabel "latency (usec, log scale)"
plot "$SWEEP" using 1:2 with linespoints lw 2 pt 7 lc rgb "#d62728" title "ud_sr p50", \
     "$SWEEP" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#d62728" title "ud_sr average", \
     "$SWEEP" using 1:4 with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "tcp p50", \
     "$SWEEP" using 1:5 with linespoints lw 1 dt 2 pt 4 lc rgb "#1f77b4" title "tcp average"

set output "$OUT/bandwidth.png"
set title "Bandwidth vs size: UCP tag_bw (streaming)\n$title" noenhanced
set logscale y 10
set ylabel "bandwidth (MB/s, log scale)"
plot "$SWEEP" using 1:6 with linespoints lw 2 pt 7 lc rgb "#d62728" title "ud_sr", \
     "$SWEEP" using 1:7 with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "tcp"
EOF
        if [ $? = 0 ]; then
            echo
            echo "plots: $OUT/latency.png $OUT/bandwidth.png"
        else
            echo "ud_sr_bench: gnuplot failed (see $OUT/logs/gnuplot.log); no plots" >&2
        fi
    else
        echo "ud_sr_bench: gnuplot not available; no plots (CSV in $OUT)" >&2
    fi
fi

fi # section "base"

# ---------------------------------------------------------------------------
# Section "zcopy": UD-ZCopy against copy-based ud_sr and tcp: UCP tag_bw
# bandwidth, and CPU time per transferred megabyte on each side (the
# client sends, the server receives), at the default datagram size (2048)
# and the largest the sock wire allows (4096).

if [ "$ONLY" = all ] || [ "$ONLY" = zcopy ]; then
    if [ $QUICK = 1 ]; then
        ZC_BUDGET=$((256 << 20)); ZC_MIN=10; ZC_MAX=4000
    else
        ZC_BUDGET=$((1024 << 20)); ZC_MIN=40; ZC_MAX=16000
    fi
    ZC_SIZES="65536 1048576 16777216"
    ZC_TLS="ud_sr ud_sr_copy tcp ud_sr4k ud_sr_copy4k"
    echo
    echo "== UD-ZCopy: UCP tag_bw, bandwidth and CPU per transferred MB"
    for s in $ZC_SIZES; do
        iters=$(iters_for $s $ZC_BUDGET $ZC_MIN $ZC_MAX)
        for rep in $(seq $REPS); do
            order=$ZC_TLS
            # alternate the order between repetitions
            [ $((rep % 2)) = 0 ] && order=$(echo $ZC_TLS | tr ' ' '\n' | tac | tr '\n' ' ')
            for tl in $order; do
                measure ucp tag_bw zc $tl $s $iters $rep
            done
        done
    done

    # zc_point TL SIZE: "MB/s,sender us/MB,(sys),receiver us/MB,(sys)" of
    # the repetition with the best bandwidth (CPU of that same run)
    zc_point() {
        awk -F, -v tl="$1" -v s="$2" '
            NR == 1 { next }
            $2 == "tag_bw" && $3 == "zc" && $4 == tl && $5 == s {
                if (best == "" || $8 + 0 > best + 0) {
                    mb   = $7 * $5 / 1e6
                    best = $8
                    line = sprintf("%s,%.0f,%.0f,%.0f,%.0f", $8,
                                   ($9 + $10) * 1e6 / mb, $10 * 1e6 / mb,
                                   ($11 + $12) * 1e6 / mb, $12 * 1e6 / mb)
                }
            }
            END { print line }' "$CPUCSV"
    }
    ZCSV=$OUT/zcopy.csv
    echo "size,tl,mtu,bw_MBps,sender_cpu_us_per_MB,sender_sys_us_per_MB,receiver_cpu_us_per_MB,receiver_sys_us_per_MB" \
        > "$ZCSV"
    ZTABLE=$OUT/zcopy_table.txt
    {
        echo
        echo "== UD-ZCopy summary (best bandwidth of $REPS; CPU of that run: user+system"
        echo "   microseconds per MB moved, system part in parentheses; the sender is"
        echo "   the client, the receiver the server; UD-ZCopy rows with"
        echo "   UCX_RNDV_THRESH=32k so that UCP fetches 64 KB messages with gets)"
        printf '%-7s | %-20s | %5s | %8s | %-15s | %-15s\n' size transport MTU MB/s \
            "sender us/MB" "receiver us/MB"
        echo "--------+----------------------+-------+----------+-----------------+----------------"
        for s in $ZC_SIZES; do
            for tl in $ZC_TLS; do
                case $tl in
                ud_sr)        name="ud_sr UD-ZCopy"; mtu=${UCX_UD_SR_MTU:-2048} ;;
                ud_sr_copy)   name="ud_sr copy (UD-copy)"; mtu=${UCX_UD_SR_MTU:-2048} ;;
                tcp)          name="tcp"; mtu=- ;;
                ud_sr4k)      name="ud_sr UD-ZCopy"; mtu=4096 ;;
                ud_sr_copy4k) name="ud_sr copy (UD-copy)"; mtu=4096 ;;
                esac
                IFS=, read -r bw scpu ssys rcpu rsys <<< "$(zc_point $tl $s)"
                echo "$s,$tl,$mtu,$bw,$scpu,$ssys,$rcpu,$rsys" >> "$ZCSV"
                printf '%-7s | %-20s | %5s | %8s | %6s (%6s) | %6s (%6s)\n' \
                    "$(fmt_size $s)" "$name" "$mtu" "${bw:-n/a}" "${scpu:--}" \
                    "${ssys:--}" "${rcpu:--}" "${rsys:--}"
            done
        done
        echo
        echo "targets (reported, not asserted): UD-ZCopy at least 1.5x the copy-based"
        echo "bandwidth at 1 MB, and less CPU per MB than copy-based on both sides"
        for mtu in 2048 4096; do
            zc=ud_sr; cp=ud_sr_copy
            [ $mtu = 4096 ] && zc=ud_sr4k && cp=ud_sr_copy4k
            IFS=, read -r zbw zs _ zr _ <<< "$(zc_point $zc 1048576)"
            IFS=, read -r cbw cs _ cr _ <<< "$(zc_point $cp 1048576)"
            awk -v mtu=$mtu -v zbw="$zbw" -v cbw="$cbw" -v zs="$zs" -v cs="$cs" \
                -v zr="$zr" -v cr="$cr" 'BEGIN {
                ok = (zbw != "" && cbw != "")
                r = (ok && cbw > 0) ? zbw / cbw : 0
                printf "  MTU %s, 1 MB: bandwidth %.2fx copy-based (>= 1.5): %s\n",
                    mtu, r, !ok ? "n/a" : (r >= 1.5 ? "met" : "MISSED")
                printf "  MTU %s, 1 MB: sender %s vs %s us/MB, receiver %s vs %s us/MB (less): %s\n",
                    mtu, zs, cs, zr, cr,
                    !ok ? "n/a" : ((zs + 0 < cs + 0 && zr + 0 < cr + 0) ? "met" : "MISSED")
            }'
        done
    } | tee "$ZTABLE"

    if ensure_gnuplot; then
        ZPLOT=$OUT/zcopy_plot.csv
        # no header line: gnuplot would draw it as an empty cluster
        : > "$ZPLOT"
        for s in $ZC_SIZES; do
            line="$(fmt_size $s | tr -d ' ')"
            for tl in $ZC_TLS; do
                v=$(awk -F, -v s=$s -v tl=$tl '$1 == s && $2 == tl { print $4 }' "$ZCSV")
                line="$line,${v:-NaN}"
            done
            echo "$line" >> "$ZPLOT"
        done
        if gnuplot > "$OUT/logs/gnuplot-zcopy.log" 2>&1 <<EOF
set datafile separator ","
set datafile missing "NaN"
set terminal pngcairo size 1000,650 font "sans,11" noenhanced
set output "$OUT/zcopy.png"
set title "UCP tag_bw over the loopback: UD-ZCopy, copy-based ud_sr (UD-copy), tcp\n($(hostname), $(date +%F), best of $REPS)" noenhanced
set key top left box opaque
set grid ytics lc rgb "#dddddd"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set ylabel "bandwidth (MB/s)"
set xlabel "message size"
set yrange [0:*]
plot "$ZPLOT" using 2:xtic(1) title "ud_sr UD-ZCopy, MTU 2048" lc rgb "#d62728", \
     "" using 5 title "ud_sr UD-ZCopy, MTU 4096" lc rgb "#ff9896", \
     "" using 3 title "ud_sr copy, MTU 2048" lc rgb "#2ca02c", \
     "" using 6 title "ud_sr copy, MTU 4096" lc rgb "#98df8a", \
     "" using 4 title "tcp" lc rgb "#1f77b4"
EOF
        then
            echo "plot: $OUT/zcopy.png"
        else
            echo "ud_sr_bench: gnuplot failed (see $OUT/logs/gnuplot-zcopy.log)" >&2
        fi
    fi
fi # section "zcopy"

# ---------------------------------------------------------------------------
# Section "rc": rc_sr (RC-SR eager over a TCP connection per endpoint with a
# shared receive pool and credits; RC-RDMA put/get by process_vm_writev/
# readv) against UCX's tcp and cma: latency, bandwidth, one-sided get/put,
# and the resources of one connection (test/perf/rc_conn_memory.c and
# rc_sr's own aptus-stats figures). Its rows carry the layout tag "rc"
# (UCP) or "rc-<layout>" (UCT).

if { [ "$ONLY" = all ] || [ "$ONLY" = rc ]; } && [ -n "$RC_SKIP" ]; then
    echo
    echo "  FAILED: rc section skipped: $RC_SKIP" >&2
    FAILED=$((FAILED + 1))
elif [ "$ONLY" = all ] || [ "$ONLY" = rc ]; then
    if [ $QUICK = 1 ]; then
        RC_LAT_BUDGET=$((16 << 20));  RC_LAT_MIN=20; RC_LAT_MAX=3000
        RC_BW_BUDGET=$((128 << 20));  RC_BW_MIN=16;  RC_BW_MAX=30000
    else
        RC_LAT_BUDGET=$((128 << 20));  RC_LAT_MIN=100; RC_LAT_MAX=10000
        RC_BW_BUDGET=$((1024 << 20));  RC_BW_MIN=64;  RC_BW_MAX=100000
    fi
    RC_LAT_SIZES="8 1024 4096"
    RC_BW_SIZES="65536 1048576 4194304 16777216"
    RC_CONNS=${BENCH_RC_CONNS:-1000}

    # the name of a transport in the output: at UCP level "cma" is UCX_TLS=
    # cma,tcp,self (tcp carries the eager messages and the rendezvous
    # handshake, cma moves the data)
    rc_label() { # TL LEVEL
        if [ "$1" = cma ] && [ "$2" = ucp ]; then echo "cma+tcp"; else echo "$1"; fi
    }

    # rc_gets LEVEL TEST LAYOUT SIZE: the gets of rc_sr (both sides' aptus-
    # stats lines) in the last repetition of a UCP point: whether UCP moved
    # the messages by rendezvous (get_zcopy, one get per message, warm-up
    # messages included) or eagerly (none)
    rc_gets() {
        cat "$OUT/logs/$1-$2-$3-rc_sr-$4-$REPS.log" \
            "$OUT/logs/$1-$2-$3-rc_sr-$4-$REPS.log.server" 2>/dev/null |
            grep '^aptus-stats rc_sr/' | tr ' ' '\n' | sed -n 's/^gets=//p' |
            awk '{ g += $1; n++ } END { if (n) print g }'
    }

    # rc_point LEVEL TEST LAYOUT SIZE KIND(lat|bw) TL...: every TL, REPS
    # times, interleaved (the order reverses every other repetition), then
    # one line
    rc_point() {
        local level=$1 test=$2 layout=$3 size=$4 kind=$5 iters rep tl order line g
        shift 5
        local tls="$*"
        if [ $kind = lat ]; then
            iters=$(iters_for $size $RC_LAT_BUDGET $RC_LAT_MIN $RC_LAT_MAX)
        else
            iters=$(iters_for $size $RC_BW_BUDGET $RC_BW_MIN $RC_BW_MAX)
        fi
        for rep in $(seq $REPS); do
            order=$tls
            [ $((rep % 2)) = 0 ] && order=$(echo $tls | tr ' ' '\n' | tac | tr '\n' ' ')
            for tl in $order; do
                measure $level $test $layout $tl $size $iters $rep
            done
        done
        line=$(printf '  %-4s %-7s %-6s %6s' "$level" "$test" \
               "$([ $layout = rc ] && echo - || echo ${layout#rc-})" "$(fmt_size $size)")
        if [ $kind = lat ]; then
            line="$line  p50/avg us"
            for tl in $tls; do
                line="$line  $(printf '%-7s %7s %8s' "$(rc_label $tl $level)" \
                    "$(combine $level $test $layout $tl $size lat50_us)" \
                    "$(combine $level $test $layout $tl $size latavg_us)")"
            done
        else
            line="$line  MB/s"
            for tl in $tls; do
                line="$line  $(printf '%-7s %8s' "$(rc_label $tl $level)" \
                    "$(combine $level $test $layout $tl $size bw_MBps)")"
            done
            if [ $level = ucp ]; then
                g=$(rc_gets $level $test $layout $size)
                [ -n "$g" ] && line="$line  (rc_sr: $g gets for $iters msgs + warm-up)"
            fi
        fi
        echo "$line"
    }

    echo
    echo "== rc_sr against tcp and cma (UCP 'cma+tcp' = UCX_TLS=cma,tcp,self: tcp"
    echo "   carries eager messages and the rendezvous handshake, cma the data)"
    rc_point uct am_lat rc-short 8 lat rc_sr tcp
    for s in $RC_LAT_SIZES; do rc_point ucp tag_lat rc $s lat rc_sr tcp; done
    for s in $RC_BW_SIZES; do rc_point ucp tag_bw rc $s bw rc_sr tcp cma; done
    rc_point uct get rc-zcopy 1048576 bw rc_sr cma
    rc_point uct put_bw rc-zcopy 1048576 bw rc_sr cma
    rc_point uct am_bw rc-bcopy 8192 bw rc_sr tcp

    # -- resources of one connection
    echo "== Resources of a connection ($RC_CONNS connections between two interfaces of one process)"
    CONNMEM=$OUT/bin/rc_conn_memory
    RCMEMCSV=$OUT/rc_conn_memory.csv
    RC_MEM_COLS="bytes_per_conn_malloc rss_per_conn fds_per_conn kernel_sock_bytes_per_conn sockbuf_limit_bytes_per_conn sockbuf_alloc_bytes_per_conn create_ns_per_ep connect_ms"
    RC_STAT_COLS="conn_state_bytes conn_kernel_bytes conn_fds conn_descriptors conn_descriptor_bytes rx_buf_bytes rx_pool_buffers"
    echo "tl,conns,$(echo $RC_MEM_COLS $RC_STAT_COLS | tr ' ' ','),note" > "$RCMEMCSV"
    # shellcheck disable=SC2046 # pkg-config output is a list of flags
    if ! gcc -O2 -Wall -o "$CONNMEM" "$ROOT/test/perf/rc_conn_memory.c" \
            $(pkg-config --cflags --libs ucx) > "$OUT/logs/rc_conn_memory-build.log" 2>&1; then
        echo "  FAILED: cannot build rc_conn_memory (see $OUT/logs/rc_conn_memory-build.log)" >&2
        FAILED=$((FAILED + 1))
    else
        for tl in rc_sr tcp; do
            log=$OUT/logs/rc_conn_memory-$tl-$RC_CONNS.log
            # two descriptors per connection, both ends in one process
            ( nofile=$(ulimit -n)
              [ "$nofile" != unlimited ] && [ "$nofile" -lt $((2 * RC_CONNS + 512)) ] &&
                  ulimit -n 65536 2>/dev/null
              UCX_APTUS_STATS=stdout exec timeout $RUN_TIMEOUT \
                  "$CONNMEM" -t $tl -d lo -n $RC_CONNS ) > "$log" 2>&1
            rc=$?
            line=$(grep "^tl=$tl " "$log" | tail -1)
            get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
            # the connecting interface's line (the accepting one has no
            # endpoints of its own)
            stats=$(grep "^aptus-stats rc_sr/" "$log" |
                    awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^eps_created=/ && $i != "eps_created=0") print }' |
                    tail -1)
            sget() { echo "$stats" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
            skipped=$(get skipped)
            if [ $rc -eq 3 ] && [ -n "$skipped" ]; then
                echo "  $tl: skipped ($skipped)"
                echo "$tl,$RC_CONNS$(printf ',%.0s' $RC_MEM_COLS $RC_STAT_COLS),skipped: $skipped" >> "$RCMEMCSV"
                continue
            fi
            if [ $rc -ne 0 ] || [ -z "$(get bytes_per_conn_malloc)" ] ||
               { [ $tl = rc_sr ] && [ -z "$stats" ]; }; then
                echo "  FAILED: connection resources $tl (exit $rc; see $log)" >&2
                FAILED=$((FAILED + 1))
                continue
            fi
            vals=
            for c in $RC_MEM_COLS; do vals="$vals,$(get $c)"; done
            for c in $RC_STAT_COLS; do vals="$vals,$(sget $c)"; done
            note="both ends of each connection counted"
            [ "$(get kernel_sock_bytes_per_conn)" = -1 ] &&
                note="$note; /proc/slabinfo not readable: no kernel socket figure"
            echo "$tl,$RC_CONNS$vals,$note" >> "$RCMEMCSV"
            printf '  %-5s malloc/conn %6s  rss/conn %6s  fds/conn %4s  kernel TCP slab/conn %6s  create %5.1f us/ep  all connected in %s ms\n' \
                $tl "$(get bytes_per_conn_malloc)" "$(get rss_per_conn)" \
                "$(get fds_per_conn)" "$(get kernel_sock_bytes_per_conn)" \
                "$(awk -v n="$(get create_ns_per_ep)" 'BEGIN { print n / 1000 }')" \
                "$(get connect_ms)"
        done
    fi
    rcmem() { # TL COLUMN
        awk -F, -v tl="$1" -v col="$2" '
            NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
            $1 == tl { print $c[col] }' "$RCMEMCSV"
    }

    # -- the table
    RCSUM=$OUT/rc_summary.csv
    echo "metric,rc_sr,tcp,cma,rc_sr_per_tcp,rc_sr_per_cma,target,met" > "$RCSUM"
    # rc_row METRIC RC_SR TCP CMA TARGET: TARGET "<=tcp", ">=0.9cma" or "-"
    rc_row() {
        awk -v m="$1" -v r="${2:-n/a}" -v t="${3:-n/a}" -v c="${4:-n/a}" -v tg="$5" 'BEGIN {
            num = "^[0-9.eE+-]+$"
            rt = (r ~ num && t ~ num && t + 0 != 0) ? sprintf("%.2f", r / t) : "-"
            rc = (r ~ num && c ~ num && c + 0 != 0) ? sprintf("%.2f", r / c) : "-"
            met = "-"
            if (tg == "<=tcp")
                met = (rt == "-") ? "n/a" : ((r + 0 <= t + 0) ? "yes" : "NO")
            else if (tg == ">=0.9cma")
                met = (rc == "-") ? "n/a" : ((r / c >= 0.9) ? "yes" : "NO")
            printf "%s,%s,%s,%s,%s,%s,%s,%s\n", m, r, t, c, rt, rc, tg, met
        }' >> "$RCSUM"
    }
    for stat in lat50_us latavg_us; do
        name=$([ $stat = lat50_us ] && echo p50 || echo avg)
        rc_row "UCT am_lat short 8 B $name (us)" \
            "$(combine uct am_lat rc-short rc_sr 8 $stat)" \
            "$(combine uct am_lat rc-short tcp 8 $stat)" "" "<=tcp"
    done
    for s in $RC_LAT_SIZES; do
        for stat in lat50_us latavg_us; do
            name=$([ $stat = lat50_us ] && echo p50 || echo avg)
            rc_row "UCP tag_lat $(fmt_size $s) $name (us)" \
                "$(combine ucp tag_lat rc rc_sr $s $stat)" \
                "$(combine ucp tag_lat rc tcp $s $stat)" "" \
                "$([ $s -le 1024 ] && echo "<=tcp" || echo -)"
        done
    done
    for s in $RC_BW_SIZES; do
        rc_row "UCP tag_bw $(fmt_size $s) (MB/s)" \
            "$(combine ucp tag_bw rc rc_sr $s bw_MBps)" \
            "$(combine ucp tag_bw rc tcp $s bw_MBps)" \
            "$(combine ucp tag_bw rc cma $s bw_MBps)" \
            "$([ $s = 1048576 ] && echo ">=0.9cma" || echo -)"
    done
    rc_row "UCT get zcopy 1 MB (MB/s)" \
        "$(combine uct get rc-zcopy rc_sr 1048576 bw_MBps)" "" \
        "$(combine uct get rc-zcopy cma 1048576 bw_MBps)" "-"
    rc_row "UCT put_bw zcopy 1 MB (MB/s)" \
        "$(combine uct put_bw rc-zcopy rc_sr 1048576 bw_MBps)" "" \
        "$(combine uct put_bw rc-zcopy cma 1048576 bw_MBps)" "-"
    rc_row "UCT am_bw bcopy 8 KB (MB/s)" \
        "$(combine uct am_bw rc-bcopy rc_sr 8192 bw_MBps)" \
        "$(combine uct am_bw rc-bcopy tcp 8192 bw_MBps)" "" "-"
    rc_row "bytes/conn malloc (both ends)" \
        "$(rcmem rc_sr bytes_per_conn_malloc)" "$(rcmem tcp bytes_per_conn_malloc)" "" "-"
    rc_row "bytes/conn RSS (both ends)" \
        "$(rcmem rc_sr rss_per_conn)" "$(rcmem tcp rss_per_conn)" "" "-"
    rc_row "fds/conn (both ends)" \
        "$(rcmem rc_sr fds_per_conn)" "$(rcmem tcp fds_per_conn)" "" "-"
    ks_r=$(rcmem rc_sr kernel_sock_bytes_per_conn); ks_t=$(rcmem tcp kernel_sock_bytes_per_conn)
    [ "$ks_r" = -1 ] && ks_r=; [ "$ks_t" = -1 ] && ks_t=
    rc_row "kernel TCP slab bytes/conn (both ends)" "$ks_r" "$ks_t" "" "-"

    RCTABLE=$OUT/rc_table.txt
    {
        echo
        echo "== rc summary ($STAT of $REPS; UCP 'cma' = UCX_TLS=cma,tcp,self; ratios rc_sr/x:"
        echo "   < 1 is better for latency and bytes, > 1 for bandwidth)"
        awk -F, '
            function fmt(v) {
                if (v !~ /^[0-9.eE+-]+$/) return v
                if (v + 0 >= 1000)        return sprintf("%.0f", v)
                return sprintf("%.3g", v)
            }
            NR == 1 {
                printf "%-38s | %8s | %8s | %8s | %6s | %6s | %8s | %s\n", "metric", "rc_sr", "tcp", "cma", "/tcp", "/cma", "target", "met?"
                print "---------------------------------------+----------+----------+----------+--------+--------+----------+-----"
                next
            }
            { printf "%-38s | %8s | %8s | %8s | %6s | %6s | %8s | %s\n", $1, fmt($2), fmt($3), fmt($4), $5, $6, $7, $8 }
        ' "$RCSUM"
        echo
        echo "targets (reported, not asserted):"
        awk -F, '
            NR == 1 { next }
            $1 == "UCP tag_bw 1 MB (MB/s)" {
                printf "  rendezvous bandwidth, UCP tag_bw 1 MB: rc_sr %s MB/s = %sx cma %s MB/s (>= 0.9x): %s\n",
                    $2, $6, $4, ($8 == "yes") ? "met" : ($8 == "NO" ? "MISSED" : "n/a")
            }
            $1 ~ /^UCP tag_lat (8 B|1 KB) / {
                printf "  small-message latency, %s: rc_sr %s vs tcp %s (<= tcp): %s\n",
                    $1, $2, $3, ($8 == "yes") ? "met" : ($8 == "NO" ? "MISSED" : "n/a")
            }' "$RCSUM"

        # receive buffers: per connection (an RC design with buffers of
        # its own for every connection: MVAPICH / MPICH2 style, credits x
        # buffer each) against rc_sr's pool shared by all connections
        desc=$(rcmem rc_sr conn_descriptors); dbytes=$(rcmem rc_sr conn_descriptor_bytes)
        rxbuf=$(rcmem rc_sr rx_buf_bytes); pool=$(rcmem rc_sr rx_pool_buffers)
        if [ -n "$desc" ] && [ -n "$pool" ]; then
            echo
            echo "== Resources of one connection ($RC_CONNS connections, both ends in one process)"
            awk -v conns="$RC_CONNS" \
                -v r_m="$(rcmem rc_sr bytes_per_conn_malloc)" -v t_m="$(rcmem tcp bytes_per_conn_malloc)" \
                -v r_rss="$(rcmem rc_sr rss_per_conn)" -v t_rss="$(rcmem tcp rss_per_conn)" \
                -v r_st="$(rcmem rc_sr conn_state_bytes)" \
                -v r_fd="$(rcmem rc_sr fds_per_conn)" -v t_fd="$(rcmem tcp fds_per_conn)" \
                -v r_cfd="$(rcmem rc_sr conn_fds)" \
                -v r_ks="$(rcmem rc_sr kernel_sock_bytes_per_conn)" -v t_ks="$(rcmem tcp kernel_sock_bytes_per_conn)" \
                -v r_kl="$(rcmem rc_sr sockbuf_limit_bytes_per_conn)" -v t_kl="$(rcmem tcp sockbuf_limit_bytes_per_conn)" \
                -v r_ck="$(rcmem rc_sr conn_kernel_bytes)" \
                -v r_ka="$(rcmem rc_sr sockbuf_alloc_bytes_per_conn)" -v t_ka="$(rcmem tcp sockbuf_alloc_bytes_per_conn)" \
                -v r_cr="$(rcmem rc_sr create_ns_per_ep)" -v t_cr="$(rcmem tcp create_ns_per_ep)" \
                -v r_ct="$(rcmem rc_sr connect_ms)" -v t_ct="$(rcmem tcp connect_ms)" \
                -v desc="$desc" -v dbytes="$dbytes" -v rxbuf="$rxbuf" -v pool="$pool" 'BEGIN {
                f = "%-52s | %-22s | %s\n"
                printf f, "per connection", "rc_sr", "tcp"
                print "-----------------------------------------------------+------------------------+-----------------------"
                printf f, "user-space bytes, both ends (malloc growth)", r_m, t_m
                printf f, "  rc_sr own figure: state of one end", r_st, "-"
                printf f, "resident bytes, both ends (RSS growth)", r_rss, t_rss
                printf f, "file descriptors, both ends", r_fd " (" r_cfd " per end)", t_fd
                printf f, "kernel socket objects, both ends (TCP slab)", (r_ks == -1) ? "not readable" : r_ks, (t_ks == -1) ? "not readable" : t_ks
                printf f, "kernel buffer limit, both ends (SNDBUF+RCVBUF)", r_kl " (" r_ck " per end)", t_kl
                printf f, "kernel buffers allocated while idle", r_ka, t_ka
                printf f, "create time per endpoint (us)", sprintf("%.1f", r_cr / 1000), sprintf("%.1f", t_cr / 1000)
                printf f, "all " conns " connected after (ms)", r_ct, t_ct
                printf f, "receive buffers it may occupy (credits x buffer)", desc " x " rxbuf " = " dbytes, "kernel buffers only"
                print ""
                print "receive buffers of an interface, by number of connections: an RC design with"
                print "buffers of its own per connection (MVAPICH/MPICH2 style, " desc " x " rxbuf " B each)"
                print "against the shared pool of rc_sr (SRQ: UCX_RC_SR_RX_QUEUE_LEN " pool " x " rxbuf " B, constant):"
                g = "%11s | %22s | %22s | %s\n"
                printf g, "connections", "per-connection buffers", "rc_sr shared pool", "ratio"
                print "------------+------------------------+------------------------+------"
                n = split("1 16 128 " conns " 10000", ns, " ")
                for (i = 1; i <= n; i++) {
                    if (i > 1 && ns[i] == ns[i - 1]) continue
                    per = ns[i] * dbytes; shared = pool * rxbuf
                    printf g, ns[i], human(per), human(shared), sprintf("%.2f", per / shared)
                }
            }
            function human(b) {
                if (b >= 1048576) return sprintf("%.1f MB (%.0f)", b / 1048576, b)
                if (b >= 1024)    return sprintf("%.1f KB (%.0f)", b / 1024, b)
                return b " B"
            }'
        fi
    } | tee "$RCTABLE"

    # -- plots
    if ensure_gnuplot; then
        RCBW=$OUT/rc_sweep.csv
        echo "size,rc_sr_bw_MBps,tcp_bw_MBps,cma_bw_MBps" > "$RCBW"
        for s in $RC_BW_SIZES; do
            m() { local v; v=$(combine ucp tag_bw rc "$1" $s bw_MBps); echo "${v:-NaN}"; }
            echo "$s,$(m rc_sr),$(m tcp),$(m cma)" >> "$RCBW"
        done
        RCLAT=$OUT/rc_latency_plot.csv
        : > "$RCLAT"
        for p in "uct am_lat rc-short 8 UCT-am_lat-8B" "ucp tag_lat rc 8 UCP-tag_lat-8B" \
                 "ucp tag_lat rc 1024 UCP-tag_lat-1KB" "ucp tag_lat rc 4096 UCP-tag_lat-4KB"; do
            set -- $p
            v1=$(combine $1 $2 $3 rc_sr $4 lat50_us); v2=$(combine $1 $2 $3 tcp $4 lat50_us)
            echo "$5,${v1:-NaN},${v2:-NaN}" >> "$RCLAT"
        done
        RCRMA=$OUT/rc_1mb_plot.csv
        : > "$RCRMA"
        for p in "ucp tag_bw rc UCP-tag_bw" "uct get rc-zcopy UCT-get-zcopy" "uct put_bw rc-zcopy UCT-put_bw-zcopy"; do
            set -- $p
            v1=$(combine $1 $2 $3 rc_sr 1048576 bw_MBps); v2=$(combine $1 $2 $3 tcp 1048576 bw_MBps)
            v3=$(combine $1 $2 $3 cma 1048576 bw_MBps)
            echo "$4,${v1:-NaN},${v2:-NaN},${v3:-NaN}" >> "$RCRMA"
        done
        title="($(hostname), $(date +%F), $STAT of $REPS, load at start $(sed -n 's/^host: .* load: \([^ ]*\).*/\1/p' "$OUT/meta.txt"))"
        if gnuplot > "$OUT/logs/gnuplot-rc.log" 2>&1 <<EOF
set datafile separator ","
set datafile missing "NaN"
set terminal pngcairo size 1000,650 font "sans,11" noenhanced
set key top left box opaque
set grid xtics ytics lc rgb "#dddddd"

set output "$OUT/rc_bandwidth.png"
set title "UCP tag_bw over the loopback: rc_sr, tcp, cma (UCX_TLS=cma,tcp,self)\n$title" noenhanced
set logscale x 2
set xtics ("64KB" 65536, "256KB" 262144, "1MB" 1048576, "4MB" 4194304, "16MB" 16777216)
set xrange [65536 / 1.5 : 16777216 * 1.5]
set yrange [0:*]
set xlabel "message size"
set ylabel "bandwidth (MB/s)"
plot "$RCBW" every ::1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#d62728" title "rc_sr", \
     "$RCBW" every ::1 using 1:3 with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "tcp", \
     "$RCBW" every ::1 using 1:4 with linespoints lw 2 pt 9 lc rgb "#2ca02c" title "cma (+tcp)"

unset logscale x
unset xtics
set xtics
unset xrange
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid noxtics ytics

set output "$OUT/rc_latency.png"
set title "Small-message latency, p50 one-way: rc_sr vs tcp\n$title" noenhanced
set xlabel ""
set ylabel "latency (usec)"
plot "$RCLAT" using 2:xtic(1) title "rc_sr" lc rgb "#d62728", \
     "" using 3 title "tcp" lc rgb "#1f77b4"

set output "$OUT/rc_1mb.png"
set title "1 MB transfers: UCP rendezvous and UCT one-sided zcopy\n$title" noenhanced
set ylabel "bandwidth (MB/s)"
plot "$RCRMA" using 2:xtic(1) title "rc_sr" lc rgb "#d62728", \
     "" using 3 title "tcp" lc rgb "#1f77b4", \
     "" using 4 title "cma (UCP: +tcp)" lc rgb "#2ca02c"
EOF
        then
            echo "plots: $OUT/rc_bandwidth.png $OUT/rc_latency.png $OUT/rc_1mb.png"
        else
            echo "ud_sr_bench: gnuplot failed (see $OUT/logs/gnuplot-rc.log)" >&2
        fi
    fi
fi # section "rc"

END=$(date +%s)
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/meta.txt"
if awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    echo "WARNING: $LOAD_WARN"
fi
echo "csv: $RAW $CPUCSV ${SWEEP:-} ${SUMMARY:-} ${MEMCSV:-} ${ZCSV:-} ${RCSUM:-} ${RCMEMCSV:-} ${RCBW:-}"
echo "elapsed: $((END - START)) s"
echo "elapsed: $((END - START)) s" >> "$OUT/meta.txt"
if [ $FAILED -gt 0 ]; then
    echo "ud_sr_bench: $FAILED measurement(s) could not be taken" >&2
    exit 1
fi
exit 0
