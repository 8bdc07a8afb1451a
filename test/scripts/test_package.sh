#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package (debian/): dpkg-buildpackage -us -uc -b on a copy of
# the source tree in a temporary directory (the checkout is left as it
# was), what the package holds (the module, the broadcast libraries,
# aptus-env, its manual page, the docs, and nothing else: no test
# programs, no .la files), its dependency on exactly the installed
# libucx0, lintian (errors fail, warnings are reported), then dpkg -i:
# aptus-env lists ud_sr and the other transports, a short ucx_perftest
# runs through it (ud_sr, aptus), its manual page is
# found, ldconfig knows the libraries; then dpkg --purge: every file is
# gone and aptus-env is off the system's PATH. A source install under
# /usr/local (contrib/build.sh --install, demo.sh) is left alone: the
# package goes to /usr, and the checks name its paths.
# As root, with dpkg-dev and debhelper (contrib/setup-debian.sh); compiles
# the project once (2 to 5 minutes).
#
#   test/scripts/test_package.sh
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/scripts/lib.sh"

pkg=ucx-aptus
for tool in dpkg-buildpackage dpkg-architecture dpkg-parsechangelog dh; do
    if ! command -v $tool >/dev/null 2>&1; then
        t_fail "$tool not installed (contrib/setup-debian.sh installs dpkg-dev and debhelper)"
        t_summary
        exit 1
    fi
done
arch=$(dpkg --print-architecture)
libdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
ucx_version=$(dpkg-query -W -f='${Version}' "libucx0:$arch" 2>/dev/null)
deb=

