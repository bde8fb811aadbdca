#!/bin/bash
# probe.sh ROUNDS OUT [FIRST] : the idle probe (sparse ping-pong, 200 round trips, 10 ms pause
# after each, thread progress), base B and new N alternating (order flipped each
# round), one exclusive hold a run. Appends to OUT one JSON line a run with
# side/link/wait/round added.
rounds=$1; out=$2
B=/tmp/l3/base-weft; N=${NBIN:-/tmp/l3/new-weft}
for r in $(seq ${3:-1} $rounds); do
  for cfg in "shm block" "shm adaptive" "udp block" "udp adaptive"; do
    set -- $cfg
    if (( r % 2 )); then order="B N"; else order="N B"; fi
    for s in $order; do
      bin=$B; [[ $s == N ]] && bin=$N
      line=$(flock -x /work/notes/quiet.lock $bin perf send-lat --local --json --link $1 --progress thread --wait $2 -n 200 --pause-us 10000 2>/dev/null | grep '^{' | tail -1)
      echo "{\"side\":\"$s\",\"link\":\"$1\",\"wait\":\"$2\",\"round\":$r,\"run\":$line}" >> $out
    done
  done
done
