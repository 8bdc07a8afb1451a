#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ucx_perftest between two processes over ud_sr: UCT level (am_lat, am_bw
# with short, bcopy and zcopy) and UCP level (tag, sync tag, active
# messages, stream) from 8 B to 4 MB, and tag_lat/tag_bw from 16 KB to
# 16 MB with UD-ZCopy on and off. Then over rc_sr: UCT am_lat, am_bw,
# put_lat, put_bw and get (short, bcopy, zcopy) and UCP tag_lat, tag_bw,
# ucp_put_lat, ucp_put_bw and ucp_get, 8 B to 16 MB; over aptus, each
# channel of its rule chain; over rc_fp in each fast-path mode, UCT am_lat
# and am_bw and UCP tag_lat and tag_bw, 8 B to 8 KB. A check passes when
# both sides finish and the transport's statistics show that it carried the
# traffic (messages both ways, or one-sided puts or gets; for the UD-ZCopy
# runs, that large messages were, or were not, fetched with zero-copy gets;
# for rc_sr rendezvous, that they were fetched with one-sided gets).
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

# TL: the transport whose statistics are checked; KEYS: counters that must
# be non-zero (summed over both sides).
TL=ud_sr
KEYS="tx_msgs rx_msgs"

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
        # both sides' last words (a UCX error or backtrace), and the
        # stacks of two that waited for each other
        grep -v '^[|+]\|^ *$' "$work/client.log" | tail -n 25 |
            sed 's/^/    client: /'
        grep -v '^ *$' "$work/server.log" | tail -n 25 | sed 's/^/    server: /'
        [ -s "$work/server.stacks" ] && sed 's/^/    /' "$work/server.stacks"
        rm -f "$work/server.stacks"
        return
    fi
    # the transport carried the traffic
    local key shown=""
    for key in $KEYS; do
        local v
        v=$(stat_sum "$stats" "$key")
        if [ "$v" -lt 1 ]; then
            t_fail "$name (statistics do not show $key over $TL)"
            return
        fi
        [ "$key" = gets ] || [ "$key" = puts ] && shown+=", $key=$v"
    done
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
           "$(perftest_final "$work/client.log" 8) msg/s$zc$shown"
}

