#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Install what UCX-Aptus needs on Debian 12 (run as root), and fetch the
# source of the installed UCX for its internal headers. Idempotent: asks
# APT only for packages that are missing.
#
#   contrib/setup-debian.sh [--no-mpi]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)

packages=(
    build-essential autoconf automake libtool pkg-config dpkg-dev
    debhelper lintian man-db
    libucx-dev libucx0 ucx-utils
    libibverbs-dev librdmacm-dev rdma-core
    libgtest-dev libnuma-dev clang clang-format valgrind
    iproute2 nftables procps strace ethtool gdb
    python3 python3-matplotlib
)
if [ "${1:-}" != "--no-mpi" ]; then
    packages+=(openmpi-bin libopenmpi-dev mpich libmpich-dev)
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: missing packages (${missing[*]}); run as root" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# UCX's internal headers, of exactly the installed version.
"$top/contrib/get-ucx-src.sh" "$top/_deps" | tail -n1
