#!/bin/bash
OUT=$1
flock -x /work/notes/quiet.lock bash -c '
OUT=$1
for r in $(seq 1 8); do
  for b in main br; do
    bin=/tmp/h22/weft-main; [ $b = br ] && bin=/tmp/h22/weft-d2
    if [ $((r % 2)) = 0 ]; then :; fi
    load=$(cut -d" " -f1 /proc/loadavg)
    res=$(timeout 60 $bin perf send-bw --local --link shm --no-icrc --size 64 --tx-depth 512 -n 1000000 --json --quiet | tail -1)
    echo "{\"round\":$r,\"bin\":\"$b\",\"test\":\"send-bw\",\"load\":$load,\"t\":\"$(date -u +%H:%M:%S)\",\"res\":${res:-null}}" >> $OUT
    res=$(timeout 60 $bin perf send-lat --local --link shm --no-icrc --size 64 -n 20000 --json --quiet | tail -1)
    echo "{\"round\":$r,\"bin\":\"$b\",\"test\":\"send-lat\",\"load\":$load,\"t\":\"$(date -u +%H:%M:%S)\",\"res\":${res:-null}}" >> $OUT
  done
done' _ "$OUT"
