#!/bin/bash
# like seq.sh, but the thread write-bw under perf sched tracing; keeps traces
W=${W:-/tmp/tw/weft-base}
for r in $(seq 1 ${1:-2}); do
 for p in inline thread; do $W probe >/dev/null 2>&1; timeout 60 $W perf send-lat --link shm --no-icrc --progress $p --size 64 -n 20000 --local --json -q >/dev/null 2>&1; done
 for p in inline thread; do $W probe >/dev/null 2>&1; timeout 60 $W perf send-bw --link shm --no-icrc --progress $p --size 64 -n 1000000 --tx-depth 512 --local --json -q > /dev/null 2>&1; done
 for p in inline thread; do $W probe >/dev/null 2>&1; echo -n "r$r $p "; 
   if true; then pre="perf record -q -o /tmp/tw/sched-$r-$p.data -e sched:sched_switch,sched:sched_wakeup,sched:sched_migrate_task -a --"; else pre=""; fi
   timeout 60 $pre $W perf write-bw --link shm --no-icrc --progress $p --size 65536 -n 20000 --local --json -q --stats 2>/tmp/tw/stats-$r-$p.txt | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(round(d["mb_per_s"]), round(d["cpu_client_us_per_op"],2), round(d["cpu_server_us_per_op"],2))'; done
done
