import json,collections,statistics as st,sys,glob
runs=collections.defaultdict(list)
for f in sorted(glob.glob('*-[0-9].jsonl')):
  b,r=f[:-6].rsplit('-',1)
  rows=[json.loads(l) for l in open(f)]
  rows=[d for d in rows if 'p99_ratio' in d]
  runs[b].append((r,rows))
for b,rs in runs.items():
  for sched in ['drr','fifo']:
    agg=collections.defaultdict(list)
    for r,rows in rs:
      for d in rows:
        if d['scheduler']!=sched: continue
        agg['p50'].append(d['p50_us']); agg['iso_p50'].append(d['isolated_p50_us']); agg['p99x'].append(d['p99_ratio'])
        agg['loss'].append(d['bulk_loss']); agg['jain'].append(d['jain']); agg['rate'].append(d['ops_per_s']/d['isolated_ops_per_s'])
        agg['bulk'].append(d['bulk_mb_per_s']); agg['bulkiso'].append(d['bulk_isolated_mb_per_s'])
    m=lambda k: st.median(agg[k])
    print(f"{b:5} {sched:4} runs={len(rs)} n={len(agg['p50'])} p50 {m('p50'):.0f}us (alone {m('iso_p50'):.1f}) p99x {m('p99x'):.1f} [{min(agg['p99x']):.1f}-{max(agg['p99x']):.1f}] rate {m('rate'):.2f} of alone; bulk {m('bulk'):.0f} MB/s alone {m('bulkiso'):.0f} loss {m('loss')*100:.0f}% jain {m('jain'):.2f} [{min(agg['jain']):.2f}-{max(agg['jain']):.2f}] jain>=.95 {sum(j>=.95 for j in agg['jain'])}/{len(agg['jain'])}")
