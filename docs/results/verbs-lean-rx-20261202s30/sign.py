import json,sys,collections,math,os
# [REF=name] sign.py FILE...: per cell, rounds in which each variant beat REF (default base; same file, same round), two-sided sign test p
REF=os.environ.get('REF','base')
by={}
for f in sys.argv[1:]:
    for l in open(f):
        x=json.loads(l); r=x['r']
        if 'error' in r or r.get('test')=='failed': continue
        val=r['p50_us'] if r['test']=='send-lat' else r['mmsg_per_s']
        by[(f,x['round'],r['test'],x['progress'],x['variant'])]=(val, r['test']=='send-lat')
wins=collections.Counter(); n=collections.Counter()
for k,(v,lower) in by.items():
    if k[-1]==REF: continue
    b=by.get(k[:-1]+(REF,))
    if not b or b[0]==v: continue
    cell=(k[2],k[3],k[-1]); n[cell]+=1
    wins[cell]+= (v<b[0]) if lower else (v>b[0])
def p(w,m):
    k=min(w,m-w); return min(1.0,2*sum(math.comb(m,i) for i in range(k+1))/2**m)
for cell in sorted(n):
    print(f"{cell[0]} {cell[1]} {cell[2]}: better in {wins[cell]} of {n[cell]} (p {p(wins[cell],n[cell]):.2f})")
