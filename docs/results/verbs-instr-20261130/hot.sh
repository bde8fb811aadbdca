#!/bin/bash
# hot.sh FUNCNAME_EXACT_SUBSTR SYMBOL_GREP: per-source-line costs of one function, from i10000/i60000 dumps
export O=${OUT:-/tmp/instr}   # OUT: the work directory
F="$1"; S="$2"; N=${3:-50000}; A=${4:-i10000.out}; B=${5:-i60000.out}; BIN=${6:-msg_rate-s1c}
python3 "$(dirname "$0")/iaddr.py" $A $B $N "$F" > $O/h-instr.txt
read start size < <(nm -S $BIN | grep "$S" | sed -n "${SEL:-1}p" | awk '{print $1, $2}')
objdump -d -l -C --no-show-raw-insn --start-address=0x$start --stop-address=$((0x$start+0x$size)) $BIN > $O/h.asm
python3 - <<'PY'
import re, collections, os
O=os.environ['O']
cnt={}
for l in open(O+'/h-instr.txt').read().splitlines()[1:]:
    a,c=l.split(); cnt[int(a,16)]=float(c)
# Per source line (printed) and per instruction (written to $O/h-annot.txt: count,
# address, source line, inlined function, instruction).
src=None; fn=None; d=collections.Counter(); n=collections.Counter(); listing=[]
for l in open(O+'/h.asm'):
    l=l.rstrip()
    m=re.match(r'^(/\S+):(\d+)', l)
    if m: src=m.group(1).split('/')[-1]+':'+m.group(2); continue
    m=re.match(r'^([^\s].*)\(\):$', l)
    if m: fn=m.group(1); continue
    m=re.match(r'^\s+([0-9a-f]+):\s+(.*)$', l)
    if m:
        a=int(m.group(1),16)
        if a in cnt:
            d[src]+=cnt[a]; n[src]+=1
            listing.append(f"{cnt[a]:6.2f} {a:x} {src:22s} {(fn or '')[:40]:40s} {m.group(2)[:70]}")
open(O+'/h-annot.txt','w').write('\n'.join(listing)+'\n')
print('total', round(sum(d.values()),1))
for k,v in d.most_common(40): print(f"{v:6.1f} {n[k]:4d} {k}")
PY
