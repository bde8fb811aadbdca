#!/usr/bin/env python3
"""probe.py NAME LINK WAIT ROUND FILE: one probe row from a run's output (220 rounds
incl. warm-up; context switches of both processes from /usr/bin/time over the whole
run, set-up included)."""
import re, sys
name, link, wait, rnd, f = sys.argv[1:6]
t = open(f).read()
row = [l.split() for l in t.splitlines() if l.split()[:2] == ['2', '200']][0]
cpu, p50 = float(row[11]), float(row[3])
tm = [l.split() for l in t.splitlines() if l.startswith('TIME ')][0]
vol, inv = int(tm[1]), int(tm[2])
def block(label):
    i = t.index(label)
    j = t.find('waits:', i)
    return t[i:j]
def get(b, k):
    m = re.search(r'\b' + k + r': (\d+),', b)
    return int(m.group(1)) if m else 0
s, c = block('server, after'), block('client:')
R = 220.0
vals = dict(csw=(vol + inv) / R, c_sleep=get(c, 'sleeps') / R, c_watch=get(c, 'watches') / R,
            s_sleep=get(s, 'sleeps') / R, early=(get(c, 'early_acks') + get(s, 'early_acks')) / R,
            acks=(get(c, 'acks_sent') + get(s, 'acks_sent')) / R)
print(name, link, wait, rnd, cpu, p50, ' '.join('%s=%.2f' % kv for kv in vals.items()))
