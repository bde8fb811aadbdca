#!/bin/bash
# hold2.sh: the background point, B and V2 alternating (poll-inline of both as the oracle and a noise check), 4 rounds
cd /tmp/bgw/diag
# bg.sh, run.sh and quiet2.sh are the earlier folders' (SCRIPTS.md), run here:
export DIAG_DIR=/tmp/bgw/diag RUNS_DIR=/tmp/bgw/runs
echo "hold2 start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
bash bg.sh 4 udp "poll-inline adaptive" "B V2"
echo "hold2 end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
