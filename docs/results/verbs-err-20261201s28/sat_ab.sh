#!/bin/sh
# ABAB of the saturated point: base (main 24f57ee) vs new, each run its own exclusive hold.
# Usage: sat_ab.sh ROUNDS OUT.jsonl
R=${1:-10}; OUT=${2:-sat-abab.jsonl}
CMD="perf send-lat --local --json --link shm --mtu 4096 --scheduler drr --outstanding 16 --sizes 64 --iters 400000 --progress thread --wait adaptive"
for r in $(seq 1 $R); do
  if [ $((r % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    line=$(flock -x /work/notes/quiet.lock ./weft.$v $CMD 2>/dev/null | grep '^{')
    echo "$line" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['variant']='$v'; d['round']=$r; print(json.dumps(d))" >> $OUT
    sleep 1
  done
done
