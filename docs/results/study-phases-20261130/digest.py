"""Digest of diag.sh output: per window one line — mean round trip, per process the
application thread's CPU share and run-queue wait share, the engine thread's CPU and
wake-ups/s, the waiter's waits (spun/blocked/at once) and the engine's takeovers and sleeps."""
import sys, json, re, collections
cur = None; rows = []
for line in open(sys.argv[1]):
    line = line.rstrip('\n')
    if line.startswith('== '):
        cur = dict(tag=line[3:], th={}, st={}); rows.append(cur); continue
    if cur is None: continue
    if line.startswith('p50 '):
        m = re.search(r'mean_rtt_us ([\d.]+)', line); cur['rtt'] = float(m[1]) if m else None
        cur['p50'] = line.split()[1]
    elif line.startswith('{'):
        o = json.loads(line)
        if o['comm'] == 'weft-cm-watch' or (o['cpu'] == 0 and o['slices'] == 0): continue
        kind = 'eng' if o['comm'] == 'weft-engine' else 'app'
        cur['th'][(o['role'], kind)] = o
    elif line.strip().startswith('stats'):
        who = 'server' if 'server' in line else 'client'
        kv = dict(re.findall(r'(\w+)=(\d+)', line))
        w = dict(re.findall(r'(\w+): (\d+)', line.split('|')[1]))
        cur['st'][who] = (kv, w)
print('| window | mean RTT µs | p50 µs | app CPU c/s | app run-queue wait c/s | engine CPU c/s | engine wake-ups/s c/s | waits blocked % c/s | at once % c/s | takeovers c/s |')
print('|---|---:|---:|---|---|---|---|---|---|---|')
for r in rows:
    def th(role, kind, k, f='{:.2f}'):
        o = r['th'].get((role, kind)); return f.format(o[k]) if o else '–'
    def pct(role, k):
        s = r['st'].get(role)
        if not s: return '–'
        w = s[1]; n = int(w.get('waits', 0)) or 1
        return f"{100 * int(w.get(k, 0)) / n:.0f}"
    def st(role, k):
        s = r['st'].get(role); return s[0].get(k, '–') if s else '–'
    print(f"| {r['tag']} | {r.get('rtt') or 0:.1f} | {r.get('p50')} | {th('client','app','cpu')}/{th('server','app','cpu')} | {th('client','app','rq_wait')}/{th('server','app','rq_wait')} | {th('client','eng','cpu')}/{th('server','eng','cpu')} | {th('client','eng','vol','{}')}/{th('server','eng','vol','{}')} | {pct('client','blocked')}/{pct('server','blocked')} | {pct('client','at_once')}/{pct('server','at_once')} | {st('client','takeovers')}/{st('server','takeovers')} |")
