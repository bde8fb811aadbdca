#!/usr/bin/env python3
# per file:function self cost diff
import subprocess, sys, re, collections
def costs(f):
    out = subprocess.run(['callgrind_annotate','--auto=no','--inclusive=no','--threshold=100',f],capture_output=True,text=True).stdout
    d = collections.Counter()
    for line in out.splitlines():
        m = re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+(.*)$', line)
        if not m or 'PROGRAM TOTALS' in line: continue
        name = re.sub(r' \[[^]]*\]$', '', m.group(2))
        name = re.sub(r'/rustc/[0-9a-f]+/library/', 'std/', name)
        name = re.sub(r'/work/wt/instr/crates/', '', name)
        d[name] += int(m.group(1).replace(',',''))
    return d
a, b, n = costs(sys.argv[1]), costs(sys.argv[2]), float(sys.argv[3])
top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
flt = sys.argv[5] if len(sys.argv) > 5 else ''
diff = {k: (b[k]-a[k])/n for k in set(a)|set(b) if flt in k}
print(f'total {sum(diff.values()):.1f}')
for k, v in sorted(diff.items(), key=lambda x: -abs(x[1]))[:top]:
    print(f'{v:9.1f}  {k[:170]}')
