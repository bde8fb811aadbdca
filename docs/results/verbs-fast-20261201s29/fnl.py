#!/usr/bin/env python3
# fnl.py A B N FUNCPATTERN [TOP] [--by-file]: self cost per file:line (or, with
# --by-file, per source file) inside functions matching FUNCPATTERN, (B - A) / N
import sys, re, collections
by_file = '--by-file' in sys.argv
args = [x for x in sys.argv[1:] if x != '--by-file']
pat = args[3]
def key(fi, line):
    fi = fi or ''
    if by_file:
        return fi.split('/crates/')[-1] if '/crates/' in fi else 'std:' + fi.split('/')[-1]
    return fi.split('/')[-1] + ':' + line
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
                d[key(fi, m.group(1))] += int(m.group(2))
    return d
a = parse(args[0]); b = parse(args[1]); n = float(args[2])
diff = {k:(b[k]-a[k])/n for k in set(a)|set(b)}
print('total %.1f' % sum(diff.values()))
top = int(args[4]) if len(args) > 4 else (25 if by_file else 40)
for k,v in sorted(diff.items(), key=lambda x:-x[1])[:top]:
    if abs(v) > 2: print(f'{v:8.1f}  {k}')
