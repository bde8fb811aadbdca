#!/bin/bash
# sat.sh ROUNDS OUT [FIRST] : the saturated point (64 B, 16 outstanding, DRR, MTU 4096,
# thread progress, adaptive wait), base B and new N alternating (order flipped each
# round), shm and udp, one exclusive hold a run; one JSON line a run appended to OUT.
rounds=$1; out=$2
B=/tmp/l3/base-weft; N=${NBIN:-/tmp/l3/new-weft}
for r in $(seq ${3:-1} $rounds); do
  for link in shm udp; do
    if (( r % 2 )); then order="B N"; else order="N B"; fi
    for s in $order; do
      bin=$B; [[ $s == N ]] && bin=$N
      line=$(flock -x /work/notes/quiet.lock $bin perf send-lat --local --json --link $link --mtu 4096 --scheduler drr --outstanding 16 --sizes 64 --iters 400000 --progress thread --wait adaptive 2>/dev/null | grep '^{' | tail -1)
      echo "{\"side\":\"$s\",\"link\":\"$link\",\"round\":$r,\"run\":$line}" >> $out
    done
  done
done
