#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The pictures of the MVAPICH-Aptus paper (Koop, Jones, Panda, IPDPS 2008,
Figure 7 and Table 2) from the statistics the transport writes itself.

Run a job with UCX_APTUS_STATS=/some/dir/aptus-%h-%p.csv (every interface
appends CSV rows host,pid,record,object,counter,value at close), then:

  contrib/aptus_stats_plot.py OUTDIR FILE.csv [FILE.csv ...]

writes
  channel_by_size.png  share of messages per channel, by message size
                       (all processes together)
  channels_per_process.png  RC connections per process: the most it held
                       at once, and the cap
and prints both as tables.
"""
import collections
import csv
import os
import sys

SIZES = ["le64", "le256", "le1k", "le4k", "le16k", "le64k", "le256k", "le1m",
         "gt1m"]
SIZE_LABELS = ["<=64", "<=256", "<=1K", "<=4K", "<=16K", "<=64K", "<=256K",
               "<=1M", ">1M"]
CHANNELS = ["ud_sr", "rc_sr", "rc_rdma", "ud_zcopy", "rc_fp"]


def load(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                rows.append(row)
    return rows


def by_size(rows):
    """{channel: [messages per size class]} summed over processes."""
    out = collections.defaultdict(lambda: [0] * len(SIZES))
    for r in rows:
        if r["record"] != "aptus-sizes" or r["counter"] not in SIZES:
            continue
        chan = r["object"].rsplit("/", 1)[-1]
        out[chan][SIZES.index(r["counter"])] += int(r["value"])
    return out


def per_process(rows):
    """[(host:pid, rc_peak, rc_max, fp_peak, fp_max)] of aptus interfaces."""
    procs = collections.OrderedDict()
    for r in rows:
        if r["record"] != "aptus":
            continue
        key = "%s:%s" % (r["host"], r["pid"])
        procs.setdefault(key, {})[r["counter"]] = int(r["value"])
    return [(k, v.get("rc_peak", 0), v.get("rc_max", 0), v.get("fp_peak", 0),
             v.get("fp_max", 0)) for k, v in procs.items()]


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    outdir, paths = argv[1], argv[2:]
    rows = load(paths)
    sizes = by_size(rows)
    procs = per_process(rows)
    if not sizes and not procs:
        sys.stderr.write("no aptus statistics in %s\n" % " ".join(paths))
        return 1

    chans = [c for c in CHANNELS if c in sizes] + \
        sorted(c for c in sizes if c not in CHANNELS)
    print("messages by size and channel (all processes)")
    print("%-8s" % "size" + "".join("%12s" % c for c in chans))
    for i, label in enumerate(SIZE_LABELS):
        counts = [sizes[c][i] for c in chans]
        if sum(counts):
            print("%-8s" % label + "".join("%12d" % n for n in counts))
    print()
    print("RC connections per process (most at once / cap)")
    for name, rc_peak, rc_max, fp_peak, fp_max in procs:
        print("%-24s rc %3d / %-3d  fp %3d / %-3d" %
              (name, rc_peak, rc_max, fp_peak, fp_max))

    import matplotlib
    matplotlib.use("Agg")
    os.makedirs(outdir, exist_ok=True)
    import matplotlib.pyplot as plt

    used = [i for i in range(len(SIZES)) if any(sizes[c][i] for c in chans)]
    if used:
        fig, ax = plt.subplots(figsize=(7, 4))
        bottom = [0.0] * len(used)
        for c in chans:
            share = []
            for k, i in enumerate(used):
                total = sum(sizes[x][i] for x in chans)
                share.append(100.0 * sizes[c][i] / total if total else 0)
            ax.bar([SIZE_LABELS[i] for i in used], share, bottom=bottom,
                   label=c)
            bottom = [b + s for b, s in zip(bottom, share)]
        ax.set_ylabel("messages (%)")
        ax.set_xlabel("message size (bytes)")
        ax.set_title("aptus: channel by message size")
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig("%s/channel_by_size.png" % outdir)
        plt.close(fig)
    if procs:
        fig, ax = plt.subplots(figsize=(max(6, len(procs) * 0.3), 4))
        ax.bar(range(len(procs)), [p[1] for p in procs], label="RC (most)")
        ax.axhline(max(p[2] for p in procs), color="red", linestyle="--",
                   label="cap (UCX_APTUS_MAX_RC)")
        ax.set_xlabel("process")
        ax.set_ylabel("RC connections")
        ax.set_title("aptus: RC connections per process")
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig("%s/channels_per_process.png" % outdir)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
