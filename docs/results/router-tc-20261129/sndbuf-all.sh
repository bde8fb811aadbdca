#!/usr/bin/env bash
# two ABAB rounds at 1518 B, one flat-out 4-s trial each: own-core kernel and tc, default send buffer and 64 MiB
for r in 1 2; do for buf in 0 64; do for m in own tc; do
  /tmp/h25/sndbuf.sh $m 1518 /tmp/h25/s/r$r-$m-$buf --tx-sndbuf-mib $buf > /dev/null 2>&1
  python3 -c "import json;x=json.loads(open('/tmp/h25/s/r$r-$m-$buf/row.json').readline());print('round $r mode $m sndbuf $buf flat_out_kpps %.0f delivered %.2f router_core_ns %.0f all_ns %.0f'%(x['flat_out_kpps'],x['flat_out_delivered_pct'],x['flat_out_cpu_ns_per_pkt_router_core'],x['flat_out_cpu_ns_per_pkt_all']))"
done; done; done
