#!/bin/bash
# probe.sh BIN LINK PIN REPS CONFIGS... : hogs point with 2 external busy loops
BIN=$1 LINK=$2 PIN=$3 REPS=$4; shift 4
if [ "$PIN" = pin ]; then P1="taskset -c 0" P2="taskset -c 1"; else P1= P2=; fi
$P1 bash -c 'while :; do :; done' >/dev/null 2>&1 & H1=$!
$P2 bash -c 'while :; do :; done' >/dev/null 2>&1 & H2=$!
sleep 0.2
for r in $(seq $REPS); do for bc in "$@"; do
  c=${bc#*:}; B=${bc%%:*}; [ "$B" = "$bc" ] && B=$BIN || B=./weft-$B
  case $c in poll-inline) f="--progress inline --wait poll";; poll-thread) f="--progress thread --wait poll";; block) f="--progress thread --wait block";; adaptive) f="--progress thread --wait adaptive";; esac
  t0=$(date +%s.%N)
  out=$(timeout 20 $B perf send-lat --local --json --quiet --link $LINK --sizes 64 --iters ${ITERS:-50000} --time-limit 0.5 $f 2>/dev/null | head -1)
  t1=$(date +%s.%N)
  echo "$r $bc $(echo "$out" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("p50 %.2f p99 %.1f ops %.0f cpu %.1f" % (r.get("p50_us") or -1, r.get("p99_us") or -1, r.get("rtt_per_s") or -1, (r.get("cpu_client_us_per_op") or 0)+(r.get("cpu_server_us_per_op") or 0)))' 2>&1) wall $(echo "$t1-$t0"|bc)"
done; done
kill $H1 $H2
