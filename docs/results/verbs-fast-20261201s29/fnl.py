#!/usr/bin/env python3
# fnl.py A B N FUNCPATTERN: self cost per file:line inside functions matching FUNCPATTERN
import sys, re, collections
pat = sys.argv[4]
def parse(f):
    d = collections.Counter(); fl = fi = None; fn=''; skip=False
    for line in open(f):
        if line.startswith('fl='): fl = fi = line[3:].strip(); continue
        if line.startswith('fi=') or line.startswith('fe='): fi = line[3:].strip(); continue
        if line.startswith('fn='): fn = line[3:].strip(); fi = fl; continue
        if line.startswith(('cfl=','cfi=','cfn=','cob=','ob=')): continue
        if line.startswith('calls='): skip=True; continue
        m = re.match(r'^(\d+) (\d+)', line)
        if m:
            if skip: skip=False; continue
            if re.search(pat, fn):
                d[(fi or '').split('/')[-1]+':'+m.group(1)] += int(m.group(2))
    return d
a = parse(sys.argv[1]); b = parse(sys.argv[2]); n = float(sys.argv[3])
diff = {k:(b[k]-a[k])/n for k in set(a)|set(b)}
print('total %.1f' % sum(diff.values()))
for k,v in sorted(diff.items(), key=lambda x:-x[1])[:int(sys.argv[5]) if len(sys.argv)>5 else 40]:
    if abs(v) > 2: print(f'{v:8.1f}  {k}')
