"""Samples the threads of the running `weft-X perf` processes every 50 ms until
killed (SIGTERM) or they end; prints, per thread, rates between its first and last
sample: CPU share, run-queue wait share, slices/s, voluntary and involuntary context
switches/s. Roles: client = the perf process whose parent is not weft, server = its child."""
import os, sys, time, signal, json
tag = sys.argv[1]
first, last = {}, {}
stop = False
def term(*_):
    global stop; stop = True
signal.signal(signal.SIGTERM, term)
def sample():
    now = time.monotonic()
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            comm = open(f'/proc/{pid}/comm').read().strip()
            if not comm.startswith('weft-'): continue
            cmd = open(f'/proc/{pid}/cmdline').read().split('\0')
            if 'perf' not in cmd: continue
            ppid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
            pcomm = open(f'/proc/{ppid}/comm').read().strip()
            role = 'server' if pcomm.startswith('weft-') and '--server' in ' '.join(cmd) or pcomm == comm else 'client'
            for tid in os.listdir(f'/proc/{pid}/task'):
                b = f'/proc/{pid}/task/{tid}'
                tcomm = open(b + '/comm').read().strip()
                run, wait, sl = map(int, open(b + '/schedstat').read().split())
                st = open(b + '/status').read().split('\n')
                vol = int([l for l in st if l.startswith('voluntary_ctxt')][0].split()[1])
                inv = int([l for l in st if l.startswith('nonvoluntary_ctxt')][0].split()[1])
                k = (role, pid, tid, tcomm)
                v = (now, run, wait, sl, vol, inv)
                first.setdefault(k, v); last[k] = v
        except (OSError, IndexError, ValueError):
            continue
while not stop:
    sample(); time.sleep(0.05)
out = []
for k, a in first.items():
    b = last[k]; dt = b[0] - a[0]
    if dt < 0.2: continue
    r = lambda i: (b[i] - a[i]) / dt
    out.append(dict(tag=tag, role=k[0], tid=k[2], comm=k[3], dt=round(dt, 2), cpu=round(r(1) / 1e9, 3), rq_wait=round(r(2) / 1e9, 3), slices=round(r(3)), vol=round(r(4)), invol=round(r(5))))
for o in sorted(out, key=lambda o: (o['role'], o['comm'])):
    print(json.dumps(o))
