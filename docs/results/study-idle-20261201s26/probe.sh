#!/bin/bash
# probe.sh ROUNDS OUT B=BIN N=BIN : the sparse ping-pong probe (10 ms pause after each
# round trip), base and new alternating (AB, then BA), one exclusive hold per run.
# Rows: side link wait round rtt/s CPU-us-per-rtt p50-us
rounds=$1; out=$2; shift 2
declare -A bin; for kv in "$@"; do bin[${kv%%=*}]=${kv#*=}; done
for r in $(seq 1 $rounds); do
  if (( r % 2 )); then order="B N"; else order="N B"; fi
  for cfg in "shm block" "shm adaptive" "udp block" "udp adaptive"; do
    set -- $cfg
    for side in $order; do
      line=$(flock -x /work/notes/quiet.lock ${bin[$side]} perf send-lat --local --link $1 --progress thread --wait $2 -n 200 --pause-us 10000 2>&1 | awk '$1=="2" && $2=="200"')
      echo "$side $1 $2 $r $(echo $line | awk '{print $11, $12, $4}')" | tee -a $out
    done
  done
done
