import subprocess,sys,os,time,json,collections
# usage: samp.py BIN PROGRESS [extra env k=v]
B=sys.argv[1]; P=sys.argv[2]
env=dict(os.environ)
for kv in sys.argv[3:]:
    k,v=kv.split('=',1); env[k]=v
cmd=[B,'perf','write-bw','--local','--link','shm','--no-icrc','--progress',P,'--size','65536','-n','20000','--json','-q','--stats']
pr=subprocess.Popen(cmd,stdout=subprocess.PIPE,stderr=subprocess.PIPE,env=env)
samples=[]
def threads():
    out={}
    pids=[pr.pid]
    try:
        for c in open(f'/proc/{pr.pid}/task/{pr.pid}/children').read().split(): pids.append(int(c))
    except Exception: pass
    for pid in pids:
        try:
            for t in os.listdir(f'/proc/{pid}/task'):
                try:
                    s=open(f'/proc/{pid}/task/{t}/stat').read()
                    name=s[s.index('(')+1:s.rindex(')')]; rest=s[s.rindex(')')+2:].split()
                    out[(pid,int(t))]=(name,rest[0],int(rest[36]),int(rest[11])+int(rest[12]))
                except Exception: pass
        except Exception: pass
    return out
t0=time.time()
while pr.poll() is None and time.time()-t0<30:
    samples.append((time.time(),threads())); time.sleep(0.002)
so,se=pr.communicate()
line=[l for l in so.decode().splitlines() if l.startswith('{')]
r=json.loads(line[-1]) if line else {}
# roles: client pid = pr.pid; server = other
roles={}
for ts,th in samples:
    for (pid,tid),(name,st,cpu,ticks) in th.items():
        role=('C' if pid==pr.pid else 'S')+('eng' if 'engine' in name else ('app' if tid==pid else name))
        roles[(pid,tid)]=role
# keep samples where both the client app and server active
cnt=collections.Counter(); n=0
for ts,th in samples:
    d={roles[k]:(v[1],v[2]) for k,v in th.items()}
    if 'Capp' not in d or 'Seng' not in d: continue
    n+=1
    key=' '.join(f"{k}:{d[k][0]}{d[k][1]}" for k in sorted(d) if k in ('Capp','Ceng','Seng','Sapp'))
    cnt[key]+=1
sleeps=[l.split()[1] for l in se.decode().splitlines() if l.strip().startswith('sleeps:')]
print(P,' '.join(sys.argv[3:]),round(r.get('mb_per_s',0)),'cpu',round(r.get('cpu_client_us_per_op',0),2),round(r.get('cpu_server_us_per_op',0),2),'sleeps',sleeps,'samples',n)
for k,v in cnt.most_common(8): print('   ',v,k)
