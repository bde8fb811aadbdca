# fn.py A.cg NA B.cg NB : per-function Ir (and D1mr, DLmr, DLmw) per message, A vs B
import sys, collections
def load(p):
    ev=None; f=fn=None; T=collections.defaultdict(lambda:[0]*9)
    for l in open(p):
        if l.startswith('events:'): ev=l.split()[1:]; continue
        if l.startswith('fl='): f=l[3:].strip(); continue
        if l.startswith('fn='): fn=l[3:].strip(); continue
        if l[:1].isdigit() and fn:
            v=list(map(int,l.split()[1:]))
            t=T[fn]
            for i,x in enumerate(v): t[i]+=x
    return T
A=load(sys.argv[1]); na=float(sys.argv[2]); B=load(sys.argv[3]); nb=float(sys.argv[4])
keys=set(A)|set(B)
rows=[(B.get(k,[0]*9)[0]/nb - A.get(k,[0]*9)[0]/na, k) for k in keys]
rows.sort(key=lambda r:-abs(r[0]))
print(f"{'fn':70s} {'Ir A':>8s} {'Ir B':>8s} {'d':>7s} {'D1mr B':>7s} {'LLr B':>6s} {'LLw B':>6s}")
for d,k in rows[:int(sys.argv[5]) if len(sys.argv)>5 else 30]:
    a=A.get(k,[0]*9); b=B.get(k,[0]*9)
    print(f"{k[:70]:70s} {a[0]/na:8.1f} {b[0]/nb:8.1f} {d:+7.1f} {b[4]/nb:7.2f} {b[5]/nb:6.2f} {b[8]/nb:6.2f}")
