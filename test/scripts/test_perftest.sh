#!/bin/bash
# ucx_perftest between two processes over ud_sr: UCT level (am_lat, am_bw
# with short, bcopy and zcopy) and UCP level (tag, sync tag, active
# messages, stream) from 8 B to 4 MB. A check passes when both sides finish
# and the transport's statistics show that ud_sr carried the traffic.
#
#   APTUS_LIB=/path/libuct_aptus.so test/scripts/test_perftest.sh
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/scripts/lib.sh"

lib=$(t_find_lib "$top")
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
    echo "test_perftest: libuct_aptus.so not found (set APTUS_LIB)" >&2
    exit 1
fi
work=$(mktemp -d /tmp/aptus-perftest.XXXXXX)
trap 'rm -rf "$work"' EXIT
port=$((20000 + RANDOM % 5000))

# run NAME ITERS UCX_TLS perftest-args...
run() {
    local name=$1 iters=$2 ucx_tls=$3
    shift 3
    port=$((port + 1))
    local stats="$work/stats-$port"
    local env=(LD_PRELOAD="$lib" UCX_APTUS_STATS="$stats.%p" UCX_NET_DEVICES=lo)
    if [ -n "$ucx_tls" ]; then
        env+=(UCX_TLS="$ucx_tls")
    fi
    if ! perftest_pair "$work" $port -- "${env[@]}" -- "$@" -n "$iters" -w 10; then
        t_fail "$name ($(tail -n 2 "$work/client.log" | tr '\n' ' '))"
        return
    fi
    # ud_sr carried the traffic: one side sent, the other received
    local sent recvd
    sent=$(cat "$stats".* 2>/dev/null | grep -c 'aptus-stats ud_sr/lo .* tx_msgs=[1-9]')
    recvd=$(cat "$stats".* 2>/dev/null | grep -c 'aptus-stats ud_sr/lo .* rx_msgs=[1-9]')
    if [ "$sent" -lt 1 ] || [ "$recvd" -lt 1 ]; then
        t_fail "$name (statistics do not show traffic over ud_sr)"
        return
    fi
    t_pass "$name: lat $(perftest_final "$work/client.log" 3) us," \
           "bw $(perftest_final "$work/client.log" 6) MB/s," \
           "$(perftest_final "$work/client.log" 8) msg/s"
}

# UCT level
run "uct am_lat short 8B"        5000 "" -t am_lat -x ud_sr -d lo -D short -s 8
run "uct am_lat bcopy 1KB"       5000 "" -t am_lat -x ud_sr -d lo -D bcopy -s 1024
run "uct am_lat bcopy 32KB"      1000 "" -t am_lat -x ud_sr -d lo -D bcopy -s 32768
run "uct am_lat zcopy 16KB 2iov" 1000 "" -t am_lat -x ud_sr -d lo -D zcopy -s 8192,8192
run "uct am_bw short 8B"        20000 "" -t am_bw  -x ud_sr -d lo -D short -s 8
run "uct am_bw bcopy 30KB"       2000 "" -t am_bw  -x ud_sr -d lo -D bcopy -s 30000
run "uct am_bw zcopy 32KB"       2000 "" -t am_bw  -x ud_sr -d lo -D zcopy -s 32768

# UCP level (no shared memory: ud_sr carries every byte)
for size in 8 4096 65536 1048576 4194304; do
    iters=$((size >= 1048576 ? 200 : 2000))
    run "ucp tag_lat ${size}B" $iters ud_sr,self -t tag_lat -s $size
    run "ucp tag_bw ${size}B"  $iters ud_sr,self -t tag_bw -s $size
done
run "ucp tag_sync_lat 8B"  2000 ud_sr,self -t tag_sync_lat -s 8
run "ucp am_lat 8B"        2000 ud_sr,self -t ucp_am_lat -s 8
run "ucp am_bw 64KB"        500 ud_sr,self -t ucp_am_bw -s 65536
run "ucp am_bw 1MB"          50 ud_sr,self -t ucp_am_bw -s 1048576
run "ucp stream_bw 1MB"      50 ud_sr,self -t stream_bw -s 1048576

t_summary
