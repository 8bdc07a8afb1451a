# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: shared helpers of the MPI test scripts (test_mpi.sh,
# test_loss.sh, test_mpi_rc.sh). Sourced, not run. Bash only.
#
# Set by the sourcing script before calling aptus_setup:
#   APTUS_SCRIPT  short name used in messages
# Environment read:
#   APTUS_LIB            path of libuct_aptus.so (required)
#   APTUS_TEST_DIR       work directory (binaries, logs, stats); when set it is
#                        kept, otherwise a scratch directory is made and
#                        removed at the end (kept when something failed)
#   APTUS_MPI_TIMEOUT    per-job time limit in seconds (default 180)
#   APTUS_MPIS           MPI flavours to test (default "openmpi mpich")

APTUS_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../contrib/sched-group.sh
. "$APTUS_REPO/contrib/sched-group.sh"
APTUS_PASSED=0
APTUS_FAILED=0
APTUS_SKIPPED=0
APTUS_WORK=
APTUS_WORK_OWNED=0
APTUS_CLEANUP_HOOKS=()
APTUS_JOB_PID=
APTUS_JOB_BIN=
APTUS_RUN_TLS=
APTUS_RUN_MCA=()
APTUS_T0=$(date +%s.%N)

pass() { echo "PASS: $1"; APTUS_PASSED=$((APTUS_PASSED + 1)); }
fail() { echo "FAIL: $1 ($2)"; APTUS_FAILED=$((APTUS_FAILED + 1)); }
skip() { echo "SKIP: $1 ($2)"; APTUS_SKIPPED=$((APTUS_SKIPPED + 1)); }
note() { echo "  $*"; }

aptus_elapsed() {
    awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

# Exit handler: run cleanup hooks, remove an owned scratch dir on success.
aptus_exit() {
    local rc=$? hook
    trap - EXIT INT TERM
    if [ -n "$APTUS_JOB_PID" ]; then
        # interrupted during a job: timeout passes the signal to the job
        kill -TERM "$APTUS_JOB_PID" 2>/dev/null
        wait "$APTUS_JOB_PID" 2>/dev/null
        APTUS_JOB_PID=
    fi
    if [ -n "$APTUS_JOB_BIN" ]; then
        aptus_kill_leftovers "$APTUS_JOB_BIN"
    fi
    for hook in "${APTUS_CLEANUP_HOOKS[@]}"; do
        $hook || true
    done
    if [ -n "$APTUS_WORK" ] && [ "$APTUS_WORK_OWNED" = 1 ]; then
        if [ "$APTUS_FAILED" -eq 0 ] && [ "$rc" -eq 0 ]; then
            rm -rf -- "$APTUS_WORK"
        else
            echo "logs kept in $APTUS_WORK"
        fi
    fi
    exit "$rc"
}

aptus_setup() {
    local lib=${APTUS_LIB:-}

    if [ -z "$lib" ]; then
        echo "$APTUS_SCRIPT: set APTUS_LIB to the path of libuct_aptus.so" >&2
        exit 2
    fi
    if [ ! -f "$lib" ]; then
        echo "$APTUS_SCRIPT: APTUS_LIB=$lib: no such file" >&2
        exit 2
    fi
    APTUS_LIB=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
    export APTUS_LIB
    APTUS_MPI_TIMEOUT=${APTUS_MPI_TIMEOUT:-180}
    APTUS_MPIS=${APTUS_MPIS:-openmpi mpich}

    trap aptus_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    if [ -n "${APTUS_TEST_DIR:-}" ]; then
        mkdir -p "$APTUS_TEST_DIR" || exit 2
        APTUS_WORK=$(cd "$APTUS_TEST_DIR" && pwd)
    else
        APTUS_WORK=$(mktemp -d "${TMPDIR:-/tmp}/aptus-$APTUS_SCRIPT.XXXXXX") || exit 2
        APTUS_WORK_OWNED=1
    fi
    echo "# $APTUS_SCRIPT: library $APTUS_LIB, work dir $APTUS_WORK," \
         "job timeout ${APTUS_MPI_TIMEOUT}s"
}

# aptus_summary: the final line and the exit status.
aptus_summary() {
    echo "# $APTUS_SCRIPT: total time $(aptus_elapsed "$APTUS_T0")s"
    echo "$APTUS_PASSED passed, $APTUS_FAILED failed, $APTUS_SKIPPED skipped"
    [ "$APTUS_FAILED" -eq 0 ]
}

# aptus_mpicc FLAVOUR: the compiler command of an MPI flavour, or nothing.
aptus_mpicc() {
    case $1 in
    openmpi) command -v mpicc.openmpi ;;
    mpich)   command -v mpicc.mpich ;;
    esac
}

