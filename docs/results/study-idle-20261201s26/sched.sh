#!/bin/bash
# sched.sh : what was run after the first round (B = base a69a03a, M = the change with
# the left-with-completions rule): traces and probe rounds interleaved, alternating.
D=/work/wt/idle/docs/results/study-idle-20261201s26
B=/tmp/idle/weft-base; M=/tmp/idle/weft-new2
$D/trace.sh M2 $M shm; $D/trace.sh B2 $B shm
$D/trace.sh M2 $M udp; $D/trace.sh B2 $B udp
$D/probe.sh 1 /tmp/idle/probe2.txt B=$B N=$M
$D/trace.sh B3 $B shm; $D/trace.sh M3 $M shm
$D/trace.sh B3 $B udp; $D/trace.sh M3 $M udp
$D/probe.sh 2 /tmp/idle/probe2b.txt B=$B N=$M
