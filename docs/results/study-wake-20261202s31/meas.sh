#!/bin/bash
cd /work/wt/s31-wak
D=docs/results/study-wake-20261202s31
export DEADLINE=$(date -d 05:33 +%s)
bash docs/results/study-idle4-20261201s29/probe3.sh 6 $D/probe.jsonl start=/tmp/wak/weft-start new=/tmp/wak/weft-nowatch base=/tmp/wak/weft-base
EXTRA=--stats STATS=/tmp/wak/st bash docs/results/study-idle4-20261201s29/hogab.sh 8 $D/hog.jsonl block start=/tmp/wak/weft-start new=/tmp/wak/weft-nowatch
