#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus robustness campaign: one command that runs the scenarios of the
# security and robustness issue and ends on one table. It reuses the
# project's own suites and tests and reads their verdicts and counters:
#
#   loss-N%     data-verifying MPI all-to-all (Open MPI and MPICH, 4 ranks,
#               ud_sr) in a network namespace where nftables drops N% of
#               the UDP datagrams; 1 MiB blocks with UD-ZCopy on and off
#   injector    the same under ud_sr's fault injector: drop, duplicate,
#               reorder, delay
#   crc         corrupted datagrams with UCX_UD_SR_CRC=y: caught, never
#               delivered (UCT level)
#   peer-death  a peer killed or gone mid-transfer, eager and zero-copy:
#               the survivor's error comes, nothing hangs (UCT and UCP)
#   stall       a receiver that stops progressing while its peers send
#   forgery     forged input against a live interface: stray and truncated
#               datagrams, wrong keys, guessed tokens, zero-copy requests
#               naming a third address, forged connections
#   replay      a stream's datagrams captured from its opening on and sent
#               again byte for byte (another address; the same one later;
#               after the receiver dropped it), and a flood of openings
#   peer-pid    remote keys and fast-path grants edited to name another
#               process: refused (the peer's pid is proven by the kernel)
#   conn-pressure  half-open connections, no descriptors left, an
#               unhandled timeout
#   settings    every setting with bad values
#   scale       10,000 active endpoints, 100,000 held messages (UCT); the
#               long form adds test_scale.sh (64 ranks, both MPIs)
#   fuzz        libFuzzer on every network-facing parser (contrib/fuzz.sh)
#   sanitizers  the unit suite under ASan and UBSan (leaks at close too)
#   valgrind    the protocol logic and the channels on the fake wire under
#               valgrind's memcheck (errors and definite leaks)
#
# Everything it creates (namespaces, nftables tables, processes) is removed
# on exit, also when a scenario fails; the table's last line says what was
# left behind (must be nothing).
#
#   contrib/campaign.sh [--long] [OUTDIR]      (default build/campaign)
#   --long: loss at 1, 5 and 20% (short: 1 and 5%), fuzz 10^7 executions
#   per target (short: 10^6), test_scale.sh.
# The short form is the "campaign" suite of contrib/run-tests.sh (CI), about
# two minutes on two cores. The last line counts scenarios: "N passed, M
# failed".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
long=0
out=
for a in "$@"; do
    case "$a" in
    --long) long=1 ;;
    -*) echo "campaign: unknown option $a" >&2; exit 2 ;;
    *) out=$a ;;
    esac
done
out=${out:-$top/build/campaign}
mkdir -p "$out"
out=$(cd "$out" && pwd)
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
unit=$top/build/test/unit/aptus_unit
asan=$top/build/test/unit/aptus_unit_asan
if [ ! -f "$lib" ] || [ ! -x "$unit" ]; then
    echo "campaign: build first (contrib/build.sh --check)" >&2
    exit 2
fi
export APTUS_LIB=$lib

# namespaces and nftables tables of ours before we start: what is left at
# the end beyond them is ours
ns_of_ours() { ip netns list 2>/dev/null | awk '$1 ~ /^aptus-/ { print $1 }' | sort; }
ns_before=$(ns_of_ours)
cleanup() {
    local ns
    for ns in $(comm -13 <(echo "$ns_before") <(ns_of_ours)); do
        ip netns delete "$ns" 2>/dev/null
    done
}
trap cleanup EXIT INT TERM

