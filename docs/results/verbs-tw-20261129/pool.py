import json, sys, statistics as st, collections
# usage: pool.py FILE... ; medians [min-max] per (test, progress, variant), CPU µs/op of both
# processes beside each rate (weft: its own measured-phase CPU; UCX: /usr/bin/time of both
# whole processes over (iters + warm-up) messages, an upper bound), and the ratio of each
# weft write-bw median to the UCX sm tag_bw median of the same files.
vals = collections.defaultdict(list); cpus = collections.defaultdict(list)
times = []; loads = []; probes = []; fails = collections.Counter()
for f in sys.argv[1:]:
    for l in open(f):
        x = json.loads(l); r = x['r']
        times.append(x['time']); loads.append(float(x['load']))
        if x.get('probe_ns'): probes.append(x['probe_ns'])
        if 'error' in r or r.get('test') == 'failed':
            fails[(x['variant'], x['progress'])] += 1; continue
        key = (r['test'], r.get('size'), x['progress'], x['variant'])
        if r['test'] == 'send-lat':
            val = r['p50_us']
        elif r['size'] >= 65536:
            val = r['mb_per_s']
        else:
            val = r['mmsg_per_s']
        if 'cpu_s' in x:
            cpu = x['cpu_s'] * 1e6 / (r['iters'] + 1000)
        else:
            cpu = r['cpu_client_us_per_op'] + r['cpu_server_us_per_op']
        vals[key].append(val); cpus[key].append(cpu)
unit = lambda k: 'µs p50' if k[0] == 'send-lat' else ('MB/s' if k[1] >= 65536 else 'M msg/s')
ucx = [v for k, v in vals.items() if k[3] == 'ucx-sm']
um = st.median(ucx[0]) if ucx else None
print('| cell | median [min–max] | CPU µs/op | n | ÷ UCX sm |')
print('| --- | --- | --- | --- | --- |')
for k in sorted(vals):
    xs = vals[k]; m = st.median(xs)
    ratio = f'{m / um:.2f}' if um and unit(k) == 'MB/s' and k[3] != 'ucx-sm' else ''
    print(f'| {k[3]} {k[0]} {k[1]} B {k[2]} ({unit(k)}) | {m:.4g} [{min(xs):.4g}–{max(xs):.4g}] | '
          f'{st.median(cpus[k]):.2f} | {len(xs)} | {ratio} |')
print('times', min(times), max(times), 'load', min(loads), max(loads),
      'probe ns', f'{min(probes):.0f}–{max(probes):.0f}' if probes else '-', 'fails', dict(fails))
