#!/bin/bash
# q.sh BIN MODE TEST PROGRESS SIZE N -> one JSON line summary
bin=$1; mode=$2; test=$3; prog=$4; size=$5; n=$6
env WEFT_UDP_RX=$mode timeout 120 ./$bin perf $test --link udp --progress $prog --size $size -n $n --local --json -q 2>/dev/null | python3 -c '
import json,sys
for l in sys.stdin:
  d=json.loads(l)
  keys=[k for k in ("p50_us","p99_us","mb_per_s","cpu_client_us_per_op","cpu_server_us_per_op") if k in d]
  print(sys.argv[1], {k:d[k] for k in keys} if keys else d)' "$bin/$mode/$test/$prog"
