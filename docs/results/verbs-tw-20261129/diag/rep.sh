#!/bin/bash
# usage: rep.sh BIN TAG N : N rounds of inline, thread (plain), thread (perf record)
B=$1; T=$2; N=$3
for i in $(seq 1 $N); do
  for p in inline thread; do
    echo "$p plain $(uptime | sed 's/.*average: //' | cut -d, -f1) $($B perf write-bw --local --link shm --no-icrc --progress $p --size 65536 --json 2>/dev/null | grep '^{')" >> /tmp/tw/rep-$T.txt
  done
  perf record -q -F 4999 -g -o /tmp/tw/rep-$T-$i.data -- $B perf write-bw --local --link shm --no-icrc --progress thread --size 65536 --json 2>/dev/null | grep '^{' | sed "s/^/thread perf$i x /" >> /tmp/tw/rep-$T.txt
done
