#!/bin/bash
# trace.sh BIN TAG [wait] : sched_switch + sched_wakeup of a sparse send-lat (udp, thread progress)
B=$1; T=$2; W=${3:-block}
perf record -q -e sched:sched_switch -e sched:sched_waking -a -o /tmp/wak/$T.data -- $B perf send-lat --local --link udp --progress thread --wait $W -n 300 --pause-us 10000 > /tmp/wak/$T.out 2>&1
perf script -i /tmp/wak/$T.data -F comm,pid,tid,cpu,time,event,trace > /tmp/wak/$T.txt 2>/dev/null
