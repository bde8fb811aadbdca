#!/bin/bash
# trace.sh BIN TAG LINK WAIT N: sched_switch + sched_waking of a sparse send-lat (thread progress, 10 ms pauses)
B=$1; T=$2; L=$3; W=$4; N=${5:-300}
D=/tmp/s32-ack/tr
perf record -q -e sched:sched_switch -e sched:sched_waking -a -o $D/$T.data -- $B perf send-lat --local --json --stats --link $L --progress thread --wait $W -n $N --pause-us 10000 > $D/$T.out 2>&1
perf script -i $D/$T.data -F comm,pid,tid,cpu,time,event,trace > $D/$T.txt 2>/dev/null
rm -f $D/$T.data
