#!/bin/bash
# probe.sh MODE ROUNDS "CONFIGS" "BINS" OUT : the phased trace's hogs point (MODE=hogs: two
# shell busy loops, 12 500 round trips or 0.5 s a window, as the trace's windows) or its
# saturated point (MODE=sat: 16 in flight, 500 000 or 2 s) or its
# background point (MODE=bg: 16 in flight beside 4 MiB WRITEs, depth 4, 500 000 or 2 s),
# shm unless LINK is set; configurations x binaries in an order that reverses every round.
# Each window: the JSON record, plus "stats" with the --stats text (stderr).
MODE=$1 ROUNDS=$2 CONFIGS=$3 BINS=$4 OUT=$5
L=${LINK:-shm}
if [ "$MODE" = hogs ]; then
  bash -c 'while :; do :; done' >/dev/null 2>&1 & H1=$!
  bash -c 'while :; do :; done' >/dev/null 2>&1 & H2=$!
  sleep 0.2
  P="--iters 12500 --time-limit 0.5"
elif [ "$MODE" = sat ]; then
  P="--iters 500000 --time-limit 2 --outstanding 16 --request-size 16"
else
  P="--iters 500000 --time-limit 2 --outstanding 16 --request-size 16 --bulk-size 4194304 --bulk-depth 4"
fi
list=()
for c in $CONFIGS; do for b in $BINS; do list+=("$c:$b"); done; done
for r in $(seq $ROUNDS); do
  if [ $((r % 2)) = 0 ]; then ord=$(printf '%s\n' "${list[@]}" | tac); else ord=$(printf '%s\n' "${list[@]}"); fi
  for cb in $ord; do
    c=${cb%%:*} b=${cb#*:}
    case $c in poll-inline) f="--progress inline --wait poll";; poll-thread) f="--progress thread --wait poll";; block) f="--progress thread --wait block";; adaptive) f="--progress thread --wait adaptive";; esac
    out=$(timeout 30 $b perf send-lat --local --json --quiet --stats --link $L --mtu 4096 --scheduler drr --sizes 64 $P $f 2>/tmp/s32hog/stats.tmp | head -1)
    python3 - "$MODE" "$r" "$c" "$b" "$out" >> $OUT <<'PY'
import json,sys
mode,r,c,b,out=sys.argv[1:]
try: rec=json.loads(out)
except Exception: rec={'error':'no output'}
rec.update(mode=mode,round=int(r),config=c,bin=b,stats=open('/tmp/s32hog/stats.tmp').read())
print(json.dumps(rec))
PY
  done
done
[ "$MODE" = hogs ] && kill $H1 $H2
true
