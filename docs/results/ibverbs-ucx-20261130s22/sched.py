# Per thread of a perf sched trace (perf script output on stdin): run time per CPU, run-queue wait
# (wake-up or preemption to switch-in), wake-ups, preemptions. Threads named weft*, ucx*, async (UCX).
import sys,re,collections
# per-thread: runtime per cpu, runqueue wait (wakeup/preempt -> switch in), counts
sw=re.compile(r'\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch: prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)')
wk=re.compile(r'\[(\d+)\]\s+([\d.]+):\s+sched:sched_wakeup: comm=(.*?) pid=(\d+) prio=\d+ target_cpu=(\d+)')
name={};run=collections.defaultdict(lambda: collections.defaultdict(float));on={};ready={};wait=collections.defaultdict(float);nw=collections.Counter();npre=collections.Counter();first=None;last=0
for l in sys.stdin:
    m=sw.search(l)
    if m:
        cpu,t,pc,pp,ps,nc,np=m.groups();t=float(t);cpu=int(cpu);pp=int(pp);np=int(np)
        first=first or t;last=t
        name[pp]=pc;name[np]=nc
        if pp in on: run[pp][cpu]+=t-on.pop(pp)
        if ps.startswith('R'): ready[pp]=t;npre[pp]+=1
        if np in ready: wait[np]+=t-ready.pop(np)
        on[np]=t;continue
    m=wk.search(l)
    if m:
        cpu,t,c,p,tc=m.groups();p=int(p);name[p]=c;ready[p]=float(t);nw[p]+=1
dur=last-first
print(f"trace {dur*1e3:.1f} ms")
for p in sorted(run,key=lambda p:-sum(run[p].values())):
    if not name[p].startswith(('weft', 'ucx', 'async')):continue
    r=run[p];tot=sum(r.values())
    print(f"{name[p]:14s} {p:6d} run {tot*1e3:7.1f} ms  cpu0 {r.get(0,0)*1e3:7.1f} cpu1 {r.get(1,0)*1e3:7.1f}  rq-wait {wait[p]*1e3:6.2f} ms  wakeups {nw[p]:5d}  preempted {npre[p]:5d}")
