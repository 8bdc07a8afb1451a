#!/bin/bash
# ucx_perftest between two processes over ud_sr: UCT level (am_lat, am_bw
# with short, bcopy and zcopy) and UCP level (tag, sync tag, active
# messages, stream) from 8 B to 4 MB, and tag_lat/tag_bw from 16 KB to
# 16 MB with UD-ZCopy on and off. A check passes when both sides finish and
# the transport's statistics show that ud_sr carried the traffic (and, for
# the UD-ZCopy runs, that large messages were, or were not, fetched with
# zero-copy gets).
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

# ZC: "on" -- the run must show zero-copy gets (zc_gets > 0, every get
# complete); "off" -- none at all; empty -- not checked.
ZC=

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
    local zc=""
    if [ -n "$ZC" ]; then
        local gets bytes aborted
        gets=$(stat_sum "$stats" zc_gets)
        bytes=$(stat_sum "$stats" zc_bytes)
        aborted=$(stat_sum "$stats" zc_aborted)
        zc=", zc_gets=$gets zc_bytes=$bytes"
        if [ "$ZC" = on ] && { [ "$gets" -lt 1 ] || [ "$aborted" -ne 0 ]; }; then
            t_fail "$name (UD-ZCopy on, but zc_gets=$gets zc_aborted=$aborted)"
            return
        fi
        if [ "$ZC" = off ] && [ "$gets" -ne 0 ]; then
            t_fail "$name (UD-ZCopy off, but zc_gets=$gets)"
            return
        fi
    fi
    t_pass "$name: lat $(perftest_final "$work/client.log" 3) us," \
           "bw $(perftest_final "$work/client.log" 6) MB/s," \
           "$(perftest_final "$work/client.log" 8) msg/s$zc"
}

# stat_sum STATS-PREFIX KEY: KEY summed over the ud_sr lines of both sides.
stat_sum() {
    cat "$1".* 2>/dev/null | awk -v key="$2" '
        $1 == "aptus-stats" && $2 ~ /^ud_sr\// {
            for (i = 3; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == key) sum += kv[2]
            }
        }
        END { print sum + 0 }'
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

# UD-ZCopy on and off (the paper's UD-copy), 16 KB .. 16 MB. UCP fetches
# messages above its rendezvous threshold with get_zcopy when it is on.
for mode in on off; do
    zcopy=y
    [ $mode = off ] && zcopy=n
    for size in 16384 65536 1048576 4194304 16777216; do
        iters=$((size >= 4194304 ? 20 : size >= 1048576 ? 100 : 1000))
        ZC=
        [ $size -ge 1048576 ] && ZC=$mode
        [ $mode = off ] && ZC=off
        UCX_UD_SR_ZCOPY=$zcopy \
            run "ucp tag_bw ${size}B zcopy=$mode" $iters ud_sr,self \
                -t tag_bw -s $size
        UCX_UD_SR_ZCOPY=$zcopy \
            run "ucp tag_lat ${size}B zcopy=$mode" $iters ud_sr,self \
                -t tag_lat -s $size
    done
done
ZC=

t_summary
