#!/bin/bash
# holdq.sh R: the quiet points (pause and plain ping-pong, adaptive), B and V alternating, R rounds
cd /tmp/bgw/diag
# bg.sh, run.sh and quiet2.sh are the earlier folders' (SCRIPTS.md), run here:
export DIAG_DIR=/tmp/bgw/diag RUNS_DIR=/tmp/bgw/runs
echo "holdq start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
bash quiet2.sh $1 "${BINS:-B V}"
echo "holdq end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
