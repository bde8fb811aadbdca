import sys,json,statistics as st,collections
# Healthy rounds only: both binaries' 1-QP runs >= THRESH M msg/s.
TH=float(sys.argv[1]); files=sys.argv[2:]
rows=[json.loads(l) for f in files for l in open(f)]
rate=collections.defaultdict(dict)
for d in rows:
    if d['res']: rate[(d['bin'],d['N'],d['depth'])][d['round']]=d['res']['mmsg_per_s']
bins=sorted({k[0] for k in rate}, key=lambda b: b!='main')
rounds=sorted({r for k in rate for r in rate[k]})
ok=[r for r in rounds if all(rate[(b,1,512)].get(r,0)>=TH for b in bins)]
print("healthy rounds:",ok)
cfgs=sorted({(k[1],k[2]) for k in rate})
hdr="| N × window | "+" | ".join(f"{b}: M msg/s, median (min–max) | {b}: ÷ one QP, per round | {b}: median" for b in bins)+" | br ÷ main, same round (median) |"
print(hdr)
for N,D in cfgs:
    w=max(1,D//N); cells=[]
    for b in bins:
        v=[rate[(b,N,D)][r] for r in ok if r in rate[(b,N,D)]]
        rr=[rate[(b,N,D)][r]/rate[(b,1,512)][r] for r in ok if r in rate[(b,N,D)]]
        cells+= [f"{st.median(v):.2f} ({min(v):.2f}–{max(v):.2f})", ("–" if N==1 else " ".join(f"{x:.2f}" for x in rr)), ("–" if N==1 else f"{st.median(rr):.2f}")]
    pr=[rate[('br',N,D)][r]/rate[('main',N,D)][r] for r in ok if r in rate[('br',N,D)] and r in rate[('main',N,D)]]
    print(f"| {N} × {w} | "+" | ".join(cells)+f" | {st.median(pr):.2f} |")
