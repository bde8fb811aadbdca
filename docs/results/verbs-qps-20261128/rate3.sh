#!/bin/bash
# usage: rate3.sh ROUND OUTFILE "NAME=BIN ..." CONFIGS... ; order of binaries rotates with the round
R=$1; OUT=$2; BINS=($3); shift 3
n=${#BINS[@]}
echo "# round $R start $(date -u +%H:%M:%S) $(uptime)" >> $OUT.notes
for cfg in "$@"; do
  N=${cfg%%:*}; D=${cfg##*:}
  for k in $(seq 0 $((n-1))); do
    i=$(( (k + R) % n )); nb=${BINS[$i]}; side=${nb%%=*}; bin=${nb#*=}
    t0=$(date +%s.%N)
    line=$(timeout 300 $bin perf send-bw --local --link shm --no-icrc --size 64 --tx-depth $D -n 200000 --json --quiet --qps $N 2>/tmp/h13/rate-err.txt | tail -1)
    t1=$(date +%s.%N)
    echo "{\"round\":$R,\"side\":\"$side\",\"qps\":$N,\"tx_depth\":$D,\"wall_s\":$(printf %.3f $(echo "$t1 - $t0" | bc)),\"rec\":${line:-null}}" >> $OUT
  done
done
echo "# round $R end $(date -u +%H:%M:%S) $(uptime)" >> $OUT.notes
