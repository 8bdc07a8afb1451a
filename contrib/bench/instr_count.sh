#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: instructions per 8-byte active message, send +
# receive, over ud_sr, rc_sr, rc_fp, aptus and UCX's tcp, counted by
# callgrind on the UCT-level
# loop of test/perf/am_instr.c (two interfaces in one process bounce an
# am_short; only the loop is counted, user space, the thread that runs it).
# Counting is deterministic, so a busy machine does not change it.
# The UD timer tick of ud_sr and aptus is set to 1 s (its largest) so that the
# delayed-ACK and retransmission checks, which fire by wall clock and would
# fire far more often under valgrind's slowdown than at full speed, stay
# out of the count. aptus has earned RC and its fast path in the warm-up
# (the interface's statistics, in instr-aptus.log, say which channel the
# messages took). Per transport, the functions that cost the most (self
# cost) are kept in functions-TL.txt.
#
#   contrib/bench/instr_count.sh [--iters N] [--out DIR]
#   INSTR_TLS   transports (default "ud_sr rc_sr rc_fp aptus tcp")
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
    env UCX_NET_DEVICES=lo UCX_UD_SR_TIMER_TICK=1s \
        UCX_APTUS_TIMER_TICK=1s LD_PRELOAD="$lib" UCX_APTUS_STATS=stdout \
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
