#!/bin/bash
# drive2.sh: after V2's build, its background point, then the dg diagnostic for V2 is not possible (no diag build): quiet points
cd /tmp/bgw/diag
# bg.sh, run.sh and quiet2.sh are the earlier folders' (SCRIPTS.md), run here:
export DIAG_DIR=/tmp/bgw/diag RUNS_DIR=/tmp/bgw/runs
L=/work/notes/quiet.lock
while ! grep -q '^1[0-9]:' <(tail -1 /tmp/bgw/buildV2.log) || [ $(wc -l < /tmp/bgw/buildV2.log) -lt 3 ]; do sleep 5; done
flock -x $L bash hold2.sh > bg2.txt 2>&1
