#!/bin/bash
# runshm.sh "TAG BIN"...: phased traces over shm only, all in one exclusive hold (study-phases-20261130's run.sh, shm only, paths changed)
cd /tmp/hogs3/runs
flock -x /work/notes/quiet.lock bash -c 'for t in "$@"; do set -- $t; echo "$1 start $(date -u +%T) $(cut -d" " -f1-3 /proc/loadavg)"; timeout 200 ./weft-$2 study --parts phased --link shm --json -q > $1-shm.jsonl; echo "$1 end $(date -u +%T)"; done' _ "$@" >> /tmp/hogs3/runs/runs.log 2>&1
