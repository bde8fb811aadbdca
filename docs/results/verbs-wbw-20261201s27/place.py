import os, sys, time, subprocess, collections
cmd = sys.argv[1:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
samples = collections.Counter()
t0=time.time()
def threads():
    out=[]
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            cmdl=open(f'/proc/{pid}/cmdline').read()
        except Exception: continue
        if 'weft' not in cmdl or 'place.py' in cmdl or 'flock' in cmdl: continue
        role = 'srv' if '--quiet' in cmdl or 'server' in cmdl else 'cli'
        try:
            for tid in os.listdir(f'/proc/{pid}/task'):
                s=open(f'/proc/{pid}/task/{tid}/stat').read()
                name=s[s.index('(')+1:s.rindex(')')]
                f=s[s.rindex(')')+2:].split()
                out.append((role,name,f[0],int(f[36]),int(f[11])+int(f[12])))
        except Exception: pass
    return out
rows=[]
while p.poll() is None and time.time()-t0<60:
    t=threads()
    running=[(r,n,c) for (r,n,st,c,_) in t if st=='R']
    key=tuple(sorted(running))
    samples[key]+=1
    time.sleep(0.0002)
outp=p.stdout.read()
for l in outp.splitlines():
    if l.strip().startswith('65536'): print(l)
tot=sum(samples.values())
for k,v in samples.most_common(12):
    print(f"{v/tot:6.1%} {k}")
