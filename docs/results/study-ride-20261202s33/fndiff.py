import re,collections,sys
A,B=sys.argv[1],sys.argv[2]
def load(f):
    d=collections.Counter()
    for l in open(f):
        parts=l.split(None,1)
        if len(parts)<2: continue
        try: v=int(parts[0])
        except: continue
        name=re.sub(r'\[.*?\]','',parts[1].strip()).strip()
        # by function only (drop the source file of inlined code)
        name=name.split(':',1)[1] if ':' in name else name
        d[name]+=v
    return d
for kind,(lo,hi,n) in (('streamed, per message',('s10000','s60000',50000)),('ping-pong, per round',('p2000','p12000',10000))):
    per={}
    for b in (A,B):
        L=load(f'{b}-{lo}.fn'); H=load(f'{b}-{hi}.fn')
        per[b]={k:(H[k]-L[k])/n for k in set(H)|set(L)}
    keys=set(per[A])|set(per[B])
    diffs=sorted(((per[B].get(k,0)-per[A].get(k,0),k) for k in keys),key=lambda x:-abs(x[0]))
    print(kind, f'({B} - {A})')
    for d,k in diffs[:12]:
        if abs(d)<0.5: break
        print('  %+8.1f  %s %8.1f %s %8.1f  %s'%(d,A,per[A].get(k,0),B,per[B].get(k,0),k[:110]))
