# SPDX-License-Identifier: BSD-3-Clause
# Main job, part: ucx_perftest between two processes on lo, every
# transport of the module beside UCX's tcp and cma. Sourced by
# contrib/demo.sh (needs R, lib, work, test/scripts/lib.sh).

DEMO_TLS="ud_sr rc_sr rc_fp aptus tcp cma"
demo_port=$((23000 + RANDOM % 4000))

# demo_measure KEY TL PERFTEST-ARGS...: R[KEY.TL.lat|bw|mr] from one pair.
demo_measure() {
    local key=$1 tl=$2 env=(UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n)
    shift 2
    demo_port=$((demo_port + 1))
    case $tl in
    tcp) ;;
    *) env+=(LD_PRELOAD="$lib") ;;
    esac
    case "$1,$tl" in
    am_*) set -- -t "$@" -x "$tl" -d lo ;;
    # cma has no active messages: tcp carries eager data and the
    # rendezvous handshake, cma the large messages and one-sided data
    *,cma) env+=(UCX_TLS="cma,tcp,self"); set -- -t "$@" ;;
    *) env+=(UCX_TLS="$tl,self"); set -- -t "$@" ;;
    esac
    if perftest_pair "$work" "$demo_port" -- "${env[@]}" -- "$@"; then
        R[$key.$tl.lat]=$(perftest_final "$work/client.log" 3)
        R[$key.$tl.bw]=$(perftest_final "$work/client.log" 6)
        R[$key.$tl.mr]=$(perftest_final "$work/client.log" 8)
    else
        R[$key.$tl.lat]=fail; R[$key.$tl.bw]=fail; R[$key.$tl.mr]=fail
    fi
}

demo_perftest() {
    local tl
    for tl in $DEMO_TLS; do
        if [ "$tl" != cma ]; then
            demo_measure uct8 "$tl" am_lat -D short -s 8 -n 10000
            demo_measure tag8 "$tl" tag_lat -s 8 -n 10000
            demo_measure tag4k "$tl" tag_lat -s 4096 -n 5000
            demo_measure rate8 "$tl" tag_bw -s 8 -n 50000
        fi
        demo_measure bw64k "$tl" tag_bw -s 65536 -n 1000
        demo_measure bw1m "$tl" tag_bw -s 1048576 -n 100
        demo_measure put1m "$tl" ucp_put_bw -s 1048576 -n 100
        demo_measure get1m "$tl" ucp_get -s 1048576 -n 100
    done
    demo_perftest_row "test" head
    demo_perftest_row "UCT am_lat 8 B (us)" uct8 lat
    demo_perftest_row "UCP tag_lat 8 B (us)" tag8 lat
    demo_perftest_row "UCP tag_lat 4 KB (us)" tag4k lat
    demo_perftest_row "UCP tag_bw 64 KB (MB/s)" bw64k bw
    demo_perftest_row "UCP tag_bw 1 MB (MB/s)" bw1m bw
    demo_perftest_row "UCP 8 B message rate (msg/s)" rate8 mr
    demo_perftest_row "UCP put_bw 1 MB (MB/s)" put1m bw
    demo_perftest_row "UCP get 1 MB (MB/s)" get1m bw
    echo "  (cma: UCX_TLS=cma,tcp,self -- tcp carries the small messages; latency"
    echo "   is the median of one run; every figure from this machine, now)"
}

# demo_perftest_row LABEL KEY FIELD | LABEL head
demo_perftest_row() {
    local tl
    printf '  %-30s' "$1"
    for tl in $DEMO_TLS; do
        if [ "$2" = head ]; then
            printf ' %10s' "$tl"
        else
            printf ' %10s' "${R[$2.$tl.$3]:--}"
        fi
    done
    printf '\n'
}
