#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerate the build system (configure, Makefile.in).
set -e
cd "$(dirname "$0")"
mkdir -p config/aux config/m4
autoreconf -fi
