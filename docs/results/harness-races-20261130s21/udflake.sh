#!/bin/bash
# udflake.sh N BIN_A BIN_B: with two CPU hogs, N alternating runs of `send-lat --qp ud` per binary; counts failures
N=$1; A=$2; B=$3
yes > /dev/null & h1=$!; yes > /dev/null & h2=$!
fa=0; fb=0
for i in $(seq $N); do
  timeout 30 $A perf send-lat --qp ud --size 512 -n 200 --local --json -q </dev/null 2>&1 | grep -q '"error"' && fa=$((fa+1))
  timeout 30 $B perf send-lat --qp ud --size 512 -n 200 --local --json -q </dev/null 2>&1 | grep -q '"error"' && fb=$((fb+1))
done
kill $h1 $h2
echo "two hogs, $N runs each: $(basename $A) $fa failed, $(basename $B) $fb failed"
