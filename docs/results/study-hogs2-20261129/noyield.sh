#!/bin/bash
# noyield.sh REPS: poll-thread and adaptive beside hogs, binary R, application
# threads' sched_yield as is (Y) or a no-op (N), alternating.
cd /tmp/hogs2/diag
for r in $(seq $1); do
  for m in Y N; do
    if [ $m = N ]; then export WEFT_DIAG_NOYIELD=1; else unset WEFT_DIAG_NOYIELD; fi
    echo "#### mode $m"
    PRE=/tmp/hogs2/diag/yieldcount.so ./diag.sh 1 "shm udp" "poll-thread adaptive" "R"
  done
done
