#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Plots of contrib/bench/aptus_bench.sh's results.csv, as the MVAPICH-Aptus
paper draws them (Koop et al., IPDPS 2008, Figure 7 and Table 2):

  time.png      time per workload and job size, normalised to RC
  memory.png    largest peak resident size of a rank, normalised to UD
  channels.png  where aptus sent its messages, per workload and job size
  sizes.png     aptus' channel by message size (all workloads, largest job)

usage: aptus_plot.py results.csv OUTDIR [sizes.csv]
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CONFIGS = ["RC", "UD", "UD-copy", "FP", "Aptus"]
CHANNELS = ["ud_sr_msgs", "rc_sr_msgs", "rc_rdma_msgs", "ud_zcopy_msgs"]


def num(value):
    try:
        return float(value)
    except ValueError:
        return float("nan")


def bars(rows, key, title, ylabel, path):
    points = sorted({(r["workload"], int(r["np"])) for r in rows},
                    key=lambda p: (p[0], p[1]))
    # the configurations of this run (between hosts: TCP too, no UD-copy)
    configs = ["TCP"] * any(r["config"] == "TCP" for r in rows) + \
        [c for c in CONFIGS if any(r["config"] == c for r in rows)]
    width = 0.8 / len(configs)
    fig, ax = plt.subplots(figsize=(max(6, len(points) * 1.2), 4))
    for i, config in enumerate(configs):
        ys = []
        for work, np_ in points:
            match = [r for r in rows if r["workload"] == work and
                     int(r["np"]) == np_ and r["config"] == config]
            ys.append(num(match[0][key]) if match else float("nan"))
        ax.bar([p + i * width for p in range(len(points))], ys, width,
               label=config)
    ax.set_xticks([p + 0.4 - width / 2 for p in range(len(points))])
    ax.set_xticklabels([f"{w}\n{n} ranks" for w, n in points], fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.5)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def channels(rows, path):
    aptus = [r for r in rows if r["config"] == "Aptus"]
    labels = [f"{r['workload']}\n{r['np']} ranks" for r in aptus]
    fig, ax = plt.subplots(figsize=(max(6, len(aptus) * 1.0), 4))
    bottom = [0.0] * len(aptus)
    for ch in CHANNELS:
        total = [sum(num(r[c]) for c in CHANNELS) or 1 for r in aptus]
        share = [num(r[ch]) / t * 100 for r, t in zip(aptus, total)]
        ax.bar(range(len(aptus)), share, bottom=bottom,
               label=ch.replace("_msgs", ""))
        bottom = [b + s for b, s in zip(bottom, share)]
    ax.set_xticks(range(len(aptus)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("messages (%)")
    ax.set_title("aptus: channel of each message")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


SIZE_CLASSES = ["le64", "le256", "le1k", "le4k", "le16k", "le64k", "le256k",
                "le1m", "gt1m"]


def sizes(path, out):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return
    top = max(int(r["np"]) for r in rows)
    rows = [r for r in rows if int(r["np"]) == top]
    chans = sorted({r["channel"] for r in rows})
    totals = {c: sum(num(r[c]) for r in rows) for c in SIZE_CLASSES}
    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = [0.0] * len(SIZE_CLASSES)
    for ch in chans:
        share = []
        for c in SIZE_CLASSES:
            n = sum(num(r[c]) for r in rows if r["channel"] == ch)
            share.append(n / totals[c] * 100 if totals[c] else 0)
        ax.bar(range(len(SIZE_CLASSES)), share, bottom=bottom, label=ch)
        bottom = [b + s for b, s in zip(bottom, share)]
    ax.set_xticks(range(len(SIZE_CLASSES)))
    ax.set_xticklabels([c.replace("le", "<=").replace("gt", ">")
                        for c in SIZE_CLASSES], fontsize=8)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("messages (%)")
    ax.set_title(f"aptus: channel by message size ({top} ranks, all workloads)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out}/sizes.png", dpi=120)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    out = sys.argv[2]
    bars(rows, "rel_to_rc", "time, normalised to RC (lower is better)",
         "time / RC", f"{out}/time.png")
    bars(rows, "rss_rel_to_ud", "peak memory per process, normalised to UD",
         "memory / UD", f"{out}/memory.png")
    channels(rows, f"{out}/channels.png")
    if len(sys.argv) == 4:
        sizes(sys.argv[3], out)


if __name__ == "__main__":
    main()
