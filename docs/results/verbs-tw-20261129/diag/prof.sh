#!/bin/bash
# usage: prof.sh BIN TAG
B=$1; T=$2
for p in inline thread; do
  perf stat -e task-clock,context-switches,cpu-migrations,cycles,instructions -o /tmp/tw/pstat-$T-$p.txt -- $B perf write-bw --local --link shm --no-icrc --progress $p --size 65536 -n 20000 --json 2>/dev/null | grep '^{' > /tmp/tw/pstat-$T-$p.json
  perf record -q -F 4999 -g -o /tmp/tw/prec-$T-$p.data -- $B perf write-bw --local --link shm --no-icrc --progress $p --size 65536 -n 60000 --json 2>/dev/null | grep '^{' > /tmp/tw/prec-$T-$p.json
done
