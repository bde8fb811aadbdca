#!/bin/bash
# after drive.sh: N4 traces alternating with B
cd /tmp/phases/runs
while ! grep -q '^done' runs.log; do sleep 5; done
for t in "U1 N4" "B4 B" "U2 N4" "B5 B" "U3 N4"; do
  set -- $t
  bash run.sh $1 $2
  sleep 20
done
echo done2 >> runs.log
