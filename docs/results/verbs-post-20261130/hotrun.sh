#!/bin/bash
# hotrun.sh BIN TAG: per-instruction callgrind of post_send (streamed 10k/60k), annotated
B=$1; T=$2
run() { flock -s /work/notes/quiet.lock valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no --callgrind-out-file=/tmp/post/$T-$1.out $B shm 64 600 $2 $3 >/dev/null 2>/tmp/post/$T-$1.err; }
run i10k 10000 256 & run i60k 60000 256 & wait
OUT=/tmp/post bash /work/main/docs/results/verbs-instr-20261130/hot.sh 'weft_verbs::qp::QueuePair::post_send' QueuePair9post_send 50000 /tmp/post/$T-i10k.out /tmp/post/$T-i60k.out $B | head -1
python3 - <<'PY' > /tmp/post/$T-annot.txt
import re
cnt={}
for l in open('/tmp/post/h-instr.txt').read().splitlines()[1:]:
    a,c=l.split(); cnt[int(a,16)]=float(c)
src=None; fn=None
for l in open('/tmp/post/h.asm'):
    l=l.rstrip()
    m=re.match(r'^(/\S+):(\d+)', l)
    if m: src=m.group(1).split('/')[-1]+':'+m.group(2); continue
    m=re.match(r'^([^\s].*)\(\):$', l)
    if m: fn=m.group(1); continue
    m=re.match(r'^\s+([0-9a-f]+):\s+(.*)$', l)
    if m:
        a=int(m.group(1),16)
        if a in cnt: print(f"{cnt[a]:5.1f} {a:x} {src:22s} {(fn or '')[:40]:40s} {m.group(2)[:70]}")
PY
