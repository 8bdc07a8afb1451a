#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: what the first message of a new stream costs (ud_sr opens a
# stream with a handshake, one extra round trip) beside the one-way latency
# of an open stream, for ud_sr, aptus and UCX's tcp (first_msg.c, UCT level,
# one process). Prints a table and writes it to $OUT/first_msg.txt.
#
#   contrib/bench/first_msg.sh [-r ROUNDS] [-n ITERS] [-t "TL ..."] [DEV]
#     -r  first-message rounds, a fresh interface pair each (200)
#     -n  timed ping-pongs on the open stream (10000; 1000 warm-up)
#     -t  transports (default "ud_sr aptus tcp")
#     DEV device (default lo)
#   APTUS_LIB  libuct_aptus.so (default build/.libs/libuct_aptus.so),
#              preloaded into every run, tcp's too, so that all run alike
#   OUT        output directory (default /tmp/first_msg)
#
# Exit status: 0, 1 when a transport could not be measured (its log is
# named on stderr), 2 on bad options or a missing library.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
out=${OUT:-/tmp/first_msg}
rounds=200
iters=10000
tls="ud_sr aptus tcp"
while getopts "r:n:t:h" opt; do
    case $opt in
    r) rounds=$OPTARG ;;
    n) iters=$OPTARG ;;
    t) tls=$OPTARG ;;
    *)
        sed -n '2,17s/^# \{0,1\}//p' "$0"
        [ "$opt" = h ] && exit 0 || exit 2
        ;;
    esac
done
shift $((OPTIND - 1))
dev=${1:-lo}
if [ ! -f "$lib" ]; then
    echo "first_msg: $lib not found (build it, or set APTUS_LIB)" >&2
    exit 2
fi
mkdir -p "$out" || exit 2
gcc -std=gnu99 -O2 -Wall -o "$out/first_msg" "$top/contrib/bench/first_msg.c" \
    $(pkg-config --cflags --libs ucx) || exit 2

failed=0
rows=()
for tl in $tls; do
    log=$out/$tl.log
    # one process per transport: no transport's threads or pools in
    # another's measurement
    if ! env LD_PRELOAD="$lib${LD_PRELOAD:+ $LD_PRELOAD}" \
        UCX_WARN_UNUSED_ENV_VARS=n timeout 900 \
        "$out/first_msg" -t "$tl" -d "$dev" -r "$rounds" -n "$iters" \
        >"$log" 2>&1; then
        echo "first_msg: $tl failed, see $log" >&2
        failed=1
        rows+=("| $tl | failed | | | | |")
        continue
    fi
    rows+=("$(awk '/^tl=/ {
        for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "| %s | %.1f | %.1f | %.2f | %.1f | %.1f |", v["tl"],
               v["first_p50_us"], v["first_p90_us"], v["open_p50_us"],
               v["ratio"], v["cold_p50_us"] }' "$log")")
done

{
    echo "first message of a new stream vs an open stream, 8-byte am_short," \
        "dev=$dev rounds=$rounds iters=$iters ($(date -u +%F\ %T) UTC," \
        "$(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg))"
    echo
    echo "| transport | first message median us | p90 | open-stream one-way median us | first / open ratio | cold-interface first median us |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
} | tee "$out/first_msg.txt"
exit $failed
