#!/bin/bash
# usage: abab.sh ROUNDS OUT NAME=BIN...   (run under flock -x /work/notes/quiet.lock)
# The order inside a round rotates by one each round (round r starts with binary r mod n).
R=$1; OUT=$2; shift 2
BINS=("$@"); N=${#BINS[@]}
for r in $(seq 1 $R); do
  for i in $(seq 0 $((N-1))); do
    nb=${BINS[$(( (i + r) % N ))]}
    v=${nb%%=*}; bin=${nb#*=}
    for t in "send-lat inline" "send-bw inline" "send-lat thread" "send-bw thread"; do
      test=${t% *}; prog=${t#* }
      if [ $test = send-lat ]; then extra="-n 20000"; else extra="--tx-depth 512 -n 1000000"; fi
      line=$(timeout 60 $bin perf $test --local --link shm --no-icrc --progress $prog --size 64 $extra --json 2>/dev/null | grep '^{' | tail -1)
      [ -n "$line" ] || line='{"test":"failed"}'
      echo "{\"round\":$r,\"pos\":$i,\"variant\":\"$v\",\"bin\":\"$bin\",\"progress\":\"$prog\",\"time\":\"$(date -u +%T)\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"r\":$line}" >> $OUT
    done
  done
done
