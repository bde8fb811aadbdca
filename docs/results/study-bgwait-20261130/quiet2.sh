#!/bin/bash
# quiet2.sh REPS BINS: no hogs; the idle phase's point (100 round trips, 10 ms pause
# after each) and a plain ping-pong, adaptive, the binaries alternating.
D=${DIAG_DIR:-/tmp/bgw/diag}  # the work directory (DIAG_DIR added 2026-11-30 for study-phases-20261130)
cd "$D"
for r in $(seq $1); do for l in shm udp; do for B in $2; do
  for p in pause plain; do
    if [ $p = pause ]; then f="--pause-us 10000 --iters 100"; else f="--iters 50000"; fi
    out=$(timeout 30 env LD_PRELOAD=$D/yieldcount.so ../runs/weft-$B perf send-lat --local --json --quiet --link $l --sizes 64 --time-limit 2 --progress thread --wait adaptive $f 2>y.tmp | head -1)
    echo "$r $l $B $p $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p99 %.1f rtt/s %.0f cpu_us/op %.1f" % (r.get("p50_us") or -1, r.get("p99_us") or -1, r.get("rtt_per_s") or -1, (r.get("cpu_client_us_per_op") or 0)+(r.get("cpu_server_us_per_op") or 0)))' 2>&1) $(grep ^yields y.tmp | awk '{print $5}' | tr '\n' ' ')"
  done
done; done; done
