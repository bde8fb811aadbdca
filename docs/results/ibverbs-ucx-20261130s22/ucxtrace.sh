#!/bin/bash
W=${W:-${W:?weft binary}}; port=$((18000 + RANDOM % 1000))
export UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=weft0:1 WEFT_IBVERBS_STATS=1
timeout 120 $W exec --link udp --dev-node -- ucx_perftest -p $port > /tmp/tw/ucxq-srv.txt 2>&1 &
sleep 1
perf record -q -o /tmp/tw/ut-$1.data -e sched:sched_switch,sched:sched_wakeup,sched:sched_migrate_task -a -- timeout 120 $W exec --link udp --dev-node -- ucx_perftest 127.0.0.1 -p $port -t tag_lat -n 20000 2>/tmp/tw/ucxq-cli.err | tail -1
wait
