import sys,re,glob
# usage: per.py TAG name lo hi
def coll(f):
    for l in open(f):
        if 'Collected :' in l:
            return [int(x) for x in l.split(':')[1].split()]
tag,name,lo,hi=sys.argv[1:5]
a=coll(f'/tmp/h22/cg/{tag}-{name}-{lo}.log'); b=coll(f'/tmp/h22/cg/{tag}-{name}-{hi}.log')
n=int(hi)-int(lo)
# Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
d=[(y-x)/n for x,y in zip(a,b)]
print(f"{tag:10s} {name:8s} Ir {d[0]:7.0f}  D1 rd {d[4]:5.1f} wr {d[5]:5.1f}  L2 rd {d[7]:5.2f} wr {d[8]:5.2f}  L2 total {d[7]+d[8]:5.2f}")
