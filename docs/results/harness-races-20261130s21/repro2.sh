#!/bin/bash
# repro2.sh BIN N LINK WAIT: N runs cycling the Fig. 5 small-op variants beside a 1 MiB flow, time-limited as the quick study
B=$1; N=$2; L=$3; W=$4
fail=0
for i in $(seq 1 $N); do
  case $((i % 3)) in
    0) t="read-lat --event";; 1) t="send-lat";; 2) t="write-send-lat";;
  esac
  ww="--wait $W"; [ "$t" = "read-lat --event" ] && ww=""
  out=$(timeout 60 $B perf $t --local --link $L --outstanding 16 --request-size 16 --bulk-size 1048576 --bulk-depth 4 $ww --sizes 16,4096 -n 2000000 --time-limit 0.5 --json -q 2>&1)
  if echo "$out" | grep -q '"error"' || ! echo "$out" | grep -q '"rtt_per_s"'; then fail=$((fail+1)); echo "FAIL $i ($t): $(echo "$out" | grep -o '"error":"[^"]*"' | head -1) $(echo "$out" | grep -v '^{' | head -2)"; fi
done
echo "$L $W: $fail of $N failed"
