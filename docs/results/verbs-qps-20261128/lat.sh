#!/bin/bash
OUT=$1
echo "# lat start $(date -u +%H:%M:%S) $(uptime)" >> $OUT.notes
for r in 1 2 3 4 5; do
 for nb in A=/tmp/weft-before-qps W=/tmp/h13/weft-wqe W=/tmp/h13/weft-wqe A=/tmp/weft-before-qps; do
  s=${nb%%=*}; b=${nb#*=}
  line=$(timeout 120 $b perf send-lat --local --link shm --no-icrc --size 64 -n 20000 --json --quiet 2>/dev/null | tail -1)
  echo "{\"round\":$r,\"side\":\"$s\",\"rec\":${line:-null}}" >> $OUT
 done
done
echo "# lat end $(date -u +%H:%M:%S) $(uptime)" >> $OUT.notes
