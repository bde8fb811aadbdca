#!/bin/bash
# sched2.sh : after sched.sh was cut short (12:19): the hogs point alone for base (B),
# the change (M) and the change without the exploration backoff (MX), then the udp
# trace of base's second round and a probe round.
D=/work/wt/idle/docs/results/study-idle-20261201s26
B=/tmp/idle/weft-base; M=/tmp/idle/weft-new2; MX=/tmp/idle/weft-mx
$D/hogs.sh 4 /tmp/idle/hogs.jsonl B=$B M=$M MX=$MX
$D/trace.sh B2 $B udp
$D/probe.sh 1 /tmp/idle/probe2.txt B=$B N=$M
