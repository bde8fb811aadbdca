#!/bin/bash
# warm.sh ROUNDS OUT BIN : udp idle CPU per rtt, adaptive vs block, -n 100 vs -n 1000, ABAB
R=$1; OUT=$2; B=$3
for r in $(seq 1 $R); do
 flock -x /work/notes/quiet.lock bash -c '
 r=$1; B=$2
 for n in 100 1000; do for Wt in block adaptive; do for L in udp shm; do
  line=$($B perf send-lat --local --json --link $L --progress thread --wait $Wt -n $n --pause-us 10000 2>/dev/null | grep "^{" | tail -1)
  echo "{\"n\":$n,\"link\":\"$L\",\"wait\":\"$Wt\",\"round\":$r,\"run\":${line:-null}}"
 done; done; done' _ $r $B >> $OUT
done