# aptus_build FLAVOUR PROGRAM...: compile test/mpi/PROGRAM.c into
# $APTUS_WORK/PROGRAM_FLAVOUR. One PASS/FAIL/SKIP per flavour; returns
# non-zero when the flavour cannot be used.
aptus_build() {
    local flavour=$1 cc prog log rc=0
    shift
    cc=$(aptus_mpicc "$flavour")
    if [ -z "$cc" ]; then
        skip "$flavour build" "no MPI compiler for $flavour installed"
        return 1
    fi
    for prog in "$@"; do
        log=$APTUS_WORK/build-${prog}_$flavour.log
        if ! "$cc" -O2 -g -Wall -Wextra -o "$APTUS_WORK/${prog}_$flavour" \
                "$APTUS_REPO/test/mpi/$prog.c" >"$log" 2>&1; then
            sed 's/^/    /' "$log"
            rc=1
        fi
    done
    if [ $rc -eq 0 ]; then
        pass "$flavour build ($*)"
    else
        fail "$flavour build ($*)" "compiler errors, see above"
    fi
    return $rc
}

# Kill what is left of a job: processes running one of our test binaries
# (identified by their exact path in the work dir, so nothing else is hit).
aptus_kill_leftovers() {
    local bin=$1 p exe found=0
    for p in /proc/[0-9]*; do
        exe=$(readlink "$p/exe" 2>/dev/null) || continue
        if [ "$exe" = "$bin" ]; then
            kill -9 "${p#/proc/}" 2>/dev/null && found=$((found + 1))
        fi
    done
    if [ $found -gt 0 ]; then
        note "killed $found leftover process(es) of $bin"
    fi
}

# aptus_mpich_group: the CPU cgroup of this script's MPICH jobs, made at the
# first one (and removed at exit); where none can be made, one line says so.
APTUS_MPICH_GROUP_TRIED=0
aptus_mpich_group() {
    [ "$APTUS_MPICH_GROUP_TRIED" = 1 ] && return 0
    APTUS_MPICH_GROUP_TRIED=1
    if aptus_sched_group_open; then
        APTUS_CLEANUP_HOOKS+=(aptus_sched_group_close)
    else
        echo "# MPICH jobs run with a scheduling group per rank" \
             "($APTUS_SCHED_GROUP_WHY): slow when ranks outnumber cores"
    fi
}

