import json,sys,statistics as st
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith('{')]
groups={}
for r in rows:
    if 'ops_per_s' not in r: continue
    k=(r['link'],r['mode'],r['clients'],r['outstanding'],r['size'],r.get('pace_us',0))
    groups.setdefault(k,{}).setdefault(r.get('adapt','main'),[]).append(r)
def ms(v):
    v=sorted(v); return st.median(v),v[0],v[-1]
def cpu(r):
    c=r.get('cpu_client_us_per_call'); s=r.get('cpu_server_us_per_call')
    return (c or 0)+(s or 0)
order=['on','off','main']
have=set(a for g in groups.values() for a in g)
base=[a for a in ('off','main') if a in have]
hdr="| link | mode | c × o | size B | pace µs | build | n | calls/s median (min–max) | p50 µs median (min–max) | p99 µs median | CPU µs/call median (min–max) |"+"".join(f" on÷{b} calls/s | on÷{b} CPU/call |" for b in base)
print(hdr); print("|"+"---|"*(hdr.count('|')-1))
for k in sorted(groups):
    g=groups[k]; res={}
    for a in order:
        if a not in g: continue
        rs=g[a]
        res[a]=(ms([r['ops_per_s'] for r in rs]),ms([r['p50_us'] for r in rs]),ms([r['p99_us'] for r in rs]),ms([cpu(r) for r in rs]),len(rs))
    for a in order:
        if a not in res: continue
        o,p,p9,c,n=res[a]
        extra=""
        for b in base:
            if a=='on' and b in res:
                extra+=f" {o[0]/res[b][0][0]:.2f} | {c[0]/res[b][3][0]:.2f} |"
            else: extra+="  |  |"
        print(f"| {k[0]} | {k[1]} | {k[2]} × {k[3]} | {k[4]} | {k[5]} | {a} | {n} | {o[0]:,.0f} ({o[1]:,.0f}–{o[2]:,.0f}) | {p[0]:.1f} ({p[1]:.1f}–{p[2]:.1f}) | {p9[0]:.1f} | {c[0]:.2f} ({c[1]:.2f}–{c[2]:.2f}) |{extra}")
