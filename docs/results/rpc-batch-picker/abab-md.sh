#!/bin/sh
# usage: abab.sh OUT ROUNDS ; alternates base and g4, each round under one exclusive hold
OUT=$1; N=$2
for r in $(seq 1 $N); do
  if [ $((r % 2)) = 1 ]; then order="base g4"; else order="g4 base"; fi
  flock -x /work/notes/quiet.lock sh -c "
    uptime >> $OUT.uptime
    for b in $order; do
      if [ \$b = base ]; then B=off,adaptive,on; else B=adaptive; fi
      timeout 300 /tmp/rb/weft-\$b rpc-bench --local --json --link udp,shm --clients 1,4 --outstanding 1,32 --mix metadata --mode direct,dispatched --batch \$B --rounds 1 --seconds 1 2>/dev/null | sed \"s/^{/{\\\"bin\\\":\\\"\$b\\\",\\\"round\\\":$r,/\" >> $OUT.jsonl
    done"
  echo "round $r done $(date +%T)"
done
