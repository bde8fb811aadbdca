# lat2.py TXT BINCOMM: per round (from SE's receive of the request), the server's sends (who, vlen, µs after
# the request's receive) and C's wake by CE (µs): median times per pattern of the server's sends.
import re, sys, collections, statistics as st
txt, bincomm = sys.argv[1], sys.argv[2][:15]
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
    if ev == 'sys_exit_recvmmsg' and me in ('SE', 'S'):
        n = int(rest.strip(), 16)
        if n < 1 << 63 and n > 0 and t - last > 0.005:
            last = t; cur = {'t0': t, 'sends': [], 'cwake': None}; rounds.append(cur)
    elif cur and ev == 'sys_enter_sendmmsg' and me in ('SE', 'S') and len(cur['sends']) < 3:
        cur['sends'].append((me, int(re.search(r'vlen: (0x[0-9a-f]+)', rest).group(1), 16), (t - cur['t0']) * 1e6))
    elif cur and ev == 'sched_waking' and me == 'CE' and cur['cwake'] is None and role(int(re.search(r' pid=(\d+)', rest).group(1))) == 'C':
        cur['cwake'] = (t - cur['t0']) * 1e6
g = collections.defaultdict(list)
for r in rounds:
    if r['cwake'] is None: continue
    sends = [s for s in r['sends'] if s[2] < r['cwake']]
    g[' '.join(f"{w}>{n}" for w, n, _ in sends)].append((r['cwake'], [s[2] for s in sends]))
for k, v in sorted(g.items(), key=lambda i: -len(i[1]))[:5]:
    ts = [st.median(x[1][i] for x in v) for i in range(len(v[0][1]))]
    print(f"{len(v):4d} rounds  sends before C's wake: {k:14s} at " + ", ".join(f"{x:.0f}" for x in ts) + f" µs; C woken at {st.median(x[0] for x in v):.0f} µs")
