#!/bin/sh
# Regenerate the build system (configure, Makefile.in).
set -e
cd "$(dirname "$0")"
mkdir -p config/aux config/m4
autoreconf -fi
