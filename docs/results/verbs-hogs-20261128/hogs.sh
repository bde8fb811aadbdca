#!/bin/bash
# adaptive ping-pong over udp beside two busy loops; p50 per binary
for r in $(seq 1 ${R:-3}); do
for b in "$@"; do
  ( timeout 8 sh -c 'while :; do :; done' & timeout 8 sh -c 'while :; do :; done' & wait ) &
  sleep 0.3
  out=$(timeout 30 /tmp/$b perf send-lat --local --link udp --progress thread --wait adaptive --size 64 -n 50000 --time-limit 2 --json 2>/dev/null | tail -1)
  wait
  echo "$r $b $(echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["p50_us"], d["p99_us"])')"
done; done
