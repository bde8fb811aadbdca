#!/bin/bash
# idle.sh ROUNDS "CONFIGS" "BINS" OUT : the phased trace's idle point (100 round trips,
# a 10 ms pause after each) with --stats; order reverses every round.
ROUNDS=$1 CONFIGS=$2 BINS=$3 OUT=$4
L=${LINK:-shm}
list=(); for c in $CONFIGS; do for b in $BINS; do list+=("$c:$b"); done; done
for r in $(seq $ROUNDS); do
  if [ $((r % 2)) = 0 ]; then ord=$(printf '%s\n' "${list[@]}" | tac); else ord=$(printf '%s\n' "${list[@]}"); fi
  for cb in $ord; do
    c=${cb%%:*} b=${cb#*:}
    case $c in poll-inline) f="--progress inline --wait poll";; poll-thread) f="--progress thread --wait poll";; block) f="--progress thread --wait block";; adaptive) f="--progress thread --wait adaptive";; esac
    out=$(timeout 30 $b perf send-lat --local --json --quiet --stats --link $L --mtu 4096 --scheduler drr --sizes 64 --iters 100 --time-limit 2 --pause-us 10000 $f 2>/tmp/s32hog/stats.tmp | head -1)
    python3 - idle "$r" "$c" "$b" "$out" >> $OUT <<'PY'
import json,sys
mode,r,c,b,out=sys.argv[1:]
try: rec=json.loads(out)
except Exception: rec={'error':'no output'}
rec.update(mode=mode,round=int(r),config=c,bin=b,stats=open('/tmp/s32hog/stats.tmp').read())
print(json.dumps(rec))
PY
  done
done
