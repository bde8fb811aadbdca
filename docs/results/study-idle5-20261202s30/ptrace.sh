#!/bin/bash
# ptrace.sh TAG BIN [hogs]: perf trace -s of one hogs window
TAG=$1; B=$2; H=${3:-2}
[ "$H" -gt 0 ] && { /tmp/hog.sh 3 $H & sleep 0.2; }
perf trace -s -o /tmp/s30l3t/pt-$TAG.txt -- $B perf send-lat --local --json --quiet --link udp --mtu 4096 --scheduler drr --iters 12500 --time-limit 0.5 --sizes 64 --progress thread --wait block --stats 2>/tmp/s30l3t/pt-$TAG.stats | tail -1 > /tmp/s30l3t/pt-$TAG.json
wait
