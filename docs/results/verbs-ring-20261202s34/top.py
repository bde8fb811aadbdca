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
        d[fn]=d.get(fn,0)+c
    return d
a=load(sys.argv[1]); b=load(sys.argv[2]); n=int(sys.argv[3])
rows=sorted(((b.get(k,0)-a.get(k,0))/n,k) for k in set(a)|set(b))[::-1]
print("total", round(sum(r[0] for r in rows)))
for v,k in rows[:int(sys.argv[4])]:
    print(f"{v:8.1f}  {k[:110]}")
