#!/bin/bash
# annot.sh TAG FUNC SYM N BIN: per-source-line table and per-instruction listing of one function
T=$1; F=$2; S=$3; N=${4:-50000}; BIN=$5
OUT=/tmp/rx bash /work/wt/rx/docs/results/verbs-instr-20261130/hot.sh "$F" "$S" $N /tmp/rx/$T-ia.out /tmp/rx/$T-ib.out $BIN
python3 - <<'PY'
import re
cnt={}
for l in open('/tmp/rx/h-instr.txt').read().splitlines()[1:]:
    a,c=l.split(); cnt[int(a,16)]=float(c)
src=None; fn=None
out=[]
for l in open('/tmp/rx/h.asm'):
    l=l.rstrip()
    m=re.match(r'^(/\S+):(\d+)', l)
    if m: src=m.group(1).split('/')[-1]+':'+m.group(2); continue
    m=re.match(r'^([^\s].*)\(\):$', l)
    if m: fn=m.group(1); continue
    m=re.match(r'^\s+([0-9a-f]+):\s+(.*)$', l)
    if m:
        a=int(m.group(1),16)
        if a in cnt: out.append(f"{cnt[a]:5.1f} {a:x} {src:22s} {(fn or '')[:40]:40s} {m.group(2)[:70]}")
open('/tmp/rx/annot-last.txt','w').write('\n'.join(out)+'\n')
PY