work=$(mktemp -d /tmp/aptus-pkg.XXXXXX)
installed_here=0
cleanup() {
    # an interrupted run must not leave the package installed
    [ $installed_here -eq 1 ] && dpkg --purge $pkg >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The state of the checkout and of a source install, to compare at the end.
checkout_state() {
    git -C "$top" status --porcelain --ignored 2>/dev/null
}
local_state() {
    md5sum /usr/local/lib/libuct_aptus.so /usr/local/bin/aptus-env 2>/dev/null
}
checkout_before=$(checkout_state)
local_before=$(local_state)

# The checkout's files (tracked, and new ones git does not ignore) into
# $work/src; the UCX source tree (_deps) is linked, not copied.
copy_tree() {
    mkdir -p "$work/src"
    if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$top" && git ls-files -z -c -o --exclude-standard |
            grep -zv '^_deps' |
            tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
            tar -xf - -C "$work/src"
    else
        (cd "$top" && tar --exclude='./build*' --exclude=./_deps \
            --exclude=./debian/build --exclude=./debian/$pkg -cf - .) |
            tar -xf - -C "$work/src"
    fi
    if [ -d "$top/_deps" ]; then
        ln -s "$(cd "$top/_deps" && pwd -P)" "$work/src/_deps"
    fi
    [ -f "$work/src/debian/rules" ]
}

# Prints the files (not directories) of the package, one a line, from /.
deb_files() {
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./|/|'
}

# Builds the package; sets deb.
build() {
    local t0=$(date +%s) jobs
    jobs=$(nproc 2>/dev/null || echo 2)
    if ! copy_tree; then
        t_fail "copy of the source tree into $work/src"
        return 1
    fi
    if ! (cd "$work/src" && dpkg-buildpackage -us -uc -b -j"$jobs") \
            >"$work/build.log" 2>&1; then
        t_fail "dpkg-buildpackage -us -uc -b:"
        tail -n 30 "$work/build.log" | sed 's/^/    /'
        return 1
    fi
    deb=$work/${pkg}_${version}_$arch.deb
    if [ ! -f "$deb" ]; then
        t_fail "dpkg-buildpackage made no ${deb##*/} ($(cd "$work" && ls -- *.deb 2>/dev/null | tr '\n' ' '))"
        return 1
    fi
    t_pass "dpkg-buildpackage -us -uc -b: ${deb##*/} in $(($(date +%s) - t0))s"
}

check_contents() {
    local files f missing='' unexpected='' doc=/usr/share/doc/$pkg
    files=$(deb_files)
    local want="/usr/bin/aptus-env $libdir/libuct_aptus.so
        $libdir/libaptus_bcast.so $libdir/libaptus_bcast_mpich.so
        /usr/share/man/man1/aptus-env.1 $doc/copyright $doc/README.md $doc/NEWS"
    for f in "$top"/docs/*.md; do
        want="$want $doc/docs/${f##*/}"
    done
    for f in $want; do
        echo "$files" | grep -qxF -e "$f" -e "$f.gz" || missing="$missing$f"$'\n'
    done
    t_check "the package holds the module, both broadcast libraries, aptus-env, its manual page and the docs" "${missing%$'\n'}"
    while read -r f; do
        case "$f" in
            /usr/bin/aptus-env | "$libdir"/lib*.so | "$libdir/pkgconfig/ucx-aptus.pc" | \
                /usr/share/man/man1/aptus-env.1.gz | "$doc"/* | \
                "/usr/share/lintian/overrides/$pkg") ;;
            *) unexpected="$unexpected$f"$'\n' ;;
        esac
        case "$f" in
            *.la | *aptus_unit* | *fuzz* | /usr/local/*) unexpected="$unexpected$f"$'\n' ;;
        esac
    done <<<"$files"
    t_check "and nothing else (no test programs, no .la files, nothing under /usr/local)" "${unexpected%$'\n'}"

    # the packaged launcher looks in $libdir only, not in the build tree
    local candidates
    candidates=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/bin/aptus-env |
                 grep 'for candidate in')
    if echo "$candidates" | grep -qF "$libdir/libuct_aptus.so" &&
       ! echo "$candidates" | grep -qF "$work"; then
        t_pass "the packaged aptus-env looks for the module in $libdir, not in the build tree"
    else
        t_fail "the packaged aptus-env looks in: $candidates"
    fi

    local depends
    depends=$(dpkg-deb -f "$deb" Depends)
    if [ -n "$ucx_version" ] && case ", $depends," in *", libucx0 (= $ucx_version),"*) true ;; *) false ;; esac; then
        t_pass "Depends: libucx0 (= $ucx_version), the UCX it was built against"
    else
        t_fail "Depends: $depends (expected libucx0 (= ${ucx_version:-?}))"
    fi
}

check_lintian() {
    local rc errors warnings
    if ! command -v lintian >/dev/null 2>&1; then
        t_skip "lintian not installed"
        return
    fi
    lintian --tag-display-limit 0 "$deb" >"$work/lintian.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then
        t_fail "lintian did not run (exit $rc): $(tail -n 2 "$work/lintian.log" | tr '\n' ' ')"
        return
    fi
    errors=$(grep '^E: ' "$work/lintian.log")
    warnings=$(grep '^W: ' "$work/lintian.log")
    t_check "lintian: no errors" "$errors"
    if [ -n "$warnings" ]; then
        echo "lintian warnings (reported, not failures):"
        echo "$warnings" | sed 's/^/    /'
    fi
}

check_man_source() {
    local out
    if ! command -v groff >/dev/null 2>&1; then
        t_skip "groff not installed (the manual page's source is not checked)"
        return
    fi
    out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$top/contrib/aptus-env.1" 2>&1)
    t_check "groff -man -ww: contrib/aptus-env.1 without warnings" "$out"
}

# aptus-env on the system's PATH, leaving out /usr/local (a source install)
system_aptus_env() {
    PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v aptus-env
}

# the package's module in ld.so's cache: ldconfig names it under /lib or
# /usr/lib (the same directory on a merged /usr), beside any under /usr/local
in_ld_cache() {
    ldconfig -p | grep -qE "=> (/usr)?/lib/${libdir#/usr/lib/}/libuct_aptus\.so\$"
}

check_install() {
    local out tl missing=''
    # minimal images exclude /usr/share/{man,doc} from packages
    # (path-exclude in /etc/dpkg/dpkg.cfg.d): the checks need them
    if ! dpkg --path-include="/usr/share/man/man1/aptus-env.1.gz" \
              --path-include="/usr/share/doc/$pkg/*" \
              -i "$deb" >"$work/install.log" 2>&1; then
        t_fail "dpkg -i ${deb##*/}:"
        tail -n 10 "$work/install.log" | sed 's/^/    /'
        dpkg --purge $pkg >/dev/null 2>&1
        return 1
    fi
    installed_here=1
    t_pass "dpkg -i ${deb##*/}"

    if [ "$(system_aptus_env)" = /usr/bin/aptus-env ]; then
        t_pass "aptus-env on PATH: /usr/bin/aptus-env"
    else
        t_fail "aptus-env on PATH: '$(system_aptus_env)' (expected /usr/bin/aptus-env)"
    fi
    # without a command it names the module it would load
    out=$(env -u APTUS_LIB /usr/bin/aptus-env 2>&1)
    if echo "$out" | grep -qF "$libdir/libuct_aptus.so"; then
        t_pass "aptus-env loads $libdir/libuct_aptus.so"
    else
        t_fail "aptus-env without a command: $out"
    fi
    out=$(env -u APTUS_LIB -u LD_PRELOAD timeout 60 /usr/bin/aptus-env ucx_info -d 2>&1)
    for tl in ud_sr rc_sr rc_fp aptus; do
        echo "$out" | grep -qE "Transport: $tl\$" || missing="$missing $tl"
    done
    if [ -z "$missing" ]; then
        t_pass "aptus-env ucx_info -d lists ud_sr, rc_sr, rc_fp and aptus"
    else
        t_fail "aptus-env ucx_info -d lacks:$missing ($(echo "$out" | grep -i 'aptus\|error' | head -n 3 | tr '\n' ' '))"
    fi
    # a short ucx_perftest through the installed aptus-env: UCT active
    # messages over ud_sr and UCP tags over aptus, on lo
    local tl port=$((26000 + RANDOM % 2000)) pdir
    pdir=$(mktemp -d /tmp/aptus-pkg-perf.XXXXXX)
    for tl in ud_sr aptus; do
        port=$((port + 1))
        local -a args=(-t am_lat -x "$tl" -d lo -s 8 -n 2000)
        [ "$tl" = aptus ] && args=(-t tag_lat -s 8 -n 2000)
        # perftest_pair runs "env ENV... timeout ucx_perftest ...": the
        # last word of ENV, the installed aptus-env, becomes the command
        if perftest_pair "$pdir" "$port" -- -u APTUS_LIB -u LD_PRELOAD \
               UCX_TLS="$tl,self" UCX_NET_DEVICES=lo /usr/bin/aptus-env -- \
               "${args[@]}" 2>/dev/null; then
            t_pass "installed aptus-env ucx_perftest ${args[1]} over $tl: $(perftest_final "$pdir/client.log" 3) us"
        else
            t_fail "installed aptus-env ucx_perftest ${args[1]} over $tl: $(tail -n 2 "$pdir/client.log" | tr '\n' ' ')"
        fi
    done
    rm -rf "$pdir"
    if man -aw aptus-env 2>/dev/null | grep -qx /usr/share/man/man1/aptus-env.1.gz &&
       [ -n "$(MANWIDTH=80 man -P cat /usr/share/man/man1/aptus-env.1.gz 2>/dev/null)" ]; then
        t_pass "man aptus-env: /usr/share/man/man1/aptus-env.1.gz"
    else
        t_fail "man -aw aptus-env: $(man -aw aptus-env 2>&1 | tr '\n' ' ')"
    fi
    if in_ld_cache; then
        t_pass "ldconfig knows $libdir/libuct_aptus.so (the package's trigger)"
    else
        t_fail "ldconfig -p does not list $libdir/libuct_aptus.so"
    fi
}