rows=()
failed=0
failed_logs=()
# row NAME LOG DETAIL: a table row from a log with "N passed, M failed"
# or gtest's summary
row() {
    local name=$1 log=$2 detail=$3 p f
    # a script's "N passed, M failed" and gtest's summary, added up
    p=$(awk '/^[0-9]+ passed, [0-9]+ failed/ { s += $1 }
             /^\[  PASSED  \] [0-9]+ test/ { s += $4 } END { print s + 0 }' "$log")
    f=$(awk '/^[0-9]+ passed, [0-9]+ failed/ { s += $3 }
             /^\[  FAILED  \] [0-9]+ tests?, listed/ { s += $4 } END { print s + 0 }' "$log")
    if [ "$f" != 0 ] || [ "$p" = 0 ]; then
        failed=1
        failed_logs+=("$name|$log")
    fi
    rows+=("$name|$p|$f|$detail")
}
# sum KEY LOG: the sum of KEY=value over the PASS lines of a log
sum() {
    # the whole key: "retransmits" is not the tail of "fast_retransmits"
    grep -oE "(^|[^_a-z])$1=[0-9]+" "$2" 2>/dev/null |
        awk -F= '{ s += $2 } END { print s + 0 }'
}
# msgs LOG: "sent S / delivered D / duplicated X / corrupted C / lost L",
# summed over the jobs' exactly-once checks (test_loss.sh)
msgs() {
    awk '/exactly once/ {
            for (i = 1; i <= NF; ++i) {
                split($i, kv, "=");
                gsub(/[^0-9]/, "", kv[2]);
                if (kv[1] ~ /^(sent|delivered|duplicated|corrupted|lost)$/)
                    t[kv[1]] += kv[2];
            }
         }
         END { printf "msgs sent %d / delivered %d / duplicated %d / corrupted %d / lost %d",
                      t["sent"], t["delivered"], t["duplicated"], t["corrupted"], t["lost"] }' "$1"
}
gtest() {
    local name=$1 filter=$2
    local log=$out/$name.log
    shift 2
    "$unit" --gtest_color=no --gtest_filter="$filter" "$@" >"$log" 2>&1
    echo "$log"
}

echo "campaign: logs in $out"

# ---- loss, injector ---------------------------------------------------
rates="1 5"
[ $long -eq 1 ] && rates="1 5 20"
for rate in $rates; do
    log=$out/loss-$rate.log
    APTUS_LOSS_PERCENT=$rate APTUS_LOSS_PARTS=nft APTUS_MPI_TIMEOUT=600 \
        bash "$top/test/scripts/test_loss.sh" "$out/loss-$rate" >"$log" 2>&1
    drops=$(grep -o 'nft dropped [0-9]*' "$log" | awk '{ s += $3 } END { print s + 0 }')
    row "loss-$rate%" "$log" "$(msgs "$log"); nft drops $drops, retransmits $(sum retransmits "$log") + fast $(sum fast_retransmits "$log"), zc resent $(sum zc_dgrams_resent "$log"); every byte checked, 0 wrong"
done
log=$out/injector.log
APTUS_LOSS_PARTS=injector bash "$top/test/scripts/test_loss.sh" "$out/injector" >"$log" 2>&1
row injector "$log" "$(msgs "$log"); dropped $(sum fault_drop "$log"), duplicated $(sum fault_dup "$log"), reordered $(sum fault_reorder "$log"), delayed $(sum fault_delay "$log"); duplicates dropped $(sum rx_duplicates "$log"), 0 wrong"

# ---- UCT and UCP level scenarios ---------------------------------------
log=$(gtest crc '*crc*:*CRC*:*corrupt*')
row crc "$log" "corrupted datagrams counted and dropped, never delivered"
log=$(gtest peer-death '*peer_failure*:*dead*:*killed*:*destroyed_peer*:*connection_loss*:*fails_the_peer*:*silent_peer*:*failure_mid_transfer*:*a_failed_channel*')
bash "$top/test/scripts/test_ucp.sh" >"$out/peer-death-ucp.log" 2>&1
cat "$out/peer-death-ucp.log" >>"$log"
row peer-death "$log" "UCT: eager and zero-copy; UCP: $(grep -o 'error callback after [0-9.]* s' "$out/peer-death-ucp.log" | head -n1)"
log=$(gtest stall '*without_progress*:*while_it_computes*:*receiver_that_computes*:*falls_behind*:*holds_100000*')
row stall "$log" "a receiver away from progress: acknowledged, served, nothing lost"
log=$(gtest forgery '*stray*:*forged*:*bystander*:*bad_key*:*malformed*:*wrong_key*:*reflect*:*guess*')
row forgery "$log" "each kind of forgery dropped and counted, the interface serves on"
log=$(gtest replay '*replayed_datagrams*:*flood_of_openings*:*lost_reset_and_reused*')
row replay "$log" "$(grep -o 'replayed=[0-9]* delivered_wrongly=[0-9]*' "$log" | head -n1) (every datagram of a stream, thrice); opening flood: $(grep -o 'openings=[0-9]* delivered=[0-9]* refused=[0-9]* evicted=[0-9]* streams_kept=[0-9]*' "$log" | head -n1)"
log=$(gtest peer-pid '*edited_key*:*grant_naming_another*:*relayed_challenge*:*grant_of_the_proven*')
row peer-pid "$log" "keys and grants naming another process refused (pid_refused); a relayed challenge proves nothing"
log=$(gtest conn-pressure '*half_open_connections_are_bounded*:*out_of_descriptors_pauses_accepting*:*unhandled_timeout_ends_the_process*')
row conn-pressure "$log" "half-open connections bounded, EMFILE pauses accepting; an unhandled timeout ends the process, peer named"
log=$(gtest settings 'settings.*:*bad_settings*')
row settings "$log" "every setting out of range refused at open, the variable and range named"
log=$(gtest scale '*ten_thousand*:*100000*:*more_than_255*')
if [ $long -eq 1 ]; then
    bash "$top/test/scripts/test_scale.sh" >>"$log" 2>&1
fi
peak=$(grep -o 'process peak_rss_kb=[0-9]* fds=[0-9]*' "$log" | tail -n 1)
row scale "$log" "10,000 endpoints active at once (${peak:-peak not reported}), 100,000 held messages$([ $long -eq 1 ] && echo ', 64-rank jobs')"

# ---- fuzz, sanitizers ----------------------------------------------------
log=$out/fuzz.log
if [ $long -eq 1 ]; then
    bash "$top/contrib/fuzz.sh" --long "$out/fuzz" >"$log" 2>&1
else
    bash "$top/contrib/fuzz.sh" "$out/fuzz" >"$log" 2>&1
fi
execs=$(awk '$2 ~ /^[0-9]+$/ && NF >= 6 { s += $2 } END { print s + 0 }' "$log")
crashes=$(awk '$2 ~ /^[0-9]+$/ && NF >= 6 { s += $3 } END { print s + 0 }' "$log")
row fuzz "$log" "$execs executions over 5 targets, $crashes crashes"
log=$out/sanitizers.log
if [ -x "$asan" ]; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
        "$asan" --gtest_color=no \
        --gtest_filter='-*ten_thousand*' >"$log" 2>&1
    findings=$(grep -cE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$log")
    # a finding fails the row even when every test passed (a leak is
    # reported after the summary)
    [ "$findings" -eq 0 ] || echo "0 passed, 1 failed" >>"$log"
    row sanitizers "$log" "$findings findings (ASan, LeakSanitizer, UBSan)"
else
    echo "0 passed, 1 failed" >"$log"
    row sanitizers "$log" "aptus_unit_asan not built"
fi

# the pure protocol logic and the channels on the fake wire under valgrind's
# memcheck too (the UCT-level tests run under ASan above: under valgrind
# their timers and sockets would take minutes; so would the two-thread
# spinning test of the Veloblock ring, which valgrind runs one thread at a
# time)
log=$out/valgrind.log
if command -v valgrind >/dev/null; then
    # the unit program is libtool's wrapper: valgrind the real one
    UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
        "$top/build/libtool" --mode=execute \
        valgrind --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite "$unit" --gtest_color=no \
        --gtest_filter='rel_window*:ud_sr_proto*:rc_sr_proto*:zcopy*:veloblock*:fp_ring*:fp_proto*:xorder*:send_rules*:chan_alloc*:fault*:ud_chan*:*udz*-veloblock.flag_written_last_is_seen_last' \
        >"$log" 2>&1
    vrc=$?
    verrs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -n 1)
    [ "$vrc" -eq 0 ] || echo "0 passed, 1 failed" >>"$log"
    row valgrind "$log" "${verrs:-?} memcheck errors, definite leaks included (protocol logic and channels on the fake wire)"
else
    echo "0 passed, 1 failed" >"$log"
    row valgrind "$log" "valgrind not installed"
fi

# ---- what is left behind ------------------------------------------------
cleanup
left_ns=$(comm -13 <(echo "$ns_before") <(ns_of_ours) | wc -l)
left_nft=0
if command -v nft >/dev/null; then
    left_nft=$(nft list tables 2>/dev/null | grep -c aptus)
fi
# the jobs' programs run from the scenarios' folders below OUTDIR
left_procs=$(pgrep -f "$out/(loss-|injector|fuzz/)" 2>/dev/null | wc -l)

echo
printf '%-11s %7s %7s  %s\n' scenario passed failed "what it showed"
for r in "${rows[@]}"; do
    IFS='|' read -r n p f d <<<"$r"
    printf '%-11s %7s %7s  %s\n' "$n" "$p" "$f" "$d"
done
printf '%-11s %7s %7s  %s\n' cleanup - - \
    "left behind: $left_ns namespaces, $left_nft nftables tables, $left_procs processes"
[ $((left_ns + left_nft + left_procs)) -eq 0 ] || failed=1
# what failed, from its log: CI keeps only this output
for r in "${failed_logs[@]}"; do
    IFS='|' read -r n log <<<"$r"
    echo
    echo "$n failed ($log):"
    grep -E -A8 '^\[  FAILED  \] [a-z]|Failure$|^FAIL:' "$log" | head -n 40 |
        sed 's/^/  /'
done
# one line for the suite runner: scenarios passed and failed
nfail=0
for r in "${rows[@]}"; do
    IFS='|' read -r n p f d <<<"$r"
    { [ "$f" != 0 ] || [ "$p" = 0 ]; } && nfail=$((nfail + 1))
done
echo "$(( ${#rows[@]} - nfail + (left_ns + left_nft + left_procs == 0) )) passed, $(( nfail + (left_ns + left_nft + left_procs != 0) )) failed"
exit $failed
