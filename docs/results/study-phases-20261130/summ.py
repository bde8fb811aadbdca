import sys,re,collections,statistics as st
# summ.py FILE...: mean RTT per (link,config,bin): median (range) n, plus engine yields median
d=collections.defaultdict(list); y=collections.defaultdict(list)
for f in sys.argv[1:]:
    tag=None
    for l in open(f):
        if l.startswith('== '): tag=tuple(l.split()[2:5])
        elif l.startswith('p50') and tag:
            m=re.search(r'mean_rtt_us ([\d.]+)',l); d[tag].append(float(m[1]))
        elif l.startswith('yields') and tag:
            y[tag].append(int(l.split()[-1]))
for k in sorted(d):
    v=d[k]; print(' '.join(k), 'n=%d median %.1f (%.1f-%.1f)'%(len(v),st.median(v),min(v),max(v)), 'eng yields med %s'%(st.median(y[k]) if y[k] else '-'), ' '.join('%.0f'%x for x in v))
