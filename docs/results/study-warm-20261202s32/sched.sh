#!/bin/bash
# sched.sh BIN TAG LINK WAIT N : per-thread runtime of one send-lat run (perf sched latency)
flock -x /work/notes/quiet.lock bash -c "perf sched record -q -o /tmp/s32/$2.data -- $1 perf send-lat --local --json --link $3 --progress thread --wait $4 -n $5 --pause-us 10000 > /tmp/s32/$2.json 2>/dev/null"
perf sched latency -i /tmp/s32/$2.data 2>/dev/null | grep -E "weft|engine" > /tmp/s32/$2.lat
