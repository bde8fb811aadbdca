"""Summary of diag.sh outputs: per link, config and binary, the windows' mean round
trips (median, range, count) and the application threads' CPU share (median).
  python3 hogsum.py FILE..."""
import sys, re, json, statistics as st, collections
rtt = collections.defaultdict(list); cpu = collections.defaultdict(list)
for f in sys.argv[1:]:
    key = None
    for line in open(f):
        if line.startswith('== '):
            r, l, c, b = line[3:].split(); key = (l, c, b); continue
        m = re.search(r'mean_rtt_us ([\d.]+)', line)
        if m and key: rtt[key].append(float(m[1]))
        if line.startswith('{') and key:
            o = json.loads(line)
            if o['comm'].startswith('weft-') and o['comm'] not in ('weft-engine', 'weft-cm-watch') and o['slices'] > 0:
                cpu[key].append(o['cpu'])
print('| link | config | binary | windows | mean RTT µs median (range) | app thread CPU, median |')
print('| --- | --- | --- | ---: | --- | ---: |')
for k in sorted(rtt):
    v = rtt[k]
    print(f'| {k[0]} | {k[1]} | {k[2]} | {len(v)} | {st.median(v):.1f} ({min(v):.1f}–{max(v):.1f}) | {st.median(cpu[k]):.2f} |')
