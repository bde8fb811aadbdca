import subprocess,sys,re,collections
def load(f):
    out=subprocess.run(['callgrind_annotate','--auto=no','--inclusive=no','--threshold=100',f],capture_output=True,text=True).stdout
    d=collections.Counter()
    for line in out.splitlines():
        m=re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+(.*)',line)
        if m:
            name=m.group(2)
            name=re.sub(r'\s*\[[^\]]*\]$','',name)
            name=re.sub(r'^[^ ]*?\.(rs|S|c|h):','',name)
            name=re.sub(r'^\?\?\?:','',name)
            d[name]+=int(m.group(1).replace(',',''))
    return d
a=load(sys.argv[1]); b=load(sys.argv[2]); n=float(sys.argv[3])
rows=sorted(((b[k]-a[k])/n,k) for k in set(a)|set(b))
rows.reverse()
tot=sum(r[0] for r in rows)
print('total %.1f'%tot)
for v,k in rows[:int(sys.argv[4]) if len(sys.argv)>4 else 40]:
    print('%8.1f  %s'%(v,k[:150]))
