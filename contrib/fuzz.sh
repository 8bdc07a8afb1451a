#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus fuzzing: libFuzzer targets for every parser that faces the
# network (test/fuzz/fuzz_*.c: UD-SR datagrams, RC-SR connection bytes,
# UD-ZCopy messages, fast-path control and blocks, the send rule grammar,
# multicast broadcast datagrams and the protocol behind them),
# built with clang under AddressSanitizer and UBSan, each run from its
# corpus in the repository (test/fuzz/corpus/<target>). Ends on a table:
# executions, crashes, corpus, coverage, time. Exits 1 on any crash (the
# input is kept in OUTDIR as crash-*).
#
#   contrib/fuzz.sh [--long] [--runs N] [--update-corpus] [--seed] [OUTDIR]
#     (default)        1,000,000 executions per target (CI)
#     --long           10,000,000 per target
#     --runs N         N per target
#     --update-corpus  merge what the runs found into test/fuzz/corpus
#     --seed           regenerate the seeds (test/fuzz/gen_seeds.c) first
#   OUTDIR: build/fuzz
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
runs=1000000
update=0
seed=0
out=
while [ $# -gt 0 ]; do
    case "$1" in
    --long) runs=10000000 ;;
    --runs) runs=$2; shift ;;
    --update-corpus) update=1 ;;
    --seed) seed=1 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
    esac
    shift
done
out=${out:-$top/build/fuzz}
targets="ud_sr rc_sr zcopy fp send_rules mcast"
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: $cc not found (contrib/setup-debian.sh installs clang)" >&2
    exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
# the pure parsers: the protocol modules and the sock wire's frames
proto="$(ls "$top"/src/proto/*.c) $top/src/wire/sock/sock_frame.c"

if [ $seed -eq 1 ]; then
    gcc -O1 -D_GNU_SOURCE -I"$top/src" "$top/test/fuzz/gen_seeds.c" $proto \
        -o "$out/gen_seeds" || exit 1
    "$out/gen_seeds" "$top/test/fuzz/corpus" || exit 1
fi

failed=0
rows=()
for t in $targets; do
    bin=$out/fuzz_$t
    if ! "$cc" -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
            -fno-sanitize-recover=undefined -I"$top/src" -I"$top/test/fuzz" \
            "$top/test/fuzz/fuzz_$t.c" $proto -o "$bin" 2>"$out/cc-$t.log"; then
        echo "fuzz: building fuzz_$t failed:" >&2
        head -n 20 "$out/cc-$t.log" >&2
        rows+=("$t|-|build failed|-|-|-")
        failed=1
        continue
    fi
    # the repository's corpus is read, never written, unless asked
    work=$out/corpus-$t
    rm -rf "$work"
    mkdir -p "$work"
    seeds=$(ls "$top/test/fuzz/corpus/$t" 2>/dev/null | wc -l)
    cp "$top/test/fuzz/corpus/$t"/* "$work/" 2>/dev/null
    start=$(date +%s.%N)
    (cd "$out" && ASAN_OPTIONS=detect_leaks=1 "$bin" -runs="$runs" \
        -max_len=4200 -print_final_stats=1 -artifact_prefix="$out/" \
        "$work" >"$out/run-$t.log" 2>&1)
    rc=$?
    secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/run-$t.log")
    cov=$(grep -o 'cov: [0-9]*' "$out/run-$t.log" | tail -n1 | awk '{ print $2 }')
    now=$(ls "$work" | wc -l)
    crashes=0
    if [ $rc -ne 0 ]; then
        crashes=1
        failed=1
        echo "fuzz: fuzz_$t found a crash:" >&2
        grep -E "ERROR|check failed|SUMMARY|Test unit written" "$out/run-$t.log" | head -n 8 >&2
    fi
    rows+=("$t|${execs:-0}|$crashes|$seeds -> $now|${cov:-?}|$secs")
    if [ $update -eq 1 ] && [ $rc -eq 0 ]; then
        mkdir -p "$top/test/fuzz/corpus/$t"
        "$bin" -merge=1 "$top/test/fuzz/corpus/$t" "$work" >"$out/merge-$t.log" 2>&1
    fi
done

echo
printf '%-12s %12s %8s %16s %6s %8s\n' target executions crashes "corpus (files)" cov seconds
npass=0
nfail=0
for r in "${rows[@]}"; do
    IFS='|' read -r t e c k v s <<<"$r"
    printf '%-12s %12s %8s %16s %6s %8s\n' "$t" "$e" "$c" "$k" "$v" "$s"
    if [ "$c" = 0 ]; then
        npass=$((npass + 1))
    else
        nfail=$((nfail + 1))
    fi
done
echo "$npass passed, $nfail failed"
exit $failed