check_remove() {
    local f left=''
    if ! dpkg --purge $pkg >"$work/remove.log" 2>&1; then
        t_fail "dpkg --purge $pkg: $(tail -n 3 "$work/remove.log" | tr '\n' ' ')"
        return 1
    fi
    installed_here=0
    if dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q "install ok installed"; then
        t_fail "dpkg --purge $pkg: still $(dpkg-query -W -f='${Status}' $pkg)"
    else
        t_pass "dpkg --purge $pkg"
    fi
    while read -r f; do
        [ -e "$f" ] && left="$left$f"$'\n'
    done <<<"$(deb_files)"
    [ -d "/usr/share/doc/$pkg" ] && left="$left/usr/share/doc/$pkg/"$'\n'
    t_check "none of its files is left" "${left%$'\n'}"
    if [ -z "$(system_aptus_env)" ]; then
        t_pass "aptus-env is no longer on PATH (/usr/local left aside)"
    else
        t_fail "aptus-env still on PATH: $(system_aptus_env)"
    fi
    if in_ld_cache; then
        t_fail "ldconfig -p still lists $libdir/libuct_aptus.so"
    else
        t_pass "ldconfig no longer lists $libdir/libuct_aptus.so"
    fi
}

check_man_source
if build; then
    check_contents
    check_lintian
    if [ "$(id -u)" != 0 ]; then
        t_skip "dpkg -i and --purge: not root"
    elif dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q "install ok installed"; then
        t_skip "dpkg -i and --purge: $pkg is installed already (left as it is)"
    elif check_install; then
        check_remove
    fi
fi

t_check "the checkout is as it was (the build ran in $work)" \
    "$(diff <(echo "$checkout_before") <(checkout_state) | grep '^[<>]')"
if [ -n "$local_before" ]; then
    t_check "the source install under /usr/local is as it was" \
        "$(diff <(echo "$local_before") <(local_state) | grep '^[<>]')"
fi
t_summary
