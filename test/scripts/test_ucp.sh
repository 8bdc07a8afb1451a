#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCP programs over ud_sr: a peer that dies is reported through UCP's peer
# error handling (UCP_ERR_HANDLING_MODE_PEER), both while sending to it and
# while idle (UCP's keepalive over uct_ep_check), and nothing hangs.
# An idle worker's async thread sleeps between its timer's periods.
# UCP's protocol choice from what the transports declare: over aptus,
# large tagged messages take the zero-copy rendezvous (RC-RDMA to the
# peers with a connection) from one active message up (32 KB), not copied
# eager datagrams; over ud_sr they stay eager up to about 170 KB (UD-ZCopy
# gets stall on lost datagrams under contention: see docs/ud_sr.md).
#
#   APTUS_LIB=/path/libuct_aptus.so test/scripts/test_ucp.sh
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/scripts/lib.sh"

lib=$(t_find_lib "$top")
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
    echo "test_ucp: libuct_aptus.so not found (set APTUS_LIB)" >&2
    exit 1
fi
work=$(mktemp -d /tmp/aptus-ucp.XXXXXX)
trap 'rm -rf "$work"' EXIT

if ! gcc -O2 -Wall -o "$work/ucp_peer_failure" "$top/test/ucp/ucp_peer_failure.c" \
        $(pkg-config --cflags --libs ucx) 2>"$work/cc.log"; then
    t_fail "build ucp_peer_failure ($(head -n 3 "$work/cc.log" | tr '\n' ' '))"
    t_summary
    exit 1
fi

if ! gcc -O2 -Wall -o "$work/ucp_idle" "$top/test/ucp/ucp_idle.c" \
        $(pkg-config --cflags --libs ucx) 2>"$work/cc.log"; then
    t_fail "build ucp_idle ($(head -n 3 "$work/cc.log" | tr '\n' ' '))"
fi

# An idle worker's async thread sleeps between its timer's periods: UCX's
# own timers made it wait in whole milliseconds and spin through the rest
# of each period (at a 1.5 ms period, tens of thousands of epoll_wait calls
# a second); a timerfd wakes it once a period (667 a second), plus the
# worker's own progress calls (1000 a second at most).
for tl in ud_sr aptus; do
    if ! command -v strace >/dev/null 2>&1; then
        t_skip "$tl idle: strace not installed"
        continue
    fi
    [ -x "$work/ucp_idle" ] || continue
    env LD_PRELOAD="$lib" UCX_TLS=$tl,self UCX_NET_DEVICES=lo \
        UCX_UD_SR_ASYNC_INTERVAL=1.5ms UCX_APTUS_ASYNC_INTERVAL=1.5ms \
        timeout 60 strace -f -c -e trace=epoll_wait -o "$work/idle.$tl" \
        "$work/ucp_idle" 1 >"$work/idle.$tl.out" 2>&1
    calls=$(awk '$NF == "epoll_wait" { print $4 }' "$work/idle.$tl" 2>/dev/null)
    if ! grep -q ": PASS" "$work/idle.$tl.out"; then
        t_fail "$tl idle: $(tail -n 2 "$work/idle.$tl.out" | tr '\n' ' ')"
    elif [ -n "$calls" ] && [ "$calls" -lt 5000 ]; then
        t_pass "$tl idle for 1 s, timer every 1.5 ms: $calls epoll_wait calls"
    else
        t_fail "$tl idle: ${calls:-?} epoll_wait calls in 1 s (the async thread spins)"
    fi
done

for mode in send idle; do
    # the transport declares the peer dead after 1 s of silence; UCP sends
    # its keepalive every 300 ms: the error must come within seconds
    out=$(env LD_PRELOAD="$lib" UCX_TLS=ud_sr UCX_NET_DEVICES=lo \
              UCX_UD_SR_TIMEOUT=1s UCX_KEEPALIVE_INTERVAL=300ms \
              timeout 60 "$work/ucp_peer_failure" "$mode" 20 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -q ": PASS"; then
        t_pass "peer failure while $mode: $(echo "$out" | grep -o '(.*)' | tail -n1)"
    else
        t_fail "peer failure while $mode (rc=$rc: $(echo "$out" | tail -n 2 | tr '\n' ' '))"
    fi
done

# rndv_from TLS [ENV...]: the size tag_send switches to rendezvous at
rndv_from() {
    local tls=$1
    shift
    env LD_PRELOAD="$lib" UCX_TLS="$tls" UCX_NET_DEVICES=lo "$@" \
        timeout 60 ucx_info -e -u t 2>/dev/null |
        sed -n 's/.*tag_send: .*\.\.\([0-9]*\)\.\.<rndv>.*/\1/p' | head -n1
}
at=$(rndv_from aptus)
if [ -n "$at" ] && [ "$at" -le 65536 ]; then
    t_pass "aptus: tagged messages from $at B take the zero-copy rendezvous"
else
    t_fail "aptus: rendezvous from '${at:-none}' B (expected 64 KB or less)"
fi
at=$(rndv_from ud_sr)
if [ -n "$at" ] && [ "$at" -gt 65536 ]; then
    t_pass "ud_sr: eager up to $at B, then UD-ZCopy"
else
    t_fail "ud_sr: rendezvous from '${at:-none}' B (expected eager past 64 KB)"
fi

t_summary
