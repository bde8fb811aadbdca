# rounds.py TXT BINCOMM: per round trip (split at C's pause timer wake, i.e. C woken by a non-weft task,
# or at SE woken by C when that is missing), histogram of CE wake-ups by the server (SE or S),
# and preemptions (switch-out in state R/R+) of each role.
import re, sys, collections
txt, bincomm = sys.argv[1], sys.argv[2][:15]
rx = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$')
L=[]; tg={}; names={}
for l in open(txt):
    m = rx.match(l)
    if not m: continue
    comm, pid, tid, cpu, t, ev, rest = m.groups()
    tg[int(tid)] = int(pid); names[int(tid)] = comm.strip()
    L.append((float(t), ev, int(tid), rest))
procs = {p for tid, p in tg.items() if names.get(tid) == bincomm}
client = min(procs)
def role(tid):
    if tid not in tg or tg[tid] not in procs: return None
    n = names[tid]
    if 'engine' in n: return 'CE' if tg[tid] == client else 'SE'
    return 'C' if tg[tid] == client else 'S'
rounds = []; cur = None; last_req = -1
pre = collections.Counter()
for t, ev, tid, rest in L:
    if ev == 'sched_waking':
        w = int(re.search(r' pid=(\d+)', rest).group(1)); r = role(w); by = role(tid)
        if r == 'SE' and by == 'C' and t - last_req > 0.005:
            last_req = t; cur = collections.Counter(); rounds.append(cur)
        if cur is not None and r == 'CE' and by in ('SE', 'S'):
            cur['ce_by_srv'] += 1
        if cur is not None and r == 'C' and by == 'CE':
            cur['c_by_ce'] += 1
    else:
        m = re.search(r'prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+)', rest)
        p, st = int(m.group(1)), m.group(2)
        r = role(p)
        if r and st.startswith('R') and cur is not None:
            cur['pre_' + r] += 1
n = len(rounds)
h = collections.Counter(r['ce_by_srv'] for r in rounds)
hc = collections.Counter(r['c_by_ce'] for r in rounds)
print(f"rounds {n}  CE woken by server per round: " + ", ".join(f"{k}:{v}" for k, v in sorted(h.items())) +
      "  | C woken by CE: " + ", ".join(f"{k}:{v}" for k, v in sorted(hc.items())) +
      "  | preemptions/rtt " + " ".join(f"{x} {sum(r['pre_'+x] for r in rounds)/max(n,1):.2f}" for x in ['C','S','CE','SE']))
