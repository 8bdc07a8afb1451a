#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Figures of the source layout of a checkout (issue 29's before and after):
# the folders of src/ and their files, lines per file (the largest, and how
# many pass 800), the includes that climb out by a relative path, the files
# that include another folder's private header (*_int.h), the transport
# files that include one wire's own headers, the pairs of places that
# repeat six or more lines (the duplicates tool, when installed), and the
# files clang-format would change.
#
#   contrib/bench/layout_figures.sh [CHECKOUT]   (default: this one)
set -u
dir=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$dir"
files=$(git ls-files 'src/*.[ch]')

echo "== $(git log --oneline -1)"
echo "-- folders (files)"
for d in $(echo "$files" | xargs -n1 dirname | sort -u); do
    printf '  %-22s %3d\n' "$d" "$(echo "$files" | grep -c "^$d/[^/]*$")"
done
echo "-- lines per file"
echo "$files" | xargs wc -l | grep -v ' total$' | sort -rn > /tmp/layout.$$
printf '  files %d, lines %d, over 800 lines %d; largest:\n' \
    "$(wc -l < /tmp/layout.$$)" "$(awk '{s += $1} END {print s}' /tmp/layout.$$)" \
    "$(awk '$1 > 800' /tmp/layout.$$ | wc -l)"
head -6 /tmp/layout.$$ | sed 's/^/    /'
rm -f /tmp/layout.$$
echo "-- includes"
printf '  relative ("../"): %d\n' \
    "$(echo "$files" | xargs grep -h '^#include "\.\./' | wc -l)"
printf '  files including another folder'"'"'s private header: %d\n' "$(
    for f in $files; do
        grep -o '^#include "[^"]*_int\.h"' "$f" | sed 's/#include "//; s/"$//' |
            while read -r inc; do
                # a bare name is this folder's; a path names its folder
                case "$inc" in */*) ;; *) continue ;; esac
                d=$(dirname "$inc"); d=${d#../}; d=${d#../}
                case "$(dirname "$f")" in *"$d") ;; *) echo "$f" ;; esac
            done
    done | sort -u | wc -l)"
printf '  transport files including a wire/sock header: %d\n' \
    "$(echo "$files" | grep '^src/uct/' | xargs grep -l '^#include ".*sock_' | wc -l)"
if command -v duplicates >/dev/null; then
    printf '  repeated blocks (6+ lines, pairs): %s\n' \
        "$(cd src && duplicates --most 1 --seconds 120 | head -1 | cut -d' ' -f1)"
fi
if command -v clang-format >/dev/null && [ -f .clang-format ]; then
    n=0
    for f in $files; do
        clang-format "$f" | cmp -s - "$f" || n=$((n + 1))
    done
    printf '  files clang-format would change: %d of %d\n' "$n" "$(echo "$files" | wc -l)"
fi
