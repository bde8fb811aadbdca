#!/bin/bash
# drive4.sh (lead, after the helper stopped): two more trace pairs, ABBA, then the 64 B ABAB
cd /tmp/bgw/diag
# bg.sh, run.sh and quiet2.sh are the earlier folders' (SCRIPTS.md), run here:
export DIAG_DIR=/tmp/bgw/diag RUNS_DIR=/tmp/bgw/runs
bash run.sh B2 B
bash run.sh W2 V2
bash run.sh W3 V2
bash run.sh B3 B
flock -x /work/notes/quiet.lock bash -c "cd /work/main && date -u +%T && bash docs/results/verbs-tx-20261129/abab.sh 8 /tmp/bgw/abab.jsonl base=/tmp/bgw/runs/weft-B new=/tmp/bgw/runs/weft-V2 && date -u +%T" > abab.log 2>&1
