#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Fetch the source of the *installed* UCX, for its internal headers.
#
# usage: contrib/get-ucx-src.sh [DESTDIR]
# Prints the path of the unpacked source tree (the directory holding src/uct)
# on its last line. Uses Debian's source package of exactly the installed
# libucx-dev version; enables deb-src entries for the configured suites when
# none exist (root only). Nothing is built from that tree: configure only
# reads its headers.
set -euo pipefail

dest=${1:-$(cd "$(dirname "$0")/.." && pwd)/_deps}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

pkgver=$(dpkg-query -W -f='${Version}' libucx-dev 2>/dev/null || true)
if [ -z "$pkgver" ]; then
    echo "get-ucx-src: libucx-dev is not installed (apt-get install libucx-dev)" >&2
    exit 1
fi
upstream=${pkgver%-*}        # 1.13.1-1 -> 1.13.1
upstream=${upstream#*:}      # drop an epoch if any
tree="$dest/ucx-$upstream"

if [ -f "$tree/src/uct/base/uct_iface.h" ]; then
    echo "$tree"
    exit 0
fi

has_deb_src() {
    grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

if ! has_deb_src; then
    if [ "$(id -u)" != 0 ]; then
        echo "get-ucx-src: no deb-src entry in APT sources; run as root or pass --with-ucx-src=DIR to configure" >&2
        exit 1
    fi
    echo "get-ucx-src: enabling deb-src for Debian's main archive" >&2
    cat > /etc/apt/sources.list.d/ucx-aptus-src.sources <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -q >&2
fi

work=$(mktemp -d "$dest/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source -q --only-source "ucx=$pkgver" >&2) || {
    echo "get-ucx-src: 'apt-get source ucx=$pkgver' failed" >&2
    exit 1
}
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'ucx-*' | head -n1)
if [ -z "$src" ] || [ ! -f "$src/src/uct/base/uct_iface.h" ]; then
    echo "get-ucx-src: unpacked source has no src/uct/base/uct_iface.h" >&2
    exit 1
fi
rm -rf "$tree"
mv "$src" "$tree"
echo "$tree"
