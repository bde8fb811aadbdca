#!/bin/bash
# write-lat (an application spinning on memory, served by its engine thread) and the quiet points, B and N4 alternating order
cd /tmp/phases/diag
echo "start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
for r in 1 2 3; do for l in shm udp; do for B in $( [ $((r%2)) = 1 ] && echo "B N4" || echo "N4 B"); do
  out=$(timeout 30 ../runs/weft-$B perf write-lat --local --json --quiet --stats --link $l --sizes 64 --iters 20000 --time-limit 2 --progress thread --wait adaptive 2>wl.tmp | head -1)
  echo "$r $l $B write-lat $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p99 %.1f rtt/s %.0f cpu_us/op %.1f" % (r.get("p50_us") or -1, r.get("p99_us") or -1, r.get("rtt_per_s") or r.get("ops_per_s") or -1, (r.get("cpu_client_us_per_op") or 0)+(r.get("cpu_server_us_per_op") or 0)))' 2>&1) $(grep -oE 'takeovers: [0-9]+|quiet_gap_ns: [0-9]+' wl.tmp | tr '\n' ' ')"
done; done; done > wl3.txt
bash quiet2.sh 2 "N4 B" > q3a.txt 2>&1
bash quiet2.sh 2 "B N4" > q3b.txt 2>&1
echo "end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
