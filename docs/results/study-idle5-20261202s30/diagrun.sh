#!/bin/bash
# diagrun.sh ROUNDS: diag binary beside 2 hogs, W windows each of D3 (WEFT_DIAG_ALWAYS_FREE=1: lever 3's sleep) and DF (the fix's), --stats to /tmp/s30l3t/diag/stats-NAME.txt
mkdir -p /tmp/s30l3t/diag
for r in $(seq 1 $1); do
flock -x /work/notes/quiet.lock bash -c '
/tmp/hog.sh 120 2 & HP=$!; sleep 0.3
for w in 1 2 3 4; do for n in D3 DF; do
  if [ $n = D3 ]; then export WEFT_DIAG_ALWAYS_FREE=1; else unset WEFT_DIAG_ALWAYS_FREE; fi
  l=$(timeout 30 /tmp/s30l3t/weft-diag perf send-lat --local --json --quiet --link udp --mtu 4096 --scheduler drr --iters 12500 --time-limit 0.5 --sizes 64 --progress thread --wait block --stats 2>>/tmp/s30l3t/diag/stats-$n.txt | tail -1)
  echo "{\"round\":$0,\"window\":$w,\"wait\":\"block\",\"name\":\"$n\",\"row\":${l:-null}}"
done; done
pkill -P $HP; kill $HP 2>/dev/null; wait 2>/dev/null' $r >> /tmp/s30l3t/diag.jsonl
done
