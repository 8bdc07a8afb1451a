#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Compare two builds of the module (before and after a change) with
# ucx_perftest on the loopback, runs interleaved so that both see the same
# machine: latency of 8-byte UCT active messages and UCP tagged messages,
# and UCP tagged bandwidth, for each transport.
#
#   contrib/bench/ab_modules.sh A.so B.so [rounds]   (default 5 rounds)
#   AB_MODE=tl contrib/bench/ab_modules.sh TL_A TL_B [rounds]
#     two transports of one build (APTUS_LIB, default build/.libs), e.g.
#     ud_sr and aptus: the same tests, interleaved the same way
#
# Prints, per test and transport, the best (latency: lowest; bandwidth:
# highest) and the median of the rounds for A and B, with B's change, and
# writes CSV to ${OUT:-/tmp/ab_modules}/ab.csv. Needs a quiet machine:
# anything else running shows up as noise in both columns.
set -u
A=${1:?usage: $0 A.so B.so [rounds]}
B=${2:?usage: $0 A.so B.so [rounds]}
ROUNDS=${3:-5}
OUT=${OUT:-/tmp/ab_modules}
mkdir -p "$OUT"
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found" >&2; exit 1; }
if [ "${AB_MODE:-lib}" = tl ]; then
    # A and B are transports; each column runs its own over one build
    LIB=${APTUS_LIB:-$(cd "$(dirname "$0")/../.." && pwd)/build/.libs/libuct_aptus.so}
    LIB_A=$LIB LIB_B=$LIB TL_A=$A TL_B=$B TLS=pair
else
    LIB_A=$A LIB_B=$B TLS=${AB_TLS:-ud_sr rc_sr}
fi
for lib in "$LIB_A" "$LIB_B"; do
    [ -f "$lib" ] || { echo "no such module: $lib" >&2; exit 1; }
done

port=$((30000 + $$ % 20000))

# run LIB TL KIND ARGS...: prints the Final: line's latency (us) or MB/s
run() {
    local lib=$1 tl=$2 kind=$3 log srv rc
    shift 3
    port=$((port + 1))
    log=$OUT/run.log
    env LD_PRELOAD="$lib" UCX_TLS="$tl,self" UCX_NET_DEVICES=lo \
        timeout 60 ucx_perftest -p $port "$@" > "$log.server" 2>&1 &
    srv=$!
    sleep 0.3
    env LD_PRELOAD="$lib" UCX_TLS="$tl,self" UCX_NET_DEVICES=lo \
        timeout 60 ucx_perftest -p $port 127.0.0.1 "$@" > "$log" 2>&1
    rc=$?
    wait $srv 2>/dev/null
    [ $rc -eq 0 ] || { echo "NA"; return; }
    # Final: iterations, typical lat, avg lat, overall lat, avg bw, overall bw
    case $kind in
        lat)  awk '/^Final:/ {print $4}' "$log" ;;
        bw)   awk '/^Final:/ {print $7}' "$log" ;;
        rate) awk '/^Final:/ {print $9}' "$log" ;; # overall messages/s
    esac
}

tests=(
    "uct_am_lat_8B lat -t am_lat -d lo -s 8 -n 200000"
    "uct_am_rate_8B rate -t am_bw -d lo -s 8 -n 1000000"
    "ucp_tag_lat_8B lat -t tag_lat -s 8 -n 200000"
    "ucp_tag_rate_8B rate -t tag_bw -s 8 -n 1000000"
    "ucp_tag_lat_4KB lat -t tag_lat -s 4096 -n 50000"
    "ucp_tag_bw_64KB bw -t tag_bw -s 65536 -n 5000"
    "ucp_tag_bw_1MB bw -t tag_bw -s 1048576 -n 500"
)

echo "test,tl,round,a,b" > "$OUT/ab.csv"
printf '%-16s %-6s %-4s %10s %10s %8s %10s %10s %8s\n' test tl unit \
    "best A" "best B" "B vs A" "median A" "median B" "B vs A"
for t in "${tests[@]}"; do
    read -r name kind args <<< "$t"
    for tl in $TLS; do
        [ "$TLS" = pair ] || TL_A=$tl TL_B=$tl
        # the UCT test names the transport; UCP takes it from UCX_TLS
        targs_a=$args targs_b=$args
        case $name in uct_*) targs_a="$args -x $TL_A" targs_b="$args -x $TL_B" ;; esac
        vals_a=() vals_b=()
        for r in $(seq "$ROUNDS"); do
            # shellcheck disable=SC2086 # targs is a list of options
            va=$(run "$LIB_A" "$TL_A" "$kind" $targs_a)
            # shellcheck disable=SC2086
            vb=$(run "$LIB_B" "$TL_B" "$kind" $targs_b)
            echo "$name,$tl,$r,$va,$vb" >> "$OUT/ab.csv"
            [ "$va" != NA ] && vals_a+=("$va")
            [ "$vb" != NA ] && vals_b+=("$vb")
        done
        # best (lowest latency, highest bandwidth) and median of the rounds
        stat() { # kind values...
            local k=$1
            shift
            [ $# -eq 0 ] && { echo "NA NA"; return; }
            printf '%s\n' "$@" | sort -g | awk -v k="$k" '
                { v[NR] = $1 }
                END { best = (k == "lat") ? v[1] : v[NR]
                      med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                      printf "%.2f %.2f\n", best, med }'
        }
        read -r best_a med_a < <(stat "$kind" ${vals_a[@]+"${vals_a[@]}"})
        read -r best_b med_b < <(stat "$kind" ${vals_b[@]+"${vals_b[@]}"})
        change() {
            awk -v a="$1" -v b="$2" 'BEGIN {
                if (a == "NA" || b == "NA" || a == 0) { print "NA"; exit }
                printf "%+.1f%%", (b - a) * 100 / a }'
        }
        case $kind in lat) unit=us ;; bw) unit=MB/s ;; rate) unit=msg/s ;; esac
        label=$tl
        [ "$TLS" = pair ] && label="$TL_A/$TL_B"
        printf '%-16s %-6s %-4s %10s %10s %8s %10s %10s %8s\n' "$name" "$label" \
            "$unit" "$best_a" "$best_b" "$(change "$best_a" "$best_b")" \
            "$med_a" "$med_b" "$(change "$med_a" "$med_b")"
    done
done
echo "CSV: $OUT/ab.csv (latency in us, bandwidth in MB/s, rate in messages/s; $ROUNDS rounds each)"
