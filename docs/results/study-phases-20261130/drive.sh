#!/bin/bash
# alternating full traces: N2 B B N2 N2 B
cd /tmp/phases/runs
for t in "T1 N2" "B1 B" "B2 B" "T2 N2" "T3 N2" "B3 B"; do
  set -- $t
  bash run.sh $1 $2
  sleep 20   # let others take the lock
done
echo done >> runs.log
