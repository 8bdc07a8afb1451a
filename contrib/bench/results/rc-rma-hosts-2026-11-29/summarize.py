#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# The table of README.md from ab.sh's ab.csv files: per test, the medians
# of tcp (its tag_bw 1 MB, the targets' reference) and of rc_sr before and
# after, the median of the paired after/before ratios within a repetition,
# and after's median over tcp's.
#   summarize.py ab-*/ab.csv
import csv
import statistics
import sys
from collections import defaultdict

vals = defaultdict(dict)  # (file, rep) -> {(test, tl, lib): value}
tests = []
for path in sys.argv[1:]:
    with open(path) as f:
        for row in csv.DictReader(f):
            if not row["value"]:
                continue
            vals[(path, row["rep"])][(row["test"], row["tl"], row["lib"])] = \
                float(row["value"])
            if row["test"] not in tests:
                tests.append(row["test"])


def med(key):
    v = [r[key] for r in vals.values() if key in r]
    return (statistics.median(v), len(v)) if v else (float("nan"), 0)


tcp, ntcp = med(("bw1m", "tcp", "-"))
print("| test (MB/s) | tcp tag_bw 1 MB | rc_sr before | rc_sr after | "
      "after/before (paired) | before/tcp | after/tcp |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for t in tests:
    b, nb = med((t, "rc_sr", "before"))
    a, na = med((t, "rc_sr", "after"))
    pairs = [r[(t, "rc_sr", "after")] / r[(t, "rc_sr", "before")]
             for r in vals.values()
             if (t, "rc_sr", "after") in r and (t, "rc_sr", "before") in r]
    ratio = statistics.median(pairs) if pairs else float("nan")
    print("| %s | %.0f | %.0f | %.0f | %.2fx (%d) | %.2fx | %.2fx |" %
          (t, tcp, b, a, ratio, len(pairs), b / tcp, a / tcp))
