#!/usr/bin/env python3
# ldiff.py A.out B.out N [top] [bycol]: per source line (file:line, inlined included) self cost difference / N
import sys, re, collections
def parse(f):
    d = collections.Counter(); fl = fi = None; fn=None
    for line in open(f):
        if line.startswith('fl='): fl = fi = line[3:].strip(); continue
        if line.startswith('fi=') or line.startswith('fe='): fi = line[3:].strip(); continue
        if line.startswith('fn='): fn = line[3:].strip(); fi = fl; continue
        if line.startswith(('cfl=','cfi=','cfn=','calls=')):
            if line.startswith('calls='): skip[0]=True
            continue
        m = re.match(r'^(\d+) (\d+)', line)
        if m:
            if skip[0]: skip[0]=False; continue
            d[(fi or '?').split('/weft/')[-1].split('/s29-fast/')[-1][-60:]+':'+m.group(1)] += int(m.group(2))
    return d
skip=[False]
a = parse(sys.argv[1]); b = parse(sys.argv[2]); n = float(sys.argv[3]); top = int(sys.argv[4]) if len(sys.argv)>4 else 60
diff = {k:(b[k]-a[k])/n for k in set(a)|set(b)}
print('total %.1f' % sum(diff.values()))
if len(sys.argv)>5:
    f = collections.Counter()
    for k,v in diff.items(): f[k.split(':')[0]] += v
    for k,v in f.most_common(40): print(f'{v:8.1f} {k}')
    sys.exit()
for k,v in sorted(diff.items(), key=lambda x:-x[1])[:top]: print(f'{v:8.1f} {k}')
