#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The docs name every variable of this project's transports, and only
# variables that exist.
#
#   UCX    every UCX_UD_SR_*, UCX_RC_SR_*, UCX_RC_FP_* and UCX_APTUS_*
#          variable that README.md and docs/*.md name is one that
#          `ucx_info -c -f` lists with the module loaded, and every one it
#          lists is named there. A name ending in '*' (UCX_APTUS_RCACHE_*)
#          names those it begins; it must begin one, and it documents them
#          only when it says more than the transport's prefix
#          (UCX_UD_SR_* documents nothing). Names are written in full:
#          `UCX_UD_SR_RTO_MIN` / `UCX_UD_SR_RTO_MAX`, not `/ _MAX`.
#   bcast  every APTUS_BCAST* variable the docs name is one that
#          src/bcast/bcast_config.c reads (UCX does not list them), and
#          every one it reads is named.
#
# Needs the built module: APTUS_LIB (run-tests.sh exports it), else
# build/.libs/libuct_aptus.so. Prints one line per rule and
# "N passed, M failed".
#
#   contrib/check-docs-vars.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
. test/scripts/lib.sh

lib=${APTUS_LIB:-build/.libs/libuct_aptus.so}
docs=(README.md docs/*.md)
prefixes=(UD_SR RC_SR RC_FP APTUS)
bcast_src=src/bcast/bcast_config.c

# the names the docs write, UCX_<prefix>... or APTUS_BCAST..., one a line
doc_names() {
    grep -ohE "(^|[^A-Za-z0-9_])$1[A-Z0-9_]*\*?" "${docs[@]}" |
        sed 's/^[^A-Z]//' | sort -u
}

# $1: the names the docs write, $2: the names that exist; prints the
# written names that exist nowhere
unknown() {
    local name stem
    while read -r name; do
        [ -n "$name" ] || continue
        case "$name" in
        *\*)
            stem=${name%\*}
            grep -q "^$stem" <<<"$2" || echo "$name (matches nothing)" ;;
        *_)
            # a prefix in prose ("the UCX_APTUS_ variables")
            grep -q "^$name" <<<"$2" || echo "$name (prefix of nothing)" ;;
        *)
            grep -qx "$name" <<<"$2" || echo "$name" ;;
        esac
    done <<<"$1"
}

# $1: the names the docs write, $2: the names that exist, $3: the
# transport's prefix; prints the existing names the docs do not name
undocumented() {
    local name stems
    stems=$(grep '\*$' <<<"$1" | sed 's/\*$//' | grep -vx "$3")
    while read -r name; do
        [ -n "$name" ] || continue
        grep -qx "$name" <<<"$1" && continue
        if [ -n "$stems" ]; then
            while read -r stem; do
                case "$name" in "$stem"*) continue 2 ;; esac
            done <<<"$stems"
        fi
        echo "$name"
    done <<<"$2"
}

if [ ! -f "$lib" ]; then
    t_fail "the module to ask ucx_info: $lib not found (build first, or set APTUS_LIB)"
    t_summary
    exit
fi
if ! command -v ucx_info >/dev/null; then
    t_fail "ucx_info not found (ucx-utils)"
    t_summary
    exit
fi
listed=$(env LD_PRELOAD="$lib" ucx_info -c -f 2>/dev/null |
    grep -oE '^UCX_[A-Z0-9_]+' | sort -u)

for p in "${prefixes[@]}"; do
    have=$(grep "^UCX_${p}_" <<<"$listed")
    if [ -z "$have" ]; then
        t_fail "ucx_info -c -f lists no UCX_${p}_ variable: the module did not load (see the stderr of: env LD_PRELOAD=$lib ucx_info -c)"
        continue
    fi
    written=$(doc_names "UCX_${p}_")
    t_check "UCX_${p}_: the docs name only variables ucx_info lists" \
        "$(unknown "$written" "$have")"
    t_check "UCX_${p}_: the docs name every variable ucx_info lists ($(wc -l <<<"$have"))" \
        "$(undocumented "$written" "$have" "UCX_${p}_")"
done

read_by_bcast=$(grep -oE '"APTUS_BCAST[A-Z0-9_]*' "$bcast_src" | tr -d '"' |
    sort -u)
written=$(doc_names APTUS_BCAST)
t_check "APTUS_BCAST: the docs name only variables $bcast_src reads" \
    "$(unknown "$written" "$read_by_bcast")"
t_check "APTUS_BCAST: the docs name every variable $bcast_src reads ($(wc -l <<<"$read_by_bcast"))" \
    "$(undocumented "$written" "$read_by_bcast" APTUS_BCAST)"

t_summary
