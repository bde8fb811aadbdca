#!/bin/bash
# the whole comparison, B = weft-main, N = branch assist; one exclusive hold per step
cd /tmp/assist/diag
log=/tmp/assist/runs/runs.log
h() { flock -x /work/notes/quiet.lock bash -c "echo \"$1 start \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"; $2; echo \"$1 end \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"" >> $log 2>&1; sleep 20; }
h hogs "PRE=/tmp/assist/diag/yieldcount.so ./diag.sh 3 'shm udp' 'adaptive poll-thread poll-inline' 'B N' > hogs.txt 2>&1"
h quiet "./quiet2.sh 5 'B N' > quiet.txt 2>&1"
h abab "cd /work/wt/assist && bash docs/results/verbs-tx-20261129/abab.sh 8 /tmp/assist/abab.jsonl base=/tmp/assist/runs/weft-B new=/tmp/assist/runs/weft-N"
for t in N1:N B1:B B2:B N2:N N3:N B3:B; do ./run.sh ${t%%:*} ${t#*:}; sleep 20; done
echo done >> $log
