#!/bin/bash
# ABAB: shm 64 B send-bw under thread progress; rate, CPU, takeovers, quiet gap
R=${R:-8}; T=${T:-send-bw}; shift 0
for r in $(seq $R); do for b in "$@"; do
  flock -x /work/notes/quiet.lock timeout 60 /tmp/$b perf $T --local --link ${LINK:-shm} --size 64 -n ${N:-2000000} --progress thread ${EXTRA} --json --stats 2>/tmp/ab-$b.err | tail -1 > /tmp/ab-$b.json
  echo "$r $b $(python3 -c "import json; d=json.load(open('/tmp/ab-$b.json')); print(round(d.get('mmsg_per_s',0),3), round(d.get('p50_us',0),3), round(d.get('p99_us',0),2), round(d['cpu_client_us_per_op'],3), round(d.get('cpu_server_us_per_op',0),3))") $(grep -E "takeovers:|quiet_gap" /tmp/ab-$b.err | head -2 | tr -s ' ' | tr '\n' ' ')"
done; done
