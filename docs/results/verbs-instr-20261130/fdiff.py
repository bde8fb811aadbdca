#!/usr/bin/env python3
# fdiff.py A.out B.out N [top] [--inclusive]: per-function self-cost difference (B - A) / N
# (inclusive cost with --inclusive; its total then means nothing)
import subprocess, sys, re, collections
inclusive = '--inclusive' in sys.argv
sys.argv = [x for x in sys.argv if x != '--inclusive']
def costs(f):
    out = subprocess.run(['callgrind_annotate','--auto=no','--inclusive=yes' if inclusive else '--inclusive=no','--threshold=100',f],capture_output=True,text=True).stdout
    d = collections.Counter()
    for line in out.splitlines():
        m = re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+(.*)$', line)
        if not m: continue
        name = m.group(2)
        if name.startswith('PROGRAM TOTALS') or 'file:function' in name: continue
        name = re.sub(r'^[^:]*:', '', name, count=1) if ':' in name.split(' ')[0] else name
        name = re.sub(r' \[[^]]*\]$', '', name)
        d[name] += int(m.group(1).replace(',',''))
    return d
a, b, n = costs(sys.argv[1]), costs(sys.argv[2]), float(sys.argv[3])
top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
diff = {k: (b[k]-a[k])/n for k in set(a)|set(b)}
tot = sum(diff.values())
print(f'total {tot:.1f}')
for k, v in sorted(diff.items(), key=lambda x: -abs(x[1]))[:top]:
    print(f'{v:9.1f}  {k[:150]}')
