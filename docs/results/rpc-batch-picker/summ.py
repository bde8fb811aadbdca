import json,re,sys,statistics as st,collections
rows=[]
for f in sys.argv[1:]:
    for line in open(f):
        m=re.match(r'\{"bin":"(\w+)","round":(\d+),',line)
        try: d=json.loads(line)
        except Exception: continue
        d["bin"]=m.group(1); d['r']=int(m.group(2)); rows.append(d)
key=lambda d:(d['mix'],d['link'],d['mode'],d['clients'],d['outstanding'])
cells=collections.defaultdict(dict)
for d in rows:
    cells[key(d)].setdefault((d['bin'],d['batch']),{})[d['r']]=d
print('| mix | link | mode | clients | out | off | on | base adaptive | new adaptive | new ÷ base (median of per-round) | new ÷ best static | p50 base → new | CPU/call base → new |')
print('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|')
for k in sorted(cells):
    c=cells[k]
    def med(v,f='ops_per_s'): 
        x=[d[f] for d in c.get(v,{}).values()]; return st.median(x) if x else float('nan')
    def cpu(v):
        x=[d['cpu_client_us_per_call']+d['cpu_server_us_per_call'] for d in c.get(v,{}).values()]; return st.median(x)
    ba=c.get(('base','adaptive'),{}); na=c.get(('g4','adaptive'),{})
    rr=[na[r]['ops_per_s']/ba[r]['ops_per_s'] for r in ba if r in na]
    best=max(med(('base','off')),med(('base','on')))
    rs=[na[r]['ops_per_s']/max(c[('base','off')][r]['ops_per_s'],c[('base','on')][r]['ops_per_s']) for r in na if r in c.get(('base','off'),{}) and r in c.get(('base','on'),{})]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {med(('base','off'))/1e3:.0f} k | {med(('base','on'))/1e3:.0f} k | {med(('base','adaptive'))/1e3:.0f} k | {med(('g4','adaptive'))/1e3:.0f} k | {st.median(rr):.2f} [{min(rr):.2f}–{max(rr):.2f}] | {st.median(rs):.2f} | {med(('base','adaptive'),'p50_us'):.1f} → {med(('g4','adaptive'),'p50_us'):.1f} µs | {cpu(('base','adaptive')):.1f} → {cpu(('g4','adaptive')):.1f} µs |")
print('rounds', len(set(d['r'] for d in rows)))
