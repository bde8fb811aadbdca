#!/bin/bash
# usage: udp.sh ROUNDS OUT NAME=BIN...   (run under flock -x /work/notes/quiet.lock)
# udp cells, inline progress, the order inside a round rotating by one each round;
# rows in the format of ../verbs-tx-20261129/abab.sh (pool.py reads them).
R=$1; OUT=$2; shift 2
BINS=("$@"); N=${#BINS[@]}
for r in $(seq 1 $R); do
  for i in $(seq 0 $((N-1))); do
    nb=${BINS[$(( (i + r) % N ))]}
    v=${nb%%=*}; bin=${nb#*=}
    for test in send-lat send-bw; do
      if [ $test = send-lat ]; then extra="-n 20000"; else extra="--tx-depth 512 -n 300000"; fi
      line=$(timeout 60 $bin perf $test --local --link udp --progress inline --size 64 $extra --json 2>/dev/null | grep '^{' | tail -1)
      [ -n "$line" ] || line='{"test":"failed"}'
      echo "{\"round\":$r,\"pos\":$i,\"variant\":\"$v\",\"bin\":\"$bin\",\"progress\":\"udp-inline\",\"time\":\"$(date -u +%T)\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"r\":$line}" >> $OUT
    done
  done
done
