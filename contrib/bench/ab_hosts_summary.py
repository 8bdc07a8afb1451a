# SPDX-License-Identifier: BSD-3-Clause
# Summarize contrib/bench/ab_hosts.sh's CSV files: medians of each library and the median of
# the after/before ratios of one repetition (run next to each other, so the
# machine's load falls on both alike). --quiet N: only the repetitions in
# which tcp's tag_bw 64 KB reached N MB/s (the machine was not loaded).
#   ab_hosts_summary.py [--quiet N] ab-*/ab.csv
import csv, sys, statistics as st
args = sys.argv[1:]
quiet = 0
if args[:1] == ['--quiet']:
    quiet = float(args[1])
    args = args[2:]
def val(r):
    try: return float(r['value'])
    except: return None
rows = []
for f in args:
    for r in csv.DictReader(open(f)):
        r['run'] = f
        rows.append(r)
calm = {(r['run'], r['mtu'], r['rep']) for r in rows
        if r['test'] == 'bw64k' and r['tl'] == 'tcp' and val(r) and val(r) >= quiet}
rows = [r for r in rows if (r['run'], r['mtu'], r['rep']) in calm]
keys = []
for r in rows:
    k = (r['mtu'], r['test'])
    if k not in keys: keys.append(k)
names = {'lat4k': 'tag_lat 4 KB (us)', 'bw64k': 'tag_bw 64 KB (MB/s)', 'bw1m': 'tag_bw 1 MB (MB/s)'}
tls = []
for r in rows:
    if r['tl'] != 'tcp' and r['tl'] not in tls: tls.append(r['tl'])
head = ['MTU', 'test', 'tcp']
for tl in tls:
    head += [tl + ' before', tl + ' after', 'after/before (paired)']
print('| ' + ' | '.join(head) + ' |')
print('|' + ' --- |' * len(head))
for mtu, test in keys:
    sel = [r for r in rows if r['mtu'] == mtu and r['test'] == test]
    def med(tl, lib):
        v = [val(r) for r in sel if r['tl'] == tl and r['lib'] == lib and val(r)]
        return st.median(v) if v else None
    def paired(tl):
        by = {}
        for r in sel:
            if r['tl'] == tl and val(r):
                by.setdefault((r['run'], r['rep']), {})[r['lib']] = val(r)
        rat = [d['after'] / d['before'] for d in by.values() if 'after' in d and 'before' in d]
        if test.startswith('lat'):
            rat = [1 / x for x in rat]  # above 1: faster
        return st.median(rat), len(rat)
    out = [mtu, names[test], '%.4g' % med('tcp', '-')]
    for tl in tls:
        b, a = med(tl, 'before'), med(tl, 'after')
        p, n = paired(tl)
        out += ['%.4g' % b, '%.4g' % a, '%.2fx (%d)' % (p, n)]
    print('| ' + ' | '.join(out) + ' |')
