#!/bin/bash
# more N5 traces, alternating with B
cd /tmp/phases/runs
for t in "V3 N5" "B7 B" "V4 N5"; do
  set -- $t
  bash run.sh $1 $2
  sleep 10
done
echo done4 >> runs.log
