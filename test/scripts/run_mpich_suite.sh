#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: MPICH's own test suite (test/mpi of `apt-get source mpich`),
# run as a user would with its runtests, over UCX's tcp and over ud_sr,
# rc_sr and aptus in the same run, one transport after the other: a line
# per test directory and transport with what passed and failed, and the
# failed tests by name.
#
#   test/scripts/run_mpich_suite.sh [WORKDIR]
#
# WORKDIR (default build/mpich-suite) keeps the source and the built tests
# between runs: the first run fetches the source of the installed MPICH
# (deb-src entries must be enabled, as contrib/get-ucx-src.sh does) and
# builds the directories' tests with mpicc.mpich (configure alone would
# take /usr/bin/mpicc, Open MPI's on Debian).
# Environment:
#   APTUS_LIB            libuct_aptus.so (default: the build tree's)
#   APTUS_MPICH_DIRS     test directories (default "pt2pt")
#   APTUS_MPICH_TLS      transports (default "tcp ud_sr rc_sr aptus";
#                        empty: fetch and build only)
#   APTUS_MPICH_MAXNP    most ranks a test runs with (default 4)
#   APTUS_MPICH_TIMEOUT  seconds a test may take (default 60)
# Every job runs with the module preloaded, UCX_TLS=<tl>,self and
# UCX_NET_DEVICES=lo. Exits non-zero when a test fails over one of our
# transports but passes over tcp in the same run (a failure over tcp too
# is reported, not counted: MPICH 4.0.2 over UCX 1.13's tcp hangs in
# MPI_Finalize at times).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$top/build/mpich-suite}
dirs=${APTUS_MPICH_DIRS:-pt2pt}
tls=${APTUS_MPICH_TLS-tcp ud_sr rc_sr aptus}
maxnp=${APTUS_MPICH_MAXNP:-4}
limit=${APTUS_MPICH_TIMEOUT:-60}

lib=${APTUS_LIB:-}
for c in "$top"/build/.libs/libuct_aptus.so /usr/local/lib/libuct_aptus.so; do
    [ -z "$lib" ] && [ -f "$c" ] && lib=$c
done
[ -n "$lib" ] && [ -f "$lib" ] ||
    { echo "libuct_aptus.so not found (build it, or set APTUS_LIB)" >&2; exit 2; }
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
for prog in mpicc.mpich mpiexec.mpich; do
    command -v $prog >/dev/null ||
        { echo "$prog not found (apt-get install mpich libmpich-dev)" >&2; exit 2; }
done

# ---- the source and the built tests ------------------------------------
mkdir -p "$work"
work=$(cd "$work" && pwd)
src=$(ls -d "$work"/mpich-*/test/mpi 2>/dev/null | head -n 1)
if [ -z "$src" ]; then
    ver=$(dpkg-query -W -f '${Version}' libmpich-dev 2>/dev/null)
    echo "# fetching the source of mpich ${ver:-(any version)}"
    (cd "$work" && apt-get source -q "mpich${ver:+=$ver}") >"$work/fetch.log" 2>&1 || {
        echo "apt-get source mpich failed (are deb-src entries enabled?):" >&2
        tail -n 5 "$work/fetch.log" >&2
        exit 2
    }
    src=$(ls -d "$work"/mpich-*/test/mpi | head -n 1)
fi
if [ ! -f "$src/Makefile" ]; then
    echo "# configuring $src"
    (cd "$src" && ./configure CC=mpicc.mpich MPIEXEC=mpiexec.mpich \
        --disable-fortran --disable-cxx --disable-dtpools --disable-spawn \
        --disable-ft-tests --disable-comm-overlap-tests --disable-perftest \
        --disable-romio) >"$work/configure.log" 2>&1 || {
        echo "configure of MPICH's tests failed: $work/configure.log" >&2
        exit 2
    }
fi
# the Debian patches leave Makefile.am newer than Makefile.in: keep make
# from running an automake this machine does not have
am="ACLOCAL=true AUTOCONF=true AUTOMAKE=true AUTOHEADER=true"
for d in $dirs; do
    [ -d "$src/$d" ] || { echo "no test directory $d in $src" >&2; exit 2; }
    # the programs built once: runtests makes only what is missing
    # shellcheck disable=SC2086 # am is a list of assignments
    make -C "$src/util" CC=mpicc.mpich $am >"$work/build-util.log" 2>&1 &&
        make -k -j"$(nproc)" -C "$src/$d" CC=mpicc.mpich $am \
            >"$work/build-$d.log" 2>&1 ||
        echo "# some tests of $d did not build ($work/build-$d.log): runtests reports them"
done
[ -n "$tls" ] || exit 0

# ---- the runs ----------------------------------------------------------
# runtests' TAP file: "ok  - ./name np # time=..." / "not ok  - ./name np
# # time=...": a failed test as name(np), one per line
failed_of() {
    grep -E '^not ok ' "$1" 2>/dev/null |
        sed -E 's/^not ok +[0-9]* *- \.\/([^ ]+) ([0-9]+).*/\1(\2)/' | sort
}
count_of() { grep -cE "^$2 +[0-9]* *- " "$1" 2>/dev/null; }

rc=0
printf '%-8s %-7s %6s %6s %7s  %s\n' dir tl passed failed seconds "failed tests"
for d in $dirs; do
    for tl in $tls; do
        tap=$work/$d-$tl.tap
        log=$work/$d-$tl.log
        rm -f "$tap"
        start=$(date +%s)
        (cd "$src/$d" && env LD_PRELOAD="$lib" UCX_TLS="$tl,self" \
            UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n \
            MPITEST_TIMEOUT="$limit" MPITEST_MEMORY_TOTAL=4 \
            ../runtests -srcdir=. -tests=testlist -maxnp="$maxnp" \
            -mpiexec=mpiexec.mpich -tapfile="$tap") >"$log" 2>&1
        secs=$(($(date +%s) - start))
        nfail=$(count_of "$tap" "not ok")
        npass=$(count_of "$tap" "ok")
        printf '%-8s %-7s %6s %6s %7s  %s\n' "$d" "$tl" "${npass:-0}" \
            "${nfail:-0}" "$secs" "$(failed_of "$tap" | tr '\n' ' ')"
        [ -s "$tap" ] || { echo "    no results: $log"; [ "$tl" = tcp ] || rc=1; }
    done
    # ours failing where tcp passed (or where tcp did not run) counts
    for tl in $tls; do
        [ "$tl" = tcp ] && continue
        if echo " $tls " | grep -q " tcp "; then
            only=$(comm -23 <(failed_of "$work/$d-$tl.tap") \
                            <(failed_of "$work/$d-tcp.tap"))
            what="fails where tcp does not"
        else
            only=$(failed_of "$work/$d-$tl.tap")
            what="fails (tcp not run)"
        fi
        if [ -n "$only" ]; then
            echo "    $d/$tl $what: $(echo "$only" | tr '\n' ' ')"
            rc=1
        fi
    done
done
echo "logs and TAP files: $work"
exit $rc
