#!/bin/bash
B=/work/wt/tw/target/release/weft
end=$((SECONDS+240))
i=0
while [ $SECONDS -lt $end ]; do
  i=$((i+1))
  for p in inline thread; do
    r=$($B perf write-bw --local --link shm --no-icrc --progress $p --size 65536 -n 20000 --json -q 2>/dev/null | grep '^{' | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["mb_per_s"]))')
    echo "$i $(date -u +%T) $p $r"
  done
  if [ "$r" -lt 20000 ]; then
    echo "slow caught at $i"
    for j in 1 2; do
      perf record -q -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_migrate_task -o /tmp/tw/catch-$j.data -- $B perf write-bw --local --link shm --no-icrc --progress thread --size 65536 -n 20000 --json -q --stats 2>/tmp/tw/catch-$j.err | grep '^{' | cut -c80-120
      python3 /tmp/tw/samp.py $B thread
    done
    break
  fi
done
