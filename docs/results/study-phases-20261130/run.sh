#!/bin/bash
# run.sh TAG BIN: one phased trace per link under one exclusive hold
R=${RUNS_DIR:-/tmp/phases/runs}  # the work directory (RUNS_DIR added 2026-11-30 for study-bgwait-20261130)
cd $R
flock -x /work/notes/quiet.lock bash -c "echo \"$1 start \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"; for l in shm udp; do timeout 400 ./weft-$2 study --parts phased --link \$l --json -q > $1-\$l.jsonl; done; echo \"$1 end \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"" >> $R/runs.log 2>&1
