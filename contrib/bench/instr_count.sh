#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: instructions per 8-byte active message, send +
# receive, over ud_sr, rc_sr, rc_fp, aptus and UCX's tcp, counted by
# callgrind on the UCT-level
# loop of test/perf/am_instr.c (two interfaces in one process bounce an
# am_short; only the loop is counted, user space, the thread that runs it).
# Counting is deterministic, so a busy machine does not change it.
# The UD timer tick of ud_sr and aptus is set to 1 s (its largest), and so
# is the tail probe's minimum, so that the delayed-ACK, retransmission and
# probe checks, which fire by wall clock and would fire far more often
# under valgrind's slowdown than at full speed, stay out of the count. aptus has earned RC and its fast path in the warm-up
# (the interface's statistics, in instr-aptus.log, say which channel the
# messages took). Per transport, the functions that cost the most (self
# cost) are kept in functions-TL.txt.
#
# Then the same through UCP, a stream of 8-byte tagged messages
# (ucx_perftest tag_bw, server and client each under callgrind): each side
# is counted twice, at N1 and N2 messages, and the difference divided by
# N2 - N1 is what one more message costs that side, start-up and teardown
# cancelled out. "aptus-ud" is aptus held to its UD channel
# (UCX_APTUS_MAX_RC=0, UCX_APTUS_MAX_FP=0): the hybrid's own cost over the
# UD it rides on.
#
#   contrib/bench/instr_count.sh [--iters N] [--out DIR]
#   INSTR_TLS       transports (default "ud_sr rc_sr rc_fp aptus tcp")
#   INSTR_UCP_TLS   for the UCP stream (default "ud_sr aptus-ud aptus tcp";
#                   empty: none)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
iters=5000
out=
while [ $# -gt 0 ]; do
    case "$1" in
    --iters) iters=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "instr_count: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
out=${out:-$top/contrib/bench/results/bench-$(date +%Y-%m-%d)}
mkdir -p "$out"
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
[ -f "$lib" ] || { echo "instr_count: build first (no $lib)" >&2; exit 2; }
command -v valgrind >/dev/null ||
    { echo "instr_count: needs valgrind (apt-get install valgrind)" >&2; exit 2; }

gcc -O2 -g -Wall -o "$out/am_instr" "$top/test/perf/am_instr.c" \
    $(pkg-config --cflags --libs ucx) || exit 1

csv=$out/instr-count.csv
echo "transport,iters,messages,instructions,per_message" >"$csv"
printf '%-8s %10s %14s %12s\n' tl messages instructions per_msg
for tl in ${INSTR_TLS:-ud_sr rc_sr rc_fp aptus tcp}; do
    rm -f "$out"/callgrind.$tl.*
    env UCX_NET_DEVICES=lo UCX_UD_SR_TIMER_TICK=1s UCX_UD_SR_PROBE_MIN=1s \
        UCX_APTUS_TIMER_TICK=1s UCX_APTUS_PROBE_MIN=1s LD_PRELOAD="$lib" \
        UCX_APTUS_STATS=stdout \
        UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
        UCX_WARN_UNUSED_ENV_VARS=n \
        timeout 600 valgrind --tool=callgrind --toggle-collect=am_instr_loop \
        --callgrind-out-file="$out/callgrind.$tl.%p" \
        "$out/am_instr" -t $tl -n "$iters" >"$out/instr-$tl.log" 2>&1
    ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/instr-$tl.log" | head -n 1)
    if [ -z "$ir" ]; then
        echo "instr_count: $tl: no count (see $out/instr-$tl.log)" >&2
        continue
    fi
    msgs=$((2 * iters))
    per=$((ir / msgs))
    echo "$tl,$iters,$msgs,$ir,$per" >>"$csv"
    printf '%-8s %10s %14s %12s\n' "$tl" "$msgs" "$ir" "$per"
    callgrind_annotate "$out"/callgrind.$tl.* 2>/dev/null |
        sed -n '/^Ir /,$p' | head -n 40 >"$out/functions-$tl.txt"
    rm -f "$out"/callgrind.$tl.*
done
rm -f "$out/am_instr"
echo "csv: $csv; per function: $out/functions-<tl>.txt"

# ---- UCP: one more 8-byte tagged message, each side -----------------------
ucp_tls=${INSTR_UCP_TLS-ud_sr aptus-ud aptus tcp}
[ -n "$ucp_tls" ] || exit 0
command -v ucx_perftest >/dev/null ||
    { echo "instr_count: no ucx_perftest: UCP stream left out" >&2; exit 0; }
n1=20000 n2=100000
ucsv=$out/instr-ucp.csv
echo "transport,side,n1,n2,instructions_n1,instructions_n2,per_message" >"$ucsv"
echo
echo "UCP tag_bw 8 B, instructions per message (one more message, each side):"
printf '%-9s %10s %10s %10s\n' tl sender receiver total
# ucp_count TL N: the collected count of each side, "server client"
ucp_count() {
    local tl=$1 n=$2 port=$((20000 + RANDOM % 10000)) extra=
    [ "$tl" = aptus-ud ] && tl=aptus extra="UCX_APTUS_MAX_RC=0 UCX_APTUS_MAX_FP=0"
    local common="LD_PRELOAD=$lib UCX_TLS=$tl,self UCX_NET_DEVICES=lo \
        UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
        UCX_WARN_UNUSED_ENV_VARS=n UCX_UD_SR_TIMER_TICK=1s \
        UCX_UD_SR_PROBE_MIN=1s UCX_APTUS_TIMER_TICK=1s UCX_APTUS_PROBE_MIN=1s \
        $extra"
    local vg="valgrind --tool=callgrind --dump-instr=no"
    # shellcheck disable=SC2086
    env $common timeout 600 $vg --callgrind-out-file=/dev/null \
        ucx_perftest -p $port -t tag_bw -s 8 -n "$n" -w 1000 \
        >"$out/ucp-$1-$n.server.log" 2>&1 &
    sleep 4 # valgrind's start
    # shellcheck disable=SC2086
    env $common timeout 600 $vg --callgrind-out-file=/dev/null \
        ucx_perftest -p $port 127.0.0.1 -t tag_bw -s 8 -n "$n" -w 1000 \
        >"$out/ucp-$1-$n.client.log" 2>&1
    wait
    echo "$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/ucp-$1-$n.server.log" | head -n 1)" \
         "$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/ucp-$1-$n.client.log" | head -n 1)"
}
for tl in $ucp_tls; do
    read -r s1 c1 < <(ucp_count "$tl" $n1)
    read -r s2 c2 < <(ucp_count "$tl" $n2)
    if [ -z "$s1$c1" ] || [ -z "$s2" ] || [ -z "$c2" ]; then
        echo "instr_count: UCP $tl: no count (see $out/ucp-$tl-*.log)" >&2
        continue
    fi
    rx=$(((s2 - s1) / (n2 - n1)))
    tx=$(((c2 - c1) / (n2 - n1)))
    echo "$tl,sender,$n1,$n2,$c1,$c2,$tx" >>"$ucsv"
    echo "$tl,receiver,$n1,$n2,$s1,$s2,$rx" >>"$ucsv"
    printf '%-9s %10s %10s %10s\n' "$tl" "$tx" "$rx" $((tx + rx))
done
echo "csv: $ucsv"
