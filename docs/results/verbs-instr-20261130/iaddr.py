#!/usr/bin/env python3
# iaddr.py A.out B.out N FNSUBSTR: per-instruction self cost diff inside functions matching FNSUBSTR
import sys, re, collections
def parse(f, want):
    d = collections.Counter(); fnames = {}; cur = None; skip = False
    addr = 0; line = 0
    for l in open(f):
        l = l.rstrip('\n')
        if l.startswith('fn='):
            m = re.match(r'fn=\((\d+)\)(?: (.*))?', l)
            if m:
                if m.group(2): fnames[m.group(1)] = m.group(2)
                cur = fnames.get(m.group(1), '')
            else: cur = l[3:]
            continue
        if l.startswith('calls='): skip = True; continue
        if not l or not (l[0].isdigit() or l[0] in '+-*' or l.startswith('0x')):
            continue
        parts = l.split()
        a = parts[0]
        if a.startswith('0x'): addr = int(a, 16)
        elif a.startswith('+'): addr += int(a[1:], 16) if a[1:].startswith('0x') else int(a[1:])
        elif a.startswith('-'): addr -= int(a[1:], 16) if a[1:].startswith('0x') else int(a[1:])
        elif a == '*': pass
        if skip: skip = False; continue
        if cur and want in cur and len(parts) >= 3:
            d[addr] += int(parts[2])
    return d
want = sys.argv[4]
a = parse(sys.argv[1], want); b = parse(sys.argv[2], want); n = float(sys.argv[3])
diff = {k: (b[k]-a[k])/n for k in set(a)|set(b)}
print('total', round(sum(diff.values()),1))
for k in sorted(diff):
    if abs(diff[k]) >= 0.5: print(f'{k:x} {diff[k]:.1f}')
