# perfcmp.py A.data NA B.data NB: ns per message per (side, symbol) from perf cpu-clock samples at 4999 Hz
import subprocess, sys, collections, re
def load(p, n):
    out = subprocess.run(['perf','report','-i',p,'--stdio','-n','--sort','pid,sym','--percent-limit','0.05'],capture_output=True,text=True).stdout
    pids = collections.Counter(); rows = []
    for l in out.splitlines():
        m = re.match(r'\s+([\d.]+)%\s+(\d+)\s+(\d+):\S+\s+\[.\]\s+(.*)', l)
        if m:
            rows.append((int(m.group(3)), m.group(4).strip(), int(m.group(2))))
            pids[int(m.group(3))] += int(m.group(2))
    # the client is the parent: lower pid
    ps = sorted(pids); side = {ps[0]: 'client', ps[-1]: 'server'}
    T = collections.defaultdict(float)
    for pid, sym, s in rows:
        if pid in side:
            T[(side[pid], sym)] += s / 4999 / n * 1e9
    tot = {side[p]: pids[p] / 4999 / n * 1e9 for p in side}
    return T, tot
A, ta = load(sys.argv[1], float(sys.argv[2])); B, tb = load(sys.argv[3], float(sys.argv[4]))
print('total ns/msg (all samples incl. setup):', {k: f'{ta[k]:.0f} -> {tb[k]:.0f}' for k in ta})
keys = sorted(set(A) | set(B), key=lambda k: -abs(B.get(k, 0) - A.get(k, 0)))
for k in keys[:int(sys.argv[5]) if len(sys.argv) > 5 else 30]:
    print(f'{k[0]:6s} {k[1][:75]:75s} {A.get(k,0):7.1f} {B.get(k,0):7.1f} {B.get(k,0)-A.get(k,0):+7.1f}')
