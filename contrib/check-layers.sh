#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The floors of docs/architecture.md, as the includes show them: each floor
# includes only the ones below it, through their public headers.
#
#   proto    nothing of the others (the build also keeps UCX out of it)
#   wire     proto and base, never a channel or a transport (nor the
#            RC-SR protocol: a wire's framing is its own)
#   channel  the wire interfaces (wire.h, conn.h), never one wire's files
#   uct      channels and the wire interfaces (wire_dev.h), never one
#            wire's files: a second wire adds files and edits no transport
#
# and no file includes another folder's private header (*_int.h) or a
# relative path ("../"). Prints one line per rule and "N passed, M failed";
# --count prints the figures only.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. test/scripts/lib.sh

# includes of the files under $1 that match the regular expression $2
includes() {
    git ls-files "$1/*.[ch]" | xargs grep -Hn "^#include \"$2" 2>/dev/null
}

# files that include a private header (*_int.h) of another folder
cross_private() {
    git ls-files 'src/*.[ch]' | while read -r f; do
        dir=$(dirname "$f")
        grep -o '^#include "[^"]*_int\.h"' "$f" | sed 's/#include "//; s/"$//' |
            while read -r inc; do
                case "$inc" in
                */*) [ "src/$(dirname "$inc")" != "$dir" ] && echo "$f: $inc" ;;
                esac
            done
    done
}

if [ "${1:-}" = "--count" ]; then
    echo "relative includes: $(git ls-files 'src/*.[ch]' 'test/*.cc' |
        xargs grep -c '^#include "\.\./' | awk -F: '{s += $2} END {print s}')"
    echo "files including another folder's private header: $(cross_private |
        cut -d: -f1 | sort -u | wc -l)"
    echo "transport files including one wire's files: $(includes src/uct \
        'wire/sock/' | cut -d: -f1 | sort -u | wc -l)"
    exit 0
fi

t_check "proto includes no other floor" \
    "$(includes src/proto '\(\.\./\)*\(channel\|wire\|uct\|bcast\)/')"
t_check "wire includes no channel or transport" \
    "$(includes src/wire '\(\.\./\)*\(channel\|uct\)/')"
t_check "wire includes no transport's protocol (its framing is its own)" \
    "$(includes src/wire '\(\.\./\)*proto/rc_sr_proto')"
t_check "channels include no wire's own files" \
    "$(includes src/channel '\(\.\./\)*wire/sock/')"
t_check "transports include no wire's own files" \
    "$(includes src/uct '\(\.\./\)*wire/sock/')"
t_check "no relative includes" "$(includes src '\.\./')"
t_check "no private header of another folder" "$(cross_private)"
t_summary
