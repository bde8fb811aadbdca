"""Per-function instruction differences between callgrind runs.

agg.py A.out B.out N [rows]: (B - A) / N per function (one run against another).
agg.py A1.out A2.out B1.out B2.out N [rows]: per function, (A2 - A1) / N beside
(B2 - B1) / N and their difference: two run lengths per binary, so set-up cancels
(docs/results/verbs-inline-20261202s35).
"""
import sys,re,subprocess
def load(f):
    out=subprocess.run(["callgrind_annotate","--auto=no","--inclusive=no","--threshold=100",f],capture_output=True,text=True).stdout
    d={}
    for line in out.splitlines():
        m=re.match(r"^\s*([0-9,]+)\s+(?:\([^)]*\)\s+)?(.*)$",line)
        if not m: continue
        c=int(m.group(1).replace(",",""))
        name=m.group(2)
        if "PROGRAM TOTALS" in name: continue
        name=re.sub(r"\s*\[[^\]]*\]\s*$","",name)
        fn=name.split(":",1)[1] if ":" in name else name
        fn=re.sub(r"::\{\{closure\}\}","",fn)
        d[fn]=d.get(fn,0)+c
    return d
def two(argv):
    a=load(argv[1]); b=load(argv[2]); n=int(argv[3])
    rows=sorted(((b.get(k,0)-a.get(k,0))/n,k) for k in set(a)|set(b))[::-1]
    print("sum", round(sum(r[0] for r in rows)))
    for v,k in rows[:int(argv[4]) if len(argv)>4 else 25]:
        if abs(v)<3: continue
        print(f"{v:8.1f}  {k[:120]}")
def four(argv):
    a1,a2,b1,b2=[load(f) for f in argv[1:5]]; n=int(argv[5])
    keys=set(a1)|set(a2)|set(b1)|set(b2)
    da={k:(a2.get(k,0)-a1.get(k,0))/n for k in keys}
    db={k:(b2.get(k,0)-b1.get(k,0))/n for k in keys}
    rows=sorted(((db[k]-da[k],da[k],db[k],k) for k in keys))[::-1]
    print("sum A",round(sum(da.values())),"B",round(sum(db.values())))
    for d,x,y,k in rows[:int(argv[6]) if len(argv)>6 else 25]:
        if abs(d)<2: continue
        print(f"{d:8.1f} {x:8.1f} {y:8.1f}  {k[:110]}")
if __name__ == "__main__":
    (four if len(sys.argv)>=6 and not sys.argv[3].isdigit() else two)(sys.argv)
