import json,statistics as st,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
for v in 'BN':
    xs=[r['ops'] for r in rows if r['v']==v]; c=[r['cpu'] for r in rows if r['v']==v]; p=[r['p99'] for r in rows if r['v']==v]
    print(v, len(xs), 'rtt/s med %.0f [%.0f-%.0f]'%(st.median(xs),min(xs),max(xs)), 'cpu us/op %.2f'%st.median(c), 'p99 %.1f'%st.median(p))
pairs=[]
for r in sorted({x['r'] for x in rows}):
    b=[x['ops'] for x in rows if x['r']==r and x['v']=='B']; n=[x['ops'] for x in rows if x['r']==r and x['v']=='N']
    if b and n: pairs.append(n[0]/b[0])
print('N/B paired median %.3f (%d of %d higher)'%(st.median(pairs), sum(p>1 for p in pairs), len(pairs)), ' '.join('%.2f'%x for x in pairs))
