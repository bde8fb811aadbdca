#!/bin/bash
# traces.sh FROM TO : phased traces of base (B) and new (N), both links, alternating
# (odd rounds B then N, even rounds N then B), one exclusive hold a trace (trace.sh).
T=/work/wt/idle/docs/results/study-idle-20261201s26/trace.sh
for r in $(seq $1 $2); do
  if (( r % 2 )); then order="B N"; else order="N B"; fi
  for link in shm udp; do
    for side in $order; do
      if [ $side = B ]; then bin=/tmp/idle/weft-base; else bin=/tmp/idle/weft-new; fi
      $T $side$r $bin $link
    done
  done
done
