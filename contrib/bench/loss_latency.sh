#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX-Aptus benchmark: 8-byte MPI ping-pong latency percentiles (p50, p99,
# p99.9, max) over ud_sr and UCX's tcp, with no loss and with kernel loss
# injected by nftables in a network namespace this script creates and
# deletes: N% of UDP datagrams for ud_sr, N% of TCP segments for tcp (the
# same rule shape, input hook, both directions of lo). Open MPI, pml/ucx,
# 2 ranks; the transports alternate within each repetition.
#
#   contrib/bench/loss_latency.sh [--rates "0 1 5"] [--reps N] [--iters N]
#                                 [--out DIR]
#
# Prints a table (median over repetitions of each percentile) and writes
# CSV rows (rate, transport, rep, p50, p99, p999, max, mean) to
# DIR/loss-latency.csv; with matplotlib, DIR/loss-latency.png.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
rates="0 1 5"
reps=3
iters=20000
out=
while [ $# -gt 0 ]; do
    case "$1" in
    --rates) rates=$2; shift ;;
    --reps) reps=$2; shift ;;
    --iters) iters=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "loss_latency: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
out=${out:-$top/contrib/bench/results/bench-$(date +%Y-%m-%d)}
mkdir -p "$out"
lib=${APTUS_LIB:-$top/build/.libs/libuct_aptus.so}
[ -f "$lib" ] || { echo "loss_latency: build first (no $lib)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "loss_latency: needs root (netns, nft)" >&2; exit 2; }
command -v nft >/dev/null || { echo "loss_latency: needs nftables" >&2; exit 2; }

mpicc.openmpi -O2 -o "$out/pp_pctl" "$top/contrib/bench/pp_pctl.c" || exit 1

ns=aptus-ll-$$
cleanup() { ip netns delete "$ns" 2>/dev/null; }
trap cleanup EXIT INT TERM
ip netns add "$ns" || exit 1
ip -n "$ns" link set lo up || exit 1

# set_loss RATE PROTO: drop RATE% of PROTO (udp: ports of ud_sr, tcp: all)
set_loss() {
    local rate=$1 proto=$2 match
    if [ "$proto" = udp ]; then
        match="udp dport 1024-65535"
    else
        match="meta l4proto tcp"
    fi
    ip netns exec "$ns" nft -f - <<EOF
table inet aptusll
delete table inet aptusll
table inet aptusll {
    chain input {
        type filter hook input priority 0; policy accept;
        $match numgen random mod 100 < $rate counter drop
    }
}
EOF
}

run() {
    local tl=$1
    timeout -k 5 300 ip netns exec "$ns" \
        env LD_PRELOAD="$lib" UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n \
        mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        -x LD_PRELOAD -x UCX_NET_DEVICES -x UCX_WARN_UNUSED_ENV_VARS \
        -x UCX_TLS="$tl,self" -np 2 "$out/pp_pctl" -i "$iters" 2>&1 |
        grep '^pp_pctl'
}

csv=$out/loss-latency.csv
echo "rate,transport,rep,p50_us,p99_us,p999_us,max_us,mean_us" >"$csv"
for rate in $rates; do
    for rep in $(seq 1 "$reps"); do
        order="ud_sr tcp"
        [ $((rep % 2)) -eq 0 ] && order="tcp ud_sr"
        for tl in $order; do
            if [ "$tl" = ud_sr ]; then set_loss "$rate" udp; else set_loss "$rate" tcp; fi
            line=$(run "$tl")
            if [ -z "$line" ]; then
                echo "loss_latency: $tl at $rate% loss produced no result" >&2
                continue
            fi
            v=$(echo "$line" | sed -E 's/.*p50_us=([0-9.]+) p99_us=([0-9.]+) p999_us=([0-9.]+) max_us=([0-9.]+) mean_us=([0-9.]+).*/\1,\2,\3,\4,\5/')
            echo "$rate,$tl,$rep,$v" >>"$csv"
        done
    done
done

echo
echo "8-byte MPI ping-pong, one-way latency (us), median of $reps runs x $iters iterations"
printf '%-6s %-7s %9s %9s %9s %10s %9s\n' loss tl p50 p99 p99.9 max mean
awk -F, 'NR > 1 { k = $1 "," $2; n[k]++; for (i = 4; i <= 8; ++i) v[k, i, n[k]] = $i }
    END {
        for (k in n) {
            split(k, kk, ",");
            line = sprintf("%-6s %-7s", kk[1] "%", kk[2]);
            for (i = 4; i <= 8; ++i) {
                m = n[k];
                for (a = 1; a <= m; ++a) x[a] = v[k, i, a];
                for (a = 1; a <= m; ++a) for (b = a + 1; b <= m; ++b)
                    if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
                med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2;
                line = line sprintf(" %9.1f", med);
            }
            print line
        }
    }' "$csv" | sort -k1,1n -k2,2r
echo "csv: $csv"

python3 - "$csv" "$out/loss-latency.png" <<'EOF' 2>/dev/null || true
import csv, sys, statistics
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
rates = sorted({int(r["rate"]) for r in rows})
fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=False)
for ax, col, title in zip(axes, ["p50_us", "p99_us", "p999_us"], ["p50", "p99", "p99.9"]):
    for tl in ["ud_sr", "tcp"]:
        ys = [statistics.median([float(r[col]) for r in rows
                                 if r["transport"] == tl and int(r["rate"]) == rt] or [float("nan")])
              for rt in rates]
        ax.plot(rates, ys, marker="o", label=tl)
    ax.set_yscale("log")
    ax.set_xlabel("loss (%)")
    ax.set_title(title + " one-way latency (us)")
    ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2])
EOF