# stat_sum STATS-PREFIX KEY: KEY summed over the $TL lines of both sides.
stat_sum() {
    cat "$1".* 2>/dev/null | awk -v key="$2" -v tl="$TL" '
        $1 == "aptus-stats" && index($2, tl "/") == 1 {
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

# rc_sr: RC-SR eager messages and RC-RDMA one-sided put/get
TL=rc_sr
run "rc_sr uct am_lat short 8B"     5000 "" -t am_lat -x rc_sr -d lo -D short -s 8
run "rc_sr uct am_lat bcopy 8KB"    5000 "" -t am_lat -x rc_sr -d lo -D bcopy -s 8192
run "rc_sr uct am_lat zcopy 8KB 2iov" 2000 "" -t am_lat -x rc_sr -d lo -D zcopy -s 4096,4096
run "rc_sr uct am_bw short 8B"     20000 "" -t am_bw  -x rc_sr -d lo -D short -s 8
run "rc_sr uct am_bw bcopy 8KB"     5000 "" -t am_bw  -x rc_sr -d lo -D bcopy -s 8192
run "rc_sr uct am_bw zcopy 8KB"     5000 "" -t am_bw  -x rc_sr -d lo -D zcopy -s 8192
KEYS=puts
run "rc_sr uct put_lat short 8B"    5000 "" -t put_lat -x rc_sr -d lo -D short -s 8
run "rc_sr uct put_bw bcopy 8KB"    5000 "" -t put_bw -x rc_sr -d lo -D bcopy -s 8192
for size in 8 65536 1048576 16777216; do
    iters=$((size >= 16777216 ? 20 : size >= 1048576 ? 200 : 2000))
    run "rc_sr uct put_bw zcopy ${size}B" $iters "" -t put_bw -x rc_sr -d lo -D zcopy -s $size
done
KEYS=gets
run "rc_sr uct get bcopy 8KB"       5000 "" -t get -x rc_sr -d lo -D bcopy -s 8192
for size in 8 65536 1048576 16777216; do
    iters=$((size >= 16777216 ? 20 : size >= 1048576 ? 200 : 2000))
    run "rc_sr uct get zcopy ${size}B" $iters "" -t get -x rc_sr -d lo -D zcopy -s $size
done
for size in 8 4096 65536 1048576 16777216; do
    iters=$((size >= 16777216 ? 20 : size >= 1048576 ? 200 : 2000))
    KEYS="tx_msgs rx_msgs"
    # above UCP's rendezvous threshold the data moves by one-sided gets
    [ $size -ge 65536 ] && KEYS="tx_msgs rx_msgs gets"
    run "rc_sr ucp tag_lat ${size}B" $iters rc_sr,self -t tag_lat -s $size
    run "rc_sr ucp tag_bw ${size}B"  $iters rc_sr,self -t tag_bw -s $size
    KEYS=puts
    run "rc_sr ucp put_lat ${size}B" $iters rc_sr,self -t ucp_put_lat -s $size
    run "rc_sr ucp put_bw ${size}B"  $iters rc_sr,self -t ucp_put_bw -s $size
    KEYS=gets
    run "rc_sr ucp get ${size}B"     $iters rc_sr,self -t ucp_get -s $size
done

# aptus: UD always, an RC connection once the traffic earns it. Each check
# names the channel the rule chain must have used (statistics of both
# sides): small and large active messages over UD-SR, middle sizes over
# RC-SR, rendezvous data over RC-RDMA -- or, with MAX_RC=0, all on UD.
TL=aptus
KEYS="ud_sr_msgs rx_in_order"
run "aptus uct am_lat short 8B"       5000 "" -t am_lat -x aptus -d lo -D short -s 8
run "aptus uct am_lat bcopy 32KB"     1000 "" -t am_lat -x aptus -d lo -D bcopy -s 30000
KEYS="rc_sr_msgs rc_granted rx_in_order"
run "aptus uct am_lat bcopy 4KB"      5000 "" -t am_lat -x aptus -d lo -D bcopy -s 4096
run "aptus uct am_bw bcopy 4KB"      20000 "" -t am_bw  -x aptus -d lo -D bcopy -s 4096
run "aptus uct am_bw zcopy 8KB 2iov" 20000 "" -t am_bw  -x aptus -d lo -D zcopy -s 4000,4000
KEYS="ud_sr_msgs"
run "aptus ucp tag_lat 8B"            5000 aptus -t tag_lat -s 8
run "aptus ucp tag_bw 20KB"           2000 aptus -t tag_bw -s 20000
KEYS="rc_sr_msgs rc_granted"
run "aptus ucp tag_bw 4KB"           20000 aptus -t tag_bw -s 4096
KEYS="rc_rdma_msgs rc_granted"
run "aptus ucp tag_bw 1MB"             500 aptus -t tag_bw -s 1048576
run "aptus ucp tag_lat 1MB"            500 aptus -t tag_lat -s 1048576
KEYS="ud_zcopy_msgs"
UCX_APTUS_MAX_RC=0 \
    run "aptus ucp tag_bw 1MB MAX_RC=0"  200 aptus -t tag_bw -s 1048576
# puts: over RC-RDMA once the traffic earned a connection; over UD, the
# target reads what the writer exported (a get turned around)
KEYS="rc_rdma_msgs rc_granted"
run "aptus uct put_bw zcopy 1MB"        200 "" -t put_bw -x aptus -d lo -D zcopy -s 1048576
KEYS="zc_puts ud_zcopy_msgs"
UCX_APTUS_MAX_RC=0 \
    run "aptus uct put_bw zcopy 1MB MAX_RC=0" 200 "" -t put_bw -x aptus -d lo -D zcopy -s 1048576
UCX_APTUS_MAX_RC=0 \
    run "aptus uct put_lat zcopy 64KB MAX_RC=0" 500 "" -t put_lat -x aptus -d lo -D zcopy -s 65536
UCX_APTUS_MAX_RC=0 UCX_RNDV_SCHEME=put_zcopy \
    run "aptus ucp tag_bw 1MB rndv=put MAX_RC=0" 200 aptus -t tag_bw -s 1048576

# rc_fp: the fast path in each of its modes, 8 B to 8 KB (the largest
# message it takes). The check is that the fast path carried messages both
# ways (fast-path writes sent and polled, a channel granted).
TL=rc_fp
KEYS="fp_tx_msgs fp_rx_msgs fp_granted"
for mode in veloblock original original_reduced; do
    export UCX_RC_FP_MODE=$mode
    run "rc_fp/$mode uct am_lat short 8B"   5000 "" -t am_lat -x rc_fp -d lo -D short -s 8
    run "rc_fp/$mode uct am_lat bcopy 1KB"  5000 "" -t am_lat -x rc_fp -d lo -D bcopy -s 1024
    run "rc_fp/$mode uct am_lat bcopy 8KB"  2000 "" -t am_lat -x rc_fp -d lo -D bcopy -s 8000
    run "rc_fp/$mode uct am_bw short 8B"   20000 "" -t am_bw  -x rc_fp -d lo -D short -s 8
    run "rc_fp/$mode uct am_bw bcopy 8KB"   5000 "" -t am_bw  -x rc_fp -d lo -D bcopy -s 8000
    run "rc_fp/$mode ucp tag_lat 8B"        5000 rc_fp,self -t tag_lat -s 8
    run "rc_fp/$mode ucp tag_lat 1KB"       5000 rc_fp,self -t tag_lat -s 1024
    run "rc_fp/$mode ucp tag_bw 8B"        20000 rc_fp,self -t tag_bw -s 8
    run "rc_fp/$mode ucp tag_bw 8KB"        5000 rc_fp,self -t tag_bw -s 8000
done
unset UCX_RC_FP_MODE

TL=ud_sr
KEYS="tx_msgs rx_msgs"

t_summary
