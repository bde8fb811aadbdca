#!/usr/bin/env python3
# calls.py A B N CALLERPATTERN: inclusive cost of calls made from functions matching the pattern, per callee, and calls count
import sys, re, collections
pat = sys.argv[4]
def parse(f):
    d = collections.Counter(); c = collections.Counter(); fn=''; cfn=None; calls=None
    for line in open(f):
        if line.startswith('fn='): fn = line[3:].strip(); continue
        if line.startswith('cfn='): cfn = line[4:].strip(); continue
        if line.startswith('calls='): calls = int(line[6:].split()[0]); continue
        m = re.match(r'^(\d+) (\d+)', line)
        if m and calls is not None:
            if re.search(pat, fn):
                d[cfn[:90]] += int(m.group(2)); c[cfn[:90]] += calls
            calls = None
    return d, c
(a, ac), (b, bc) = parse(sys.argv[1]), parse(sys.argv[2]); n = float(sys.argv[3])
for k in sorted(set(a)|set(b), key=lambda k: -(b[k]-a[k])):
    v = (b[k]-a[k])/n
    if abs(v) > 2: print(f'{v:8.1f}  calls {(bc[k]-ac[k])/n:5.2f}  {k}')
