#!/bin/bash
# ABAB of two weft binaries (A, B) on the tests below, a core-to-core probe (PROBE: a
# two-thread one-cache-line ping-pong printing "one-way N ns") before and after each
# cell. Rounds alternate the order (AB, BA, ...). One line per cell:
#   round variant probe_before_ns probe_after_ns test link progress p50_us|Mmsg/s cpu_us_per_op
# Usage: A=bin B=bin [AENV=VAR=1] [BENV=VAR=1] ROUNDS=6 PROBE=/tmp/pp abab.sh
set -u
tests=(
 "send-lat --link shm --no-icrc --progress inline --size 64 -n 20000"
 "send-lat --link shm --no-icrc --progress thread --size 64 -n 20000"
 "send-lat --link udp --progress inline --size 64 -n 20000"
 "write-lat --link shm --no-icrc --progress inline --size 64 -n 20000"
 "read-lat --link shm --no-icrc --progress inline --size 64 -n 20000"
 "send-bw --link shm --no-icrc --progress inline --size 64 -n 1000000 --tx-depth 512"
 "send-bw --link udp --progress inline --size 64 -n 300000 --tx-depth 512"
)
for r in $(seq 1 "$ROUNDS"); do
  order="A B"; [ $((r % 2)) = 0 ] && order="B A"
  for v in $order; do
    if [ "$v" = A ]; then bin=$A; e=${AENV:-}; else bin=$B; e=${BENV:-}; fi
    for t in "${tests[@]}"; do
      p1=$($PROBE | awk '{print $(NF-1)}')
      out=$(env $e timeout 60 "$bin" perf $t --local --json 2>/dev/null | tail -1)
      p2=$($PROBE | awk '{print $(NF-1)}')
      set -- $t
      echo "$r $v $p1 $p2 $1 $3 $7 $(echo "$out" | python3 -c 'import json,sys
try:
    d=json.loads(sys.stdin.read()); print(d.get("p50_us", d.get("mmsg_per_s")), round(d["cpu_client_us_per_op"]+d["cpu_server_us_per_op"],3))
except Exception: print("fail fail")')"
    done
  done
done
