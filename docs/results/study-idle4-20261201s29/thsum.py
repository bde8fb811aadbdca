#!/usr/bin/env python3
# thsum.py FILE: per binary, per thread kind, per round trip (RTTs = warmup + iters; warmup = min(1000, max(10, iters/10)) of the requested 12500 -> 1000):
# run µs, runqueue wait µs, slices, voluntary and involuntary switches; pooled over windows; plus pooled rtt mean
import json, sys, collections
f = sys.argv[1]; req = int(sys.argv[2]) if len(sys.argv) > 2 else 12500
warm = min(1000, max(10, req // 10))
acc = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0]*5)); n = collections.Counter(); us = collections.Counter(); it = collections.Counter()
for l in open(f):
    d = json.loads(l)
    if not d['row'] or not d['threads']: continue
    rt = warm + d['row']['iters']
    n[d['name']] += rt
    us[d['name']] += d['row']['iters'] * 1e6 / d['row']['rtt_per_s']; it[d['name']] += d['row']['iters']
    for k, v in d['threads'].items():
        a = acc[d['name']][k]
        for i in range(5): a[i] += v[i]
for name in sorted(acc):
    print(f"{name}: rtt mean {us[name]/it[name]:.1f} us over {it[name]} rtts")
    for k in sorted(acc[name]):
        a = acc[name][k]; m = n[name]
        print(f"   {k:14s} run {a[0]/1e3/m:6.1f} us  wait {a[1]/1e3/m:6.1f} us  slices {a[2]/m:5.2f}  vol {a[3]/m:5.2f}  invol {a[4]/m:5.2f}  wait/slice {a[1]/1e3/max(a[2],1):6.1f} us")
