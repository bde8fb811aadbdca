import sys, statistics as st
def q(v,f):
    v=sorted(v); return v[int((len(v)-1)*f)] if v else 0
for f in sys.argv[1:]:
    rows=[tuple(map(int,l.split('\t'))) for l in open(f)]
    T=rows[-1][0]+rows[-1][4]
    print(f, 'records',len(rows),'span ms %.0f'%(T/1e3))
    names={0:'at-once',1:'spun',2:'blocked',3:'timeout'}
    for k in (0,1,2,3):
        r=[x for x in rows if x[1]==k]
        if not r: continue
        d=[x[4] for x in r]; n=[x[5] for x in r]
        print('  %-8s n %5d  dur sum ms %7.1f p50 %6d p90 %6d p99 %6d max %6d | events sum %6d p50 %d | batch %d | spin p50 %d'%(names[k],len(r),sum(d)/1e3,q(d,.5),q(d,.9),q(d,.99),max(d),sum(n),q(n,.5),sum(x[3] for x in r),q([x[2] for x in r],.5)))
    bl=[x for x in rows if x[1]==2]
    if bl:
        print('  blocked: spin chosen', sorted(x[2] for x in bl)[:5], '...', 'wake p50', q([x[6] for x in bl if x[6]!=4294967295],.5), 'p90', q([x[6] for x in bl if x[6]!=4294967295],.9))
        print('  blocked dur list (first 30):', [x[4] for x in bl][:30])
        print('  blocked spin list (first 30):', [x[2] for x in bl][:30])
    # time outside waits: gaps between records
    away=[rows[i+1][0]-(rows[i][0]+rows[i][4]) for i in range(len(rows)-1)]
    print('  away between waits: sum ms %.1f p50 %d p90 %d p99 %d max %d'%(sum(away)/1e3,q(away,.5),q(away,.9),q(away,.99),max(away)))
