#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Plots of contrib/bench/bcast_bench.sh's bcast.csv (medians over the
repetitions), after the multicast paper's figures (Liu, Mamidala and Panda,
IPDPS 2004, figures 6 to 9):

  bcast_latency.png  time inside MPI_Bcast against size, one panel per MPI
                     and job size, the MPI's own against libaptus_bcast
  bcast_tput.png     back-to-back broadcasts per second against size
  bcast_skew.png     time inside MPI_Bcast under random skew, against the
                     job size (1 ms) and against the skew (8 ranks)

usage: bcast_plot.py bcast.csv OUTDIR

With --hosts, contrib/bench/bcast_hosts.sh's bcast_hosts.csv (a rank per
host; the MPI's own over tcp and over ud_sr against libaptus_bcast, per
loss rate): prints the table of medians with the ratios ours / own and
the targets (markdown), and draws

  bcast_hosts_latency.png  time inside MPI_Bcast against size, a panel
                           per MPI and loss rate (rows) and job size
  bcast_hosts_tput.png     broadcasts per second against size, the same
  bcast_hosts_skew.png     time inside MPI_Bcast (64 B) against the skew,
                           a panel per MPI and loss rate, both job sizes

usage: bcast_plot.py --hosts bcast_hosts.csv OUTDIR [jobs.csv]
"""
import csv
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

IMPLS = [("own", "MPI's own MPI_Bcast", "tab:gray"),
         ("aptus", "libaptus_bcast (multicast)", "tab:blue")]


def load(path):
    med = defaultdict(list)
    for r in csv.DictReader(open(path)):
        key = (r["mpi"], int(r["np"]), r["mode"], int(r["size"]),
               int(r["skew_us"]), r["impl"])
        med[key].append(float(r["value"]))
    return {k: statistics.median(v) for k, v in med.items()}


def panels(med, mode):
    return sorted({(k[0], k[1]) for k in med if k[2] == mode})


def plot_vs_size(med, mode, ylabel, path, logy):
    cells = panels(med, mode)
    if not cells:
        return
    cols = len({c[1] for c in cells})
    mpis = sorted({c[0] for c in cells})
    fig, axes = plt.subplots(len(mpis), cols, figsize=(4 * cols, 3.2 * len(mpis)),
                             squeeze=False)
    nps = sorted({c[1] for c in cells})
    for i, mpi in enumerate(mpis):
        for j, np_ in enumerate(nps):
            ax = axes[i][j]
            for impl, label, color in IMPLS:
                pts = sorted((k[3], v) for k, v in med.items()
                             if k[:3] == (mpi, np_, mode) and k[5] == impl)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-",
                            label=label, color=color)
            ax.set_xscale("log", base=2)
            if logy:
                ax.set_yscale("log")
            ax.set_title(f"{mpi}, {np_} ranks")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_skew(med, path):
    mpis = sorted({k[0] for k in med if k[2] == "skew"})
    if not mpis:
        return
    fig, axes = plt.subplots(2, len(mpis), figsize=(4.5 * len(mpis), 6.4),
                             squeeze=False)
    for i, mpi in enumerate(mpis):
        for row, (xi, fixed, xlabel, title) in enumerate([
                (1, (4, 1000), "ranks", f"{mpi}, 64 B, skew up to 1 ms"),
                (4, (1, 8), "random skew per rank, up to (us)",
                 f"{mpi}, 64 B, 8 ranks")]):
            ax = axes[row][i]
            for impl, label, color in IMPLS:
                pts = sorted((k[xi], v) for k, v in med.items()
                             if k[0] == mpi and k[2] == "skew" and
                             k[5] == impl and k[fixed[0]] == fixed[1])
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-",
                            label=label, color=color)
            ax.set_title(title)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("time in MPI_Bcast (us)")
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


HOST_IMPLS = [("tcp", "MPI's own over tcp", "tab:gray"),
              ("ud_sr", "MPI's own over ud_sr", "tab:orange"),
              ("aptus", "libaptus_bcast (multicast)", "tab:blue")]


def load_hosts(path):
    vals = defaultdict(list)
    for r in csv.DictReader(open(path)):
        if not r["value"]:
            continue
        key = (int(r["hosts"]), int(r["loss"]), r["mpi"], r["mode"],
               int(r["size"]), int(r["skew_us"]), r["impl"])
        vals[key].append(float(r["value"]))
    return ({k: statistics.median(v) for k, v in vals.items()},
            max((len(v) for v in vals.values()), default=0))


def fmt(v):
    return "-" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def hosts_table(med, nreps, jobs_path):
    """The table and the targets, markdown, on stdout."""
    points = sorted({k[:6] for k in med},
                    key=lambda k: (k[0], k[1], k[2], ["lat", "tput", "skew"].index(k[3]),
                                   k[4], k[5]))
    print(f"## MPI_Bcast, one rank per host: medians of up to {nreps} repetitions")
    print()
    print("lat and skew: time inside MPI_Bcast (us, lower is better); tput: "
          "broadcasts per second (higher is better). Ratios are aptus / own.")
    print()
    print("| hosts | UDP loss | MPI | measure | size | skew us | own tcp | own ud_sr "
          "| aptus | aptus/tcp | aptus/ud_sr |")
    print("| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in points:
        v = {i: med.get(p + (i,)) for i, _, _ in HOST_IMPLS}
        r = [f"{v['aptus'] / v[o]:.2f}" if v["aptus"] and v[o] else "-"
             for o in ("tcp", "ud_sr")]
        print(f"| {p[0]} | {p[1]}% | {p[2]} | {p[3]} | {p[4]} | "
              f"{p[5] if p[3] == 'skew' else ''} | {fmt(v['tcp'])} | "
              f"{fmt(v['ud_sr'])} | {fmt(v['aptus'])} | {r[0]} | {r[1]} |")

    # the targets, at the largest job size
    hosts = sorted({k[0] for k in med})
    if not hosts:
        return
    big, small = hosts[-1], hosts[0]
    print()
    print(f"## Targets at {big} hosts (medians)")
    print()
    print("| MPI | UDP loss | latency 8 B-1 KB, aptus/own (<= 0.7) | "
          "throughput, aptus/own (> 1) | 64 B under 1 ms skew, us: "
          f"{small} -> {big} hosts (flat: x <= 1.2) | every byte verified |")
    print("| --- | ---: | --- | --- | --- | --- |")
    jobs = list(csv.DictReader(open(jobs_path))) if jobs_path else []
    for mpi in sorted({k[2] for k in med}):
        for loss in sorted({k[1] for k in med}):
            cells = []
            for mode, sizes, ok in (("lat", lambda s: s <= 1024, lambda r: r <= 0.7),
                                    ("tput", lambda s: True, lambda r: r > 1)):
                part = []
                for own in ("tcp", "ud_sr"):
                    rs = [med[k] / med[k[:6] + (own,)]
                          for k in med
                          if k[:4] == (big, loss, mpi, mode) and k[6] == "aptus"
                          and sizes(k[4]) and med.get(k[:6] + (own,))]
                    if rs:
                        met = all(ok(r) for r in rs)
                        part.append(f"vs {own} {min(rs):.2f}-{max(rs):.2f} "
                                    f"{'met' if met else 'NO'}")
                cells.append("; ".join(part) or "-")
            part = []
            for impl in ("aptus", "tcp", "ud_sr") if big != small else ():
                a = med.get((small, loss, mpi, "skew", 64, 1000, impl))
                b = med.get((big, loss, mpi, "skew", 64, 1000, impl))
                if a and b:
                    x = b / a
                    flat = f" {'flat' if x <= 1.2 else 'NOT flat'}" if impl == "aptus" else ""
                    part.append(f"{impl} {a:.0f} -> {b:.0f} (x{x:.2f}){flat}")
            cells.append("; ".join(part) or "- (one job size only)")
            js = [j for j in jobs if j["mpi"] == mpi and int(j["loss"]) == loss]
            if js:
                badj = [j for j in js if j["verdict"] != "ok"]
                nbytes = sum(int(j["checked"] or 0) for j in js)
                nbad = sum(int(j["bad"] or 0) for j in js)
                cells.append(f"{len(js) - len(badj)} of {len(js)} jobs ok (every job "
                             f"size, all three broadcasts), {nbytes / 1e6:.0f} MB "
                             f"checked, {nbad} bad bytes")
            else:
                cells.append("-")
            print(f"| {mpi} | {loss}% | " + " | ".join(cells) + " |")


def plot_hosts_vs_size(med, mode, ylabel, path):
    rows = sorted({(k[2], k[1]) for k in med if k[3] == mode})
    cols = sorted({k[0] for k in med if k[3] == mode})
    if not rows:
        return
    fig, axes = plt.subplots(len(rows), len(cols),
                             figsize=(4.2 * len(cols), 3.0 * len(rows)),
                             squeeze=False)
    for i, (mpi, loss) in enumerate(rows):
        for j, n in enumerate(cols):
            ax = axes[i][j]
            for impl, label, color in HOST_IMPLS:
                pts = sorted((k[4], v) for k, v in med.items()
                             if k[:4] == (n, loss, mpi, mode) and k[6] == impl)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-",
                            label=label, color=color)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{mpi}, {n} hosts, {loss}% UDP loss", fontsize=9)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_hosts_skew(med, path):
    rows = sorted({k[2] for k in med if k[3] == "skew"})
    cols = sorted({k[1] for k in med if k[3] == "skew"})
    hosts = sorted({k[0] for k in med if k[3] == "skew"})
    if not rows:
        return
    fig, axes = plt.subplots(len(rows), len(cols),
                             figsize=(4.8 * len(cols), 3.4 * len(rows)),
                             squeeze=False)
    styles = ["--", "-", ":", "-."]
    for i, mpi in enumerate(rows):
        for j, loss in enumerate(cols):
            ax = axes[i][j]
            for impl, label, color in HOST_IMPLS:
                for h, n in enumerate(hosts):
                    pts = sorted((k[5], v) for k, v in med.items()
                                 if k[:4] == (n, loss, mpi, "skew") and k[6] == impl)
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts],
                                "o" + styles[h % len(styles)], color=color,
                                label=f"{label}, {n} hosts")
            ax.set_yscale("log")
            ax.set_title(f"{mpi}, 64 B, {loss}% UDP loss", fontsize=9)
            ax.set_xlabel("random skew per rank, up to (us)")
            ax.set_ylabel("time in MPI_Bcast (us)")
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main_hosts(args):
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    med, nreps = load_hosts(args[0])
    out = args[1]
    hosts_table(med, nreps, args[2] if len(args) == 3 else None)
    plot_hosts_vs_size(med, "lat", "time in MPI_Bcast (us)",
                       f"{out}/bcast_hosts_latency.png")
    plot_hosts_vs_size(med, "tput", "broadcasts per second",
                       f"{out}/bcast_hosts_tput.png")
    plot_hosts_skew(med, f"{out}/bcast_hosts_skew.png")
    print()
    print("Plots: bcast_hosts_latency.png, bcast_hosts_tput.png, "
          "bcast_hosts_skew.png.")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--hosts":
        main_hosts(sys.argv[2:])
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    med = load(sys.argv[1])
    out = sys.argv[2]
    plot_vs_size(med, "lat", "time in MPI_Bcast (us)",
                 f"{out}/bcast_latency.png", True)
    plot_vs_size(med, "tput", "broadcasts per second",
                 f"{out}/bcast_tput.png", True)
    plot_skew(med, f"{out}/bcast_skew.png")
    print(f"# plots: {out}/bcast_latency.png bcast_tput.png bcast_skew.png")


if __name__ == "__main__":
    main()
