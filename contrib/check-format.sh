#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Every C and C++ source of the repository formatted as .clang-format says
# (clang-format from Debian's clang-format package), and every source and
# script carrying the licence line (LICENSE). Prints one line per file that
# differs, with the number of lines clang-format would change, and "N
# passed, M failed". --fix formats them in place.
#
#   contrib/check-format.sh [--fix]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. test/scripts/lib.sh

if ! command -v clang-format >/dev/null; then
    echo "check-format: clang-format not found (apt-get install clang-format)" >&2
    exit 1
fi
files=$(git ls-files 'src/*.[ch]' 'test/*.[ch]' 'test/*.cc' 'contrib/*.c' \
                     'contrib/*.h')
differ=0
for f in $files; do
    if [ "${1:-}" = "--fix" ]; then
        clang-format -i "$f"
        continue
    fi
    n=$(clang-format "$f" | diff "$f" - | grep -c '^>')
    if [ "$n" -gt 0 ]; then
        t_fail "$f: $n lines differ from clang-format"
        differ=$((differ + 1))
    fi
done
[ "${1:-}" = "--fix" ] && exit 0

unlicensed=$(git ls-files '*.c' '*.h' '*.cc' '*.sh' '*.py' '*.am' '*.ac' |
             grep -v '/results/' | xargs grep -L 'SPDX-License-Identifier: BSD-3-Clause')
if [ -z "$unlicensed" ]; then
    t_pass "every source and script carries the licence line"
else
    t_fail "no licence line in:" $unlicensed
fi
if [ "$differ" -eq 0 ]; then
    t_pass "$(wc -w <<<"$files") files formatted as .clang-format says" \
           "($(clang-format --version | sed 's/^.*version //'))"
fi
t_summary
