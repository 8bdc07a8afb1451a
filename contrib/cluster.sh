#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus: a cluster in a box. See usage() below and docs/cluster.md.
#
# Hosts are network namespaces, each with a PID, UTS, IPC and mount
# namespace of its own, joined by a Linux bridge in a "switch" namespace.
# Nothing is made in the root namespace's network. Needs root, iproute2,
# nftables and util-linux (unshare, nsenter).
set -u

CL_SELF=$(readlink -f "${BASH_SOURCE[0]}")
CL_TOP=$(cd "$(dirname "$CL_SELF")/.." && pwd)
CL_BASE=${APTUS_CLUSTER_RUN:-/run/aptus-cluster}
CL_NAME=${APTUS_CLUSTER:-default}
CL_DEV=eth0             # the device inside every host (and the head)
CL_BRIDGE=aptus-br0     # the bridge, inside the switch namespace

usage() {
    cat <<'EOF'
contrib/cluster.sh: a cluster in a box -- N "hosts" on one machine, to try
the transports between machines without a cluster.

Every host hN is a network namespace with a PID, UTS (hostname hN), IPC and
mount namespace of its own (its own /proc and /dev/shm), with one device
eth0 (a veth) plugged into a Linux bridge that lives in a "switch"
namespace. Addresses: hN is SUBNET.N (default 10.213.0.N/24), the head
(where mpirun/mpiexec run, with no ranks of its own) is SUBNET.254; the
names h1..hN and head resolve inside the namespaces. There is no default
route: nothing in the cluster can reach an address outside it, and nothing
is made in the root namespace's network. The file system is shared by all
hosts (as if over NFS): binaries and the library are used in place.

Usage: contrib/cluster.sh [--name NAME] COMMAND [ARGS...]

  up N [OPTIONS]      make N hosts (1..250), the switch and the head
  set OPTIONS         change MTU, loss or black holes of a running cluster
                      (options not given keep their value)
  down [--all]        remove everything the cluster made (--all: every
                      cluster under /run/aptus-cluster and every leftover
                      namespace named like one)
  status              what exists: hosts, settings, drop counters
  exec HOST CMD...    run CMD in HOST (hN, head or an address) in its
                      namespaces, with this environment and working directory
  each CMD...         run CMD in every host in turn, output prefixed "hN: "
  ompi [ARGS...]      mpirun.openmpi ARGS from the head, ranks on the hosts
  mpich [ARGS...]     mpiexec.mpich ARGS from the head, ranks on the hosts
  clean               kill every process in the hosts and the head (what a
                      killed job may have left), the hosts stay up
  agent HOST CMD...   the remote-shell agent the MPI launchers call (like
                      ssh HOST CMD: CMD is run by /bin/sh -c in HOST with a
                      fresh login environment)

Options of up and set:
  --mtu LIST          MTU of each host's eth0, comma-separated, host by host;
                      the last value is repeated (default 1500), e.g.
                      --mtu 9000,1500,9000,9000. The switch's ports take the
                      largest, so a frame larger than a host's MTU is dropped
                      by that host's device (mixed-MTU segment).
  --loss LIST         percent of UDP datagrams each host drops on input from
                      eth0 (nftables, input hook: meta l4proto udp numgen
                      random mod 100 < N drop); one value for all or a list
  --tcp-loss LIST     the same for TCP segments (the MPI launchers' and UCX
                      tcp's connections too)
  --blackhole hA,hB   the switch drops UDP datagrams larger than the limit
                      (IP length) between hA and hB, both ways, while both
                      devices keep their MTU: a path that silently eats big
                      datagrams. Repeat for more pairs; "none" clears.
  --blackhole-limit B the IP length above which the black hole drops (1500)
  --slots S           ranks per host in the default host files (2)
  --subnet A.B.C      the /24 of the cluster (up only; default 10.213.0)

Environment: APTUS_CLUSTER (the name, like --name; default "default"),
APTUS_CLUSTER_RUN (state directory, default /run/aptus-cluster). Names of
everything made start with "aptus-": namespaces aptus-h1.. aptus-hN,
aptus-sw, aptus-head (aptus-NAME-h1.. for a named cluster; several
clusters can be up at once, each on its own bridge).

Delay and reordering: this kernel has no netem, so the cluster drops but
never delays. The transports carry their own fault injector for that:
UCX_UD_SR_FAULT_DROP, _DUP, _REORDER, _DELAY (probabilities),
_DELAY_TIME and _SEED (UCX_APTUS_FAULT_* for aptus; see
src/uct/ud/ud_sr_params.c), set in the ranks' environment.

Examples:
  contrib/cluster.sh up 4 --mtu 9000,1500,9000,9000 --loss 1
  contrib/cluster.sh exec h1 ps ax          # h1's processes only
  L=$PWD/build/.libs/libuct_aptus.so
  contrib/cluster.sh exec h1 env LD_PRELOAD=$L ucx_perftest -x ud_sr -d eth0 -t am_lat &
  contrib/cluster.sh exec h2 env LD_PRELOAD=$L ucx_perftest 10.213.0.1 -x ud_sr -d eth0 -t am_lat
  contrib/cluster.sh ompi -np 8 -x LD_PRELOAD=$L -x UCX_TLS=ud_sr,self \
      -x UCX_NET_DEVICES=eth0 ./alltoall
  contrib/cluster.sh mpich -n 8 -genv LD_PRELOAD $L -genv UCX_TLS ud_sr,self \
      -genv UCX_NET_DEVICES eth0 ./alltoall
  contrib/cluster.sh down

ompi adds --allow-run-as-root --oversubscribe --bind-to none, the agent
(--mca plm_rsh_agent, no tree spawn), oob/btl over eth0 and pml ucx with
pml_ucx_tls/pml_ucx_devices any, each unless ARGS set it, and
--hostfile (h1..hN, --slots each) unless ARGS name hosts. mpich adds
-launcher ssh -launcher-exec <agent> and -f <host file> unless ARGS name
hosts, and runs the job in a CPU cgroup of its own (contrib/sched-group.sh).
EOF
}

msg() { echo "cluster: $*" >&2; }
die() { msg "$*"; exit 1; }

# ---- names -------------------------------------------------------------

cl_prefix() {
    if [ "$CL_NAME" = default ]; then
        echo "aptus-"
    else
        echo "aptus-$CL_NAME-"
    fi
}
CL_PREFIX=
CL_DIR=
cl_names() {
    case $CL_NAME in
    *[!a-z0-9]* | '') die "cluster name '$CL_NAME': lower-case letters and digits only" ;;
    esac
    [ ${#CL_NAME} -le 12 ] || die "cluster name '$CL_NAME': 12 characters at most"
    CL_PREFIX=$(cl_prefix)
    CL_DIR=$CL_BASE/$CL_NAME
}
ns_host() { echo "${CL_PREFIX}h$1"; }
ns_sw() { echo "${CL_PREFIX}sw"; }
ns_head() { echo "${CL_PREFIX}head"; }

# ---- state ---------------------------------------------------------------

# Settings, saved in $CL_DIR/state (bash assignments).
S_N=0
S_SUBNET=10.213.0
S_MTU=1500
S_LOSS=0
S_TCPLOSS=0
S_BH=none
S_BHLIMIT=1500
S_SLOTS=2

state_load() {
    [ -f "$CL_DIR/state" ] || die "cluster '$CL_NAME' is not up (no $CL_DIR/state); see: $0 up N"
    # shellcheck source=/dev/null
    . "$CL_DIR/state"
}

state_save() {
    {
        printf 'S_N=%q\nS_SUBNET=%q\nS_MTU=%q\nS_LOSS=%q\n' \
            "$S_N" "$S_SUBNET" "$S_MTU" "$S_LOSS"
        printf 'S_TCPLOSS=%q\nS_BH=%q\nS_BHLIMIT=%q\nS_SLOTS=%q\n' \
            "$S_TCPLOSS" "$S_BH" "$S_BHLIMIT" "$S_SLOTS"
    } >"$CL_DIR/state.new" && mv "$CL_DIR/state.new" "$CL_DIR/state"
}

# per_host LIST I: the I-th value of a comma-separated list, the last one
# repeated.
per_host() {
    local IFS=, v last=
    local -a a
    read -r -a a <<<"$1"
    for v in "${a[@]}"; do last=$v; done
    echo "${a[$(($2 - 1))]:-$last}"
}

check_list() {
    local what=$1 list=$2 lo=$3 hi=$4 v IFS=,
    for v in $list; do
        case $v in
        '' | *[!0-9]*) die "$what: '$v' is not a number" ;;
        esac
        if [ "$v" -lt "$lo" ] || [ "$v" -gt "$hi" ]; then
            die "$what: $v is out of range ($lo..$hi)"
        fi
    done
    [ -n "$list" ] || die "$what: empty list"
}

# host_index NAME: N for hN (or its address), else nothing.
host_index() {
    local h=$1
    case $h in
    "$S_SUBNET".*) h=h${h##*.} ;;
    esac
    h=${h%%.*}
    case $h in
    h[1-9] | h[1-9][0-9] | h[1-9][0-9][0-9])
        local i=${h#h}
        [ "$i" -le "$S_N" ] && echo "$i"
        ;;
    esac
}

is_head() {
    case $1 in
    head | head.* | "$S_SUBNET.254") return 0 ;;
    esac
    return 1
}

