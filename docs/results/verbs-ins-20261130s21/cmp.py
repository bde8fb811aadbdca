import sys
def rd(f):
    d={}
    for l in open(f).read().splitlines()[1:]:
        v,k=l.split(None,1); d[k]=float(v)
    return d
a=rd(sys.argv[1]); b=rd(sys.argv[2]); n=int(sys.argv[3]) if len(sys.argv)>3 else 12
for k in sorted(set(a)|set(b), key=lambda k: -abs(b.get(k,0)-a.get(k,0)))[:n]:
    print(f"{a.get(k,0):8.1f} {b.get(k,0):8.1f} {b.get(k,0)-a.get(k,0):+7.1f} {k[:90]}")
