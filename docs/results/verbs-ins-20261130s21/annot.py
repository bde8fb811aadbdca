import re,sys
O='/tmp/ins'
cnt={}
for l in open(O+'/h-instr.txt').read().splitlines()[1:]:
    a,c=l.split(); cnt[int(a,16)]=float(c)
src=None; fn=None
for l in open(O+'/h.asm'):
    l=l.rstrip()
    m=re.match(r'^(/\S+):(\d+)', l)
    if m: src=m.group(1).split('/')[-1]+':'+m.group(2); continue
    m=re.match(r'^([^\s].*)\(\):$', l)
    if m: fn=m.group(1); continue
    m=re.match(r'^\s+([0-9a-f]+):\s+(.*)$', l)
    if m:
        a=int(m.group(1),16)
        if a in cnt: print(f"{cnt[a]:6.2f} {a:x} {src:22s} {(fn or '')[:40]:40s} {m.group(2)[:70]}")
