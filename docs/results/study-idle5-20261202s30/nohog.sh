#!/bin/bash
# nohog.sh OUT name=BIN...: 3 windows each, no hogs, --stats to OUT-NAME.stats
OUT=$1; shift
for r in 1 2 3; do for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
 l=$(timeout 30 $b perf send-lat --local --json --quiet --link udp --mtu 4096 --scheduler drr --iters 12500 --time-limit 0.5 --sizes 64 --progress thread --wait ${WAIT:-block} --stats 2>>$OUT-$n.stats | tail -1)
 echo "$n $l" >> $OUT.jsonl; done; done
