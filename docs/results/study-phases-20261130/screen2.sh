#!/bin/bash
cd /tmp/phases/diag
echo "start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
DIAG_DIR=/tmp/phases/diag PRE=/tmp/phases/diag/yieldcount.so bash diag.sh 3 "udp shm" "adaptive" "B N2 N4" > s2.txt 2>&1
bash bg.sh 3 udp "adaptive poll-thread" "B N2 N4" > bg2.txt 2>&1
bash quiet2.sh 3 "B N2 N4" > q2.txt 2>&1
echo "end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
