#!/bin/bash
# wl.sh REPS "BINS": write-lat (the application spins on memory for the peer's WRITE and
# its engine thread serves it), adaptive, alternating order per round
cd /tmp/phases/diag
for r in $(seq $1); do for l in shm udp; do
  if [ $((r%2)) = 1 ]; then bins="$2"; else bins=$(echo $2 | awk '{for(i=NF;i>0;i--) printf "%s ", $i}'); fi
  for B in $bins; do
  out=$(timeout 30 ../runs/weft-$B perf write-lat --local --json --quiet --stats --link $l --sizes 64 --iters 20000 --time-limit 2 --progress thread --wait adaptive 2>wl.tmp | head -1)
  echo "$r $l $B write-lat $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p99 %.1f rtt/s %.0f cpu_us/op %.1f" % (r.get("p50_us") or -1, r.get("p99_us") or -1, r.get("rtt_per_s") or r.get("ops_per_s") or -1, (r.get("cpu_client_us_per_op") or 0)+(r.get("cpu_server_us_per_op") or 0)))' 2>&1) $(grep -oE 'takeovers: [0-9]+|quiet_gap_ns: [0-9]+' wl.tmp | tr '\n' ' ')"
done; done; done
