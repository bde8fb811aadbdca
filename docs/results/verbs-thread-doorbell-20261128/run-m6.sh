#!/bin/bash
# ABAB: A=/tmp/weft-new (f2e8e24: doorbell path), B=/tmp/weft-G (+ thread progress: a pass through Shared::assist every 16 posts)
out=/tmp/m6/rows.txt; : > $out
uptime >> $out
for r in 1 2 3 4 5 6; do
  for v in A B; do
    if [ $v = A ]; then bin=/tmp/weft-new; else bin=/tmp/weft-G; fi
    l=$(timeout 60 $bin perf send-lat --local --link shm --no-icrc --progress thread --size 64 -n 20000 --json 2>/dev/null | tail -1)
    echo "r$r $v shm-lat-thread $(echo "$l" | grep -o '"p50_us":[0-9.]*\|"cpu_client_us_per_op":[0-9.]*\|"cpu_server_us_per_op":[0-9.]*' | tr '\n' ' ')" >> $out
    b=$(timeout 60 $bin perf send-bw --local --link shm --no-icrc --progress thread --size 64 -n 1000000 --tx-depth 512 --json 2>/dev/null | tail -1)
    echo "r$r $v shm-bw-thread $(echo "$b" | grep -o '"mmsg_per_s":[0-9.]*\|"cpu_client_us_per_op":[0-9.]*\|"cpu_server_us_per_op":[0-9.]*' | tr '\n' ' ')" >> $out
    b=$(timeout 60 $bin perf send-bw --local --link shm --no-icrc --progress inline --size 64 -n 1000000 --tx-depth 512 --json 2>/dev/null | tail -1)
    echo "r$r $v shm-bw-inline $(echo "$b" | grep -o '"mmsg_per_s":[0-9.]*\|"cpu_client_us_per_op":[0-9.]*\|"cpu_server_us_per_op":[0-9.]*' | tr '\n' ' ')" >> $out
    for l in shm udp; do
      w=$(timeout 60 $bin perf write-lat --local --link $l --progress thread --size 64 -n 5000 --json 2>/dev/null | tail -1)
      echo "r$r $v $l-wlat-thread $(echo "$w" | grep -o '"p50_us":[0-9.]*' | tr '\n' ' ')" >> $out
    done
    l=$(timeout 60 $bin perf send-lat --local --link udp --progress thread --size 64 -n 20000 --json 2>/dev/null | tail -1)
    echo "r$r $v udp-lat-thread $(echo "$l" | grep -o '"p50_us":[0-9.]*' | tr '\n' ' ')" >> $out
  done
done
uptime >> $out
