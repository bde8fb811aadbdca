#!/bin/bash
# N5 (= main + quiet gap up to 4 ms, the yield where main has it) against B, N4: quiet points, hogs point, background point
cd /tmp/phases/diag
echo "start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
bash quiet2.sh 1 "B N5 N4" > q4.txt 2>&1
bash quiet2.sh 1 "N4 N5 B" >> q4.txt 2>&1
bash quiet2.sh 1 "N5 B N4" >> q4.txt 2>&1
DIAG_DIR=/tmp/phases/diag PRE=/tmp/phases/diag/yieldcount.so bash diag.sh 2 "udp shm" "adaptive" "N5 B N4" > s4.txt 2>&1
bash bg.sh 2 udp "adaptive" "N5 B N4" > bg4.txt 2>&1
echo "end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
