#!/bin/bash
# repeat the shm cells until a thread write-bw run falls below $LOW MB/s; keep its sched trace
W=${W:-/tmp/tw/weft-base}; LOW=${LOW:-13000}
for r in $(seq 1 ${1:-4}); do
 for p in inline thread; do $W probe >/dev/null 2>&1; timeout 60 $W perf send-lat --link shm --no-icrc --progress $p --size 64 -n 20000 --local --json -q >/dev/null 2>&1; done
 for p in inline thread; do timeout 60 $W perf send-bw --link shm --no-icrc --progress $p --size 64 -n 1000000 --tx-depth 512 --local --json -q > /dev/null 2>&1; done
 for v in posix sm; do taskset -c 0-1 bash -c "UCX_TLS=$v,self timeout 60 ucx_perftest -p 17778 >/dev/null 2>&1 & sleep 0.5; UCX_TLS=$v,self timeout 60 ucx_perftest localhost -p 17778 -t tag_bw -s 65536 -n 20000 -w 1000 -f >/dev/null 2>&1; wait"; done
 for p in inline thread; do $W probe >/dev/null 2>&1; echo -n "$(date +%T) r$r $p "; 
   timeout 60 perf record -q -o /tmp/tw/c-$p.data -e sched:sched_switch,sched:sched_wakeup,sched:sched_migrate_task -a -- $W perf write-bw --link shm --no-icrc --progress $p --size 65536 -n 20000 --local --json -q --stats 2>/tmp/tw/cstats-$p.txt | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(round(d["mb_per_s"]), round(d["cpu_client_us_per_op"],2), round(d["cpu_server_us_per_op"],2))' | tee /tmp/tw/last.txt
   mb=$(cut -d' ' -f1 /tmp/tw/last.txt)
   if [ $p = thread ] && [ "${mb:-99999}" -lt $LOW ]; then cp /tmp/tw/c-thread.data /tmp/tw/slow-$r.data; cp /tmp/tw/cstats-thread.txt /tmp/tw/slow-$r-stats.txt; echo caught; exit 0; fi
 done
done
