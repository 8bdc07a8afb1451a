# APTUS_CHECK_UCX: find the installed UCX, the internal headers of exactly
# that version, and the build-time config.h of the installed library.
AC_DEFUN([APTUS_CHECK_UCX], [
    PKG_CHECK_MODULES([UCX], [ucx >= 1.13], [],
        [AC_MSG_ERROR([UCX development files not found (apt-get install libucx-dev)])])
    UCX_VERSION=`$PKG_CONFIG --modversion ucx`
    AC_SUBST([UCX_VERSION])

    AC_PATH_PROG([UCX_INFO], [ucx_info], [], [$PATH:/usr/bin])
    AS_IF([test -z "$UCX_INFO"],
          [AC_MSG_ERROR([ucx_info not found (apt-get install ucx-utils)])])

    AC_ARG_WITH([ucx-src],
        [AS_HELP_STRING([--with-ucx-src=DIR],
            [UCX source tree of the installed version, for internal headers
             (default: fetch Debian's source package with contrib/get-ucx-src.sh)])],
        [], [with_ucx_src=fetch])

    AS_IF([test "x$with_ucx_src" = xfetch -o "x$with_ucx_src" = xyes], [
        AC_MSG_NOTICE([fetching the UCX $UCX_VERSION source package for internal headers])
        with_ucx_src=`$srcdir/contrib/get-ucx-src.sh | tail -n1` ||
            AC_MSG_ERROR([could not fetch the UCX source; pass --with-ucx-src=DIR])
    ])
    AS_IF([test ! -f "$with_ucx_src/src/uct/base/uct_iface.h"],
          [AC_MSG_ERROR([$with_ucx_src is not a UCX source tree (no src/uct/base/uct_iface.h)])])
    UCX_SRC=`cd "$with_ucx_src" && pwd`

    AC_MSG_CHECKING([UCX source version])
    ucx_src_major=`grep 'ucx_ver_major' "$UCX_SRC/configure.ac" | head -n1 | cut -d, -f2 | sed 's/#.*//' | tr -dc '0-9'`
    ucx_src_minor=`grep 'ucx_ver_minor' "$UCX_SRC/configure.ac" | head -n1 | cut -d, -f2 | sed 's/#.*//' | tr -dc '0-9'`
    ucx_src_patch=`grep 'ucx_ver_patch' "$UCX_SRC/configure.ac" | head -n1 | cut -d, -f2 | sed 's/#.*//' | tr -dc '0-9'`
    ucx_src_version="$ucx_src_major.$ucx_src_minor.$ucx_src_patch"
    AC_MSG_RESULT([$ucx_src_version])
    AS_IF([test "x$ucx_src_version" != "x$UCX_VERSION"],
          [AC_MSG_ERROR([UCX source in $UCX_SRC is version $ucx_src_version but the installed UCX is $UCX_VERSION: struct layouts would not match; use the source of the installed version])])

    AC_MSG_CHECKING([build-time config.h of the installed UCX])
    mkdir -p ucx-config
    AS_IF([$UCX_INFO -b > ucx-config/config.h.tmp 2>/dev/null &&
           grep -q '^#define UCX_CONFIG_H' ucx-config/config.h.tmp],
          [mv ucx-config/config.h.tmp ucx-config/config.h],
          [rm -f ucx-config/config.h.tmp
           AC_MSG_ERROR([`$UCX_INFO -b` did not print the UCX build configuration])])
    ucx_cfg_version=`sed -n 's/^#define VERSION *"\(.*\)"/\1/p' ucx-config/config.h`
    AC_MSG_RESULT([ucx-config/config.h (UCX $ucx_cfg_version)])
    AS_CASE([$UCX_VERSION], [$ucx_cfg_version|$ucx_cfg_version.*], [],
            [AC_MSG_ERROR([ucx_info reports UCX $ucx_cfg_version but pkg-config reports $UCX_VERSION])])

    # The exact build of libucs and libuct the module is compiled against:
    # their GNU build IDs, which the module compares with the libraries in
    # the process before it registers (src/uct/base/aptus_ucx_check.c).
    AC_PATH_PROG([READELF], [readelf], [], [$PATH:/usr/bin])
    ucx_libdir=`$PKG_CONFIG --variable=libdir ucx`
    for ucx_lib in ucs uct; do
        AC_MSG_CHECKING([build ID of lib$ucx_lib])
        ucx_bid=
        AS_IF([test -n "$READELF" && test -e "$ucx_libdir/lib$ucx_lib.so"],
              [ucx_bid=`$READELF -n "$ucx_libdir/lib$ucx_lib.so" 2>/dev/null | awk '/Build ID:/ { print $NF; exit }'`])
        AS_IF([test -n "$ucx_bid"], [AC_MSG_RESULT([$ucx_bid])],
              [AC_MSG_RESULT([none (the run-time check of the UCX build is off)])])
        AS_IF([test $ucx_lib = ucs],
              [AC_DEFINE_UNQUOTED([APTUS_UCS_BUILD_ID], ["$ucx_bid"],
                   [GNU build ID of the libucs the module is built against])],
              [AC_DEFINE_UNQUOTED([APTUS_UCT_BUILD_ID], ["$ucx_bid"],
                   [GNU build ID of the libuct the module is built against])])
    done

    UCX_INTERNAL_CPPFLAGS="-DHAVE_CONFIG_H -I\$(top_builddir)/ucx-config -I$UCX_SRC/src $UCX_CFLAGS"
    AC_SUBST([UCX_SRC])
    AC_SUBST([UCX_INTERNAL_CPPFLAGS])
    UCX_MODULE_LIBS="-luct -lucs"
    AC_SUBST([UCX_MODULE_LIBS])
])