# ---- options of up and set ----------------------------------------------

parse_opts() {
    local bh_given=0
    while [ $# -gt 0 ]; do
        case $1 in
        --mtu) S_MTU=${2:?--mtu needs a list}; shift 2 ;;
        --mtu=*) S_MTU=${1#*=}; shift ;;
        --loss) S_LOSS=${2:?--loss needs a list}; shift 2 ;;
        --loss=*) S_LOSS=${1#*=}; shift ;;
        --tcp-loss) S_TCPLOSS=${2:?--tcp-loss needs a list}; shift 2 ;;
        --tcp-loss=*) S_TCPLOSS=${1#*=}; shift ;;
        --blackhole | --blackhole=*)
            local v
            if [ "$1" = --blackhole ]; then
                v=${2:?--blackhole needs hA,hB}; shift 2
            else
                v=${1#*=}; shift
            fi
            if [ "$v" = none ]; then
                S_BH=none
            elif [ $bh_given = 0 ] || [ "$S_BH" = none ]; then
                S_BH=$v
            else
                S_BH="$S_BH $v"
            fi
            bh_given=1
            ;;
        --blackhole-limit) S_BHLIMIT=${2:?--blackhole-limit needs bytes}; shift 2 ;;
        --blackhole-limit=*) S_BHLIMIT=${1#*=}; shift ;;
        --slots) S_SLOTS=${2:?--slots needs a number}; shift 2 ;;
        --slots=*) S_SLOTS=${1#*=}; shift ;;
        --subnet) S_SUBNET=${2:?--subnet needs A.B.C}; shift 2 ;;
        --subnet=*) S_SUBNET=${1#*=}; shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
        esac
    done
    check_list --mtu "$S_MTU" 576 65535
    check_list --loss "$S_LOSS" 0 100
    check_list --tcp-loss "$S_TCPLOSS" 0 100
    check_list --blackhole-limit "$S_BHLIMIT" 28 65535
    check_list --slots "$S_SLOTS" 1 1024
    if ! [[ $S_SUBNET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]]; then
        die "--subnet $S_SUBNET: expected A.B.C (a /24)"
    fi
    local p
    if [ "$S_BH" != none ]; then
        for p in $S_BH; do
            if ! [[ $p =~ ^h[0-9]+,h[0-9]+$ ]]; then
                die "--blackhole $p: expected hA,hB"
            fi
            local ha=${p%,*} hb=${p#*,}
            [ "$ha" != "$hb" ] || die "--blackhole $p: two different hosts"
            if [ -z "$(host_index "$ha")" ] || [ -z "$(host_index "$hb")" ]; then
                die "--blackhole $p: no such host (h1..h$S_N)"
            fi
        done
    fi
}

# ---- applying settings -------------------------------------------------

apply_settings() {
    local i max=0 m sw out
    sw=$(ns_sw)
    for ((i = 1; i <= S_N; i++)); do
        m=$(per_host "$S_MTU" "$i")
        [ "$m" -gt "$max" ] && max=$m
    done
    [ "$max" -lt 1500 ] && max=1500
    # the switch's ports first, so that they never limit a host
    for ((i = 1; i <= S_N; i++)); do
        ip -n "$sw" link set "aptus-h$i" mtu "$max" || return 1
    done
    ip -n "$sw" link set aptus-head mtu "$max" || return 1
    ip -n "$sw" link set "$CL_BRIDGE" mtu "$max" || return 1
    for ((i = 1; i <= S_N; i++)); do
        ip -n "$(ns_host "$i")" link set "$CL_DEV" mtu "$(per_host "$S_MTU" "$i")" ||
            return 1
    done

    # loss: nftables in every host, input hook, from eth0 only (traffic
    # between ranks of one host does not cross the network)
    local l t rules
    for ((i = 1; i <= S_N; i++)); do
        l=$(per_host "$S_LOSS" "$i")
        t=$(per_host "$S_TCPLOSS" "$i")
        rules=
        [ "$l" -gt 0 ] &&
            rules+="        iifname \"$CL_DEV\" meta l4proto udp numgen random mod 100 < $l counter drop comment \"udp-loss\""$'\n'
        [ "$t" -gt 0 ] &&
            rules+="        iifname \"$CL_DEV\" meta l4proto tcp numgen random mod 100 < $t counter drop comment \"tcp-loss\""$'\n'
        if ! out=$(ip netns exec "$(ns_host "$i")" nft -f - 2>&1 <<EOF
table inet aptus
delete table inet aptus
table inet aptus {
    chain input {
        type filter hook input priority 0; policy accept;
$rules    }
}
EOF
        ); then
            msg "h$i: nft refused the loss rules: $out"
            return 1
        fi
    done

    # black holes: the switch drops big UDP datagrams between two hosts
    local p a b ia ib
    rules=
    if [ "$S_BH" != none ]; then
        for p in $S_BH; do
            ia=$(host_index "${p%,*}")
            ib=$(host_index "${p#*,}")
            a=$S_SUBNET.$ia
            b=$S_SUBNET.$ib
            rules+="        ip saddr $a ip daddr $b ip protocol udp ip length > $S_BHLIMIT counter drop comment \"blackhole h$ia->h$ib\""$'\n'
            rules+="        ip saddr $b ip daddr $a ip protocol udp ip length > $S_BHLIMIT counter drop comment \"blackhole h$ib->h$ia\""$'\n'
        done
    fi
    if ! out=$(ip netns exec "$sw" nft -f - 2>&1 <<EOF
table bridge aptus
delete table bridge aptus
table bridge aptus {
    chain blackhole {
        type filter hook forward priority 0; policy accept;
$rules    }
}
EOF
    ); then
        msg "switch: nft refused the black-hole rules: $out"
        return 1
    fi
    return 0
}

# ---- making and removing -------------------------------------------------

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
    local t
    for t in ip nft nsenter unshare; do
        command -v "$t" >/dev/null ||
            die "$t not found (apt-get install iproute2 nftables util-linux)"
    done
}

