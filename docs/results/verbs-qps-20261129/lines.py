import sys,collections,re
def parse(f):
    names={}
    def nm(kind,s):
        m=re.match(r'\((\d+)\)(?:\s+(.*))?',s)
        if m:
            k=(kind,m.group(1))
            if m.group(2): names[k]=m.group(2)
            return names.get(k,s)
        return s
    ev=None; cost=collections.defaultdict(lambda: None)
    fl=fi=None; fn=None; last=0; skip=False
    agg=collections.defaultdict(lambda:[0]*20)
    for l in open(f):
        l=l.rstrip('\n')
        if l.startswith('events:'): ev=l.split()[1:]; continue
        if l.startswith('fl='): fl=nm('fl',l[3:]); fi=None; continue
        if l.startswith('fi=') or l.startswith('fe='): fi=nm('fl',l[3:]); continue
        if l.startswith('fn='): fn=nm('fn',l[3:]); fi=None; continue
        if l.startswith('cfn=') or l.startswith('cfl=') or l.startswith('cfi=') or l.startswith('cob=') or l.startswith('ob='):
            if l.startswith('cfn='): nm('fn',l[4:])
            elif l.startswith('cob=') or l.startswith('ob='): pass
            else: nm('fl',l[4:])
            continue
        if l.startswith('calls='): skip=True; continue
        if not l or not (l[0].isdigit() or l[0] in '+-*'): continue
        parts=l.split()
        p=parts[0]
        if p=='*': ln=last
        elif p[0]=='+': ln=last+int(p[1:])
        elif p[0]=='-': ln=last-int(p[1:])
        else: ln=int(p)
        last=ln
        if skip: skip=False; continue
        vals=list(map(int,parts[1:]))
        a=agg[(fi or fl,ln,fn)]
        for i,v in enumerate(vals): a[i]+=v
    return ev,agg
ev,a=parse(sys.argv[1]); _,b=parse(sys.argv[2]); n=int(sys.argv[3]); key=sys.argv[4]; top=int(sys.argv[5])
i=ev.index(key)
d={k:(b[k][i]-a.get(k,[0]*20)[i])/n for k in b}
print('total',sum(d.values()))
srcs={}
for k,v in sorted(d.items(),key=lambda x:-x[1])[:top]:
    f,ln,fname=k
    try:
        if f not in srcs: srcs[f]=open(f).read().split('\n')
        s=srcs[f][ln-1].strip()[:80]
    except Exception: s=''
    print(f"{v:6.2f} {fname[:60]} | {'/'.join(f.split('/')[-3:])}:{ln} {s}")
