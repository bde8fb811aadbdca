#!/bin/bash
# repro.sh BIN N LINK MODE WAIT: N short windowed send-lat runs beside a background flow; count failures
B=$1; N=$2; L=$3; M=$4; W=$5
fail=0
for i in $(seq 1 $N); do
  out=$(timeout 60 $B perf send-lat --local --link $L --outstanding 16 --bulk-size 1048576 --bulk-depth 4 --wait $W --progress $M -n 3000 --json -q 2>&1)
  if ! echo "$out" | grep -q '"rtt_per_s"' || echo "$out" | grep -q '"error"'; then fail=$((fail+1)); echo "FAIL $i: $(echo "$out" | grep -o '"error":"[^"]*"' | head -1) $(echo "$out" | grep -iv '^{' | head -2)"; fi
done
echo "$L $M $W: $fail of $N failed"
