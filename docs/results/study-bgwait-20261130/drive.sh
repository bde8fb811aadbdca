#!/bin/bash
# drive.sh: the holds in order, each its own flock -x (≤ 10 min)
cd /tmp/bgw/diag
# bg.sh, run.sh and quiet2.sh are the earlier folders' (SCRIPTS.md), run here:
export DIAG_DIR=/tmp/bgw/diag RUNS_DIR=/tmp/bgw/runs
L=/work/notes/quiet.lock
flock -x $L bash hold1.sh > bg1.txt 2>&1
bash run.sh B1 B
bash run.sh V1 V
flock -x $L bash holdq.sh 6 > q1.txt 2>&1
bash run.sh V2 V
bash run.sh B2 B
flock -x $L bash -c "cd /work/wt/bgw && date -u +%T && bash docs/results/verbs-tx-20261129/abab.sh 6 /tmp/bgw/abab.jsonl base=/tmp/bgw/runs/weft-B new=/tmp/bgw/runs/weft-V && date -u +%T" > abab.log 2>&1
bash run.sh B3 B
bash run.sh V3 V
