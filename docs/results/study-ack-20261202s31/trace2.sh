#!/bin/bash
# trace2.sh BIN TAG LINK WAIT N: trace.sh plus sendmmsg (vlen) and recvmmsg (return) per thread
B=$1; T=$2; L=$3; W=$4; N=${5:-300}
D=/tmp/s32-ack/tr
perf record -q -e sched:sched_switch -e sched:sched_waking -e syscalls:sys_enter_sendmmsg -e syscalls:sys_exit_recvmmsg -a -o $D/$T.data -- $B perf send-lat --local --json --stats --link $L --progress thread --wait $W -n $N --pause-us 10000 > $D/$T.out 2>&1
perf script -i $D/$T.data -F comm,pid,tid,cpu,time,event,trace > $D/$T.txt 2>/dev/null
rm -f $D/$T.data
