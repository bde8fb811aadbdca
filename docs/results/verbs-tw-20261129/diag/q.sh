#!/bin/bash
B=$1
$B probe 2>&1 | tail -1
for i in 1 2 3; do
 for q in "-q" ""; do
  for p in inline thread; do
   echo "$p q=$q $($B perf write-bw --local --link shm --no-icrc --progress $p --size 65536 -n 20000 --json $q 2>/dev/null | grep '^{' | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(round(r["mb_per_s"]), round(r["cpu_client_us_per_op"],2), round(r["cpu_server_us_per_op"],2))')"
  done
 done
done
$B probe 2>&1 | tail -1
