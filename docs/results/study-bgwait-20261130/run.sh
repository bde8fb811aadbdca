#!/bin/bash
# run.sh TAG BIN: one phased trace per link under one exclusive hold
cd /tmp/bgw/runs
flock -x /work/notes/quiet.lock bash -c "echo \"$1 start \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"; for l in shm udp; do timeout 400 ./weft-$2 study --parts phased --link \$l --json -q > $1-\$l.jsonl; done; echo \"$1 end \$(date -u +%T) \$(cut -d' ' -f1-3 /proc/loadavg)\"" >> /tmp/bgw/runs/runs.log 2>&1
