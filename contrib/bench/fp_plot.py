#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Plots of the fast-path benchmark (fp_bench.sh): fp_latency.png (latency
against message size), fp_channels.png (8-byte latency against the channels
polled) and fp_share.png (share of eligible messages on the fast path).

    fp_plot.py results.csv OUTDIR
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    data = defaultdict(lambda: defaultdict(dict))
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["value"] == "":
                continue
            data[row["section"]][row["config"]][row["x"]] = float(row["value"])
    return data


def numeric_items(series):
    items = [(int(x), v) for x, v in series.items() if x.isdigit()]
    return sorted(items)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, out = load(sys.argv[1]), sys.argv[2]

    lat = data["latency"]
    if lat:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for cfg, series in lat.items():
            if cfg == "cma_get":
                continue
            pts = numeric_items(series)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    label=cfg if cfg in ("rc_sr", "posix") else "rc_fp " + cfg)
        if "8" in lat.get("cma_get", {}):
            ax.axhline(lat["cma_get"]["8"], linestyle=":", color="grey",
                       label="cma 8 B get")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("UCT am_lat (us)")
        ax.set_title("Small-message latency")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out + "/fp_latency.png", dpi=120)

    ch = data["channels"]
    if ch:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for cfg, series in ch.items():
            pts = numeric_items(series)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    label="rc_fp " + cfg)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("fast-path channels the receiver polls")
        ax.set_ylabel("8-byte latency (us)")
        ax.set_ylim(bottom=0)
        ax.set_title("Polling cost of fast-path channels")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out + "/fp_channels.png", dpi=120)

    sh = data["share"]
    if sh:
        modes = list(sh.keys())
        nps = sorted({int(x) for s in sh.values() for x in s})
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        width = 0.8 / max(len(modes), 1)
        for i, mode in enumerate(modes):
            ax.bar([j + i * width for j in range(len(nps))],
                   [sh[mode].get(str(n), 0) for n in nps], width, label=mode)
        ax.set_xticks([j + width * (len(modes) - 1) / 2
                       for j in range(len(nps))])
        ax.set_xticklabels([str(n) for n in nps])
        ax.set_xlabel("MPI ranks")
        ax.set_ylabel("eligible messages on the fast path (%)")
        ax.set_ylim(0, 100)
        ax.axhline(85, linestyle=":", color="grey")
        ax.set_title("Fast-path share, mixed sizes (fp_mix)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out + "/fp_share.png", dpi=120)


if __name__ == "__main__":
    main()
