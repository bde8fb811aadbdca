import sys,re,collections,statistics as st
# qdsum.py FILE...: qdiag.sh output; per link and binary, median (range) over rounds of the
# CPU µs per round trip (both processes, client, server) and per process of the
# stand-bys, watches, sleeps and engine passes per round trip (100 round trips a run).
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    k=None
    for l in open(f):
        if l.startswith('== '):
            w=l.split(); k=(w[2],w[3])
            m=re.search(r'cpu_us/op ([\d.]+) client ([\d.]+) server ([\d.]+)',l)
            if not m: k=None; continue
            for n,v in zip(('cpu','cpu_cl','cpu_sv'),m.groups()): d[k][n].append(float(v))
        elif l.startswith('  stats') and k:
            who='sv' if 'server' in l else 'cl'
            for n in ('passes','sleeps','standbys','takeovers','watches'):
                d[k][n+'_'+who].append(int(re.search(n+r'=(\d+)',l)[1])/100)
cols=['cpu','cpu_cl','cpu_sv','standbys_sv','standbys_cl','takeovers_cl','watches_sv','watches_cl','sleeps_sv','sleeps_cl','passes_sv','passes_cl']
print('| link | binary | runs | '+' | '.join(cols)+' |'); print('|---|---|---:|'+'---|'*len(cols))
for k in sorted(d):
    x=d[k]; print('| %s | %s | %d | '%(k[0],k[1],len(x['cpu']))+' | '.join('%.3g (%.3g–%.3g)'%(st.median(x[c]),min(x[c]),max(x[c])) if x[c] else '-' for c in cols)+' |')
