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


def main():
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