# aptus_mpirun NAME FLAVOUR NP PROGRAM [ARGS...]
#
# Runs $APTUS_WORK/PROGRAM_FLAVOUR on NP ranks over ud_sr,self (or
# $APTUS_RUN_TLS) with every rank's statistics in
# $APTUS_WORK/TAG.stats/stats.PID and the output in $APTUS_WORK/TAG.log
# (TAG: NAME with '/', '%' and such made '_').
# Optional globals:
#   APTUS_RUN_PREFIX  array, command put in front of the launcher
#                     (e.g. ip netns exec NS)
#   APTUS_RUN_ENV     array of VAR=VALUE set for the job (and forwarded)
#   APTUS_RUN_TLS     UCX_TLS of the job (default ud_sr,self)
#   APTUS_RUN_PRELOAD libraries preloaded before the module in the job only
#                     (e.g. the multicast MPI_Bcast library)
#   APTUS_RUN_MCA     array of Open MPI MCA NAME VALUE pairs: each replaces
#                     the default of that name (pml ucx, pml_ucx_tls any,
#                     pml_ucx_devices any) or is added after them; an empty
#                     VALUE drops the parameter. Ignored for MPICH.
# Sets APTUS_RUN_RC, APTUS_RUN_LOG, APTUS_RUN_STATS, APTUS_RUN_SECS and
# APTUS_RUN_PIDS (rank-ordered pids, from the programs' summary lines).
aptus_mpirun() {
    local name=$1 flavour=$2 np=$3 prog=$4
    shift 4
    local bin=$APTUS_WORK/${prog}_$flavour t0 kv i
    local -a env launcher fwd=() mca=() extra group=()

    local tag=${name//[^A-Za-z0-9._-]/_}
    APTUS_RUN_LOG=$APTUS_WORK/$tag.log
    APTUS_RUN_STATS=$APTUS_WORK/$tag.stats
    APTUS_RUN_PIDS=()
    rm -rf -- "$APTUS_RUN_STATS" "$APTUS_RUN_LOG"
    mkdir -p "$APTUS_RUN_STATS"

    # shellcheck disable=SC2054  # the comma in ud_sr,self is meant
    env=(LD_PRELOAD="${APTUS_RUN_PRELOAD:+$APTUS_RUN_PRELOAD }$APTUS_LIB${LD_PRELOAD:+ $LD_PRELOAD}"
         UCX_TLS="${APTUS_RUN_TLS:-ud_sr,self}" UCX_NET_DEVICES=lo
         UCX_APTUS_STATS="$APTUS_RUN_STATS/stats.%p,$APTUS_RUN_STATS/stats.%p.csv"
         UCX_WARN_UNUSED_ENV_VARS=n)
    for kv in ${APTUS_RUN_ENV[@]+"${APTUS_RUN_ENV[@]}"}; do
        env+=("$kv")
    done
    case $flavour in
    openmpi)
        for kv in "${env[@]}"; do
            fwd+=(-x "${kv%%=*}")
        done
        # MCA parameters: NAME VALUE pairs, the defaults first
        mca=(pml ucx pml_ucx_tls any pml_ucx_devices any)
        extra=(${APTUS_RUN_MCA[@]+"${APTUS_RUN_MCA[@]}"})
        while [ "${#extra[@]}" -ge 2 ]; do
            for ((i = 0; i < ${#mca[@]}; i += 2)); do
                [ "${mca[i]}" = "${extra[0]}" ] && break
            done
            mca[i]=${extra[0]}
            mca[i + 1]=${extra[1]}
            extra=("${extra[@]:2}")
        done
        launcher=(mpirun.openmpi --allow-run-as-root --oversubscribe
                  --bind-to none)
        for ((i = 0; i < ${#mca[@]}; i += 2)); do
            if [ -n "${mca[i + 1]}" ]; then
                launcher+=(--mca "${mca[i]}" "${mca[i + 1]}")
            fi
        done
        launcher+=("${fwd[@]}" -np "$np")
        ;;
    mpich)
        # Hydra forwards the whole environment to the ranks. It makes every
        # rank a session (an autogroup) of its own: the job runs in one CPU
        # cgroup so that oversubscribed ranks share the cores fairly
        # (contrib/sched-group.sh).
        launcher=(mpiexec.mpich -n "$np")
        aptus_mpich_group
        group=(${APTUS_SCHED_GROUP_RUN[@]+"${APTUS_SCHED_GROUP_RUN[@]}"})
        ;;
    esac

    t0=$(date +%s.%N)
    # Fault-injector settings of the caller's environment are not inherited:
    # a job gets only the faults its test asks for. The job runs in the
    # background so that an interrupt of this script is handled at once
    # (aptus_exit stops the job).
    env -u UCX_UD_SR_FAULT_DROP -u UCX_UD_SR_FAULT_DUP \
        -u UCX_UD_SR_FAULT_REORDER -u UCX_UD_SR_FAULT_DELAY \
        -u UCX_UD_SR_FAULT_SEED \
        ${group[@]+"${group[@]}"} \
        timeout -k 10 "$APTUS_MPI_TIMEOUT" \
        ${APTUS_RUN_PREFIX[@]+"${APTUS_RUN_PREFIX[@]}"} \
        env "${env[@]}" "${launcher[@]}" "$bin" "$@" \
        </dev/null >"$APTUS_RUN_LOG" 2>&1 &
    APTUS_JOB_PID=$!
    APTUS_JOB_BIN=$bin
    wait "$APTUS_JOB_PID"
    APTUS_RUN_RC=$?
    APTUS_JOB_PID=
    APTUS_RUN_SECS=$(aptus_elapsed "$t0")
    aptus_kill_leftovers "$bin"
    APTUS_JOB_BIN=

    # "PROGRAM rank R/N pid P: OK|FAIL ..." -> APTUS_RUN_PIDS[R]=P
    while read -r r p; do
        APTUS_RUN_PIDS[r]=$p
    done < <(sed -n "s|^$prog rank \([0-9]*\)/$np pid \([0-9]*\): .*|\1 \2|p" \
                 "$APTUS_RUN_LOG")
}

# aptus_check_run NAME PROGRAM NP: PASS/FAIL on the exit status, the
# program's verdict and one summary line per rank.
aptus_check_run() {
    local name=$1 prog=$2 np=$3 why=
    if [ "$APTUS_RUN_RC" -eq 124 ] || [ "$APTUS_RUN_RC" -eq 137 ]; then
        why="timed out after ${APTUS_MPI_TIMEOUT}s"
    elif [ "$APTUS_RUN_RC" -ne 0 ]; then
        why="exit status $APTUS_RUN_RC"
    fi
    if grep -q "^$prog: FAIL" "$APTUS_RUN_LOG"; then
        why="${why:+$why, }data mismatch: $(grep -m1 "^$prog: FAIL" "$APTUS_RUN_LOG")"
    elif ! grep -q "^$prog: PASS" "$APTUS_RUN_LOG"; then
        why="${why:+$why, }no verdict line"
    fi
    if [ "${#APTUS_RUN_PIDS[@]}" -ne "$np" ]; then
        why="${why:+$why, }${#APTUS_RUN_PIDS[@]} of $np ranks reported"
    fi
    if [ -z "$why" ]; then
        pass "$name (${APTUS_RUN_SECS}s)"
        return 0
    fi
    fail "$name" "$why; log $APTUS_RUN_LOG"
    grep -E 'FAIL|rror|Abort|abort|signal|timeout|timed out' "$APTUS_RUN_LOG" \
        | head -n 8 | sed 's/^/    | /'
    return 1
}

# aptus_stat PID KEY [TL]: KEY summed over the TL (default ud_sr) lines of
# one rank's stats (empty when the rank wrote no TL line).
aptus_stat() {
    local f=$APTUS_RUN_STATS/stats.$1
    [ -f "$f" ] || return 0
    awk -v key="$2" -v tl="${3:-ud_sr}/" '
        $1 == "aptus-stats" && index($2, tl) == 1 {
            n++
            for (i = 3; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == key) sum += kv[2]
            }
        }
        END { if (n) print sum + 0 }' "$f"
}

# aptus_stat_total KEY [TL]: KEY summed over all ranks of the last job.
aptus_stat_total() {
    local r total=0 v
    for r in "${!APTUS_RUN_PIDS[@]}"; do
        v=$(aptus_stat "${APTUS_RUN_PIDS[$r]}" "$1" "${2:-ud_sr}")
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

# aptus_check_zcopy NAME on|off: PASS when the last job fetched messages
# with UD-ZCopy gets (on: zc_gets > 0 and none aborted) or with none (off).
aptus_check_zcopy() {
    local name=$1 mode=$2 gets bytes aborted resent detail
    gets=$(aptus_stat_total zc_gets)
    bytes=$(aptus_stat_total zc_bytes)
    aborted=$(aptus_stat_total zc_aborted)
    resent=$(aptus_stat_total zc_dgrams_resent)
    detail="zc_gets=$gets zc_bytes=$bytes zc_dgrams_resent=$resent"
    detail="$detail copy_gets=$(aptus_stat_total copy_gets)"
    if [ "$mode" = on ] && [ "$gets" -gt 0 ] && [ "$aborted" -eq 0 ]; then
        pass "$name: large messages moved by UD-ZCopy ($detail)"
    elif [ "$mode" = off ] && [ "$gets" -eq 0 ]; then
        pass "$name: no UD-ZCopy with it off ($detail)"
    else
        fail "$name: UD-ZCopy $mode" "$detail zc_aborted=$aborted"
    fi
}

# aptus_check_traffic NAME NP [TL]: PASS when every rank of the last job
# wrote a TL (default ud_sr) statistics line with tx_msgs > 0 and
# rx_msgs > 0.
aptus_check_traffic() {
    local name=$1 np=$2 tl=${3:-ud_sr} r pid tx rx why='' line=''
    for ((r = 0; r < np; r++)); do
        pid=${APTUS_RUN_PIDS[$r]:-}
        if [ -z "$pid" ]; then
            why="${why:+$why, }rank $r: pid unknown"
            continue
        fi
        tx=$(aptus_stat "$pid" tx_msgs "$tl")
        rx=$(aptus_stat "$pid" rx_msgs "$tl")
        if [ -z "$tx" ]; then
            why="${why:+$why, }rank $r (pid $pid): no $tl stats line"
        elif [ "$tx" -le 0 ] || [ "$rx" -le 0 ]; then
            why="${why:+$why, }rank $r (pid $pid): tx_msgs=$tx rx_msgs=$rx"
        fi
        line="$line r$r:tx=${tx:-?}"
    done
    if [ -z "$why" ]; then
        pass "$name: $tl traffic in every rank ($line )"
        return 0
    fi
    fail "$name: $tl traffic in every rank" "$why"
    return 1
}
