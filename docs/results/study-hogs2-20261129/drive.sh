#!/bin/bash
# alternate full traces: E4 B5 B6 E5 E6 B7, a pause between holds for others
cd /tmp/hogs2/runs
for t in E4:E B5:B B6:B E5:E E6:E B7:B; do
  ./run.sh ${t%%:*} ${t#*:}
  sleep 20
done
echo done >> runs.log
