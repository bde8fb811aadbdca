import json,sys,statistics as st,collections
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base=sys.argv[2] if len(sys.argv)>2 else 'base'
d=collections.defaultdict(dict)
variants=[]
rows=[x for x in rows if 'error' not in x['r'] and x['r'].get('test')!='failed']
for x in rows:
    r=x['r']; key=(r['test'],x['progress'])
    if x['variant'] not in variants: variants.append(x['variant'])
    val=r['p50_us'] if r['test']=='send-lat' else r['mmsg_per_s']
    cpu=r['cpu_client_us_per_op']+r['cpu_server_us_per_op']
    d[key].setdefault(x['variant'],[]).append((x['round'],val,cpu))
for key in sorted(d):
    unit='us p50' if key[0]=='send-lat' else 'M msg/s'
    print(f"{key[0]} {key[1]} ({unit})")
    b=d[key][base]; bm=st.median(v[1] for v in b)
    for v in variants:
        xs=d[key][v]; vals=[a[1] for a in xs]; m=st.median(vals)
        br={a[0]:a[1] for a in b}
        pr=st.median(a[1]/br[a[0]] for a in xs if a[0] in br)
        print(f"  {v:6s} {m:.3f} [{min(vals):.3f}-{max(vals):.3f}] cpu/op {st.median(a[2] for a in xs):.3f} us  ratio {m/bm:.3f} per-round {pr:.3f} n={len(xs)}")
print('loads', sorted(set(x['load'] for x in rows)), rows[0]['time'], rows[-1]['time'])
