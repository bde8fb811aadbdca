#!/usr/bin/env python3
# roles.py TXT BINCOMM [ROUNDS=330]: wake-ups per round trip of the pair's four threads (C client app,
# CE client engine, S server app, SE server engine), each split by waker (another of the four,
# or "other": an interrupt on a foreign task or idle, i.e. a timer; trace sched_waking, which fires in
# the waker's context, not sched_wakeup, which a remote wake-up fires on the target CPU), and switches-in per round trip.
import re, sys, collections
txt, bincomm = sys.argv[1], sys.argv[2][:15]
R = float(sys.argv[3]) if len(sys.argv) > 3 else 330.0
rx = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$')
L = []; tg = {}; names = {}
for l in open(txt):
    m = rx.match(l)
    if not m: continue
    comm, pid, tid, cpu, t, ev, rest = m.groups()
    tg[int(tid)] = int(pid); names[int(tid)] = comm.strip()
    L.append((ev, int(tid), rest))
procs = {p for tid, p in tg.items() if names.get(tid) == bincomm}
client = min(procs)
def role(tid):
    if tid not in tg or tg[tid] not in procs: return None
    n = names[tid]
    if 'engine' in n: return 'CE' if tg[tid] == client else 'SE'
    if n == bincomm: return 'C' if tg[tid] == client else 'S'
    return None
wk = collections.Counter(); by = collections.Counter(); sw = collections.Counter()
for ev, tid, rest in L:
    if ev == 'sched_switch':
        n = int(re.search(r'next_pid=(\d+)', rest).group(1))
        r = role(n)
        if r: sw[r] += 1
    elif ev in ('sched_waking', 'sched_wakeup'):
        n = int(re.search(r' pid=(\d+)', rest).group(1))
        r = role(n)
        if r:
            wk[r] += 1; by[(r, role(tid) or 'other')] += 1
tot = 0
for r in ['C', 'S', 'CE', 'SE']:
    parts = ', '.join(f"{w} {c / R:.2f}" for (x, w), c in sorted(by.items(), key=lambda i: -i[1]) if x == r)
    print(f"{r:2s} wakes/rtt {wk[r] / R:.2f} (by {parts})  switches-in/rtt {sw[r] / R:.2f}")
    tot += wk[r]
print(f"all wakes/rtt {tot / R:.2f}  switches-in/rtt {sum(sw.values()) / R:.2f}")
