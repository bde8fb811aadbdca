#!/bin/bash
# schedrec.sh K name=BIN ...: under one hold, beside 2 hogs, K perf-sched recordings of one hogs window per binary
K=$1; shift
flock -x /work/notes/quiet.lock bash -c '
K=$1; shift
/tmp/hog.sh 120 2 & HP=$!; sleep 0.3
for i in $(seq 1 $K); do for nb in "$@"; do n=${nb%%=*}; b=${nb#*=}
  perf sched record -o /tmp/l3h/sched/$n-$i.data -- $b perf send-lat --local --json --quiet --link udp --mtu 4096 --scheduler drr --iters 12500 --time-limit 0.5 --sizes 64 --progress thread --wait block --stats 2>/tmp/l3h/sched/$n-$i.err | tail -1 > /tmp/l3h/sched/$n-$i.json
done; done
pkill -P $HP; kill $HP 2>/dev/null; wait 2>/dev/null' _ "$K" "$@"
