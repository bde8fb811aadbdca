#!/bin/bash
# N (0bf26e6) against N2 (the engine thread's yield moved before it takes the engine) and B, beside hogs
cd /tmp/assist/diag
log=/tmp/assist/runs/runs.log
flock -x /work/notes/quiet.lock bash -c "echo \"hogsN2 start \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"; PRE=/tmp/assist/diag/yieldcount.so ./diag.sh 3 'shm udp' 'adaptive poll-thread' 'B N N2' > hogsN2.txt 2>&1; echo \"hogsN2 end \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"" >> $log 2>&1
