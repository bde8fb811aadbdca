import re, sys
txt, bincomm, start, n = sys.argv[1], sys.argv[2][:15], float(sys.argv[3]), int(sys.argv[4])
rx = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$')
L=[]; tg={}; names={}
for l in open(txt):
    m = rx.match(l)
    if not m: continue
    comm, pid, tid, cpu, t, ev, rest = m.groups()
    tg[int(tid)] = int(pid); names[int(tid)] = comm.strip()
    L.append((float(t), ev, int(tid), comm.strip(), int(cpu), rest))
procs = {p for tid, p in tg.items() if names.get(tid) == bincomm}
mine = {tid for tid, p in tg.items() if p in procs}
client = min(procs)
def nm(tid):
    if tid not in mine: return names.get(tid, '?')
    side = 'C' if tg[tid] == client else 'S'
    return side + ('E' if 'engine' in names[tid] else '')
k = 0; t0=None
for t, ev, tid, comm, cpu, rest in L:
    if t < start: continue
    if ev == 'sched_switch':
        m = re.search(r'prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)', rest)
        p, st, nn = int(m.group(1)), m.group(2), int(m.group(4))
        if p in mine or nn in mine:
            t0 = t0 or t
            print('%9.1f cpu%d switch %-6s(%s) -> %s' % ((t-t0)*1e6, cpu, nm(p) if p in mine else names.get(p,'?')[:10], st, nm(nn) if nn in mine else m.group(3)[:10])); k+=1
    else:
        m = re.search(r'pid=(\d+)', rest); w = int(m.group(1))
        if w in mine:
            t0 = t0 or t
            print('%9.1f cpu%d wake   %-6s by %s' % ((t-t0)*1e6, cpu, nm(w), nm(tid) if tid in mine else comm[:10])); k+=1
    if k > n: break
