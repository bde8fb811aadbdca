import sys,re,json,collections,statistics as st
# bgsum.py FILE...: per (link config bin): median (range) of p99, p90; app involuntary
# switches/s and run-queue wait (both processes' app threads summed), engine thread
# wake-ups/s (voluntary switches, summed), blocked waits (both processes).
rows=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    tag=None
    for l in open(f):
        if l.startswith('== '):
            tag=tuple(l.split()[2:5]); cur=rows[tag]; ai=ev=aq=bl=0.0; cur['_n'].append(1); continue
        if tag is None: continue
        if l.startswith('p50'):
            m=dict(re.findall(r'(p50|p90|p99|cpu_us/op) ([\d.]+)',l)); cur['p99'].append(float(m['p99'])); cur['p90'].append(float(m['p90'])); cur['cpu'].append(float(m['cpu_us/op']))
        elif l.startswith('{'):
            r=json.loads(l)
            if r['comm']=='weft-engine': cur['_ev'].append(r['vol'])
            elif r['comm'].startswith('weft-') and r['comm'] not in('weft-cm-watch',) and r['cpu']>0.01: cur['_ai'].append(r['invol']); cur['_aq'].append(r['rq_wait'])
        elif 'WaitStats' in l:
            m=re.search(r'blocked: (\d+)',l); cur['_bl'].append(int(m[1]))
def med(v): return '%.1f (%.1f–%.1f)'%(st.median(v),min(v),max(v)) if v else '-'
print('| link config bin | runs | p99 µs | p90 µs | CPU µs/op | app invol. switches/s (per app thread) | app run-queue wait | engine wake-ups/s (per thread) | blocked waits per run (both) |')
print('|---|---:|---|---|---|---|---|---|---|')
for k in sorted(rows):
    c=rows[k]; n=len(c['_n'])
    print('| %s | %d | %s | %s | %s | %.0f | %.3f | %.0f | %.0f |'%(' '.join(k),n,med(c['p99']),med(c['p90']),med(c['cpu']),st.median(c['_ai']) if c['_ai'] else 0,st.median(c['_aq']) if c['_aq'] else 0,st.median(c['_ev']) if c['_ev'] else 0,sum(c['_bl'])/n))
