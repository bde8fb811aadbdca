"""Summary of quiet2.sh outputs: per link, point and binary, median (range) over the
rounds of p50, p99 and CPU per round trip (both processes).
  python3 quietsum.py FILE..."""
import sys, statistics as st, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    for line in open(f):
        w = line.split()
        if len(w) < 12: continue
        k = (w[1], w[3], w[2])
        d[k]['p50'].append(float(w[5])); d[k]['p99'].append(float(w[7])); d[k]['cpu'].append(float(w[11]))
def f(v):
    n = 2 if max(v) < 10 else 1 if max(v) < 100 else 0
    return f'{st.median(v):.{n}f} ({min(v):.{n}f}–{max(v):.{n}f})'
print('| link | point | binary | rounds | p50 µs | p99 µs | CPU µs per round trip |')
print('| --- | --- | --- | ---: | --- | --- | --- |')
for k in sorted(d):
    v = d[k]
    print(f'| {k[0]} | {k[1]} | {k[2]} | {len(v["p50"])} | {f(v["p50"])} | {f(v["p99"])} | {f(v["cpu"])} |')
