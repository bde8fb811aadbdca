#!/bin/bash
# dg.sh REPS BIN: the background point, adaptive, udp, with WEFT_WAITDIAG (diagnostic build)
cd /tmp/bgw/diag
for r in $(seq $1); do
  echo "== $r udp adaptive $2"
  WEFT_WAITDIAG=1 timeout 30 ../runs/weft-$2 perf send-lat --local --json --quiet --stats --link udp --mtu 4096 --scheduler drr --iters 500000 --time-limit 2 --sizes 64 --outstanding 16 --request-size 16 --bulk-size 4194304 --bulk-depth 4 --progress thread --wait adaptive 2>dg.tmp | head -1 | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p90 %.1f p99 %.1f" % (r.get("p50_us") or -1, r.get("p90_us") or -1, r.get("p99_us") or -1))'
  grep -E "WAITDIAG|WaitStats" dg.tmp
done
