import sys
for f in sys.argv[1:]:
    rows=[tuple(map(int,l.split('\t'))) for l in open(f)]
    print(f)
    cur=None; acc=None
    out=[]
    for r in rows:
        if r[1]==0:
            if acc: acc['ev']+=r[5]
            continue
        b=r[3]
        if cur!=b:
            if acc: out.append(acc)
            acc={'b':b,'t':r[0]//1000,'n':0,'spent':0,'ev':0,'blk':0,'blkdur':0}
            cur=b
        acc['n']+=1; acc['spent']+=r[4] if r[1]==1 else 0; acc['ev']+=r[5]
        if r[1]==2: acc['blk']+=1; acc['blkdur']+=r[4]
    out.append(acc)
    for a in out:
        print('  %s t=%4dms waits %4d spent %6.1fms events %6d blocked %3d (%.1f ms)'%('BATCH' if a['b'] else 'learn',a['t'],a['n'],a['spent']/1e3,a['ev'],a['blk'],a['blkdur']/1e3))
