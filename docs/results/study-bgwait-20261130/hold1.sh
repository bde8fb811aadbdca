#!/bin/bash
# hold1.sh: the background point, B and V alternating (with poll-inline B as the oracle), 4 rounds
cd /tmp/bgw/diag
# bg.sh, run.sh and quiet2.sh are the earlier folders' (SCRIPTS.md), run here:
export DIAG_DIR=/tmp/bgw/diag RUNS_DIR=/tmp/bgw/runs
echo "hold1 start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
bash bg.sh 4 udp "poll-inline adaptive" "B V"
echo "hold1 end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
