# seq2.py TXT BINCOMM [K]: per-round sequences of wake-ups ("X<Y"), sendmmsg calls ("X>n": n datagrams)
# and non-empty recvmmsg returns ("X:n") of the pair's threads; a round starts at SE's first
# recvmmsg that returns datagrams ≥ 5 ms after the previous round's start.
import re, sys, collections
txt, bincomm = sys.argv[1], sys.argv[2][:15]; K = int(sys.argv[3]) if len(sys.argv) > 3 else 8
rx = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\w+):(\w+):\s+(.*)$')
L=[]; tg={}; names={}
for l in open(txt):
    m = rx.match(l)
    if not m: continue
    comm, pid, tid, cpu, t, sys_, ev, rest = m.groups()
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
    me = role(tid)
    if ev == 'sched_waking':
        w = int(re.search(r' pid=(\d+)', rest).group(1)); r = role(w)
        if r and me and cur is not None: cur.append(f"{r}<{me}")
    elif ev == 'sys_enter_sendmmsg' and me:
        n = int(re.search(r'vlen: (0x[0-9a-f]+)', rest).group(1), 16)
        if cur is not None: cur.append(f"{me}>{n}")
    elif ev == 'sys_exit_recvmmsg' and me:
        n = int(rest.strip(), 16)
        if n >= 1 << 63 or n == 0: continue
        if me in ('SE', 'S') and t - last > 0.005:
            last = t; cur = []; rounds.append(cur)
        if cur is not None: cur.append(f"{me}:{n}")
c = collections.Counter(' '.join(r) for r in rounds)
for s, k in c.most_common(K): print(f"{k/len(rounds):5.1%}  {s}")
