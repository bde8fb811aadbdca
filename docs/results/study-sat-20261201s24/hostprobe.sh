#!/bin/bash
# hostprobe.sh N OUT: N times, a fixed CPU loop on both cores at once (seconds each), then the saturated point (inline), in one hold
flock -x /work/notes/quiet.lock bash -c '
for i in $(seq 1 $1); do
  p0=$(taskset -c 0 python3 -c "import time;t=time.perf_counter();s=0
for i in range(4000000): s+=i
print(round(time.perf_counter()-t,3))" & taskset -c 1 python3 -c "import time;t=time.perf_counter();s=0
for i in range(4000000): s+=i
print(round(time.perf_counter()-t,3))"; wait)
  r=$(timeout 60 /tmp/sat/weft-base perf send-lat --local --link shm --progress inline --wait poll --outstanding 16 --size 64 -n 1000000 --json -q 2>/dev/null | tail -1 | python3 -c "import json,sys; print(round(json.load(sys.stdin)[\"rtt_per_s\"]/1e6,3))")
  echo "$(echo $p0) $r"
done' _ $1 >> $2
