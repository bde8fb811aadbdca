# seq.py TXT BINCOMM [K]: the most common per-round sequences of wake-ups among the pair's threads
# ("X<Y" = X woken by Y; a round starts at SE woken by C after ≥ 5 ms), with their share.
import re, sys, collections
txt, bincomm = sys.argv[1], sys.argv[2][:15]; K = int(sys.argv[3]) if len(sys.argv) > 3 else 8
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
rounds = []; cur = None; last = -1
for t, ev, tid, rest in L:
    if ev != 'sched_waking': continue
    w = int(re.search(r' pid=(\d+)', rest).group(1)); r = role(w); by = role(tid) or 'x'
    if not r: continue
    if r == 'SE' and by == 'C' and t - last > 0.005:
        last = t; cur = []; rounds.append(cur)
    if cur is not None and by != 'x': cur.append(f"{r}<{by}")
c = collections.Counter(' '.join(r) for r in rounds)
for s, k in c.most_common(K): print(f"{k/len(rounds):5.1%}  {s}")
