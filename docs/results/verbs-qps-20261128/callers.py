import sys,collections,re
def parse(f,target):
    names={}; ev=None; fn=None; cfn=None; incall=False
    agg=collections.defaultdict(lambda:[0]*20)
    def nm(s):
        m=re.match(r'\((\d+)\)(?:\s+(.*))?',s)
        if m:
            if m.group(2): names[m.group(1)]=m.group(2)
            return names.get(m.group(1),s)
        return s
    for l in open(f):
        l=l.rstrip('\n')
        if l.startswith('events:'): ev=l.split()[1:]
        elif l.startswith('fn='): fn=nm(l[3:])
        elif l.startswith('cfn='): cfn=nm(l[4:])
        elif l.startswith('calls='): incall=True
        elif incall and l and (l[0].isdigit() or l[0] in '+-*'):
            incall=False
            if target in cfn:
                v=list(map(int,l.split()[1:]))
                a=agg[fn]
                for i,x in enumerate(v): a[i]+=x
    return ev,agg
t=sys.argv[5]
ev,a=parse(sys.argv[1],t); _,b=parse(sys.argv[2],t); n=int(sys.argv[3]); i=ev.index(sys.argv[4])
d={k:(b[k][i]-a.get(k,[0]*20)[i])/n for k in b}
for k,v in sorted(d.items(),key=lambda x:-x[1])[:8]: print(f"{v:6.2f} {k[:120]}")
