#!/bin/bash
# after drive2.sh: a screen of N5 (quiet points, ABAB) then N5 traces alternating with B
cd /tmp/phases/runs
while ! grep -q '^done2' runs.log; do sleep 5; done
flock -x /work/notes/quiet.lock bash -c 'cd /tmp/phases/diag; echo "screen5 start $(date -u +%T) $(cut -d" " -f1-3 /proc/loadavg)"; bash quiet2.sh 2 "B N5" > q5.txt 2>&1; bash quiet2.sh 2 "N5 B" >> q5.txt 2>&1; bash /work/wt/phases/docs/results/verbs-tx-20261129/abab.sh 8 /tmp/phases/abab5.jsonl base=/tmp/phases/runs/weft-B new=/tmp/phases/runs/weft-N5; echo "screen5 end $(date -u +%T) $(cut -d" " -f1-3 /proc/loadavg)"' >> runs.log 2>&1
sleep 10
for t in "V1 N5" "B6 B" "V2 N5"; do
  set -- $t
  bash run.sh $1 $2
  sleep 15
done
echo done3 >> runs.log
