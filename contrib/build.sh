#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Configure and build UCX-Aptus in build/ (and install it with --install).
#
#   contrib/build.sh [--install] [--prefix DIR] [--check]
#     --install   make install (default prefix /usr/local) and ldconfig
#     --check     also build the unit-test programs
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
install=0
check=0
prefix=/usr/local
while [ $# -gt 0 ]; do
    case "$1" in
        --install) install=1 ;;
        --check)   check=1 ;;
        --prefix)  prefix=$2; shift ;;
        *) echo "build: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

ucx_src=$("$top/contrib/get-ucx-src.sh" "$top/_deps" | tail -n1)
jobs=$(nproc 2>/dev/null || echo 2)

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    ./autogen.sh >/dev/null 2>&1 || ./autogen.sh
fi

mkdir -p build
cd build
if [ ! -f Makefile ] || [ ../configure -nt config.status ]; then
    ../configure --prefix="$prefix" --with-ucx-src="$ucx_src" >configure.log 2>&1 || {
        tail -n 30 configure.log >&2
        exit 1
    }
fi
make -j"$jobs" >make.log 2>&1 || { grep -E "error|Error" make.log | head -n 40 >&2; exit 1; }
if [ $check -eq 1 ]; then
    make -j"$jobs" check TESTS= >make-check.log 2>&1 || {
        grep -E "error|Error" make-check.log | head -n 40 >&2
        exit 1
    }
fi
if [ $install -eq 1 ]; then
    make install >make-install.log 2>&1 || { tail -n 20 make-install.log >&2; exit 1; }
    ldconfig 2>/dev/null || true
fi
echo "build: $(pwd)/.libs/libuct_aptus.so"
