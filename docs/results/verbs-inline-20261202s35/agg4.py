import sys,importlib.util
spec=importlib.util.spec_from_file_location("agg","/work/main/docs/results/verbs-ring-proto-20261202s33/agg.py")
import re,subprocess
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
        d[fn]=d.get(fn,0)+c
    return d
# args: A_small A_big B_small B_big N
a1,a2,b1,b2=[load(f) for f in sys.argv[1:5]]; n=int(sys.argv[5])
keys=set(a1)|set(a2)|set(b1)|set(b2)
da={k:(a2.get(k,0)-a1.get(k,0))/n for k in keys}
db={k:(b2.get(k,0)-b1.get(k,0))/n for k in keys}
rows=sorted(((db[k]-da[k],da[k],db[k],k) for k in keys))[::-1]
print("sum A",round(sum(da.values())),"B",round(sum(db.values())))
for d,x,y,k in rows:
    if abs(d)<2: continue
    print(f"{d:8.1f} {x:8.1f} {y:8.1f}  {k[:110]}")
