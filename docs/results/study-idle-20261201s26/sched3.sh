#!/bin/bash
# sched3.sh : the final code (MX = b0baa56's behaviour) against base: a probe round,
# then phased traces (X = MX).
D=/work/wt/idle/docs/results/study-idle-20261201s26
B=/tmp/idle/weft-base; X=/tmp/idle/weft-mx
while pgrep -f "hogs.sh 4" > /dev/null; do sleep 2; done
$D/probe.sh 2 /tmp/idle/probe3.txt B=$B N=$X
$D/trace.sh X2 $X shm
$D/trace.sh X2 $X udp
$D/trace.sh B2 $B udp
$D/trace.sh X3 $X shm
