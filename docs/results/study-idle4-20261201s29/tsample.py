#!/usr/bin/env python3
# tsample.py CMD...: runs CMD, samples /proc schedstat + ctxt switches of its threads and its children's
# every 10 ms, prints the command's stdout last line and a JSON of per-thread-kind totals at the end (stderr).
import subprocess, sys, os, time, json
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
last = {}
def children(pid):
    try: return [int(x) for x in open(f'/proc/{pid}/task/{pid}/children').read().split()]
    except Exception: return []
def sample(pid, role):
    try: tids = os.listdir(f'/proc/{pid}/task')
    except Exception: return
    for t in tids:
        try:
            comm = open(f'/proc/{pid}/task/{t}/comm').read().strip()
            run, wait, slices = map(int, open(f'/proc/{pid}/task/{t}/schedstat').read().split())
            st = open(f'/proc/{pid}/task/{t}/status').read()
            vol = int(st.split('voluntary_ctxt_switches:')[1].split()[0])
            nvol = int(st.split('nonvoluntary_ctxt_switches:')[1].split()[0])
            kind = 'engine' if 'engine' in comm else ('app' if int(t) == pid else comm)
            last[(role, int(t))] = (kind, run, wait, slices, vol, nvol)
        except Exception: pass
import threading
out = []
def reader():
    for l in p.stdout: out.append(l)
th = threading.Thread(target=reader); th.start()
while p.poll() is None:
    sample(p.pid, 'client')
    for c in children(p.pid): sample(c, 'server')
    time.sleep(0.01)
th.join()
tot = {}
for (role, tid), (kind, run, wait, slices, vol, nvol) in last.items():
    if kind not in ('engine', 'app'): continue
    k = f'{role}-{kind}'
    a = tot.setdefault(k, [0, 0, 0, 0, 0])
    for i, v in enumerate((run, wait, slices, vol, nvol)): a[i] += v
print(out[-1].strip() if out else 'null')
sys.stderr.write(json.dumps(tot) + '\n')
