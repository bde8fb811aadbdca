#!/bin/bash
# ababq.sh ROUNDS OUT (env BASE, NEW: the two weft binaries): base/new alternating (order rotates), send-bw inline, shm 64 B, QPS QPs x DEPTH in flight per QP
R=$1; OUT=$2
for r in $(seq 1 $R); do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    for cfg in "256 1" "4096 1"; do
      set -- $cfg
      line=$(timeout 60 $([ $v = base ] && echo ${BASE:-/tmp/ins2/weft-base} || echo ${NEW:-/tmp/ins2/weft-r3}) perf send-bw --local --link shm --no-icrc --progress inline --size 64 --qps $1 --tx-depth $2 -n 1000000 --json 2>/dev/null | grep '^{' | tail -1)
      [ -n "$line" ] || line='{"test":"failed"}'
      echo "{\"round\":$r,\"variant\":\"$v\",\"qps\":$1,\"depth\":$2,\"time\":\"$(date -u +%T)\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"r\":$line}" >> $OUT
    done
  done
done