# The namespaces of this cluster that exist now.
existing_ns() {
    local ns
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in
        "${CL_PREFIX}sw" | "${CL_PREFIX}head") echo "$ns" ;;
        "${CL_PREFIX}h"[1-9]*)
            [[ ${ns#"${CL_PREFIX}"h} =~ ^[0-9]+$ ]] && echo "$ns"
            ;;
        esac
    done
}

# kill_ns_procs NS: kill every process in network namespace NS.
kill_ns_procs() {
    local p
    for p in $(ip netns pids "$1" 2>/dev/null); do
        [ "$p" = $$ ] && continue
        kill -9 "$p" 2>/dev/null
    done
}

# teardown: remove every namespace of this cluster and its state; quiet
# about what is not there.
teardown() {
    local f p ns _
    # the hosts' init processes first: their PID namespaces die with them
    for f in "$CL_DIR"/h*.pid; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null
    done
    for ns in $(existing_ns); do
        kill_ns_procs "$ns"
    done
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        local left=0
        for ns in $(existing_ns); do
            [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && left=1
        done
        [ $left = 0 ] && break
        sleep 0.2
    done
    for ns in $(existing_ns); do
        ip netns delete "$ns" 2>/dev/null || msg "could not delete namespace $ns"
        rm -rf "/etc/netns/$ns"
    done
    rm -rf "$CL_DIR"
    rmdir "$CL_BASE" /etc/netns 2>/dev/null
    return 0
}

# start_init I: the long-lived first process of host I: PID 1 of its PID
# namespace, in its UTS (hostname hI), IPC and mount namespace (own /proc,
# own /dev/shm). "exec" and the agent enter its namespaces with nsenter.
start_init() {
    local i=$1 ns pid child _
    ns=$(ns_host "$i")
    setsid ip netns exec "$ns" unshare --pid --uts --ipc --mount --fork \
        --mount-proc --propagation private \
        /bin/bash "$CL_DIR/init" "h$i" </dev/null >/dev/null 2>&1 &
    pid=$!
    disown "$pid"
    # unshare's child, PID 1 inside, is the init; it is ready once it
    # has started its own child (the host is named, /dev/shm mounted)
    for _ in $(seq 1 100); do
        child=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null)
        child=${child%% *}
        if [ -n "$child" ] &&
           [ -n "$(cat "/proc/$child/task/$child/children" 2>/dev/null)" ]; then
            echo "$child" >"$CL_DIR/h$i.pid"
            echo "$pid" >"$CL_DIR/h$i.unshare"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    msg "h$i: the init process did not start"
    return 1
}

write_files() {
    local i
    {
        echo "127.0.0.1 localhost"
        for ((i = 1; i <= S_N; i++)); do
            echo "$S_SUBNET.$i h$i"
        done
        echo "$S_SUBNET.254 head"
    } >"$CL_DIR/hosts"
    for ((i = 1; i <= S_N; i++)); do
        echo "h$i slots=$S_SLOTS"
    done >"$CL_DIR/hostfile.ompi"
    for ((i = 1; i <= S_N; i++)); do
        echo "h$i:$S_SLOTS"
    done >"$CL_DIR/hostfile.mpich"
    # PID 1 of a host: names it, gives it a /dev/shm of its own, then
    # waits; bash waiting reaps the orphans it inherits as PID 1 (no
    # zombies). SIGKILL from outside ends the host.
    cat >"$CL_DIR/init" <<'EOF'
# init of a host of contrib/cluster.sh: init HOSTNAME
hostname "$1" || exit 1
mount -t tmpfs -o mode=1777,size=50% aptus-shm /dev/shm || exit 1
trap 'exit 0' TERM
while :; do sleep 86400 & wait; done
EOF
    {
        echo "#!/bin/sh"
        echo "# remote-shell agent of cluster '$CL_NAME' (contrib/cluster.sh)"
        printf 'exec %q --name %q agent "$@"\n' "$CL_SELF" "$CL_NAME"
    } >"$CL_DIR/agent"
    chmod 755 "$CL_DIR/agent"
}

# add_port NS ADDR NAME: a veth from the switch to NS, eth0 inside at ADDR.
add_port() {
    local ns=$1 addr=$2 port=$3 sw
    sw=$(ns_sw)
    ip netns add "$ns" || return 1
    mkdir -p "/etc/netns/$ns" && cp "$CL_DIR/hosts" "/etc/netns/$ns/hosts" ||
        return 1
    ip link add "$port" netns "$sw" type veth peer name "$CL_DEV" netns "$ns" ||
        return 1
    ip -n "$sw" link set "$port" master "$CL_BRIDGE" up || return 1
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1
    ip -n "$ns" link set lo up || return 1
    ip -n "$ns" addr add "$addr/24" dev "$CL_DEV" || return 1
    ip -n "$ns" link set "$CL_DEV" up || return 1
    # A NIC cuts a TCP segment or a UDP GSO train into frames of the link's
    # size before the wire; a veth hands the whole (up to 64 KB) to the
    # bridge and the next host as one packet, where the switch's rules
    # (black hole, loss) would judge it instead of its frames and no frame
    # would cost the receiver anything. Segment in the sending host, as a
    # NIC; coalesce in the receiving one (GRO), as a NIC's driver does.
    # (A veth passes a packet to its peer's GRO only when the sending end
    # has no TSO: the switch's port too.)
    if command -v ethtool >/dev/null 2>&1; then
        ip netns exec "$ns" ethtool -K "$CL_DEV" tx-udp-segmentation off \
            tcp-segmentation-offload off generic-receive-offload on \
            >/dev/null 2>&1 || true
        ip netns exec "$sw" ethtool -K "$port" tcp-segmentation-offload off \
            >/dev/null 2>&1 || true
    fi
}

UP_DONE=0
up_abort() {
    [ $UP_DONE = 1 ] && return
    msg "interrupted or failed: removing what was made"
    teardown
}

cmd_up() {
    [ $# -ge 1 ] || die "usage: $0 up N [options]"
    case $1 in
    -h | --help) usage; exit 0 ;;
    esac
    local n=$1
    shift
    if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then
        die "up: N must be 1..250, not '$n'"
    fi
    need_root
    S_N=$n
    parse_opts "$@"
    if [ -e "$CL_DIR/state" ] || [ -n "$(existing_ns)" ]; then
        die "cluster '$CL_NAME' exists already ($(existing_ns | tr '\n' ' ')); '$0 down' first"
    fi
    mkdir -p "$CL_DIR" || die "cannot make $CL_DIR"
    trap up_abort EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    write_files
    local sw i
    sw=$(ns_sw)
    ip netns add "$sw" || exit 1
    ip -n "$sw" link set lo up || exit 1
    ip -n "$sw" link add "$CL_BRIDGE" type bridge || exit 1
    ip -n "$sw" link set "$CL_BRIDGE" up || exit 1
    for ((i = 1; i <= S_N; i++)); do
        add_port "$(ns_host "$i")" "$S_SUBNET.$i" "aptus-h$i" || exit 1
        start_init "$i" || exit 1
    done
    add_port "$(ns_head)" "$S_SUBNET.254" aptus-head || exit 1
    apply_settings || exit 1
    state_save || exit 1
    UP_DONE=1
    trap - EXIT INT TERM
    echo "cluster '$CL_NAME' up: $S_N hosts h1..h$S_N ($S_SUBNET.1..$S_SUBNET.$S_N), head $S_SUBNET.254, device $CL_DEV in each"
    show_settings
}

cmd_set() {
    need_root
    state_load
    parse_opts "$@"
    apply_settings || die "set: could not apply the settings"
    state_save
    show_settings
}

cmd_down() {
    need_root
    if [ "${1:-}" = --all ]; then
        local d
        for d in "$CL_BASE"/*/; do
            [ -d "$d" ] || continue
            CL_NAME=$(basename "$d")
            cl_names
            teardown
        done
        # leftovers named like a cluster's namespaces, state or not
        local ns name
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
            if [[ $ns =~ ^aptus-(([a-z0-9]+)-)?(sw|head|h[0-9]+)$ ]]; then
                name=${BASH_REMATCH[2]:-default}
                CL_NAME=$name
                cl_names
                teardown
            fi
        done
        msg "down: all clusters removed"
        return 0
    fi
    teardown
    msg "down: cluster '$CL_NAME' removed"
}

# ---- running things in hosts ---------------------------------------------

# enter_prefix HOST [DIR]: sets ENTER to the command prefix that runs a
# command in HOST, in directory DIR (default: this one).
ENTER=()
enter_prefix() {
    local h=$1 wd=${2:-$PWD} i pid
    if is_head "$h"; then
        # the head: its network namespace, a UTS namespace (hostname head),
        # the root PID namespace (it only launches)
        # shellcheck disable=SC2016  # for the inner shell
        ENTER=(ip netns exec "$(ns_head)" unshare --uts
               /bin/sh -c 'hostname head && exec "$@"' aptus-head)
        return 0
    fi
    i=$(host_index "$h")
    [ -n "$i" ] || die "no host '$h' in cluster '$CL_NAME' (h1..h$S_N, head)"
    pid=$(cat "$CL_DIR/h$i.pid" 2>/dev/null)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        die "h$i: its init process is gone; '$0 down' and up again"
    fi
    ENTER=(nsenter -t "$pid" --net --pid --uts --ipc --mount --wd="$wd" --)
}

cmd_exec() {
    [ $# -ge 2 ] || die "usage: $0 exec HOST CMD..."
    state_load
    enter_prefix "$1"
    shift
    exec "${ENTER[@]}" "$@"
}

cmd_each() {
    [ $# -ge 1 ] || die "usage: $0 each CMD..."
    state_load
    local i rc=0
    for ((i = 1; i <= S_N; i++)); do
        enter_prefix "h$i"
        "${ENTER[@]}" "$@" 2>&1 | sed "s/^/h$i: /"
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    done
    return $rc
}

# agent [SSH-OPTIONS] HOST CMD...: what the launchers call instead of ssh.
cmd_agent() {
    while [ $# -gt 0 ]; do
        case $1 in
        -[oplFiLRDEJSWbcemw]) shift 2 ;;
        -*) shift ;;
        *) break ;;
        esac
    done
    [ $# -ge 2 ] || die "agent: usage: agent HOST CMD..."
    state_load
    local h=${1#*@}
    shift
    enter_prefix "$h" /root
    # like ssh: the words joined into one command line for the remote
    # shell, a fresh login environment
    local path=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
    exec env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/sh PATH="$path" \
        "${ENTER[@]}" /bin/sh -c "$*"
}

# has_arg WORD ARGS...: ARGS contain WORD.
has_arg() {
    local w=$1 a
    shift
    for a in "$@"; do
        [ "$a" = "$w" ] && return 0
    done
    return 1
}

# has_mca NAME ARGS...: ARGS set MCA parameter NAME.
has_mca() {
    local name=$1 prev=
    shift
    local a
    for a in "$@"; do
        case $prev in
        --mca | -mca | --gmca | -gmca) [ "$a" = "$name" ] && return 0 ;;
        esac
        prev=$a
    done
    return 1
}

cmd_ompi() {
    state_load
    local -a args=(--allow-run-as-root --oversubscribe) kv
    local a n v
    has_arg --bind-to "$@" || args+=(--bind-to none)
    for kv in "plm_rsh_agent $CL_DIR/agent" "plm_rsh_no_tree_spawn 1" \
              "oob_tcp_if_include $CL_DEV" "btl_tcp_if_include $CL_DEV" \
              "pml ucx" "pml_ucx_tls any" "pml_ucx_devices any"; do
        n=${kv%% *}
        v=${kv#* }
        has_mca "$n" "$@" || args+=(--mca "$n" "$v")
    done
    local named=0
    for a in --host -host -H --hostfile -hostfile --machinefile -machinefile \
             --default-hostfile; do
        has_arg "$a" "$@" && named=1
    done
    [ $named = 1 ] || args+=(--hostfile "$CL_DIR/hostfile.ompi")
    enter_prefix head
    exec "${ENTER[@]}" mpirun.openmpi "${args[@]}" "$@"
}

# in_cpu_group: this process is in a CPU cgroup other than the root one
# (where autogroups do not apply: nothing to do).
in_cpu_group() {
    local _ ctrl path
    while IFS=: read -r _ ctrl path; do
        case ,$ctrl, in
        *,cpu,*) [ "$path" != / ] && return 0 ;;
        ,,) [ ! -f /sys/fs/cgroup/cpu/tasks ] && [ "$path" != / ] && return 0 ;;
        esac
    done </proc/self/cgroup
    return 1
}

cmd_mpich() {
    state_load
    local -a args=(-launcher ssh -launcher-exec "$CL_DIR/agent")
    local a named=0
    for a in -f -hostfile -machinefile -hosts -host; do
        has_arg "$a" "$@" && named=1
    done
    [ $named = 1 ] || args+=(-f "$CL_DIR/hostfile.mpich")
    enter_prefix head
    # Hydra makes every rank a session (an autogroup) of its own: the job
    # runs in a CPU cgroup so that ranks share the cores fairly
    local -a group=()
    # shellcheck source=contrib/sched-group.sh
    . "$CL_TOP/contrib/sched-group.sh"
    if ! in_cpu_group && aptus_sched_group_open; then
        group=("${APTUS_SCHED_GROUP_RUN[@]}")
        "${group[@]}" "${ENTER[@]}" mpiexec.mpich "${args[@]}" "$@" &
        local job=$! rc
        trap 'kill -TERM $job 2>/dev/null' INT TERM
        wait $job
        rc=$?
        trap - INT TERM
        wait $job 2>/dev/null
        aptus_sched_group_close
        return $rc
    fi
    exec "${ENTER[@]}" mpiexec.mpich "${args[@]}" "$@"
}

cmd_clean() {
    need_root
    state_load
    local i pid n=0 p
    for ((i = 1; i <= S_N; i++)); do
        pid=$(cat "$CL_DIR/h$i.pid" 2>/dev/null) || continue
        kill -0 "$pid" 2>/dev/null || continue
        # every process of the PID namespace but its init (and kill itself)
        nsenter -t "$pid" --pid --mount -- /bin/kill -KILL -1 2>/dev/null
    done
    for p in $(ip netns pids "$(ns_head)" 2>/dev/null); do
        [ "$p" = $$ ] && continue
        kill -9 "$p" 2>/dev/null && n=$((n + 1))
    done
    return 0
}

# ---- status --------------------------------------------------------------

show_settings() {
    local i l t line
    for ((i = 1; i <= S_N; i++)); do
        l=$(per_host "$S_LOSS" "$i")
        t=$(per_host "$S_TCPLOSS" "$i")
        line="  h$i $S_SUBNET.$i mtu $(per_host "$S_MTU" "$i")"
        [ "$l" -gt 0 ] && line+=", udp loss $l%"
        [ "$t" -gt 0 ] && line+=", tcp loss $t%"
        echo "$line"
    done
    if [ "$S_BH" != none ]; then
        echo "  black hole at the switch: UDP datagrams over $S_BHLIMIT bytes dropped between ${S_BH// / and }"
    fi
}

cmd_status() {
    local d any=0 i pid ns c known=" "
    for d in "$CL_BASE"/*/; do
        [ -f "$d/state" ] || continue
        any=1
        CL_NAME=$(basename "$d")
        cl_names
        S_BH=none
        state_load
        echo "cluster '$CL_NAME': $S_N hosts, switch $(ns_sw), head $(ns_head) ($S_SUBNET.254), state in $CL_DIR"
        show_settings
        for ((i = 1; i <= S_N; i++)); do
            pid=$(cat "$CL_DIR/h$i.pid" 2>/dev/null)
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                echo "  h$i: namespace $(ns_host "$i"), init pid $pid, $(($(ip netns pids "$(ns_host "$i")" | wc -l) - 3)) other processes"
            else
                echo "  h$i: namespace $(ns_host "$i"), init process GONE"
            fi
            c=$(ip netns exec "$(ns_host "$i")" nft list table inet aptus 2>/dev/null |
                sed -n 's/.*counter packets \([0-9]*\) .*comment "\(.*\)".*/\2 \1/p' | tr '\n' ' ')
            [ -n "$c" ] && echo "      dropped: $c"
        done
        c=$(ip netns exec "$(ns_sw)" nft list table bridge aptus 2>/dev/null |
            sed -n 's/.*counter packets \([0-9]*\) .*comment "\(.*\)".*/\2: \1;/p' | tr '\n' ' ')
        [ -n "$c" ] && echo "  switch dropped: $c"
        for ns in $(existing_ns); do known+="$ns "; done
    done
    [ $any = 1 ] || echo "no cluster is up"
    local stray=
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in
        aptus-*) [[ $known == *" $ns "* ]] || stray+=" $ns" ;;
        esac
    done
    [ -n "$stray" ] && echo "other aptus- namespaces (not a cluster's, or left over):$stray"
    return 0
}

# ---- main ------------------------------------------------------------------

while [ $# -gt 0 ]; do
    case $1 in
    --name) CL_NAME=${2:?--name needs a name}; shift 2 ;;
    --name=*) CL_NAME=${1#*=}; shift ;;
    -h | --help | help) usage; exit 0 ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
cl_names
cmd=$1
shift
case $cmd in
up) cmd_up "$@" ;;
set) cmd_set "$@" ;;
down) cmd_down "$@" ;;
status) cmd_status ;;
exec) cmd_exec "$@" ;;
each) cmd_each "$@" ;;
agent) cmd_agent "$@" ;;
ompi) cmd_ompi "$@" ;;
mpich) cmd_mpich "$@" ;;
clean) cmd_clean ;;
*) msg "unknown command '$cmd'"; usage >&2; exit 2 ;;
esac
